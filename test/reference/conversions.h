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
