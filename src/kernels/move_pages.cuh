// move_pages: a block copies one part of one source entry's tokens of one layer and one plane
// (the entry split into `parts` where the batch is too small to fill the device), the widest
// vector the plane allows, up to four vectors in flight a thread. With checksums a block takes
// a whole entry's plane: its CRC-32 first, then (if it matches) the copy.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "cachestore/move.h"
#include "detail/guard.h"
#include "kernels/args.h"
#include "kernels/core/crc32.cuh"
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
  uint32_t* checksums;                  // [entries, layers, planes] or nullptr
  const uint32_t* expected_checksums;   // [entries, layers, planes] or nullptr
  crc32::BlockConstants crc[kMaxPagePlanes];  // the checksum kernel's, a plane each
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

// One source entry's verdicts in one block: its source page, and where its tokens go.
struct MoveEntry {
  int64_t src_page;
  int64_t dst_page;      // dst_coarser: the destination page
  uint32_t first_token;  // dst_coarser: the entry's first token in it
  bool src_ok;
  bool dst_ok;           // dst_coarser: the destination page is usable (else per page)
};

// An entry's page ids, read before the count decides: the id arrays hold num_entries entries
// and the grid none past them, so a padded entry's ids are in bounds, read and never used, and
// the count, the ids and then the page's rows are two load latencies on the chain, not three.
struct MoveIds {
  int64_t src_page;
  int64_t dst_page;      // dst_coarser: the destination page's id
  uint32_t first_token;  // dst_coarser: the entry's first token in it
  uint32_t within;       // dst_coarser: the entry's place among its destination page's
};
__device__ __forceinline__ MoveIds move_ids(const MoveArgs& a, uint32_t entry32) {
  MoveIds ids{};
  ids.src_page = move_page_of(a.src, entry32);
  if (a.dst_coarser) {
    // 32-bit: entries are below 2^31 (the grid), and a 64-bit division is a call.
    const uint32_t ratio = static_cast<uint32_t>(a.ratio);
    const uint32_t dst_entry = entry32 / ratio;
    ids.within = entry32 - dst_entry * ratio;
    ids.first_token = ids.within * static_cast<uint32_t>(a.src.page_size);
    ids.dst_page = move_page_of(a.dst, dst_entry);
  }
  return ids;
}

// The entry's guard (block-uniform): the count, the ids, the diagnostics. Each entry's ids are
// counted by the first part of layer 0's plane 0 only, a destination page by the block of its
// first source entry.
__device__ __forceinline__ MoveEntry move_entry(const MoveArgs& a, const MoveIds& ids,
                                                uint32_t entry32, int64_t n, bool counts) {
  const int64_t entry = entry32;
  MoveEntry e{};
  e.src_page = ids.src_page;
  e.src_ok = move_page_ok(entry, n, e.src_page, a.src.num_pages, counts && threadIdx.x == 0,
                          a.diagnostics);
  e.dst_ok = true;
  if (a.dst_coarser) {
    e.first_token = ids.first_token;
    e.dst_page = ids.dst_page;
    e.dst_ok = move_page_ok(entry, n, e.dst_page, a.dst.num_pages,
                            counts && threadIdx.x == 0 && ids.within == 0, a.diagnostics);
  } else if (counts) {
    for (int32_t k = threadIdx.x; k < a.ratio; k += blockDim.x)
      move_page_ok(entry, n, move_page_of(a.dst, entry * a.ratio + k), a.dst.num_pages, true,
                   a.diagnostics);
  }
  return e;
}

// The count as read (the guard needs no clamp, detail/guard.h); a negative one is counted once.
__device__ __forceinline__ int64_t move_count(const MoveArgs& a) {
  const int64_t n = a.n_ptr != nullptr ? *a.n_ptr : a.num_entries;
  if (n < 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 &&
      a.diagnostics != nullptr)
    atomicAdd(&a.diagnostics->negative_entry_counts, 1ull);
  return n;
}

// f(Vec{}) with the plane's vector type.
template <typename F>
__device__ __forceinline__ void with_vector(int32_t vec_log2, F&& f) {
  switch (vec_log2) {
    case 4:
      return f(uint4{});
    case 3:
      return f(uint2{});
    case 2:
      return f(uint32_t{});
    case 1:
      return f(uint16_t{});
    default:
      return f(uint8_t{});
  }
}

