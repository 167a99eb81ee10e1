// MLA V3.2 ("fp8_ds_mla", layout::kMlaLayouts[kV32]): lane l holds NoPE values kN*l..kN*l+kN-1
// (128/kN lanes per 128-value tile), quantized to e4m3 with an fp32 tile scale; lanes 0..7 also
// copy one 16-byte RoPE vector. kRule, the cache's scale rule, is compiled in: a run-time branch
// on it would sit on the chain between the loads and the stores.
#pragma once

#include "kernels/core/ue8m0.cuh"
#include "kernels/mla_row.cuh"

namespace cachestore::kernels {

template <>
struct MlaRow<MlaLayout::kV32> {
  template <ScaleRule kRule, typename SlotT, int kN, bool kPdl, int kRope = kRopeNone>
  __device__ __forceinline__ static void store(const GuardArgs& guard, const MlaArgs& a,
                                               const PageTableArgs& table,
                                               int64_t row, int lane, bool live,
                                               const RopeArgs* rope = nullptr) {
    constexpr layout::PagedRows kRows = layout::mla_layout(MlaLayout::kV32).rows;
    constexpr int kRopeLanes = layout::kRopeDim / 8;
    constexpr int kTileLanes = layout::mla_layout(MlaLayout::kV32).tile / kN;
    constexpr int kScalesOffset = layout::mla_layout(MlaLayout::kV32).scales_in_record;
    constexpr int kRopeOffset = layout::mla_layout(MlaLayout::kV32).rope_in_record;
    const int64_t input_row = mla_input_row(row, live);
    const uint16_t* nope = a.nope + (input_row * a.nope_row_stride + kN * lane);
    const uint16_t* rope_src = a.rope + (input_row * a.rope_row_stride + 8 * lane);
    GuardSources<SlotT> sources(guard, a.slots, table, row);
    Bf16Vals<kN> x;
    uint4 rope_vec;
    const auto load = [&]() {
      x = Bf16Vals<kN>::template load<kPdl>(nope);
      // A rotating row's RoPE vectors come rotated from warp 0 (MlaRowRotation).
      rope_vec = lane < kRopeLanes && !kRope
                     ? load_global<kPdl>(reinterpret_cast<const uint4*>(rope_src))
                     : uint4{};
    };
    const auto [amax, pos, stored] = [&]() {
      if constexpr (kRope) {  // warp 0 rotates the RoPE part, lanes 0..7 take it (MlaRowRotation)
        MlaRowRotation<8> rotation(*rope, input_row, a.rope + input_row * a.rope_row_stride);
        begin_row<kPdl>(guard, sources, nope, rope_src, rotation.position_src);
        load();
        rotation.template load_inputs<kPdl>(lane < 32, lane % 32);
        uint32_t w[4];
        return guard_mla_row<kTileLanes, kPdl>(
            guard, a, sources, row, lane, live, x,
            [&]() {
              w[0] = rope_vec.x, w[1] = rope_vec.y, w[2] = rope_vec.z, w[3] = rope_vec.w;
              rotation.rotate(lane < 32, lane % 32, lane < kRopeLanes ? lane : -1, w);
              rope_vec = {w[0], w[1], w[2], w[3]};
            },
            [&](int64_t n) {
              return rotation.verdict(guard, row, n, live, lane == 0, lane < kRopeLanes,
                                      8 * lane, w);
            });
      } else {
        begin_row<kPdl>(guard, sources, nope, rope_src);
        load();
        return guard_mla_row<kTileLanes, kPdl>(guard, a, sources, row, lane, live, x);
      }
    }();
    if (!stored) return;

    uint8_t* record =
        a.cache.data + layout::data_offset(kRows, pos.local_page, pos.in_page, a.cache.page_stride);
    x.decode();
    float scale;
    Fp8Bytes<kN> q;
    if constexpr (kRule == ScaleRule::kPow2) {
      const uint8_t e8 =
          pow2_scale_byte(amax, [](float a) { return detail::v32_pow2_scale_base(a); },
                          [](float a) { return detail::v32_pow2_scale_byte(a); });
      scale = detail::ue8m0_to_float(e8);
      q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
    } else {
      scale = detail::v32_amax_scale(amax);
      q = x.template to_e4m3_divided<ScaleSource::kTileAmax>(scale);
    }
    *reinterpret_cast<Fp8Bytes<kN>*>(record + kN * lane) = q;
    if (lane % kTileLanes == 0)
      reinterpret_cast<float*>(record + kScalesOffset)[lane / kTileLanes] = scale;
    if (lane < kRopeLanes) store_vec(record + kRopeOffset + 16 * lane, rope_vec);
  }
};

}  // namespace cachestore::kernels
