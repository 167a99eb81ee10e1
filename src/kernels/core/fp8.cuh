// fp8 (e4m3, e5m2) encoding: x / s with IEEE division's bytes, without a division instruction.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "detail/scale_rules.h"

namespace cachestore::kernels {

// kN fp8 bytes: one 1-, 2-, 4-, 8- or 16-byte vector.
template <int kN>
using Fp8Bytes = std::conditional_t<
    kN == 1, uint8_t,
    std::conditional_t<kN == 2, uint16_t,
                       std::conditional_t<kN == 4, uint32_t,
                                          std::conditional_t<kN == 8, uint2, uint4>>>>;

// Where a divisor comes from decides which checks its quotient needs (fp8_divided).
enum class ScaleSource {
  kIndexKAmax,  // max(amax, 1e-4) / 448: in [2^-64, 2^64] or +Inf, and |x / s| <= 448
  kTileAmax,    // V3.2's max(amax / 448, FLT_MIN): |x / s| <= 448, but s may be below 2^-64
  kGiven,       // a caller's scale (K/V caches): any value, and x / s may overflow
};

// x / s with the stored fp8 byte IEEE division gives, without a division instruction (whose
// range checks serialize the values), given r = 1/s correctly rounded: a product and one fma
// residual correction (Markstein). A zero product is kept as it is (its sign, which the
// correction would lose; also s = Inf, where x * 0 is exactly x / Inf), and with kMayOverflow an
// Inf one (x / s overflows or lies within a rounding of FLT_MAX: both saturate; the residual
// would make NaN of it). Valid for scales in [2^-64, 2^64] (markstein_applies; below, the
// residual can underflow) and +Inf; callers divide outside. Checked against div.rn for every
// bf16 (and fp16) x over the scales of every rule and 2,000+ others (gpu_conversion_test,
// gpu_paged_kv_test).
__device__ __forceinline__ bool markstein_applies(float s) {
  return s >= 0x1p-64f && s <= 0x1p64f;  // false for NaN
}
template <bool kMayOverflow>
__device__ __forceinline__ float markstein_quotient(float x, float s, float r) {
  const float q = x * r;
  const float corrected = detail::markstein_correct(x, s, r, q);
  // The Inf check only where it can matter: under the MLA launch bounds it costs registers.
  return q == 0.0f || (kMayOverflow && isinf(q)) ? q : corrected;
}
// RN(1 / s) for s in [FLT_MIN, 2^126) or s = +Inf (0), without the range check and slow-path
// call of rcp.rn.f32: its fast path (an approximate reciprocal and one Newton step in fma),
// which is the whole computation for these s. The amax rules' scales lie there. Checked against
// __frcp_rn for every such s (gpu_conversion_test).
__device__ __forceinline__ float reciprocal_rn(float s) {
  float r0;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(s));
  const float r = fmaf(r0, fmaf(-s, r0, 1.0f), r0);
  return s == INFINITY ? 0.0f : r;
}

// A non-negative e4m3 scale byte as fp32 (detail::e4m3_scale_to_float's value): on sm_89 and
// later the conversion instruction to fp16 (exact: fp16 holds every e4m3 value) and fp16's
// widening, two instructions in place of the bit assembly and its subnormal select.
__device__ __forceinline__ float e4m3_scale_decode(uint8_t byte) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(byte, __NV_E4M3)));
#else
  return detail::e4m3_scale_to_float(byte);
#endif
}

// The scalar form for a caller's scale, for the exhaustive tests.
__device__ __forceinline__ float exact_quotient(float x, float s) {
  return markstein_applies(s) ? markstein_quotient<true>(x, s, __frcp_rn(s)) : __fdiv_rn(x, s);
}

