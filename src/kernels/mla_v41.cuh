// DeepSeek V4.1 MLA rows, V41 (528 B, layout::kMlaLayouts[kV41]) and V41_FP4 (288 B,
// kMlaLayouts[kV41Fp4]): lanes 0..448/kN-1 hold kN NoPE values each, the last 64/kN lanes kN
// RoPE values each; all 512 are quantized, in tiles of 32 (e4m3, UE8M0 scales) or 16 (e2m1,
// e4m3 scales).
#pragma once

#include "kernels/mla_row.cuh"

namespace cachestore::kernels {

// Both V4.1 layouts' row; kRule is unread (the layouts fix their scale formats).
template <MlaLayout kLayout>
struct V41Row {
  template <ScaleRule kRule, typename SlotT, int kN, bool kPdl, int kRope = kRopeNone,
            typename Rope = RopeArgs>
  __device__ __forceinline__ static void store(const GuardArgs& guard, const MlaArgs& a,
                                               const PageTableArgs& table,
                                               int64_t row, int lane, bool live,
                                               const Rope* rope = nullptr) {
    constexpr layout::PagedRows kRows = layout::mla_layout(kLayout).rows;
    constexpr int kNopeLanes = layout::mla_layout(kLayout).nope_dim / kN;
    constexpr int kTileLanes = layout::mla_layout(kLayout).tile / kN;
    Bf16Vals<kN> x;
    const auto [amax, pos, stored] =
        load_nope_or_rope_row<SlotT, kTileLanes, kPdl, kRope>(guard, a, table, row, lane, live,
                                                              kNopeLanes, x, rope);
    if (!stored) return;

    const auto [data_row, scale_row] = split_row_pointers(kRows, a, pos);
    uint8_t scale_byte;
    if constexpr (layout::mla_layout(kLayout).values == layout::Encoding::kE4m3) {
      x.decode();
      scale_byte = detail::v41_scale_byte(amax);
      *reinterpret_cast<Fp8Bytes<kN>*>(data_row + kN * lane) =
          x.to_e4m3_times(detail::ue8m0_reciprocal(scale_byte));
    } else {
      scale_byte = static_cast<uint8_t>(
          __nv_cvt_float_to_fp8(detail::v41_fp4_scale_input(amax), __NV_SATFINITE, __NV_E4M3));
      // x / s by the decoded scale with IEEE division's result (s in [2^-9, 448], where the
      // Markstein quotient applies; an Inf x keeps its Inf quotient). The reciprocal only on
      // the per-value path (a block with a NaN or Inf): the thresholds need none.
      const float s = e4m3_scale_decode(scale_byte);
      *reinterpret_cast<Fp4Bytes<kN>*>(data_row + kN / 2 * lane) =
          x.to_e2m1(s, Fp4Ties::kToEven, [s](float v) {
            return markstein_quotient<true>(v, s, reciprocal_rn(s));
          });
    }
    // Every lane of a tile writes the tile's scale byte (the same value), as V4 does: no EXIT
    // between the two stores.
    scale_row[lane / kTileLanes] = scale_byte;
  }
};

template <>
struct MlaRow<MlaLayout::kV41> : V41Row<MlaLayout::kV41> {};
template <>
struct MlaRow<MlaLayout::kV41Fp4> : V41Row<MlaLayout::kV41Fp4> {};

}  // namespace cachestore::kernels