// grid (entries * parts, layers, planes).
template <bool kPdl>
__global__ void __launch_bounds__(256) move_pages_kernel(const MoveArgs a) {
  begin_store<kPdl>(GuardArgs{});  // the stores' PDL prologue, without an early trigger
  const uint32_t entry32 = a.parts.div(blockIdx.x);
  const uint32_t part = blockIdx.x - entry32 * a.parts.divisor;
  const int32_t layer = blockIdx.y, plane = blockIdx.z;
  const MoveIds ids = move_ids(a, entry32);
  const int64_t n = move_count(a);
  if (entry32 >= n) return;
  const MoveEntry e = move_entry(a, ids, entry32, n, layer == 0 && plane == 0 && part == 0);
  if (!e.src_ok || !e.dst_ok) return;
  const MovePlaneArgs shape = a.planes[plane];
  if (part * a.part_vectors >= static_cast<uint32_t>(a.src.page_size) * shape.per_token.divisor)
    return;  // a smaller plane than the one the parts were sized for
  const uint8_t* src = move_plane_base(a.src, layer, plane, a.num_planes) +
                       e.src_page * a.src.page_stride[plane];
  uint8_t* dst = move_plane_base(a.dst, layer, plane, a.num_planes);
  with_vector(shape.vec_log2, [&](auto vector) {
    move_vectors<decltype(vector)>(a, shape, plane, src, dst, e.dst_page, e.first_token,
                                   entry32, n, part);
  });
}

// The CRC-32 of one block's source rows, in row order (token, head, byte), to every thread:
// thread i folds vectors [i * rounds, (i + 1) * rounds) of the block padded at its front.
template <typename Vec>
__device__ uint32_t move_block_crc(const MoveArgs& a, const MovePlaneArgs& shape, int32_t plane,
                                   const uint8_t* src, const crc32::Tables& tables,
                                   uint32_t* warp_parts) {
  constexpr int kInFlight = 4;
  const crc32::BlockConstants& k = a.crc[plane];
  const int64_t s_token = a.src.token_stride[plane], s_head = a.src.head_stride[plane];
  const int64_t first = static_cast<int64_t>(threadIdx.x) * k.rounds - k.front;
  uint32_t part = 0;
  for (uint32_t round = 0; round < k.rounds; round += kInFlight) {
    Vec v[kInFlight];
    bool real[kInFlight];
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      const int64_t i = first + round + r;  // negative: a padding vector (zeros)
      real[r] = round + r < k.rounds && i >= 0;
      if (!real[r]) continue;
      const uint32_t at = static_cast<uint32_t>(i);
      const uint32_t token = shape.per_token.div(at);
      const uint32_t rest = at - token * shape.per_token.divisor;
      const uint32_t head = shape.per_row.div(rest);
      const uint32_t c = rest - head * shape.per_row.divisor;
      v[r] = *reinterpret_cast<const Vec*>(src + token * s_token + head * s_head +
                                           static_cast<int64_t>(c) * sizeof(Vec));
    }
#pragma unroll
    for (int r = 0; r < kInFlight; ++r)
      if (real[r]) part = crc32::update(tables, part, v[r]);
  }
  return crc32::combine_block(part, k, warp_parts);
}

// With checksums: one block an entry, layer and plane (grid (entries, layers, planes)); the
// source rows are read and checksummed before anything is written, then copied if they match.
template <bool kPdl>
__global__ void __launch_bounds__(256) move_pages_checksum_kernel(const MoveArgs a) {
  __shared__ crc32::Tables tables;
  __shared__ uint32_t warp_parts[8];
  begin_store<kPdl>(GuardArgs{});
  const uint32_t entry32 = blockIdx.x;
  const int32_t layer = blockIdx.y, plane = blockIdx.z;
  const MoveIds ids = move_ids(a, entry32);
  const int64_t n = move_count(a);
  if (entry32 >= n) return;
  const MoveEntry e = move_entry(a, ids, entry32, n, layer == 0 && plane == 0);
  if (!e.src_ok) return;
  const MovePlaneArgs shape = a.planes[plane];
  const uint8_t* src = move_plane_base(a.src, layer, plane, a.num_planes) +
                       e.src_page * a.src.page_stride[plane];
  uint8_t* dst = move_plane_base(a.dst, layer, plane, a.num_planes);
  crc32::build_tables(tables);
  with_vector(shape.vec_log2, [&](auto vector) {
    using Vec = decltype(vector);
    const uint32_t crc = move_block_crc<Vec>(a, shape, plane, src, tables, warp_parts);
    const int64_t block = (static_cast<int64_t>(entry32) * gridDim.y + layer) * gridDim.z + plane;
    if (a.checksums != nullptr && threadIdx.x == 0) a.checksums[block] = crc;
    if (a.expected_checksums != nullptr && crc != a.expected_checksums[block]) {
      if (threadIdx.x == 0 && a.diagnostics != nullptr)
        atomicAdd(&a.diagnostics->checksum_mismatches, 1ull);
      return;
    }
    if (e.dst_ok) move_vectors<Vec>(a, shape, plane, src, dst, e.dst_page, e.first_token,
                                    entry32, n, 0);
  });
}

}  // namespace cachestore::kernels
