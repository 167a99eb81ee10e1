// Reference encoders, written from the formats' definitions (OCP FP8 E4M3; PTX ISA cvt to
// .ue8m0x2 with .rp.satfinite), in integer arithmetic only so that the same source runs on the
// host and, for exhaustive checks, on the device. The library's kernels use cuda_fp8.h; the
// tests check both against these.
#pragma once

#include <cstdint>
#include <cstring>

#include "cachestore/layout.h"

namespace cachestore::reference {

CACHESTORE_HOST_DEVICE inline uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

// fp32 -> OCP FP8 with kMan mantissa bits and exponent bias kBias: round to nearest even;
// finite overflow and infinity saturate to the largest finite value (satfinite: fp32 bits
// kMaxBits, code kMaxCode); NaN gives the canonical 0x7F.
template <uint32_t kMan, uint32_t kBias, uint32_t kMaxBits, uint8_t kMaxCode>
CACHESTORE_HOST_DEVICE inline uint8_t fp8_from_float(float x) {
  constexpr uint32_t kNormalExp = 128 - kBias;  // fp32 exponent field of the smallest normal
  const uint32_t u = float_to_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;                  // NaN
  if (a >= kMaxBits) return sign | kMaxCode;          // >= the largest finite (incl. Inf)
  const uint32_t exp = a >> 23;
  const uint32_t mant = a & 0x7fffffu;
  if (exp >= kNormalExp) {                            // normal
    uint32_t q = ((exp - (kNormalExp - 1)) << kMan) | (mant >> (23 - kMan));
    const uint32_t rem = mant & ((1u << (23 - kMan)) - 1u);
    const uint32_t half = 1u << (22 - kMan);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the exponent
    return sign | static_cast<uint8_t>(q);
  }
  // Subnormal: k * 2^(1 - kBias - kMan). The fp32 value is m * 2^(e - 150), e = max(exp, 1).
  const uint32_t m = exp == 0 ? mant : (mant | 0x800000u);
  const uint32_t shift = (150u - (kBias - 1 + kMan)) - (exp == 0 ? 1u : exp);
  if (shift > 24) return sign;                        // below half of the smallest subnormal
  uint32_t k = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (k & 1u))) ++k;   // 1 << kMan is the smallest normal
  return sign | static_cast<uint8_t>(k);
}

// e4m3: bias 7, max 448 (0x7E), no infinity, NaN = S.1111.111.
CACHESTORE_HOST_DEVICE inline uint8_t e4m3_from_float(float x) {
  return fp8_from_float<3, 7, 0x43e00000u, 0x7e>(x);
}

// e5m2: bias 15, max 57344 (0x7B), infinity S.11111.00 (never produced: satfinite).
CACHESTORE_HOST_DEVICE inline uint8_t e5m2_from_float(float x) {
  return fp8_from_float<2, 15, 0x47600000u, 0x7b>(x);
}

// IEEE binary16 bits -> fp32 (exact).
CACHESTORE_HOST_DEVICE inline float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // Inf, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: mant * 2^-24, normalized
    uint32_t e = 113, m = mant;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// fp32 -> bf16 bits, round to nearest even (cvt.rn.bf16.f32); a NaN gives the canonical 0x7FFF.
