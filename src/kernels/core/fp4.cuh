// e2m1 (fp4) encoding: the software conversion, the native one on Blackwell, and the bf16
// threshold comparison Hopper's stores use.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstring>
#include <type_traits>

#include "cachestore/layout.h"
#include "detail/scale_rules.h"
#include "kernels/core/fp8.cuh"
#include "kernels/core/native_cvt.cuh"

namespace cachestore::kernels {


// The e2m1 code of y (round to nearest; |y| > 6 gives 6; NaN gives +6, 0x7; the sign kept on a
// zero magnitude, 0x8), as the PTX ISA defines cvt.rn.satfinite.e2m1x2.f32 for ties to even.
// The magnitude code counts the midpoints between the 8 values {0, .5, 1, 1.5, 2, 3, 4, 6} that
// |y| passes; a tie (|y| on a midpoint) goes to the even code (the midpoints above the odd codes
// 1, 3, 5: 0.75, 1.75, 3.5 count when reached) or toward zero (no midpoint counts when only
// reached). Branch-free; checked against the reference for all 2^32 inputs (gpu_conversion_test).
__host__ __device__ __forceinline__ uint32_t e2m1_code_software(float y, Fp4Ties ties) {
  const float a = fabsf(y);
  uint32_t code = (a > 0.25f) + (a > 1.25f) + (a > 2.5f) + (a > 5.0f);
  code += ties == Fp4Ties::kToEven ? (a >= 0.75f) + (a >= 1.75f) + (a >= 3.5f)
                                    : (a > 0.75f) + (a > 1.75f) + (a > 3.5f);
  uint32_t bits;
  memcpy(&bits, &y, sizeof bits);
  return a != a ? 0x7u : code | ((bits >> 28) & 0x8u);
}

// Two codes in one byte, `lo` in the low nibble. Ties to even on the native images: the
// instruction, whose NaN (+6) and zero-sign results are those of the software path above.
__device__ __forceinline__ uint32_t e2m1x2(float lo, float hi, Fp4Ties ties) {
#if CACHESTORE_NATIVE_SHORT_CVT
  if (ties == Fp4Ties::kToEven)
    return __nv_cvt_float2_to_fp4x2(make_float2(lo, hi), __NV_E2M1, cudaRoundNearest);
#endif
  return e2m1_code_software(lo, ties) | (e2m1_code_software(hi, ties) << 4);
}

// kN / 2 bytes of e2m1 codes: 4 (kN = 8) or 8 (kN = 16).
template <int kN>
using Fp4Bytes = std::conditional_t<kN == 8, uint32_t, uint2>;

// e2m1(f(v[i])) of kN values packed in memory order, two per byte, the even index low.
template <int kN, typename F>
__device__ __forceinline__ Fp4Bytes<kN> pack_e2m1(const float (&v)[kN], Fp4Ties ties, F f) {
  static_assert(kN == 8 || kN == 16, "one 4- or 8-byte vector");
  uint32_t w[kN / 8];
#pragma unroll
  for (int i = 0; i < kN / 8; ++i) {
    w[i] = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[i] |= e2m1x2(f(v[8 * i + 2 * j]), f(v[8 * i + 2 * j + 1]), ties) << (8 * j);
  }
  if constexpr (kN == 8) {
    return w[0];
  } else {
    return make_uint2(w[0], w[1]);
  }
}

// The e2m1 bytes of 4 words of 2 bf16 values each, in memory order: `code(a)` takes a word's
// two magnitudes (bf16x2) and returns 128 + each code as bf16x2, whose low mantissa bits are
// then the codes; the signs are the input's (kept on a zero magnitude). Each half's code (below
// 8) with its sign as bit 3 is the half's nibble in its low byte; two byte permutes gather the
// four nibbles of two words into the low nibbles of four bytes, a shift and an OR pair them into
// bytes 0 and 2, and a third permute packs the two words' pairs: 15 instructions for 8 values,
// where masking and shifting each code and sign into place took 32.
template <typename Code>
__device__ __forceinline__ uint32_t e2m1_bytes_of_bf16_words(const uint32_t* w, Code code) {
  uint32_t nibbles[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t magnitude = w[j] & 0x7fff7fffu;
    const __nv_bfloat162 sum = code(*reinterpret_cast<const __nv_bfloat162*>(&magnitude));
    nibbles[j] = *reinterpret_cast<const uint32_t*>(&sum) | ((w[j] >> 12) & 0x00080008u);
  }
  uint32_t pairs[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t p = __byte_perm(nibbles[2 * i], nibbles[2 * i + 1], 0x6420);
    pairs[i] = p | (p >> 4);
  }
  return __byte_perm(pairs[0], pairs[1], 0x6420);
}

// e2m1 codes of x / s for bf16 x and a scale s of a few significant bits (V41_FP4's e4m3 scale,
// the fp4 indexer's power of two), without a quotient: the code of x / s counts the e2m1
// midpoints t in {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} that |x| / s passes, and |x| / s > t iff
// |x| > t * s. t * s has at most 7 significant bits, so it is exact in bf16 (or +Inf past its
// range, where no finite x passes), and the comparison is exact. It is also what the rounded
// quotient gives: x != t * s means |x - t * s| >= one bf16 ulp, 2^16 times more than the
// rounding of x / s, so rn(x / s) never lands on a midpoint it did not reach. A tie (|x| == t *
// s) goes up where ties go to even and t is above an odd code (0.75, 1.75, 3.5): there the
// threshold is the next bf16 below t * s. Two values per instruction: the seven bf16x2 compares
// give 1.0 or 0.0 each, summed onto 128.0, whose low mantissa bits are then the code. NaN and Inf
// inputs (Inf thresholds) take the per-value path instead (e2m1_scaled). Checked against the
// reference for every bf16 x and every scale of both layouts, both tie rules (gpu_conversion_test).
struct E2m1Thresholds {
  __nv_bfloat162 t[7];