// fp8(f(v[i])) of kN values (1, 2 or a multiple of 4), packed in memory order, satfinite, round
// to nearest even (cvt.rn.satfinite.{e4m3,e5m2}x2.f32); four values at a time so that few are
// live at once.
template <__nv_fp8_interpretation_t kFormat, int kN, typename F>
__device__ __forceinline__ Fp8Bytes<kN> pack_fp8(const float (&v)[kN], F f) {
  static_assert(kN == 1 || kN == 2 || kN == 4 || kN == 8 || kN == 16,
                "one 1-, 2-, 4-, 8- or 16-byte vector");
  if constexpr (kN == 1) {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f(v[0]), __NV_SATFINITE, kFormat));
  } else if constexpr (kN == 2) {
    return static_cast<uint16_t>(
        __nv_cvt_float2_to_fp8x2(make_float2(f(v[0]), f(v[1])), __NV_SATFINITE, kFormat));
  } else {
    uint32_t w[kN / 4];
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f(v[4 * i]), f(v[4 * i + 1])),
                                                   __NV_SATFINITE, kFormat);
      const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(f(v[4 * i + 2]), f(v[4 * i + 3])),
                                                   __NV_SATFINITE, kFormat);
      w[i] = lo | (hi << 16);
    }
    if constexpr (kN == 4) {
      return w[0];
    } else if constexpr (kN == 8) {
      return make_uint2(w[0], w[1]);
    } else {
      return make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// The Markstein quotient with the sign of the product q = x * r (one bitwise select): where q is
// a zero the correction can lose its sign (x = -0 gives +0), and elsewhere it has q's sign
// already, so this is markstein_quotient without its compare and select a value, for any finite
// q. A NaN x stays NaN.
__device__ __forceinline__ float markstein_quotient_signed(float x, float s, float r) {
  const float q = __fmul_rn(x, r);
  const float corrected = detail::markstein_correct(x, s, r, q);
  return copysignf(corrected, q);
}

// max |v[i]| (NaN ignored), as a tree: a chain of kN - 1 dependent maxima would sit on the
// decode-size store's chain.
template <int kN>
__device__ __forceinline__ float magnitude_max(const float (&v)[kN]) {
  float m[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) m[i] = fabsf(v[i]);
#pragma unroll
  for (int stride = kN / 2; stride > 0; stride /= 2)
#pragma unroll
    for (int i = 0; i < stride; ++i) m[i] = fmaxf(m[i], m[i + stride]);
  return m[0];
}

// fp8(v[i] / s) of kN values sharing the scale s, with IEEE division's bytes. The range decisions
// are taken once for the vector, never per value: per-value checks would make one
// branch-and-reconverge region per value and serialize the quotients. The index-K amax rule needs
// no decision, so its kernels do not carry the division path (registers under their launch
// bounds). A caller's scale (kGiven) may make x / s overflow: the vector's largest magnitude
// decides once whether any product can reach 2^127 (then every value takes the checked quotient),
// so that the others take markstein_quotient_signed.
template <__nv_fp8_interpretation_t kFormat, ScaleSource kSource, int kN>
__device__ __forceinline__ Fp8Bytes<kN> fp8_divided(const float (&v)[kN], float s) {
  if (kSource != ScaleSource::kIndexKAmax && !markstein_applies(s))
    return pack_fp8<kFormat>(v, [s](float x) { return __fdiv_rn(x, s); });
  // Every scale here is in reciprocal_rn's range (index-K: [2^-22, 2^120) or +Inf; the others
  // within [2^-64, 2^64], markstein_applies).
  const float r = reciprocal_rn(s);
  if constexpr (kSource == ScaleSource::kGiven) {
    if (!(magnitude_max(v) * r < 0x1p127f))
      return pack_fp8<kFormat>(v, [s, r](float x) { return markstein_quotient<true>(x, s, r); });
    return pack_fp8<kFormat>(v, [s, r](float x) { return markstein_quotient_signed(x, s, r); });
  } else {
    return pack_fp8<kFormat>(v, [s, r](float x) { return markstein_quotient<false>(x, s, r); });
  }
}

}  // namespace cachestore::kernels
