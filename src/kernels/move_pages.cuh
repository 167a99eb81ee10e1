// move_pages: a block copies one part of one source entry's tokens of one layer and one plane
// (the entry split into `parts` where the batch is too small to fill the device), the widest
// vector the plane allows, up to four vectors in flight a thread.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "cachestore/move.h"
#include "detail/guard.h"
#include "kernels/args.h"
#include "kernels/core/guard.cuh"

namespace cachestore::kernels {

// One side of a move (cachestore/move.h PageSide), the planes' strides in bytes.
struct MoveSideArgs {
  uint8_t* data;
  int64_t layer_stride;
  const uint64_t* plane_bases;  // [layers * planes] or nullptr
  const void* ids;              // [entries] int32 | int64, or nullptr (entry e is page e)
  int64_t num_pages;
  int32_t ids64;
  int32_t page_size;
  int64_t offset[kMaxPagePlanes];
  int64_t page_stride[kMaxPagePlanes];
  int64_t token_stride[kMaxPagePlanes];
  int64_t head_stride[kMaxPagePlanes];
};

// A plane's rows in vectors of 2^vec_log2 bytes.
struct MovePlaneArgs {
  FastDivmod per_token;  // vectors a token (num_heads * row_bytes / vector)
  FastDivmod per_row;    // vectors a row
  int32_t vec_log2;
};

struct MoveArgs {
  MoveSideArgs src;
  MoveSideArgs dst;
  MovePlaneArgs planes[kMaxPagePlanes];
  int32_t num_planes;
  // Pages of the two sides: ratio = the larger page size / the smaller; dst_coarser: a
  // destination page holds `ratio` source entries (else a source entry fills `ratio`
  // destination pages, dst_page dividing its tokens).
  int32_t ratio;
  int32_t dst_coarser;
  FastDivmod dst_page;
  FastDivmod parts;          // blocks an entry (grid x = entries * parts)
  uint32_t part_vectors;     // vectors a part
  int64_t num_entries;
  const int32_t* n_ptr;
  MoveDiagnostics* diagnostics;
};

__device__ __forceinline__ int64_t move_page_of(const MoveSideArgs& s, int64_t entry) {
  if (s.ids == nullptr) return entry;
  return s.ids64 ? static_cast<const int64_t*>(s.ids)[entry]
                 : static_cast<const int32_t*>(s.ids)[entry];
}

__device__ __forceinline__ uint8_t* move_plane_base(const MoveSideArgs& s, int32_t layer,
                                                    int32_t plane, int32_t planes) {
  uint8_t* base = s.plane_bases != nullptr
                      ? reinterpret_cast<uint8_t*>(s.plane_bases[layer * planes + plane])
                      : s.data + layer * s.layer_stride;
  return base + s.offset[plane];
}

// The stores' row guard with an entry as the row and its page id as the slot (no reserved
// id): usable, padding (past n, or a negative id) or out of range (counted where `counts`).
__device__ __forceinline__ bool move_page_ok(int64_t entry, int64_t n, int64_t page,
                                             int64_t num_pages, bool counts,
                                             MoveDiagnostics* diagnostics) {
  const detail::RowVerdict verdict = detail::classify_row(entry, n, page, -1, num_pages);
  if (verdict == detail::RowVerdict::kOutOfRange && counts && diagnostics != nullptr)
    atomicAdd(&diagnostics->out_of_range_pages, 1ull);
  return verdict == detail::RowVerdict::kStore;
}

template <typename Vec>
__device__ __forceinline__ void move_vectors(const MoveArgs& a, const MovePlaneArgs& shape,
                                             int32_t plane, const uint8_t* src,
                                             uint8_t* dst_base, int64_t dst_page,
                                             uint32_t first_token, int64_t entry,
                                             int64_t n, uint32_t part) {
  constexpr int kInFlight = 4;
  const int64_t s_token = a.src.token_stride[plane], s_head = a.src.head_stride[plane];
  const int64_t d_token = a.dst.token_stride[plane], d_head = a.dst.head_stride[plane];
  const int64_t d_pages = a.dst.page_stride[plane];
  const uint32_t begin = part * a.part_vectors;
  const uint32_t total = min(static_cast<uint32_t>(a.src.page_size) * shape.per_token.divisor,
                             begin + a.part_vectors);
  for (uint32_t base = begin + threadIdx.x; base < total; base += kInFlight * blockDim.x) {
    Vec v[kInFlight];
    uint8_t* out[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      out[k] = nullptr;
      const uint32_t i = base + k * blockDim.x;
      if (i >= total) continue;
      const uint32_t token = shape.per_token.div(i);
      const uint32_t r = i - token * shape.per_token.divisor;
      const uint32_t head = shape.per_row.div(r);
      const uint32_t c = r - head * shape.per_row.divisor;
      int64_t page = dst_page;
      uint32_t dst_token = first_token + token;
      if (!a.dst_coarser) {  // this entry's tokens span `ratio` destination pages
        const uint32_t q = a.dst_page.div(token);
        dst_token = token - q * a.dst_page.divisor;
        page = move_page_of(a.dst, entry * a.ratio + q);
        if (!move_page_ok(entry, n, page, a.dst.num_pages, false, nullptr)) continue;
      }
      const int64_t within = static_cast<int64_t>(c) * sizeof(Vec);
      v[k] = *reinterpret_cast<const Vec*>(src + token * s_token + head * s_head + within);
      out[k] = dst_base + page * d_pages + dst_token * d_token + head * d_head + within;
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k)
      if (out[k] != nullptr) *reinterpret_cast<Vec*>(out[k]) = v[k];
  }
}

// grid (entries * parts, layers, planes).
template <bool kPdl>
__global__ void __launch_bounds__(256) move_pages_kernel(const MoveArgs a) {
  begin_store<kPdl>(GuardArgs{});  // the stores' PDL prologue, without an early trigger
  const uint32_t entry32 = a.parts.div(blockIdx.x);
  const uint32_t part = blockIdx.x - entry32 * a.parts.divisor;
  const int64_t entry = entry32;
  const int32_t layer = blockIdx.y, plane = blockIdx.z;
  // The count as read: the guard needs no clamp (detail/guard.h).
  const int64_t n = a.n_ptr != nullptr ? *a.n_ptr : a.num_entries;
  if (n < 0 && blockIdx.x == 0 && layer == 0 && plane == 0 && threadIdx.x == 0 &&
      a.diagnostics != nullptr)
    atomicAdd(&a.diagnostics->negative_entry_counts, 1ull);
  if (entry >= n) return;
  // Each entry's ids are counted by the first part of layer 0's plane 0 only.
  const bool counts = layer == 0 && plane == 0 && part == 0;
  const int64_t src_page = move_page_of(a.src, entry);
  const bool src_ok =
      move_page_ok(entry, n, src_page, a.src.num_pages, counts && threadIdx.x == 0,
                   a.diagnostics);
  int64_t dst_page = 0;
  uint32_t first_token = 0;  // of this entry in its destination page (dst_coarser)
  if (a.dst_coarser) {
    // 32-bit: entries are below 2^31 (the grid), and a 64-bit division is a call.
    const uint32_t ratio = static_cast<uint32_t>(a.ratio);
    const uint32_t dst_entry = entry32 / ratio;
    const uint32_t within = entry32 - dst_entry * ratio;
    first_token = within * static_cast<uint32_t>(a.src.page_size);
    dst_page = move_page_of(a.dst, dst_entry);
    // A destination page is counted by the block of its first source entry.
    if (!move_page_ok(entry, n, dst_page, a.dst.num_pages,
                      counts && threadIdx.x == 0 && within == 0, a.diagnostics))
      return;
  } else if (counts) {
    for (int32_t k = threadIdx.x; k < a.ratio; k += blockDim.x)
      move_page_ok(entry, n, move_page_of(a.dst, entry * a.ratio + k), a.dst.num_pages, true,
                   a.diagnostics);
  }
  if (!src_ok) return;
  const MovePlaneArgs shape = a.planes[plane];
  if (part * a.part_vectors >= static_cast<uint32_t>(a.src.page_size) * shape.per_token.divisor)
    return;  // a smaller plane than the one the parts were sized for
  const uint8_t* src = move_plane_base(a.src, layer, plane, a.num_planes) +
                       src_page * a.src.page_stride[plane];
  uint8_t* dst = move_plane_base(a.dst, layer, plane, a.num_planes);
  const auto copy = [&](auto vector) {
    move_vectors<decltype(vector)>(a, shape, plane, src, dst, dst_page, first_token, entry, n,
                                   part);
  };
  switch (shape.vec_log2) {
    case 4:
      return copy(uint4{});
    case 3:
      return copy(uint2{});
    case 2:
      return copy(uint32_t{});
    case 1:
      return copy(uint16_t{});
    default:
      return copy(uint8_t{});
  }
}

}  // namespace cachestore::kernels
