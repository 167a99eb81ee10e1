// move_pages's kernel and launcher.
#include <algorithm>

#include "dispatch/launchers.h"
#include "kernels/move_pages.cuh"
#include "launch.cuh"

namespace cachestore::detail {
namespace {

// The widest vector (log2 bytes, at most 16) that divides every address and stride of plane j
// on both sides; bases from plane_bases count as 16-byte aligned (cachestore/move.h).
int32_t plane_vector_log2(const MovePagesParams& p, int32_t j) {
  uint64_t bits = static_cast<uint64_t>(p.rows[j].row_bytes) | 16u;
  for (const PageSide* s : {&p.src, &p.dst}) {
    const PlaneStrides& st = s->planes[j];
    bits |= static_cast<uint64_t>(st.offset) | static_cast<uint64_t>(st.page_stride) |
            static_cast<uint64_t>(st.token_stride) | static_cast<uint64_t>(st.head_stride);
    if (s->plane_bases == nullptr)
      bits |= reinterpret_cast<uintptr_t>(s->data) |
              (p.num_layers > 1 ? static_cast<uint64_t>(s->layer_stride) : 0u);
  }
  int32_t log2 = 0;
  while (log2 < 4 && (bits & (uint64_t{1} << log2)) == 0) ++log2;
  return log2;
}

kernels::MoveSideArgs side_args(const PageSide& s) {
  kernels::MoveSideArgs a{};
  a.data = static_cast<uint8_t*>(s.data);
  a.layer_stride = s.layer_stride;
  a.plane_bases = s.plane_bases;
  a.ids = s.page_ids;
  a.num_pages = s.num_pages;
  a.ids64 = s.page_ids_type == SlotType::kInt64 ? 1 : 0;
  a.page_size = s.page_size;
  for (int32_t j = 0; j < kMaxPagePlanes; ++j) {
    a.offset[j] = s.planes[j].offset;
    a.page_stride[j] = s.planes[j].page_stride;
    a.token_stride[j] = s.planes[j].token_stride;
    a.head_stride[j] = s.planes[j].head_stride;
  }
  return a;
}

}  // namespace

Status launch_move_pages(const MovePagesParams& p, const ArchInfo& arch, cudaStream_t stream) {
  kernels::MoveArgs a{};
  a.src = side_args(p.src);
  a.dst = side_args(p.dst);
  a.num_planes = p.num_planes;
  const int32_t ps = p.src.page_size, pd = p.dst.page_size;
  a.dst_coarser = pd >= ps ? 1 : 0;
  a.ratio = std::max(ps, pd) / std::min(ps, pd);
  a.dst_page = kernels::FastDivmod::make(static_cast<uint32_t>(pd));
  a.num_entries = p.num_entries;
  a.n_ptr = p.num_entries_non_padded;
  a.diagnostics = p.diagnostics;
  int64_t most_vectors = 1;
  for (int32_t j = 0; j < p.num_planes; ++j) {
    const int32_t log2 = plane_vector_log2(p, j);
    const int64_t per_row = p.rows[j].row_bytes >> log2;
    const int64_t per_token = per_row * p.rows[j].num_heads;
    if (per_token * ps >= (int64_t{1} << 31))
      return fail(Status::kErrorNotSupported,
                  "rows[%d]: a page of %d tokens of %lld bytes each is more than 2^31 vectors of "
                  "%d bytes", j, ps, static_cast<long long>(per_token << log2), 1 << log2);
    a.planes[j] = {kernels::FastDivmod::make(static_cast<uint32_t>(per_token)),
                   kernels::FastDivmod::make(static_cast<uint32_t>(per_row)), log2};
    most_vectors = std::max(most_vectors, per_token * ps);
  }
  const int32_t threads =
      static_cast<int32_t>(std::min<int64_t>(256, (most_vectors + 31) / 32 * 32));
  a.checksums = p.checksums;
  a.expected_checksums = p.expected_checksums;
  const bool checksummed = p.checksums != nullptr || p.expected_checksums != nullptr;
  // A part of an entry is four vectors a thread (one round of loads in flight), or one where
  // the batch would not give every SM two blocks: a small batch is then one round of loads.
  // With checksums a block takes a whole plane of an entry (its CRC before its copy).
  const int64_t blocks = p.num_entries * p.num_layers * p.num_planes;
  int64_t part_vectors = int64_t{threads} * 4;
  if (checksummed)
    part_vectors = most_vectors;
  else if (blocks * ((most_vectors + part_vectors - 1) / part_vectors) < 2 * arch.sm_count)
    part_vectors = threads;
  const int64_t parts = (most_vectors + part_vectors - 1) / part_vectors;
  if (p.num_entries * parts > 0x7fffffff)
    return fail(Status::kErrorNotSupported,
                "num_entries = %lld: more than 2^31 - 1 blocks of %lld vectors",
                static_cast<long long>(p.num_entries), static_cast<long long>(part_vectors));
  a.parts = kernels::FastDivmod::make(static_cast<uint32_t>(parts));
  a.part_vectors = static_cast<uint32_t>(part_vectors);
  const dim3 grid(static_cast<unsigned>(p.num_entries * parts),
                  static_cast<unsigned>(p.num_layers), static_cast<unsigned>(p.num_planes));
  if (checksummed) {
    for (int32_t j = 0; j < p.num_planes; ++j)
      a.crc[j] = kernels::crc32::block_constants(
          static_cast<uint32_t>(p.src.page_size) * a.planes[j].per_token.divisor,
          1u << a.planes[j].vec_log2, static_cast<uint32_t>(threads));
    return with_pdl(use_pdl({p.enable_pdl}, arch), [&](auto pdl) {
      return launch_store(kernels::move_pages_checksum_kernel<decltype(pdl)::value>, grid,
                          dim3(threads), stream, pdl, a);
    });
  }
  return with_pdl(use_pdl({p.enable_pdl}, arch), [&](auto pdl) {
    return launch_store(kernels::move_pages_kernel<decltype(pdl)::value>, grid, dim3(threads),
                        stream, pdl, a);
  });
}

}  // namespace cachestore::detail
