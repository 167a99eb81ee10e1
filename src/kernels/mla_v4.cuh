// MLA V4 ("MODEL1", layout::kMlaLayouts[kV4]): lanes 0..448/kN-1 hold kN NoPE values each
// (64/kN lanes per 64-value tile), quantized to e4m3 with a UE8M0 tile scale; the last 64/kN
// lanes hold kN RoPE values each, copied raw.
#pragma once

#include "kernels/core/ue8m0.cuh"
#include "kernels/mla_row.cuh"

namespace cachestore::kernels {

template <>
struct MlaRow<MlaLayout::kV4> {
  template <ScaleRule kRule, typename SlotT, int kN, bool kPdl, int kRope = kRopeNone>
  __device__ __forceinline__ static void store(const GuardArgs& guard, const MlaArgs& a,
                                               const PageTableArgs& table,
                                               int64_t row, int lane, bool live,
                                               const RopeArgs* rope = nullptr) {
    constexpr layout::PagedRows kRows = layout::mla_layout(MlaLayout::kV4).rows;
    constexpr int kNopeDim = layout::mla_layout(MlaLayout::kV4).nope_dim;
    constexpr int kNopeLanes = kNopeDim / kN;
    constexpr int kTileLanes = layout::mla_layout(MlaLayout::kV4).tile / kN;
    constexpr int kRopeOffset = layout::mla_layout(MlaLayout::kV4).rope_in_record;
    const bool is_nope = lane < kNopeLanes;
    Bf16Vals<kN> x;
    const auto [amax, pos, stored] =
        load_nope_or_rope_row<SlotT, kTileLanes, kPdl, kRope>(guard, a, table, row, lane, live,
                                                              kNopeLanes, x, rope);
    if (!stored) return;

    const auto [data_row, scale_row] = split_row_pointers(kRows, a, pos);
    // Every lane quantizes (the RoPE lanes' results are dropped) and only the stores depend on
    // the kind of lane: the warp that holds both kinds then diverges for a store, not for the
    // chain.
    x.decode();
    const uint8_t e8 = pow2_scale_byte(amax, [](float a) { return detail::v4_scale_base(a); },
                                       [](float a) { return detail::v4_scale_byte(a); });
    const Fp8Bytes<kN> q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
    if (is_nope) {
      *reinterpret_cast<Fp8Bytes<kN>*>(data_row + kN * lane) = q;
    } else {
      x.store_raw(data_row + kRopeOffset + 2 * kN * (lane - kNopeLanes));
    }
    // Every lane of a tile writes its scale byte (the same value: the warp's store merges them);
    // the RoPE lanes' "tile" is the pad byte after the seven scales, which is 0. Written from one
    // lane of the tile, the row would end in an EXIT between the two stores.
    static_assert(kNopeLanes / kTileLanes == layout::mla_tiles(layout::mla_layout(MlaLayout::kV4)),
                  "the pad byte follows the scales");
    scale_row[lane / kTileLanes] = is_nope ? e8 : 0;
  }
};

}  // namespace cachestore::kernels