  __device__ __forceinline__ E2m1Thresholds(float scale, Fp4Ties ties) {
    const float midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
#pragma unroll
    for (int i = 0; i < 7; ++i) {
      uint32_t pair = static_cast<uint32_t>(
          __bfloat16_as_ushort(__float2bfloat16_rn(midpoints[i] * scale)));
      if (ties == Fp4Ties::kToEven && i % 2 == 1) pair -= 1;  // >= t*s: > its predecessor
      pair |= pair << 16;
      t[i] = *reinterpret_cast<const __nv_bfloat162*>(&pair);
    }
  }

  // The codes of 4 words of 2 bf16 values each (sign kept): 4 bytes in memory order.
  __device__ __forceinline__ uint32_t codes(const uint32_t* w) const {
    return e2m1_bytes_of_bf16_words(w, [this](__nv_bfloat162 a) {
      __nv_bfloat162 sum = __floats2bfloat162_rn(128.0f, 128.0f);
#pragma unroll
      for (int i = 0; i < 7; ++i) sum = __hadd2(sum, __hgt2(a, t[i]));
      return sum;
    });
  }
};

// e2m1 codes (ties to even) of x * inv for bf16 x and a power of two inv that is a normal
// bf16 (the fp4 indexer's 2^(127 - e8)), without NaN or Inf x: a = min(|x| inv, 6), exact in
// bf16 (a power-of-two product; below bf16's normal range it is below 0.25 either way, code 0),
// then the least of rn(2a), rn(a) + 2 and rn(a / 2) + 4 as bf16 sums onto 128, whose ulp is 1
// (nvfp4_code_pair_bits' rule, each candidate rounded once by fma), two values an instruction;
// the codes are the sum's low mantissa bits (e2m1_bytes_of_bf16_words). Checked for every bf16 x and
// every power-of-two scale (gpu_conversion_test).
struct E2m1PowerOfTwo {
  __nv_bfloat162 inv;

  __device__ __forceinline__ explicit E2m1PowerOfTwo(float power_of_two)
      : inv(__float2bfloat162_rn(power_of_two)) {}

