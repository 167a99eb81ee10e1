// DeepSeek V4.1 stores: the V41 (528 B) and V41_FP4 (288 B) MLA rows and the fp4 (68-byte)
// index-K row, with the same lane shape as the other DeepSeek stores (store_kernels.cuh): kN
// values per lane, the count, slot and input loads together, the one guard, then the writes.
#pragma once

#include "cachestore/layout.h"
#include "kernels/common.cuh"

namespace cachestore::kernels {

// ---- fp4 index-K (68-byte layout): one row on 2^lanes_log2 lanes, kN values per lane. 32 / kN
// lanes hold one 32-value group; lanes past D / kN only pad the row's lane group.
// A row past the batch (`live` false) reads nothing but takes part in the group's shuffles.
// kPinned: begin_row's addressing without PDL too, which the fp4 index-K kernel takes (a partial
// H200 run: 1.28-1.36 -> 1.23-1.29x of the lean naive node at n <= 512, PDL off; NOTES.md,
// item 23). kDim: D compiled in (0: the run-time head_dim), as for the fp8 row.
template <typename SlotT, int kN, bool kPdl, bool kPinned = kPdl, int kDim = 0>
__device__ __forceinline__ void store_index_k_fp4_row(const GuardArgs& guard, const IndexKArgs& a,
                                                      int64_t row, int lane, bool live,
                                                      bool count_negative = true) {
  constexpr int kGroupLanes = layout::kFp4Group / kN;
  guarded_index_k_row<SlotT, kN, kGroupLanes, kPdl, kPinned, kDim>(guard, a, row, lane, live,
                                                             count_negative,
                                                    [&](Bf16Vals<kN>& x, float amax,
                                                        const PagePosition& pos) {
    const uint8_t e8 = detail::index_k_fp4_scale_byte(amax);
    const float inv = detail::ue8m0_reciprocal(e8);  // x / 2^(e8 - 127), exact
    Fp4Bytes<kN> q =
        x.to_e2m1(detail::ue8m0_to_float(e8), a.ties(), [inv](float v) { return v * inv; });
    if constexpr (kN == 8) {
      q = e2m1_drop_zero_signs(q);
    } else {
      q = make_uint2(e2m1_drop_zero_signs(q.x), e2m1_drop_zero_signs(q.y));
    }
    const int head_dim = index_k_dim<kDim>(a);
    store_bytes(a.cache.data + layout::index_k_fp4_data_offset(pos.local_page, pos.in_page,
                                                               a.cache.page_stride, head_dim) +
                    kN / 2 * lane,
                q, a.cache.page_stride % sizeof(q) == 0);
    if (lane % kGroupLanes == 0) {
      a.cache.data[layout::index_k_fp4_scale_offset(pos.local_page, pos.in_page,
                                                    int64_t{1} << a.cache.page_shift,
                                                    a.cache.page_stride, head_dim) +
                   lane / kGroupLanes] = e8;
    }
  });
}

// blockDim = (2^lanes_log2, rows per block): a multiple of 32 threads, so every warp is whole.
template <typename SlotT, int kN, bool kPdl, int kDim = 0>
__global__ void __launch_bounds__(512, 4)
index_k_fp4_kernel(const GuardArgs guard, const IndexKArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  store_index_k_fp4_row<SlotT, kN, kPdl, true, kDim>(guard, a, row, threadIdx.x,
                                                     row < guard.num_tokens);
}

// ---- MLA V41 and V41_FP4: lanes 0..448/kN-1 hold kN NoPE values each, the last 64/kN lanes kN
// RoPE values each; all 512 are quantized, in tiles of 32 (V41) or 16 (V41_FP4) values.
template <MlaLayout kLayout>
struct V41Format;
template <>
struct V41Format<MlaLayout::kV41> {
  static constexpr layout::SplitRows kRows = layout::kV41Rows;
  static constexpr int kTile = layout::kV41TileSize;
};
template <>
struct V41Format<MlaLayout::kV41Fp4> {
  static constexpr layout::SplitRows kRows = layout::kV41Fp4Rows;
  static constexpr int kTile = layout::kV41Fp4TileSize;
};

template <MlaLayout kLayout, typename SlotT, int kN, bool kPdl>
__device__ __forceinline__ void store_mla_v41_row(const GuardArgs& guard, const MlaArgs& a,
                                                  int64_t row, int lane, bool live) {
  using Format = V41Format<kLayout>;
  constexpr int kNopeLanes = layout::kV41NopeDim / kN;
  constexpr int kTileLanes = Format::kTile / kN;
  Bf16Vals<kN> x;
  const auto [amax, pos, stored] =
      load_nope_or_rope_row<SlotT, kTileLanes, kPdl>(guard, a, row, lane, live, kNopeLanes, x);
  if (!stored) return;

  const int64_t page_size = int64_t{1} << a.cache.page_shift;
  uint8_t* data_row = a.cache.data + layout::split_data_offset(Format::kRows, pos.local_page,
                                                               pos.in_page, a.cache.page_stride);
  uint8_t* scale_row =
      a.cache.data + layout::split_scale_offset(Format::kRows, pos.local_page, pos.in_page,
                                                page_size, a.cache.page_stride);
  uint8_t scale_byte;
  if constexpr (kLayout == MlaLayout::kV41) {
    x.decode();
    scale_byte = detail::v41_scale_byte(amax);
    *reinterpret_cast<Fp8Bytes<kN>*>(data_row + kN * lane) =
        x.to_e4m3_times(detail::ue8m0_reciprocal(scale_byte));
  } else {
    scale_byte = static_cast<uint8_t>(
        __nv_cvt_float_to_fp8(detail::v41_fp4_scale_input(amax), __NV_SATFINITE, __NV_E4M3));
    // x / s by the decoded scale with IEEE division's result (s in [2^-9, 448], where the
    // Markstein quotient applies; an Inf x keeps its Inf quotient).
    const float s = detail::e4m3_scale_to_float(scale_byte);
    const float r = reciprocal_rn(s);
    *reinterpret_cast<Fp4Bytes<kN>*>(data_row + kN / 2 * lane) =
        x.to_e2m1(s, Fp4Ties::kToEven, [s, r](float v) {
          return markstein_quotient<true>(v, s, r);
        });
  }
  // Every lane of a tile writes the tile's scale byte (the same value), as V4 does: no EXIT
  // between the two stores.
  scale_row[lane / kTileLanes] = scale_byte;
}

}  // namespace cachestore::kernels
