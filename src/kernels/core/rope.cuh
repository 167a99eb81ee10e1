// What every rotating store shares (store_paged_kv's RoPE, fused_store_cache's): the rounding
// of each peer's rotary kernel, the cos/sin loads and the rotation units.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/args.h"
#include "kernels/core/vector_io.cuh"

namespace cachestore::kernels {

// fp32 rounded to the input type (round to nearest even; a NaN becomes the canonical one), as
// fp32: what the engines' rotary kernels write.
template <KvDataType kIn>
__device__ __forceinline__ float round_to_input(float x) {
  if constexpr (kIn == KvDataType::kFp32) {
    return x;
  } else if constexpr (kIn == KvDataType::kBf16) {
    return __bfloat162float(__float2bfloat16_rn(x));
  } else {
    return __half2float(__float2half_rn(x));
  }
}

// One rotated value: own x and partner y give x cos - y sin (first), or own y and partner x give
// y cos + x sin. kInputType (16-bit inputs): each product and the sum rounded to the input type,
// as vLLM's rotary_embedding computes in c10::BFloat16 / c10::Half; otherwise fp32 with the
// contraction nvcc applies to both peers' fp32 expressions, then one rounding.
template <KvDataType kIn>
__device__ __forceinline__ float rotate_value(float own, float partner, float c, float s,
                                              bool first, bool input_rounding) {
  if (kIn != KvDataType::kFp32 && input_rounding) {
    const float a = round_to_input<kIn>(__fmul_rn(own, c));
    const float b = round_to_input<kIn>(__fmul_rn(partner, s));
    return round_to_input<kIn>(first ? __fsub_rn(a, b) : __fadd_rn(a, b));
  }
  const float b = __fmul_rn(partner, s);
  return round_to_input<kIn>(__fmaf_rn(own, c, first ? -b : b));
}

// The cos/sin row of `position`: a position outside the cache reads row 0, so that the row can
// be read before the guard decides (the cache is read-only; such a row stores nothing).
__device__ __forceinline__ const uint8_t* cos_sin_row(const RopeArgs& r, int64_t position) {
  const bool inside = position >= 0 && position < r.max_position;
  return r.cos_sin + (inside ? position : 0) * r.cos_sin_stride;
}

// kN values of the cos/sin cache's type from each of elements `at` and `at + b_offset` of the
// row `row` (aligned to their bytes, up to 16), as fp32: one branch on the type for both.
template <int kN>
__device__ __forceinline__ void load_cos_sin_values(KvDataType type, const uint8_t* row,
                                                    int32_t at, int32_t b_offset, float (&a)[kN],
                                                    float (&b)[kN]) {
  if (type == KvDataType::kFp32) {
    load_bytes<false, 4 * kN>(row + 4 * at, a);
    load_bytes<false, 4 * kN>(row + 4 * (at + b_offset), b);
  } else {
    uint16_t ab[kN], bb[kN];
    load_bytes<false, 2 * kN>(row + 2 * at, ab);
    load_bytes<false, 2 * kN>(row + 2 * (at + b_offset), bb);
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      a[i] = type == KvDataType::kBf16 ? kv_value<KvDataType::kBf16>(ab[i])
                                       : kv_value<KvDataType::kFp16>(ab[i]);
      b[i] = type == KvDataType::kBf16 ? kv_value<KvDataType::kBf16>(bb[i])
                                       : kv_value<KvDataType::kFp16>(bb[i]);
    }
  }
}

// The cos and sin of kN pairs from pair `at` of the cos/sin row `row`, as fp32; rounded to the
// input type first under kInputType rounding, as vLLM holds its cache in the query's dtype.
// kMayInterleave: the row may hold each pair's cos and sin side by side (the MLA rotations;
// the paged kernel refuses that layout and compiles only the halves).
template <KvDataType kIn, int kN, bool kMayInterleave = false>
__device__ __forceinline__ void load_cos_sin_row(const RopeArgs& r, const uint8_t* row,
                                                 int32_t at, float (&c)[kN], float (&s)[kN]) {
  const auto type = static_cast<KvDataType>(r.cos_sin_type);
  if (kMayInterleave && (r.cos_sin_form & kCosSinInterleaved) != 0) {
    // pairs at .. at + kN - 1 as two runs of kN / 2 pairs (one run, read twice, when kN is 1)
    constexpr int kHalf = kN > 1 ? kN / 2 : 1;
    float lo[2 * kHalf], hi[2 * kHalf];
    load_cos_sin_values(type, row, 2 * at, kN > 1 ? 2 * kHalf : 0, lo, hi);
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      c[i] = i < kHalf ? lo[2 * i] : hi[2 * (i - kHalf)];
      s[i] = i < kHalf ? lo[2 * i + 1] : hi[2 * (i - kHalf) + 1];
    }
  } else {
    load_cos_sin_values(type, row, at, r.half_rot, c, s);
  }
  if (kIn != KvDataType::kFp32 && r.input_rounding && type != kIn) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      c[i] = round_to_input<kIn>(c[i]);
      s[i] = round_to_input<kIn>(s[i]);
    }
  }
}

