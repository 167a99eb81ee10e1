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

// A row's rotation (the rows' kRope): none; any RotaryEmbedding, its style, rounding and cos/sin
// form read at run time; or SGLang's freqs_cis form compiled in (GPT-J, the fp32 rounding, a
// row's own fp32 row of (cos, sin) pairs; no Q; FreqsCisArgs), whose kernel holds nothing else.
inline constexpr int kRopeNone = 0;
inline constexpr int kRopeAny = 1;
inline constexpr int kRopeFreqsCis = 2;

// The row of a layout: `MlaRow<kLayout>::store<kRule, SlotT, kN, kPdl, kRope>(guard, kv, table,
// row, lane, live, rope)`, specialized in the layout's kernel header. kRule is the cache's scale
// rule where the layout reads one (layout::MlaLayoutInfo::scale_rule_selectable), else kPow2 and
// unread. kRope: the row's RoPE part is rotated first (kRopeAny: MlaRowRotation, `rope` a
// RopeArgs; kRopeFreqsCis: FreqsCisRotation, `rope` a FreqsCisArgs; unread with kRopeNone).
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

// The rotation of a rotating MLA row's RoPE part (fused_store_cache with RotaryEmbedding),
// spread over the 32 lanes of the row's warp that holds it: lane l of that warp rotates the
// part's word l (values 2l and 2l + 1; NeoX with the word 16 away, its partners), from its own
// loads of the two words beside the row's values, and the lanes that hold the part then take
// their kVals / 2 words by shuffles. Each lane's chain is then one pair's rotation rather than
// kVals values behind a branch of the few lanes that hold them. The cos/sin is loaded once the
// count and the slot have issued, before they decide (cos_sin_row: the cache is read-only, and a
// position outside it reads row 0, which nothing stores); a row that turns out not to be stored
// was rotated for nothing, and written nowhere. A row is stored when it is real and its position
// is in the cos/sin cache; a real row past the cache is counted once and stores nothing. The
// rotated values are bf16 (rounded by the peer's rule), what the layout then stores, and
// key_out's. kVals: the RoPE values a lane that holds them holds (8 or 16).
template <int kVals>
struct MlaRowRotation {
  static_assert(kVals == 8 || kVals == 16, "8 or 16 RoPE values a lane");
  static constexpr int kWords = kVals / 2;
  static_assert(kWords * layout::kRopeDim / kVals == 32, "the part is one word a lane of a warp");
  const RopeArgs& r;
  const int64_t input_row;
  const uint8_t* position_src;
  const uint32_t* part;  // the row's RoPE input, 32 words
  int64_t position = 0;
  uint32_t own = 0;      // word l of the part
  uint32_t partner = 0;  // word l ^ 16 (NeoX's partners; read either way, the same line)

  // `input_row`: the row whose inputs the lanes read (mla_input_row); `part`: its RoPE input.
  __device__ __forceinline__ MlaRowRotation(const RopeArgs& rope, int64_t input_row,
                                            const uint16_t* part)
      : r(rope),
        input_row(input_row),
        position_src(rotation_position_address(rope, input_row)),
        part(reinterpret_cast<const uint32_t*>(part)) {}

  // The row's position (every lane: the verdict needs it) and, on the rotating warp, the lane's
  // two words, loaded beside the row's values.
  template <bool kPdl>
  __device__ __forceinline__ void load_inputs(bool rotating_warp, int warp_lane) {
    position = load_rotation_position<kPdl>(r, position_src, input_row);
    if (rotating_warp) {
      own = load_global<kPdl>(part + warp_lane);
      partner = load_global<kPdl>(part + (warp_lane ^ 16));
    }
  }

