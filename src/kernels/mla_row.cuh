// The row shape every MLA layout shares: kN values per lane over 512 / kN lanes (one warp at
// kN = 16, two at kN = 8), the count, slot and input loaded together, the tile amax, the one
// guard. Each layout's kernel header specializes MlaRow with its quantization and writes.
#pragma once

#include "cachestore/layout.h"
#include "kernels/core/bf16_values.cuh"
#include "kernels/core/guard.cuh"
#include "kernels/core/reduce.cuh"
#include "kernels/core/rope.cuh"

namespace cachestore::kernels {

// Lanes of one MLA row: 512 values (V4, V4.1: 448 NoPE + 64 RoPE; V3.2: 512 NoPE) at kN a lane.
template <int kN>
inline constexpr int kMlaRowLanes = 512 / kN;

// The row of a layout: `MlaRow<kLayout>::store<kRule, SlotT, kN, kPdl, kRope>(guard, kv, table,
// row, lane, live, rope)`, specialized in the layout's kernel header. kRule is the cache's scale
// rule where the layout reads one (layout::MlaLayoutInfo::scale_rule_selectable), else kPow2 and
// unread. kRope: the row's RoPE part is rotated first (MlaRowRotation; `rope` unread otherwise).
template <MlaLayout kLayout>
struct MlaRow;

// Where an MLA row's lane reads its kN values: lanes below `nope_lanes` from the NoPE input,
// the rest from the RoPE input. Selected operand by operand, so that the address is a few selects
// rather than two branches that reconverge in front of the load.
template <int kN>
__device__ __forceinline__ const uint16_t* nope_or_rope_source(const MlaArgs& a, int64_t row,
                                                               int lane, int nope_lanes) {
  const bool is_nope = lane < nope_lanes;
  return (is_nope ? a.nope : a.rope) + (row * (is_nope ? a.nope_row_stride : a.rope_row_stride) +
                                        kN * (is_nope ? lane : lane - nope_lanes));
}

// An MLA row without RoPE: nothing rotates, the verdict is the guard's.
struct NoRotation {
  __device__ __forceinline__ void operator()() const {}
  __device__ __forceinline__ bool operator()(int64_t /*n*/) const { return true; }
};

// The guard of an MLA row whose values `x` are loading: the count and the slot load beside
// them, then `rotate()` (a rotating row's RoPE part rotated, in x or beside it), the tile's amax
// (the whole warp takes part), `verdict(n)` (a rotating row's: false, not stored), the row's page
// position and the verdict. The count and the slot issue before the rotation: its branches would
// otherwise hold them back until its cos/sin is there, a third load latency on the chain; and
// nothing before the verdict waits for them. The row returns when `stored` is false. A row
// past the batch (`live` false: the last block's spare rows) loads no slot (-1: never stored,
// never counted).
struct MlaRowGuard {
  float amax;
  PagePosition pos;
  bool stored;
};
template <int kTileLanes, bool kPdl, typename SlotT, int kN, typename Rotate = NoRotation,
          typename Verdict = NoRotation>
__device__ __forceinline__ MlaRowGuard guard_mla_row(const GuardArgs& guard, const MlaArgs& a,
                                                     const GuardSources<SlotT>& sources,
                                                     int64_t row, int lane, bool live,
                                                     const Bf16Vals<kN>& x,
                                                     Rotate&& rotate = Rotate{},
                                                     Verdict&& verdict = Verdict{}) {
  const int64_t n = sources.template load_count<kPdl>(guard);
  const int64_t slot = live ? sources.template load_slot<kPdl>(n) : -1;
  rotate();
  const float amax = group_amax<kTileLanes>(x.amax());
  const bool rotated = verdict(n);
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  return {amax, pos,
          row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0) && rotated};
}

// The rotation of a rotating MLA row's RoPE part (fused_store_cache with RotaryEmbedding): the
// row's position loads beside its inputs (every lane: the verdict needs it), and each lane that
// holds RoPE values loads its cos/sin once the count and the slot have issued, before they
// decide (cos_sin_row: the cache is read-only, and a position outside it reads row 0, which
// nothing stores); then each such lane rotates its values, a NeoX partner (32 values on)
// shuffled from the lane that holds it, in the same warp, while the count and the slot are still
// on their way (a row that turns out not to be stored was rotated for nothing, and written
// nowhere). A row is stored when it is real and its position is in the cos/sin cache; a real
// row past the cache is counted once and stores nothing. The rotated values are bf16 (rounded
// by the peer's rule), what the layout then stores, and key_out's. kVals: the RoPE values a
// lane holds (8 or 16).
template <int kVals>
struct MlaRowRotation {
  static_assert(kVals == 8 || kVals == 16, "8 or 16 RoPE values a lane");
  const RopeArgs& r;
  const int64_t input_row;
  const uint8_t* position_src;
  int64_t position = 0;