// The same at position `pos` (inside the cache).
template <KvDataType kIn, int kN, bool kMayInterleave = false>
__device__ __forceinline__ void load_cos_sin(const RopeArgs& r, int64_t pos, int32_t at,
                                             float (&c)[kN], float (&s)[kN]) {
  load_cos_sin_row<kIn, kN, kMayInterleave>(r, r.cos_sin + pos * r.cos_sin_stride, at, c, s);
}

// kW values of the input type (exact: each is one) into its 16-byte vectors.
template <KvDataType kIn, int kW, int kLoads>
__device__ __forceinline__ void encode_values(const float (&v)[kW], uint4 (&x)[kLoads]) {
  if constexpr (kIn == KvDataType::kFp32) {
    memcpy(x, v, sizeof v);
  } else {
    uint16_t bits[kW];
#pragma unroll
    for (int i = 0; i < kW; ++i)
      bits[i] = kIn == KvDataType::kBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v[i]))
                                         : __half_as_ushort(__float2half_rn(v[i]));
    memcpy(x, bits, sizeof bits);
  }
}

// Which unit a thread holds: its head, its (first) vector, whether it is a pair (NeoX: the
// vector and the one rotary_dim / 2 after it; adjacent_pairs: two GPT-J vectors side by side)
// and whether it rotates.
struct RopeUnit {
  uint32_t head;
  uint32_t vec;
  bool pair;
  bool rotated;

  // A K or Q unit (`per_head` units a head): pairs first, then the unrotated vectors after the
  // rotary dim's 2 pair_units. kAdjacent: the kernel reads adjacent_pairs (else NeoX's only).
  template <bool kAdjacent = false>
  __device__ __forceinline__ static RopeUnit rotating(const RopeArgs& r, const FastDivmod& per_head,
                                                      uint32_t jj) {
    const uint32_t head = per_head.div(jj);
    const uint32_t u = jj - head * per_head.divisor;
    const bool pair = static_cast<int32_t>(u) < r.pair_units;
    const uint32_t vec = !pair ? u + r.pair_units : kAdjacent && r.adjacent_pairs != 0 ? 2 * u : u;
    return {head, vec, pair, static_cast<int32_t>(u) < r.rotated_units};
  }
  // A pair unit's second vector, in vectors after its first.
  template <bool kAdjacent = false>
  __device__ __forceinline__ static int32_t partner_vecs(const RopeArgs& r) {
    return kAdjacent && r.adjacent_pairs != 0 ? 1 : r.pair_units;
  }
  // A V vector: stored as it is.
  __device__ __forceinline__ static RopeUnit plain(const FastDivmod& per_head, uint32_t jj) {
    const uint32_t head = per_head.div(jj);
    return {head, jj - head * per_head.divisor, false, false};
  }
};

// Where row `row`'s position is, and the position (int32 or int64) loaded from there.
__device__ __forceinline__ const uint8_t* position_address(const RopeArgs& r, int64_t row) {
  return static_cast<const uint8_t*>(r.positions) + row * (r.positions_int64 ? 8 : 4);
}
template <bool kPdl>
__device__ __forceinline__ int64_t load_position(const RopeArgs& r, const uint8_t* src) {
  return r.positions_int64 ? load_global<kPdl>(reinterpret_cast<const int64_t*>(src))
                           : load_global<kPdl>(reinterpret_cast<const int32_t*>(src));
}

