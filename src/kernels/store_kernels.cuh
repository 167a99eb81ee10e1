// The store kernels. One group of lanes per row: each lane moves 16-byte vectors, reads the
// count, its row's slot and its input together (so their latencies overlap), applies the one
// guard, and only then writes. Rows at or past num_tokens read nothing.
#pragma once

#include "cachestore/layout.h"
#include "kernels/common.cuh"

namespace cachestore::kernels {

// The largest block a launch policy uses (arch.h); the launch bounds cap registers so that
// the index-K kernels run 2048 threads per SM and the MLA kernels 1536.
inline constexpr int kMaxBlockThreads = 512;

// ---- bf16 index-K: blockDim = (lanes per row, rows per block) -----------------------------
template <typename SlotT>
__global__ void index_k_bf16_kernel(const GuardArgs guard, const IndexKBf16Args a) {
  begin_store(guard);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= guard.num_tokens) return;
  const uint16_t* src = a.k + row * a.k_row_stride;
  int vec = threadIdx.x;
  const bool has_first = vec < a.vecs_per_row;
  const uint4 first = has_first ? load_vec(src + 8 * vec) : uint4{};
  const int64_t n = load_token_count(guard);
  const int64_t slot = load_slot<SlotT>(a.slots, row);
  if (!row_is_stored(guard, a.slots, row, n, slot, threadIdx.x == 0)) return;
  auto* dst = reinterpret_cast<uint8_t*>(a.cache + slot * a.cache_row_stride);
  if (has_first) store_vec(dst + 16 * vec, first);
  for (vec += blockDim.x; vec < a.vecs_per_row; vec += blockDim.x)
    store_vec(dst + 16 * vec, load_vec(src + 8 * vec));
}

// ---- fp8 index-K (132-byte layout): one row on 2^lanes_log2 lanes, 16 values per lane -----
// Eight lanes hold one 128-value block; lanes past D/16 (D = 384) only pad the group.
template <typename SlotT>
__device__ __forceinline__ void store_index_k_fp8_row(const GuardArgs& guard,
                                                      const IndexKFp8Args& a, int64_t row,
                                                      int lane) {
  const bool active = lane * 16 < a.head_dim;
  const uint16_t* src = a.k + row * a.k_row_stride + lane * 16;
  const uint4 lo = active ? load_vec(src) : uint4{};
  const uint4 hi = active ? load_vec(src + 8) : uint4{};
  const int64_t n = load_token_count(guard);
  const int64_t slot = load_slot<SlotT>(a.slots, row);
  const Bf16x16 x(lo, hi);
  const float amax = group_amax<8>(Bf16x16::amax(lo, hi));
  if (!row_is_stored(guard, a.slots, row, n, slot, lane == 0) || !active) return;

  const int64_t page = slot >> a.cache.page_shift;
  const int64_t in_page = slot & ((int64_t{1} << a.cache.page_shift) - 1);
  const float base = detail::index_k_scale_base(amax);
  float scale;
  uint4 q;
  if (a.rule == ScaleRule::kPow2) {
    const uint8_t e8 = ue8m0_round_up(base);
    scale = detail::ue8m0_to_float(e8);
    q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));  // x * 2^-e == x / 2^e exactly
  } else {
    scale = base;
    q = x.to_e4m3_divided<false>(base);  // base >= 1e-4 / 448
  }
  store_16_bytes(a.cache.data + layout::index_k_fp8_data_offset(page, in_page, a.cache.page_stride,
                                                                a.head_dim) + 16 * lane,
                 q, a.cache.page_stride % 16 == 0);
  if ((lane & 7) == 0) {
    const int64_t offset = layout::index_k_fp8_scale_offset(
        page, in_page, int64_t{1} << a.cache.page_shift, a.cache.page_stride, a.head_dim);
    reinterpret_cast<float*>(a.cache.data + offset)[lane / 8] = scale;
  }
}

// blockDim = (2^lanes_log2, rows per block)
template <typename SlotT>
__global__ void __launch_bounds__(kMaxBlockThreads, 2048 / kMaxBlockThreads)
index_k_fp8_kernel(const GuardArgs guard, const IndexKFp8Args a) {
  begin_store(guard);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= guard.num_tokens) return;
  store_index_k_fp8_row<SlotT>(guard, a, row, threadIdx.x);
}