  // `input_row`: the row whose inputs the lanes read (mla_input_row).
  __device__ __forceinline__ MlaRowRotation(const RopeArgs& rope, int64_t input_row)
      : r(rope),
        input_row(input_row),
        position_src(rotation_position_address(rope, input_row)) {}

  // The row's position, loaded beside the row's values.
  template <bool kPdl>
  __device__ __forceinline__ void load_position() {
    position = load_rotation_position<kPdl>(r, position_src, input_row);
  }

  // The cos/sin of a lane that holds RoPE values d0 .. d0 + kVals - 1 (NeoX: kVals of each,
  // GPT-J: the first kVals / 2).
  __device__ __forceinline__ void load_cos_sin(int32_t d0, float (&c)[kVals],
                                               float (&s)[kVals]) const {
    const uint8_t* row = cos_sin_row(r, position);
    if (r.pair_units > 0) {
      load_cos_sin_row<KvDataType::kBf16>(r, row, d0 < r.half_rot ? d0 : d0 - r.half_rot, c, s);
    } else {
      float c4[kVals / 2], s4[kVals / 2];
      load_cos_sin_row<KvDataType::kBf16>(r, row, d0 / 2, c4, s4);
#pragma unroll
      for (int i = 0; i < kVals / 2; ++i) {
        c[i] = c4[i];
        s[i] = s4[i];
      }
    }
  }

  // The lane's kVals RoPE values `w` (bf16 pairs; `rope_lane`: it holds RoPE values d0 ..
  // d0 + kVals - 1) rotated by its cos/sin, whatever the count says. Called by every lane of the
  // row's warps (the row is uniform in a warp), so that NeoX's shuffles see the whole warp.
  // The style and the rounding are one uniform branch here, so that the rotation each row runs
  // is straight-line code: per-value branches on them measured as long as the row's loads.
  __device__ __forceinline__ void rotate(bool rope_lane, int32_t d0,
                                         uint32_t (&w)[kVals / 2]) const {
    float c[kVals], s[kVals];
    if (rope_lane) load_cos_sin(d0, c, s);
    if (r.pair_units > 0) {
      if (r.input_rounding) rotate_as<true, true>(rope_lane, d0, c, s, w);
      else rotate_as<true, false>(rope_lane, d0, c, s, w);
    } else {
      if (r.input_rounding) rotate_as<false, true>(rope_lane, d0, c, s, w);
      else rotate_as<false, false>(rope_lane, d0, c, s, w);
    }
  }

  // The rotation in one style (kNeox) and rounding (kInputRounding).
  template <bool kNeox, bool kInputRounding>
  __device__ __forceinline__ void rotate_as(bool rope_lane, int32_t d0, const float (&c)[kVals],
                                            const float (&s)[kVals],
                                            uint32_t (&w)[kVals / 2]) const {
    // Four values at a time, so that the row stays within its registers. NeoX pairs d and d + 32
    // sit on lanes 32 / kVals apart; every lane shuffles (the row is the warp's), the RoPE lanes
    // rotate.
    constexpr int kGroup = 4;
    constexpr int kPartnerLanes = layout::kRopeDim / 2 / kVals;
    constexpr bool neox = kNeox;
    const bool first = d0 < r.half_rot;
#pragma unroll
    for (int g = 0; g < kVals / kGroup; ++g) {
      uint32_t* words = w + g * (kGroup / 2);
      uint32_t partner[kGroup / 2];
      if constexpr (neox) {
#pragma unroll
        for (int i = 0; i < kGroup / 2; ++i)
          partner[i] = __shfl_xor_sync(0xffffffffu, words[i], kPartnerLanes);
      }
      if (!rope_lane) continue;
      float v[kGroup];
#pragma unroll
      for (int i = 0; i < kGroup / 2; ++i) decode_bf16x2(words[i], v + 2 * i);
      if constexpr (neox) {
        float p[kGroup];
#pragma unroll
        for (int i = 0; i < kGroup / 2; ++i) decode_bf16x2(partner[i], p + 2 * i);
#pragma unroll
        for (int i = 0; i < kGroup; ++i)
          v[i] = rotate_value<KvDataType::kBf16>(v[i], p[i], c[kGroup * g + i],
                                                 s[kGroup * g + i], first, kInputRounding);
      } else {  // GPT-J: pairs (2i, 2i + 1) inside the lane
        float cg[kGroup / 2], sg[kGroup / 2];
#pragma unroll
        for (int i = 0; i < kGroup / 2; ++i) {
          cg[i] = c[kGroup / 2 * g + i];
          sg[i] = s[kGroup / 2 * g + i];
        }
        rotate_adjacent_pairs<KvDataType::kBf16>(v, cg, sg, kInputRounding);
      }
#pragma unroll
      for (int i = 0; i < kGroup / 2; ++i)  // exact: each value is a bf16 already
        words[i] = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i]))) |
                   static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1])))
                       << 16;
    }
  }

  // Whether the row (count `n`) is stored: real, its position in the cache (a real row past it
  // counted by the leader); key_out then gets the rotated values `w` of a RoPE lane.
  __device__ __forceinline__ bool verdict(const GuardArgs& guard, int64_t row, int64_t n,
                                          bool live, bool leader, bool rope_lane, int32_t d0,
                                          const uint32_t (&w)[kVals / 2]) const {
    const bool real = live && row < n;
    const bool in_cache = position >= 0 && position < r.max_position;
    if (leader && real && !in_cache && guard.diagnostics != nullptr)
      atomicAdd(&guard.diagnostics->out_of_range_positions, 1ull);
    if (!real || !in_cache) return false;
    if (rope_lane && r.k_out != nullptr) {
      uint8_t* out = r.k_out + 2 * (row * r.k_out_token_stride + d0);
#pragma unroll
      for (int i = 0; i < kVals / 8; ++i)
        store_vec(out + 16 * i, uint4{w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]});
    }
    return true;
  }
};