// The same for fused_store_cache's rotations, which may take a cos/sin row a row
// (kCosSinByRow): the position is then the row, nothing is loaded, and the row's cos/sin row
// stands as the address (a readable word where a kernel without a count pins one).
__device__ __forceinline__ const uint8_t* rotation_position_address(const RopeArgs& r,
                                                                    int64_t row) {
  return (r.cos_sin_form & kCosSinByRow) != 0 ? r.cos_sin + row * r.cos_sin_stride
                                               : position_address(r, row);
}
template <bool kPdl>
__device__ __forceinline__ int64_t load_rotation_position(const RopeArgs& r, const uint8_t* src,
                                                          int64_t row) {
  return (r.cos_sin_form & kCosSinByRow) != 0 ? row : load_position<kPdl>(r, src);
}

// GPT-J: the kN / 2 pairs (2i, 2i + 1) of v rotated by cos c[i], sin s[i].
template <KvDataType kIn, int kN>
__device__ __forceinline__ void rotate_adjacent_pairs(float (&v)[kN], const float (&c)[kN / 2],
                                                      const float (&s)[kN / 2],
                                                      bool input_rounding) {
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    const float even = v[2 * i];
    v[2 * i] = rotate_value<kIn>(even, v[2 * i + 1], c[i], s[i], true, input_rounding);
    v[2 * i + 1] = rotate_value<kIn>(v[2 * i + 1], even, c[i], s[i], false, input_rounding);
  }
}

// Two values of a 16-bit input type a word, each product and each sum rounded once to the type:
// the bits of kInputType's rule (the exact fp32 product rounded; an fp32 sum of two such values
// rounded to fp32 and then to the type is the sum rounded once, as fp32 has more than 2p + 2
// bits). gpu_conversion_test checks every pair of 16-bit values.
template <KvDataType kIn>
struct PackedPair {
  using T2 = std::conditional_t<kIn == KvDataType::kBf16, __nv_bfloat162, __half2>;
  __device__ __forceinline__ static T2 of(uint32_t w) {
    T2 t;
    memcpy(&t, &w, 4);
    return t;
  }
  __device__ __forceinline__ static uint32_t bits(T2 t) {
    uint32_t w;
    memcpy(&w, &t, 4);
    return w;
  }
  // (lo, hi) exact in the type (the rule's cos and sin): one conversion, no rounding.
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    if constexpr (kIn == KvDataType::kBf16) {
      return bits(__floats2bfloat162_rn(lo, hi));
    } else {
      return bits(__floats2half2_rn(lo, hi));
    }
  }
  __device__ __forceinline__ static uint32_t mul(uint32_t a, uint32_t b) {
    return bits(__hmul2_rn(of(a), of(b)));
  }
  __device__ __forceinline__ static uint32_t add(uint32_t a, uint32_t b) {
    return bits(__hadd2_rn(of(a), of(b)));
  }
  __device__ __forceinline__ static uint32_t sub(uint32_t a, uint32_t b) {
    return bits(__hsub2_rn(of(a), of(b)));
  }
};

// GPT-J's pair (lo, hi) of word w at cos c, sin s under kInputType: (lo c - hi s, hi c + lo s),
// each product and sum rounded to the type.
template <KvDataType kIn>
__device__ __forceinline__ uint32_t rotate_adjacent_word(uint32_t w, float c, float s) {
  using P = PackedPair<kIn>;
  const uint32_t swapped = __byte_perm(w, 0, 0x1032);
  return P::add(P::mul(w, P::pack(c, c)), P::mul(swapped, P::pack(-s, s)));
}

// A unit's kW input values x rotated at `position`: x (and y, for a pair) left holding the
// rotated values in the input type (packed, or where `want_bits`), v (and w) the same values
// as fp32. A NeoX pair rotates x
// with its partners y (d and d + rotary_dim / 2); GPT-J pairs (2i, 2i + 1) lie inside x and,
// for adjacent_pairs, inside the next vector y. kInputType on 16-bit inputs computes on two
// values a word (PackedPair: the same bits as value by value) where the kernel is compiled
// kPacked for that rounding; otherwise each value in fp32 by the rotation's rounding.
// kAdjacent: the kernel's GPT-J units may be two adjacent vectors (r.adjacent_pairs).
template <KvDataType kIn, int kW, int kLoads, bool kMayInterleave = false, bool kPacked = false,
          bool kAdjacent = false>