  // The codes of 4 words of 2 bf16 values each (sign kept): 4 bytes in memory order.
  __device__ __forceinline__ uint32_t codes(const uint32_t* w) const {
    const __nv_bfloat162 six = __floats2bfloat162_rn(6.0f, 6.0f);
    const __nv_bfloat162 two = __floats2bfloat162_rn(2.0f, 2.0f);
    const __nv_bfloat162 half = __floats2bfloat162_rn(0.5f, 0.5f);
    const __nv_bfloat162 k128 = __floats2bfloat162_rn(128.0f, 128.0f);
    const __nv_bfloat162 k130 = __floats2bfloat162_rn(130.0f, 130.0f);
    const __nv_bfloat162 k132 = __floats2bfloat162_rn(132.0f, 132.0f);
    return e2m1_bytes_of_bf16_words(w, [&](__nv_bfloat162 magnitude) {
      const __nv_bfloat162 a = __hmin2(__hmul2(magnitude, inv), six);
      return __hmin2(__hmin2(__hfma2(a, two, k128), __hadd2(a, k130)), __hfma2(a, half, k132));
    });
  }
};

// Whether any of the 16-bit values of kWords words is NaN or +-Inf (magnitude >= 0x7f80), per
// bf16x2 word without carries between the halves.
template <int kWords>
__device__ __forceinline__ bool any_bf16_nan_or_inf(const uint32_t* w) {
  uint32_t hit = 0;
#pragma unroll
  for (int j = 0; j < kWords; ++j) hit |= ((w[j] & 0x7fff7fffu) + 0x00800080u) & 0x80008000u;
  return hit != 0;
}

// NVFP4's e2m1 code of a product y (ties to even, saturating at 6, the sign kept on a zero
// magnitude, 0 for a NaN) from y's bits, in about half the instructions of the seven threshold
// compares: for |y| >= 1 the fp32 significand rounded to one bit, ties to even (the carry moves
// the exponent), so that code = 2 + 2e + m for |y| = (1 + m / 2) 2^e, capped at 7; below 1, 2|y|
// rounded to an integer by one fma onto 2^23 (codes 0, 1, 2). Equal to e2m1_code_software with
// a NaN giving 0 for every fp32 y (gpu_conversion_test).
__host__ __device__ __forceinline__ uint32_t nvfp4_code_of_product(float y) {
  uint32_t u;
  memcpy(&u, &y, sizeof u);
  const uint32_t a = u & 0x7fffffffu;
  uint32_t r = a + 0x1fffffu + ((a >> 22) & 1u);
  r = r < 0x40c00000u ? r : 0x40c00000u;  // 6 and above (Inf too): 0x40c00000 >> 22 = 252 + 7
  float magnitude;
  memcpy(&magnitude, &a, sizeof magnitude);
  const float below_one = fmaf(magnitude, 2.0f, 8388608.0f);
  uint32_t sub;
  memcpy(&sub, &below_one, sizeof sub);
  const uint32_t code = a < 0x3f800000u ? (sub & 3u) : (r >> 22) - 252u;
  return a > 0x7f800000u ? 0u : code | ((u >> 28) & 0x8u);
}

// NVFP4's two codes of products y = x * out in one byte, `lo` low (nvfp4_code_of_product's
// rule: FlashInfer's encoder, where a NaN passes no threshold and the device's NaN products
// carry no sign). The instruction's NaN code is 0x7: cleared by a select.
__device__ __forceinline__ uint32_t nvfp4_e2m1x2(float lo, float hi) {
#if CACHESTORE_NATIVE_SHORT_CVT
  const uint32_t pair =
      __nv_cvt_float2_to_fp4x2(make_float2(lo, hi), __NV_E2M1, cudaRoundNearest);
  return pair & (lo != lo ? 0xf0u : 0xffu) & (hi != hi ? 0x0fu : 0xffu);
#else
  return nvfp4_code_of_product(lo) | (nvfp4_code_of_product(hi) << 4);
#endif
}

// The e2m1 magnitude code (ties to even) of a = min(|y|, 6) in the low bits of the returned
// bits: the smallest of rn(2a), rn(a) + 2 and rn(a / 2) + 4, each an fp32 sum with 2^23 (whose
// ulp is 1), so rounded once, to even. The grid {0, .5, 1, 1.5, 2, 3, 4, 6} is spaced 0.5 below
// 2, 1 from 2 to 4 and 2 from 4, where codes 0-4, 4-6 and 6-7 count the steps: each candidate
// is the code on its range and, rn being monotonic, at least the code elsewhere (below 2, 2a <=
// a + 2 and 2a <= a / 2 + 4; from 2 to 4, a + 2 <= 2a and a + 2 <= a / 2 + 4; from 4, a / 2 + 4
// <= both). The even integers are the even codes, which ties go to. |y| >= 6 (Inf too) clamps
// to 6 (code 7). A NaN y propagates: the result is NaN, whose bit 29 (kNvfp4NanBit) is clear in
// every code's bits (0x4b000000 + code).
inline constexpr uint32_t kNvfp4NanBit = 0x20000000u;
__device__ __forceinline__ uint32_t e2m1_magnitude_bits(float y) {
  float a;
  asm("min.NaN.f32 %0, %1, 0f40C00000;" : "=f"(a) : "f"(fabsf(y)));  // min(|y|, 6), NaN kept
  constexpr float kTwo23 = 8388608.0f;
  const float c1 = fmaf(a, 2.0f, kTwo23);
  const float c2 = a + (kTwo23 + 2.0f);
  const float c3 = fmaf(a, 0.5f, kTwo23 + 4.0f);
  return __float_as_uint(fminf(fminf(c1, c2), c3));
}

// The byte of NVFP4 codes of two products (`lo` in the low nibble) in the low byte of the
// result (its upper bytes are not codes); `nan` gathers kNvfp4NanBit when either is NaN. The
// signs: `lo`'s top byte and `hi`'s side by side, their sign bits (7, 15) moved to 3 and 7 by
// one multiply-high by 2^28 + 2^24 (7 -> 35, 15 -> 39; the other two products land outside the
// byte).
__device__ __forceinline__ uint32_t nvfp4_code_pair_bits(float lo, float hi, uint32_t& nan) {
  const uint32_t signs = __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x73) & 0x8080u;
  const uint32_t lo_code = e2m1_magnitude_bits(lo), hi_code = e2m1_magnitude_bits(hi);
  nan |= lo_code | hi_code;
  return ((hi_code << 4) + lo_code) | __umulhi(signs, 0x11000000u);
}