CACHESTORE_HOST_DEVICE inline uint16_t bf16_bits_rn(float x) {
  const uint32_t u = float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// fp32 -> IEEE binary16 bits, round to nearest even (cvt.rn.f16.f32): overflow to infinity,
// subnormals, a NaN giving the canonical 0x7FFF.
CACHESTORE_HOST_DEVICE inline uint16_t fp16_bits_rn(float x) {
  const uint32_t u = float_to_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;
  if (a >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 (the tie above 65504) and Inf
  if (a < 0x38800000u) {  // below 2^-14: a multiple of 2^-24, by integer rounding
    const uint32_t exp = a >> 23;
    if (exp < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // value = mant * 2^(exp - 150), in units of 2^-24
    const uint32_t q = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    return sign | static_cast<uint16_t>(q + (rest > half || (rest == half && (q & 1u))));
  }
  const uint32_t h = ((((a >> 23) - 112) << 10) | ((a >> 13) & 0x3ffu));
  const uint32_t rest = a & 0x1fffu;
  return sign | static_cast<uint16_t>(h + (rest > 0x1000u || (rest == 0x1000u && (h & 1u))));
}

// One lane of cvt.rp.satfinite.ue8m0x2.f32: 2^ceil(log2|x|) as a biased exponent byte.
// NaN -> 0xFF; |x| > 2^127 (incl. Inf) saturates to 0xFE; |x| <= 2^-127 (incl. 0) -> 0x00.
// The sign is ignored, as cuda_fp8.h's emulation does (scales are never negative here).
CACHESTORE_HOST_DEVICE inline uint8_t ue8m0_from_float_rp_satfinite(float x) {
  const uint32_t a = float_to_bits(x) & 0x7fffffffu;
  if (a > 0x7f800000u) return 0xff;
  if (a > 0x7f000000u) return 0xfe;
  const uint32_t exp = a >> 23;
  const uint32_t mant = a & 0x7fffffu;
  if (exp == 0) return mant > 0x400000u ? 1 : 0;
  return static_cast<uint8_t>(exp + (mant != 0 ? 1u : 0u));
}

// fp32 -> e2m1 (FP4: 1 sign, 2 exponent, 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6),
// as the PTX ISA defines cvt.rn.satfinite.e2m1x2.f32: round to nearest, ties to even (or, for
// SGLang's indexer, toward zero); |x| beyond 6 (Inf included) saturates to 6; NaN gives +6 (0x7);
// the sign bit is kept, also on a zero magnitude (-0.0 and small negatives give 0x8). Nearest by
// exact double arithmetic over the eight magnitudes.
CACHESTORE_HOST_DEVICE inline uint8_t e2m1_from_float(float x, bool ties_to_even = true) {
  const uint32_t u = float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7;
  const uint8_t sign = static_cast<uint8_t>((u >> 28) & 0x8u);
  const double a = x < 0 ? -static_cast<double>(x) : static_cast<double>(x);
  const double values[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  if (a >= 6.0) return sign | 0x7;
  uint8_t k = 0;
  while (values[k + 1] <= a) ++k;                 // values[k] <= a < values[k + 1]
  const double below = a - values[k], above = values[k + 1] - a;
  uint8_t code = k;
  if (above < below) code = static_cast<uint8_t>(k + 1);
  else if (above == below && ties_to_even && (k & 1u)) code = static_cast<uint8_t>(k + 1);
  return sign | code;
}

// The index-K pow2 / V4 scale byte by docs/layouts.md's formula: the UE8M0 round-up of
// max(amax, 1e-4) / 448 (IEEE division; satfinite: an Inf amax gives 254).
CACHESTORE_HOST_DEVICE inline uint8_t v4_scale_byte_formula(float amax) {
  return ue8m0_from_float_rp_satfinite((amax > 1e-4f ? amax : 1e-4f) / 448.0f);
}

// The V3.2 pow2 scale byte by its formula: the UE8M0 round-up of max(amax / 448, 1e-4), i.e.
// e = ceil(log2(max(amax / 448, 1e-4))) (the round-up of the IEEE quotient is that ceiling:
// amax / 448 never rounds onto a power of two from above).
CACHESTORE_HOST_DEVICE inline uint8_t v32_pow2_scale_byte_formula(float amax) {
  const float q = amax / 448.0f;
  return ue8m0_from_float_rp_satfinite(q > 1e-4f ? q : 1e-4f);
}

// The V41 scale byte by docs/layouts.md's formula, V3.2 pow2's; but an Inf amax gives 247
// (exp_field(Inf) - 8), the byte SGLang's kernel writes.
CACHESTORE_HOST_DEVICE inline uint8_t v41_scale_byte_formula(float amax) {
  if ((float_to_bits(amax) & 0x7fffffffu) == 0x7f800000u) return 247;
  return v32_pow2_scale_byte_formula(amax);
}

// e4m3 byte -> fp32, exactly (the format's definition: bias 7, subnormals k * 2^-9).
CACHESTORE_HOST_DEVICE inline float e4m3_to_float(uint8_t byte) {
  const int exp = (byte >> 3) & 0xf, man = byte & 0x7;
  const float magnitude = exp == 0 ? man * 0x1p-9f : (8 + man) * 0x1p-3f * static_cast<float>(1 << exp) * 0x1p-7f;
  return (byte & 0x80) ? -magnitude : magnitude;
}

}  // namespace cachestore::reference