__device__ __forceinline__ void rotate_unit(const RopeArgs& r, const RopeUnit& unit,
                                            int64_t position, uint4 (&x)[kLoads],
                                            uint4 (&y)[kLoads], float (&v)[kW], float (&w)[kW],
                                            bool want_bits = true) {
  const bool adjacent = kAdjacent && unit.pair && r.adjacent_pairs != 0;
  const bool neox = unit.pair && !adjacent;
  if constexpr (kPacked) {
    static_assert(kIn != KvDataType::kFp32, "packed: two 16-bit values a word");
    constexpr int kC = kW;  // cos/sin values a unit reads at most (a NeoX or adjacent pair)
    float c[kC], s[kC];
    const int32_t vec = static_cast<int32_t>(unit.vec);
    if (unit.pair) {
      load_cos_sin<kIn, kW, kMayInterleave>(r, position, (neox ? kW : kW / 2) * vec, c, s);
    } else {
      float ch[kW / 2], sh[kW / 2];
      load_cos_sin<kIn, kW / 2, kMayInterleave>(r, position, kW / 2 * vec, ch, sh);
#pragma unroll
      for (int i = 0; i < kW / 2; ++i) {
        c[i] = ch[i];
        s[i] = sh[i];
      }
    }
    using P = PackedPair<kIn>;
    constexpr int kWords = kW / 2;
    uint32_t xw[kWords], yw[kWords];
    memcpy(xw, x, sizeof xw);
    memcpy(yw, y, sizeof yw);
    if (neox) {
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        const uint32_t cw = P::pack(c[2 * k], c[2 * k + 1]);
        const uint32_t sw = P::pack(s[2 * k], s[2 * k + 1]);
        const uint32_t xr = P::sub(P::mul(xw[k], cw), P::mul(yw[k], sw));
        yw[k] = P::add(P::mul(yw[k], cw), P::mul(xw[k], sw));
        xw[k] = xr;
      }
    } else {
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        xw[k] = rotate_adjacent_word<kIn>(xw[k], c[k], s[k]);
        if (adjacent) yw[k] = rotate_adjacent_word<kIn>(yw[k], c[kWords + k], s[kWords + k]);
      }
    }
    memcpy(x, xw, sizeof xw);
    decode_values<kIn>(x, v);
    if (unit.pair) {
      memcpy(y, yw, sizeof yw);
      decode_values<kIn>(y, w);
    }
    return;
  }
  decode_values<kIn>(x, v);
  if (neox) {
    decode_values<kIn>(y, w);
    float c[kW], s[kW];
    load_cos_sin<kIn, kW, kMayInterleave>(r, position, kW * static_cast<int32_t>(unit.vec), c, s);
#pragma unroll
    for (int i = 0; i < kW; ++i) {
      const float vi = v[i];
      v[i] = rotate_value<kIn>(vi, w[i], c[i], s[i], true, r.input_rounding);
      w[i] = rotate_value<kIn>(w[i], vi, c[i], s[i], false, r.input_rounding);
    }
  } else if (adjacent) {
    decode_values<kIn>(y, w);
    float c[kW], s[kW];  // the first kW / 2 pairs x's, the rest y's
    load_cos_sin<kIn, kW, kMayInterleave>(r, position, kW / 2 * static_cast<int32_t>(unit.vec),
                                          c, s);
    float cx[kW / 2], sx[kW / 2], cy[kW / 2], sy[kW / 2];
#pragma unroll
    for (int i = 0; i < kW / 2; ++i) {
      cx[i] = c[i];
      sx[i] = s[i];
      cy[i] = c[kW / 2 + i];
      sy[i] = s[kW / 2 + i];
    }
    rotate_adjacent_pairs<kIn>(v, cx, sx, r.input_rounding);
    rotate_adjacent_pairs<kIn>(w, cy, sy, r.input_rounding);
  } else {
    float c[kW / 2], s[kW / 2];
    load_cos_sin<kIn, kW / 2, kMayInterleave>(r, position, kW / 2 * static_cast<int32_t>(unit.vec),
                                              c, s);
    rotate_adjacent_pairs<kIn>(v, c, s, r.input_rounding);
  }
  if (want_bits) {
    encode_values<kIn>(v, x);
    if (unit.pair) encode_values<kIn>(w, y);
  }
}

}  // namespace cachestore::kernels
