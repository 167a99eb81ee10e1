// Scale formulas of docs/layouts.md, shared by the kernels and the host references. What differs
// between the two is only the final conversions (e4m3 and the UE8M0 round-up): the device uses
// cuda_fp8.h, the references their own encoders (test/reference/conversions.h).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cachestore/layout.h"

namespace cachestore::detail {

inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kAmaxFloor = 1e-4f;

CACHESTORE_HOST_DEVICE inline float bits_to_float(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
CACHESTORE_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

// bf16 bits to fp32 (exact).
CACHESTORE_HOST_DEVICE inline float bf16_bits_to_float(uint16_t bits) {
  return bits_to_float(static_cast<uint32_t>(bits) << 16);
}

// |x| folded into a running amax; fmaxf ignores NaN, so NaN never becomes the amax.
CACHESTORE_HOST_DEVICE inline float amax_fold(float amax, float x) { return fmaxf(amax, fabsf(x)); }

// 2^(byte - 127) as fp32: byte 0 is the subnormal 2^-127, 255 is NaN. Selects, not branches:
// the kernels compute it on the chain after the loads.
CACHESTORE_HOST_DEVICE inline float ue8m0_to_float(uint8_t byte) {
  const uint32_t bits = static_cast<uint32_t>(byte) << 23;
  return bits_to_float(byte == 0 ? 0x00400000u : byte == 255 ? 0x7fc00000u : bits);
}

// 2^(127 - byte), the exact reciprocal of ue8m0_to_float for byte in [0, 254].
CACHESTORE_HOST_DEVICE inline float ue8m0_reciprocal(uint8_t byte) {
  const uint32_t bits = static_cast<uint32_t>(254 - byte) << 23;
  return bits_to_float(byte == 254 ? 0x00400000u : byte == 255 ? 0x7fc00000u : bits);
}

// The Markstein correction of q = x * r toward x / d, given r = RN(1 / d): q + (x - q * d) * r,
// in two fma. The scale formulas' constant divisions (below) and the kernels' quotients by a
// scale (markstein_quotient) both finish with it; each states where the result is x / d.
CACHESTORE_HOST_DEVICE inline float markstein_correct(float x, float d, float r, float q) {
  return fmaf(fmaf(-q, d, x), r, q);
}

// x / d correctly rounded for a positive constant d with r = RN(1 / d), by one product and a
// Markstein correction (two fma). The device's IEEE division checks its operands' ranges and
// branches to a slow path (FCHK, BSSY, CALL): on the chain after the loads that is the latency
// of a decode-size store. Valid where the scale formulas use it: x >= 0 with x / d normal or
// x = 0 (smaller quotients are clamped by every formula), and x = +Inf (whose residual would be
// NaN). Checked against IEEE division for every such fp32 x and both constants on the host
// (host_reference_test) and as compiled for the device (gpu_conversion_test).
CACHESTORE_HOST_DEVICE inline float quotient_by_constant(float x, float d, float r) {
#if defined(__CUDA_ARCH__)
  const float q = __fmul_rn(x, r);  // never contracted into the fma below
#else
  const float q = x * r;
#endif
  const float corrected = markstein_correct(x, d, r, q);
  return x == INFINITY ? x : corrected;
}

// x / d for the formulas' constants d (448, 6): IEEE division on the host (the references),
// quotient_by_constant on the device (the same value; 1 / d folds at compile time).
CACHESTORE_HOST_DEVICE inline float divide_by_constant(float x, float d) {
#if defined(__CUDA_ARCH__)
  return quotient_by_constant(x, d, 1.0f / d);
#else
  return x / d;
#endif
}

// index-K: s = max(amax, 1e-4) / 448; the pow2 rule rounds this value up to a power of two.
CACHESTORE_HOST_DEVICE inline float index_k_scale_base(float amax) {
  return divide_by_constant(fmaxf(amax, kAmaxFloor), kE4m3Max);
}

// MLA V4: e = ceil(log2(max(amax, 1e-4) / 448)); the scale byte is the UE8M0 round-up of this.
CACHESTORE_HOST_DEVICE inline float v4_scale_base(float amax) { return index_k_scale_base(amax); }

// MLA V3.2 pow2 (FlashMLA): 2^ceil(log2(max(amax / 448, 1e-4))): the round-up of this value.
CACHESTORE_HOST_DEVICE inline float v32_pow2_scale_base(float amax) {
  return fmaxf(divide_by_constant(amax, kE4m3Max), kAmaxFloor);
}

// MLA V3.2 amax (vLLM): max(amax / 448, FLT_MIN); an all-zero tile never yields NaN.
CACHESTORE_HOST_DEVICE inline float v32_amax_scale(float amax) {
  return fmaxf(divide_by_constant(amax, kE4m3Max), FLT_MIN);
}

// A power-of-two scale's UE8M0 byte, ceil(log2(amax / 448)) + 127, from amax's bits as SGLang's
// V4.1 kernel does: exp_field - 8 + (mantissa > 0x600000, i.e. amax's significand above 1.75 =
// 448 / 2^8), at least `min_byte` (the formula's floor), `inf_byte` for an Inf amax. For every
// other amax >= 0 (never NaN) it is the UE8M0 round-up of the IEEE quotient amax / 448 with that
// floor: a significand s in [1, 1.75] gives a quotient in (2^(k-1), 2^k] that rounds to at most
// 2^k, one above 1.75 (by 2^-23 or more) a quotient more than half an ulp above 2^k. A compare
// and an add instead of the division and the round-up on the chain after the loads. Checked
// against the formula for every fp32 amax (gpu_conversion_test) and every bf16 one here
// (host_reference_test).
CACHESTORE_HOST_DEVICE inline uint8_t pow2_scale_byte(float amax, int32_t min_byte,
                                                      uint8_t inf_byte) {
  const uint32_t u = float_bits(amax);
  const int32_t e = static_cast<int32_t>((u >> 23) & 0xffu) - 8 + ((u & 0x7fffffu) > 0x600000u);
  return (u & 0x7fffffffu) == 0x7f800000u ? inf_byte
                                          : static_cast<uint8_t>(e > min_byte ? e : min_byte);
}

// index-K pow2 and MLA V4: the UE8M0 round-up of max(amax, 1e-4) / 448 (index_k_scale_base,
// v4_scale_base): at least 105 (1e-4 / 448 rounds up to 2^-22), 254 for an Inf amax (satfinite).
inline constexpr int32_t kIndexKPow2MinByte = 105;
CACHESTORE_HOST_DEVICE inline uint8_t index_k_pow2_scale_byte(float amax) {
  return pow2_scale_byte(amax, kIndexKPow2MinByte, 254);
}
CACHESTORE_HOST_DEVICE inline uint8_t v4_scale_byte(float amax) {
  return index_k_pow2_scale_byte(amax);
}

// MLA V3.2 pow2: the UE8M0 round-up of max(amax / 448, 1e-4) (v32_pow2_scale_base): at least
// 114 (2^-13, the first power of two above 1e-4), 254 for an Inf amax.
inline constexpr int32_t kV32Pow2MinByte = 114;
CACHESTORE_HOST_DEVICE inline uint8_t v32_pow2_scale_byte(float amax) {
  return pow2_scale_byte(amax, kV32Pow2MinByte, 254);
}

// V41 (per 32 values): e = ceil(log2(max(amax / 448, 1e-4))), as V3.2 pow2, but an Inf amax gives
// 247 (exp_field(Inf) - 8), the byte SGLang's kernel writes, where the formula would saturate.
CACHESTORE_HOST_DEVICE inline uint8_t v41_scale_byte(float amax) {
  return pow2_scale_byte(amax, kV32Pow2MinByte, 247);
}

// V41_FP4 (per 16 values): the value whose e4m3 encoding is the scale byte,
// clamp(amax / 6, 2^-9, 448) (e4m3's smallest subnormal and largest finite value).
inline constexpr float kE2m1Max = 6.0f;
CACHESTORE_HOST_DEVICE inline float v41_fp4_scale_input(float amax) {
  return fminf(fmaxf(divide_by_constant(amax, kE2m1Max), 0x1p-9f), kE4m3Max);
}

// A non-negative e4m3 byte (a scale) decoded to fp32, exactly.
CACHESTORE_HOST_DEVICE inline float e4m3_scale_to_float(uint8_t byte) {
  const uint32_t exp = (byte >> 3) & 0xfu, man = byte & 0x7u;
  if (exp == 0) return static_cast<float>(man) * 0x1p-9f;
  return bits_to_float(((exp + 120u) << 23) | (man << 20));
}

// fp4 indexer (per 32 values): sf = max(amax / 6, 1e-4), scale byte its UE8M0 round-up
// clamp(exp_field(sf) + (mantissa(sf) != 0), 1, 254).
CACHESTORE_HOST_DEVICE inline uint8_t index_k_fp4_scale_byte(float amax) {
  const uint32_t u = float_bits(fmaxf(divide_by_constant(amax, kE2m1Max), kAmaxFloor));
  const uint32_t e = (u >> 23) + ((u & 0x7fffffu) != 0 ? 1u : 0u);
  return static_cast<uint8_t>(e < 1u ? 1u : e > 254u ? 254u : e);
}

}  // namespace cachestore::detail
