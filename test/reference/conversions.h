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

// fp32 -> e4m3 (bias 7, max 448, no infinity, NaN = S.1111.111): round to nearest even,
// saturate finite overflow and infinity to +-448, NaN to the canonical 0x7F.
CACHESTORE_HOST_DEVICE inline uint8_t e4m3_from_float(float x) {
  const uint32_t u = float_to_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;            // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;    // >= 448 (incl. Inf): satfinite
  const uint32_t exp = a >> 23;
  const uint32_t mant = a & 0x7fffffu;
  if (exp >= 121) {                             // >= 2^-6: e4m3 normal
    uint32_t q = ((exp - 120) << 3) | (mant >> 20);
    const uint32_t rem = mant & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) ++q;  // may carry into the exponent
    return sign | static_cast<uint8_t>(q);
  }
  // e4m3 subnormal: k * 2^-9. The fp32 value is m * 2^(e - 150), e = max(exp, 1).
  const uint32_t m = exp == 0 ? mant : (mant | 0x800000u);
  const uint32_t shift = 141u - (exp == 0 ? 1u : exp);  // >= 21
  if (shift > 24) return sign;                            // below half of 2^-9
  uint32_t k = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (k & 1u))) ++k;       // k == 8 is the smallest normal
  return sign | static_cast<uint8_t>(k);
}

// fp32 -> e5m2 (bias 15, max 57344, infinity S.11111.00): round to nearest even, saturate
// finite overflow and infinity to +-57344 (satfinite), NaN to the canonical 0x7F.
CACHESTORE_HOST_DEVICE inline uint8_t e5m2_from_float(float x) {
  const uint32_t u = float_to_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;            // NaN
  if (a >= 0x47600000u) return sign | 0x7bu;    // >= 57344 (incl. Inf): satfinite
  const uint32_t exp = a >> 23;
  const uint32_t mant = a & 0x7fffffu;
  if (exp >= 113) {                             // >= 2^-14: e5m2 normal
    uint32_t q = ((exp - 112) << 2) | (mant >> 21);
    const uint32_t rem = mant & 0x1fffffu;
    if (rem > 0x100000u || (rem == 0x100000u && (q & 1u))) ++q;  // may carry into the exponent
    return sign | static_cast<uint8_t>(q);
  }
  // e5m2 subnormal: k * 2^-16. The fp32 value is m * 2^(e - 150), e = max(exp, 1).
  const uint32_t m = exp == 0 ? mant : (mant | 0x800000u);
  const uint32_t shift = 134u - (exp == 0 ? 1u : exp);  // >= 22
  if (shift > 24) return sign;                            // below half of 2^-16
  uint32_t k = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (k & 1u))) ++k;       // k == 4 is the smallest normal
  return sign | static_cast<uint8_t>(k);
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

}  // namespace cachestore::reference