// The row whose input an MLA row reads: its own, or for a row past the batch (`live` false) row
// 0's (a launch has a row), read and never stored. An exit of those rows before the loads, or a
// load under their condition, would put the first read of the inputs' constant-bank line behind
// the test of num_tokens (another line): two constant-cache misses one after the other on the
// way to the loads. A select keeps the two reads side by side.
__device__ __forceinline__ int64_t mla_input_row(int64_t row, bool live) { return live ? row : 0; }

// The start of a V4 / V4.1 row: each lane's kN values `x` from the NoPE input or, on the lanes
// from `nope_lanes` on, the RoPE input (nope_or_rope_source), loaded beside the count and the
// slot (and with kRope the position, the RoPE lanes' values then rotated), then guard_mla_row.
template <typename SlotT, int kTileLanes, bool kPdl, bool kRope = false, int kN>
__device__ __forceinline__ MlaRowGuard load_nope_or_rope_row(const GuardArgs& guard,
                                                             const MlaArgs& a,
                                                             const PageTableArgs& table,
                                                             int64_t row, int lane, bool live,
                                                             int nope_lanes, Bf16Vals<kN>& x,
                                                             const RopeArgs* rope = nullptr) {
  const int64_t input_row = mla_input_row(row, live);
  const uint16_t* src = nope_or_rope_source<kN>(a, input_row, lane, nope_lanes);
  GuardSources<SlotT> sources(guard, a.slots, table, row);
  if constexpr (kRope) {
    MlaRowRotation<kN> rotation(*rope, input_row);
    begin_row<kPdl>(guard, sources, src, rotation.position_src);
    x = Bf16Vals<kN>::template load<kPdl>(src);
    const bool rope_lane = lane >= nope_lanes;
    const int32_t d0 = kN * (lane - nope_lanes);
    rotation.template load_position<kPdl>();
    uint32_t w[kN / 2];
    return guard_mla_row<kTileLanes, kPdl>(
        guard, a, sources, row, lane, live, x,
        [&]() {
          x.words(w);
          rotation.rotate(rope_lane, d0, w);
          x.set_words(w);
        },
        [&](int64_t n) {
          return rotation.verdict(guard, row, n, live, lane == 0, rope_lane, d0, w);
        });
  } else {
    begin_row<kPdl>(guard, sources, src);
    x = Bf16Vals<kN>::template load<kPdl>(src);
    return guard_mla_row<kTileLanes, kPdl>(guard, a, sources, row, lane, live, x);
  }
}

// Where a stored row of a split-page layout (data rows, then scale rows) writes.
struct SplitRowPointers {
  uint8_t* data_row;
  uint8_t* scale_row;
};
__device__ __forceinline__ SplitRowPointers split_row_pointers(const layout::PagedRows& rows,
                                                               const MlaArgs& a,
                                                               const PagePosition& pos) {
  const int64_t page_size = int64_t{1} << a.cache.page_shift;
  return {a.cache.data + layout::data_offset(rows, pos.local_page, pos.in_page,
                                             a.cache.page_stride),
          a.cache.data + layout::scale_offset(rows, pos.local_page, pos.in_page, page_size,
                                              a.cache.page_stride)};
}

}  // namespace cachestore::kernels