  // Word `l` of the part rotated in one style (kNeox) and rounding (kInputRounding), by the
  // cos/sin row `row`.
  template <bool kNeox, bool kInputRounding>
  __device__ __forceinline__ uint32_t rotated_word(const uint8_t* row, int l) const {
    float v[2];
    decode_bf16x2(own, v);
    if constexpr (kNeox) {  // values d = 2l, 2l + 1 and d +- 32, by cos/sin d mod 32
      float p[2], c[2], s[2];
      decode_bf16x2(partner, p);
      load_cos_sin_row<KvDataType::kBf16, 2, true>(r, row, (2 * l) & (layout::kRopeDim / 2 - 1), c,
                                                   s);
      const bool first = l < layout::kRopeDim / 4;
#pragma unroll
      for (int i = 0; i < 2; ++i)
        v[i] = rotate_value<KvDataType::kBf16>(v[i], p[i], c[i], s[i], first, kInputRounding);
    } else {  // GPT-J: the pair (2l, 2l + 1), by cos/sin l
      float c[1], s[1];
      load_cos_sin_row<KvDataType::kBf16, 1, true>(r, row, l, c, s);
      rotate_adjacent_pairs<KvDataType::kBf16>(v, c, s, kInputRounding);
    }
    // exact: each value is a bf16 already
    return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[0]))) |
           static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[1]))) << 16;
  }

  // The part rotated, whatever the count says, and the words of RoPE lane `rope_index` (0 ..
  // 64 / kVals - 1; negative: a lane that holds none, `w` untouched) into w. Called by every lane
  // of the row; the warp that holds the part (`rotating_warp`, `warp_lane` its lane) rotates it.
  // The style and the rounding are one uniform branch, so that the rotation is straight-line code.
  __device__ __forceinline__ void rotate(bool rotating_warp, int warp_lane, int rope_index,
                                         uint32_t (&w)[kWords]) const {
    if (!rotating_warp) return;
    const uint32_t word = any_form_word(warp_lane);
    const int first = kWords * (rope_index < 0 ? 0 : rope_index);
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t got = __shfl_sync(0xffffffffu, word, first + j);
      if (rope_index >= 0) w[j] = got;
    }
  }

  // Word `l` rotated in the style, rounding and cos/sin form of `r`.
  __device__ __forceinline__ uint32_t any_form_word(int l) const {
    const uint8_t* row = cos_sin_row(r, position);
    uint32_t word;
    if (r.pair_units > 0) {
      word = r.input_rounding ? rotated_word<true, true>(row, l)
                              : rotated_word<true, false>(row, l);
    } else {
      word = r.input_rounding ? rotated_word<false, true>(row, l)
                              : rotated_word<false, false>(row, l);
    }
    return word;
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

// The rotation of a row's RoPE part in SGLang's freqs_cis form (FreqsCisArgs): GPT-J pairs by
// the row's own fp32 (cos, sin) pairs, each rotated value x c - y s (or y c + x s) in fp32 with
// the contraction nvcc applies to SGLang's expression, then rounded to bf16 once. The lanes
// that hold the part rotate their own kN values by their kN / 2 pairs, loaded beside the values
// (the row of a real row is in the table: check_fused_store wants at least num_tokens rows).
// Every lane of the row runs the arithmetic and only the part's lanes keep it: a branch around
// it, divergent in the warp that holds the part, measured 0.06 us slower a row at decode sizes
// than the straight-line form.
template <int kN>
struct FreqsCisRotation {
  static constexpr int kWords = kN / 2;
  float4 pairs[kN / 4];  // (cos, sin) of the lane's kN / 2 pairs

  // The row's (cos, sin) pairs for RoPE lane `rope_index` (negative: none, zeros).
  static __device__ __forceinline__ const float4* source(const FreqsCisArgs& f, int64_t input_row,
                                                         int rope_index) {
    return reinterpret_cast<const float4*>(f.freqs + input_row * f.stride) +
           kN / 4 * (rope_index < 0 ? 0 : rope_index);
  }
  template <bool kPdl>
  __device__ __forceinline__ void load(const float4* src, bool rope_lane) {
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) pairs[i] = rope_lane ? load_global<kPdl>(src + i) : float4{};
  }

  // The words w (bf16 pairs in memory order) rotated where `rope_lane`.
  __device__ __forceinline__ void rotate(bool rope_lane, uint32_t (&w)[kWords]) const {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      float v[2];
      decode_bf16x2(w[j], v);
      const float4& p = pairs[j / 2];
      const float c = j % 2 == 0 ? p.x : p.z, s = j % 2 == 0 ? p.y : p.w;
      const __nv_bfloat162 rotated = __floats2bfloat162_rn(__fmaf_rn(v[0], c, -__fmul_rn(v[1], s)),
                                                           __fmaf_rn(v[1], c, __fmul_rn(v[0], s)));
      w[j] = rope_lane ? *reinterpret_cast<const uint32_t*>(&rotated) : w[j];
    }
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
template <typename SlotT, int kTileLanes, bool kPdl, int kRope = kRopeNone, int kN,
          typename Rope = RopeArgs>
__device__ __forceinline__ MlaRowGuard load_nope_or_rope_row(const GuardArgs& guard,
                                                             const MlaArgs& a,
                                                             const PageTableArgs& table,
                                                             int64_t row, int lane, bool live,
                                                             int nope_lanes, Bf16Vals<kN>& x,
                                                             const Rope* rope = nullptr) {
  const int64_t input_row = mla_input_row(row, live);
  const uint16_t* src = nope_or_rope_source<kN>(a, input_row, lane, nope_lanes);
  GuardSources<SlotT> sources(guard, a.slots, table, row);
  if constexpr (kRope == kRopeFreqsCis) {
    const FreqsCisArgs& f = *rope;
    const int rope_index = lane - nope_lanes;
    const bool rope_lane = rope_index >= 0;
    FreqsCisRotation<kN> rotation;
    const float4* pairs_src = FreqsCisRotation<kN>::source(f, input_row, rope_index);
    begin_row<kPdl>(guard, sources, src, pairs_src);
    x = Bf16Vals<kN>::template load<kPdl>(src);
    rotation.template load<kPdl>(pairs_src, rope_lane);
    return guard_mla_row<kTileLanes, kPdl>(
        guard, a, sources, row, lane, live, x,
        [&]() {
          uint32_t w[kN / 2];
          x.words(w);
          rotation.rotate(rope_lane, w);
          x.set_words(w);
        },
        [&](int64_t n) {  // a real row's table row is in the table: every real row rotates
          if (rope_lane && f.k_out != nullptr && live && row < n)
            x.store_raw(f.k_out + 2 * (row * f.k_out_token_stride + kN * rope_index));
          return true;
        });
  } else if constexpr (kRope == kRopeAny) {
    // The RoPE lanes load nothing of their own: their words come rotated from their warp.
    constexpr int kRopeLanes = layout::kRopeDim / kN;
    MlaRowRotation<kN> rotation(*rope, input_row,
                                                       a.rope + input_row * a.rope_row_stride);
    begin_row<kPdl>(guard, sources, src, rotation.position_src);
    const int rope_index = lane - nope_lanes;
    x = Bf16Vals<kN>::template load<kPdl>(src, rope_index < 0);
    const bool rotating_warp = lane / 32 == (nope_lanes + kRopeLanes - 1) / 32;
    rotation.template load_inputs<kPdl>(rotating_warp, lane % 32);
    const bool rope_lane = rope_index >= 0;
    const int32_t d0 = kN * rope_index;
    uint32_t w[kN / 2];
    return guard_mla_row<kTileLanes, kPdl>(
        guard, a, sources, row, lane, live, x,
        [&]() {
          x.words(w);
          rotation.rotate(rotating_warp, lane % 32, rope_index, w);
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
