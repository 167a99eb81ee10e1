// UE8M0 (power-of-two exponent byte) scales: the native round-up on Blackwell, the bits of amax
// elsewhere.
#pragma once

#include <cstdint>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/core/native_cvt.cuh"

namespace cachestore::kernels {

// UE8M0 round-up (2^ceil(log2 x) as a biased exponent, satfinite) of a scale x in [FLT_MIN,
// +Inf], the domain of every rule that uses it: Blackwell's native cvt.rp.satfinite.ue8m0x2.f32
// (through cuda_fp8.h) on sm_100a; elsewhere from x's bits, the exponent field plus one when the
// significand is not 1, at most 254 (cuda_fp8.h's emulation of the instruction handles every
// input, with branches, on the chain after the loads). Both checked against the PTX definition
// over the whole domain (gpu_conversion_test). The stores call it on the native images only
// (pow2_scale_byte); the other images take the byte from amax's bits, and the bits path here is
// what the conversion test checks against the instruction's definition.
__device__ __forceinline__ uint8_t ue8m0_round_up(float x) {
#if CACHESTORE_NATIVE_SHORT_CVT
  return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
#else
  const uint32_t u = __float_as_uint(x);
  return static_cast<uint8_t>(min((u >> 23) + ((u & 0x7fffffu) != 0u), 254u));
#endif
}

// The UE8M0 byte of a power-of-two scale rule (index-K pow2, V4, V3.2 pow2): on the native images
// the instruction's round-up of the rule's quotient, `quotient(amax)`; elsewhere the same byte
// from amax's bits, `from_bits(amax)` (detail::pow2_scale_byte: a compare and an add instead of
// the division and the round-up on the chain after the loads). Both are checked against the
// formula over every fp32 amax (gpu_conversion_test: the bits directly, the instruction through
// cuda_fp8.h's emulation of it and the PTX definition).
template <typename Quotient, typename FromBits>
__device__ __forceinline__ uint8_t pow2_scale_byte(float amax, Quotient quotient,
                                                   FromBits from_bits) {
#if CACHESTORE_NATIVE_SHORT_CVT
  return ue8m0_round_up(quotient(amax));
#else
  return from_bits(amax);
#endif
}

}  // namespace cachestore::kernels