// ---- MLA V4: one warp per row. Lanes 0..27: 16 NoPE values each (4 lanes per 64-value
// tile); lanes 28..31: 16 RoPE values each, copied raw.
template <typename SlotT>
__device__ __forceinline__ void store_mla_v4_row(const GuardArgs& guard, const MlaArgs& a,
                                                 int64_t row, int lane) {
  constexpr int kNopeLanes = layout::kV4NopeDim / 16;
  const bool is_nope = lane < kNopeLanes;
  const uint16_t* src = is_nope ? a.nope + row * a.nope_row_stride + 16 * lane
                                : a.rope + row * a.rope_row_stride + 16 * (lane - kNopeLanes);
  const uint4 lo = load_vec(src), hi = load_vec(src + 8);
  const int64_t n = load_token_count(guard);
  const int64_t slot = load_slot<SlotT>(a.slots, row);
  const Bf16x16 x(lo, hi);
  const float amax = group_amax<layout::kV4TileSize / 16>(Bf16x16::amax(lo, hi));
  if (!row_is_stored(guard, a.slots, row, n, slot, lane == 0)) return;

  const int64_t page_size = int64_t{1} << a.cache.page_shift;
  const int64_t page = slot >> a.cache.page_shift, in_page = slot & (page_size - 1);
  uint8_t* data_row = a.cache.data + layout::v4_data_offset(page, in_page, a.cache.page_stride);
  uint8_t* scale_row =
      a.cache.data + layout::v4_scale_offset(page, in_page, page_size, a.cache.page_stride);
  if (is_nope) {
    const uint8_t e8 = ue8m0_round_up(detail::v4_scale_base(amax));
    store_vec(data_row + 16 * lane, x.to_e4m3_times(detail::ue8m0_reciprocal(e8)));
    if ((lane & 3) == 0) scale_row[lane / 4] = e8;
  } else {
    uint8_t* rope_dst = data_row + layout::kV4NopeDim + 32 * (lane - kNopeLanes);
    store_vec(rope_dst, lo);
    store_vec(rope_dst + 16, hi);
    if (lane == kNopeLanes) scale_row[layout::kV4NumTiles] = 0;  // the pad byte
  }
}

// ---- MLA V3.2: one warp per row. Lane l: NoPE values 16l..16l+15 (8 lanes per 128-value
// tile); lanes 0..7 also copy one 16-byte RoPE vector.
template <typename SlotT>
__device__ __forceinline__ void store_mla_v32_row(const GuardArgs& guard, const MlaArgs& a,
                                                  int64_t row, int lane) {
  constexpr int kRopeLanes = layout::kRopeDim / 8;
  const uint16_t* src = a.nope + row * a.nope_row_stride + 16 * lane;
  const uint4 lo = load_vec(src), hi = load_vec(src + 8);
  const uint4 rope = lane < kRopeLanes ? load_vec(a.rope + row * a.rope_row_stride + 8 * lane)
                                       : uint4{};
  const int64_t n = load_token_count(guard);
  const int64_t slot = load_slot<SlotT>(a.slots, row);
  const Bf16x16 x(lo, hi);
  const float amax = group_amax<layout::kV32TileSize / 16>(Bf16x16::amax(lo, hi));
  if (!row_is_stored(guard, a.slots, row, n, slot, lane == 0)) return;

  const int64_t page = slot >> a.cache.page_shift;
  const int64_t in_page = slot & ((int64_t{1} << a.cache.page_shift) - 1);
  uint8_t* record = a.cache.data + layout::v32_record_offset(page, in_page, a.cache.page_stride);
  float scale;
  uint4 q;
  if (a.rule == ScaleRule::kPow2) {
    const uint8_t e8 = ue8m0_round_up(detail::v32_pow2_scale_base(amax));
    scale = detail::ue8m0_to_float(e8);
    q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
  } else {
    scale = detail::v32_amax_scale(amax);
    q = x.to_e4m3_divided<true>(scale);
  }
  store_vec(record + 16 * lane, q);
  if ((lane & 7) == 0)
    reinterpret_cast<float*>(record + layout::kV32ScalesOffset)[lane / 8] = scale;
  if (lane < kRopeLanes) store_vec(record + layout::kV32RopeOffset + 16 * lane, rope);
}

// ---- fused_store_cache: blockDim = (32, rows_per_block + index warps). Warp w <
// rows_per_block stores row first_row + w of the KV cache; the warps after it store the
// index-K of the same rows (2^lanes_log2 lanes per row), when there is one.
template <MlaLayout kLayout, typename SlotT>
__global__ void __launch_bounds__(kMaxBlockThreads, 1536 / kMaxBlockThreads)
fused_store_kernel(const GuardArgs guard, const MlaArgs kv,
                                   const IndexKFp8Args index, const int32_t rows_per_block) {
  begin_store(guard);
  const int warp = threadIdx.y, lane = threadIdx.x;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  if (warp < rows_per_block) {
    const int64_t row = first_row + warp;
    if (row >= guard.num_tokens) return;
    if constexpr (kLayout == MlaLayout::kV4) {
      store_mla_v4_row<SlotT>(guard, kv, row, lane);
    } else {
      store_mla_v32_row<SlotT>(guard, kv, row, lane);
    }
  } else {
    const int local = (warp - rows_per_block) * 32 + lane;
    const int row_in_block = local >> index.lanes_log2;
    const int64_t row = first_row + row_in_block;
    if (row_in_block >= rows_per_block || row >= guard.num_tokens) return;
    store_index_k_fp8_row<SlotT>(guard, index, row, local & ((1 << index.lanes_log2) - 1));
  }
}

}  // namespace cachestore::kernels