// One NVFP4 block: 16 values of a (token, head) under the global decode scale g
// (docs/layouts.md): amax (NaN ignored), the e4m3 block scale of amax / (6 g) by IEEE division
// (0 unless amax and g are > 0), out = 1 / (sf g) correctly rounded with sf the decoded scale (0
// unless sf > 0 too), and the e2m1 codes of x * out in memory order. On Hopper the codes come
// from nvfp4_code_pair_bits, and a block with a NaN product (a NaN input, or 0 * Inf) takes
// the per-value rule (nvfp4_e2m1x2) instead.
struct Nvfp4Block {
  uint2 codes;
  uint8_t scale;
};
__device__ __forceinline__ Nvfp4Block nvfp4_block(const float (&v)[16], float g) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) amax = detail::amax_fold(amax, v[i]);
  const bool scaled = amax > 0.0f && g > 0.0f;
  const uint8_t scale = static_cast<uint8_t>(__nv_cvt_float_to_fp8(
      scaled ? __fdiv_rn(amax, 6.0f * g) : 0.0f, __NV_SATFINITE, __NV_E4M3));
  const float sf = e4m3_scale_decode(scale);
  const float out = scaled && sf > 0.0f ? __frcp_rn(sf * g) : 0.0f;
  const auto per_value = [&](uint32_t (&w)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      w[i] = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[i] |= nvfp4_e2m1x2(v[8 * i + 2 * j] * out, v[8 * i + 2 * j + 1] * out) << (8 * j);
    }
  };
  uint32_t w[2];
#if CACHESTORE_NATIVE_SHORT_CVT
  per_value(w);
#else
  uint32_t nan = 0;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    uint32_t b[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      b[j] = nvfp4_code_pair_bits(v[8 * i + 2 * j] * out, v[8 * i + 2 * j + 1] * out, nan);
    w[i] = __byte_perm(__byte_perm(b[0], b[1], 0x40), __byte_perm(b[2], b[3], 0x40), 0x5410);
  }
  if (nan & kNvfp4NanBit) per_value(w);
#endif
  return {make_uint2(w[0], w[1]), scale};
}

// Clears the sign of every nibble whose magnitude is 0 (0x8 -> 0x0): the fp4 indexer's rule.
__device__ __forceinline__ uint32_t e2m1_drop_zero_signs(uint32_t w) {
  const uint32_t nonzero = ((w & 0x77777777u) + 0x77777777u) & 0x88888888u;  // no carries
  return w & (0x77777777u | nonzero);
}

}  // namespace cachestore::kernels
