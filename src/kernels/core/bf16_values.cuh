// A lane's share of a bf16 input row: its loads, its amax and its encodings.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/core/fp4.cuh"
#include "kernels/core/fp8.cuh"
#include "kernels/core/guard.cuh"
#include "kernels/core/native_cvt.cuh"
#include "kernels/core/vector_io.cuh"

namespace cachestore::kernels {

// kN bf16 values (one 8-byte vector, or kN / 8 16-byte vectors) decoded to fp32, and their amax.
// kN = 16 for large batches (fewer lanes, bandwidth), 8 for decode sizes, where the latency of the
// chain after the loads is the cost and idle lanes are free; 4 for the fp8 index-K kernel at
// the smallest batches (tuning.h: values_per_lane).
template <int kN>
struct Bf16Vals {
  static_assert(kN == 4 || kN == 8 || kN == 16, "4, 8 or 16 values per lane");
  static constexpr int kWords = kN / 2;  // bf16 pairs
  // One 8-byte load (kN = 4) or kN / 8 16-byte loads, kept as loaded: a RoPE vector rebuilt
  // from words lets the compiler merge V4's NoPE and RoPE stores behind a reconvergence point.
  using LoadVec = std::conditional_t<kN == 4, uint2, uint4>;
  static constexpr int kLoads = kN == 4 ? 1 : kN / 8;
  LoadVec raw[kLoads];
  float v[kN];

  // The values at `src` (pinned by begin_row when kPinned), or zeros where not `active`.
  template <bool kPinned>
  __device__ __forceinline__ static Bf16Vals load(const uint16_t* src, bool active = true) {
    Bf16Vals x;
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
      x.raw[i] = active ? load_global<kPinned>(reinterpret_cast<const LoadVec*>(src + 8 * i))
                        : LoadVec{};
    return x;
  }

  // The 32-bit words (bf16 pairs) in memory order.
  __device__ __forceinline__ void words(uint32_t (&w)[kWords]) const {
    if constexpr (kN == 4) {
      w[0] = raw[0].x;
      w[1] = raw[0].y;
    } else {
#pragma unroll
      for (int i = 0; i < kLoads; ++i) {
        w[4 * i] = raw[i].x;
        w[4 * i + 1] = raw[i].y;
        w[4 * i + 2] = raw[i].z;
        w[4 * i + 3] = raw[i].w;
      }
    }
  }

  // The values from 32-bit words in memory order (a rotated RoPE part).
  __device__ __forceinline__ void set_words(const uint32_t (&w)[kWords]) {
    if constexpr (kN == 4) {
      raw[0] = {w[0], w[1]};
    } else {
#pragma unroll
      for (int i = 0; i < kLoads; ++i) raw[i] = {w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]};
    }
  }

  // The raw values, copied (V4's RoPE lanes): kN * 2 bytes, aligned to the load vector.
  __device__ __forceinline__ void store_raw(uint8_t* dst) const {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) *reinterpret_cast<LoadVec*>(dst + 16 * i) = raw[i];
  }

  // Decoding is separate from loading so that it runs after the count and slot loads issue.
  __device__ __forceinline__ void decode() {
    uint32_t w[kWords];
    words(w);
#pragma unroll
    for (int i = 0; i < kWords; ++i) decode_bf16x2(w[i], v + 2 * i);
  }

  // max |x| of the values, on the packed bf16 pairs: exact (max picks one of the values) and as
  // NaN-ignoring as fmaxf (__hmax2 returns the other operand of a NaN). In [+0, +Inf], never NaN
  // or -0 (the magnitudes carry no sign): group_amax compares the bits as integers.
  __device__ __forceinline__ float amax() const {
    uint32_t w[kWords];
    words(w);
    __nv_bfloat162 m[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) m[i] = __habs2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
#pragma unroll
    for (int stride = kWords / 2; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < stride; ++i) m[i] = __hmax2(m[i], m[i + stride]);
    return fmaxf(fmaxf(__low2float(m[0]), __high2float(m[0])), 0.0f);
  }

  // e4m3(x * factor), packed in memory order.
  __device__ __forceinline__ Fp8Bytes<kN> to_e4m3_times(float factor) const {
    return pack_fp8<__NV_E4M3>(v, [factor](float x) { return x * factor; });
  }

  // e2m1 codes of x / s (sign kept; docs/layouts.md's rounding with `ties`), two per byte.
  // `quotient(x)` is x / s exactly as the layout defines it (a true division for V41_FP4, a
  // power-of-two product for the indexer): the per-value path computes it and converts (the
  // native instruction on Blackwell for ties to even); elsewhere the bf16 thresholds decide, or
  // for ties to even by a power of two `inverse` = 1 / s (> 0 and normal) E2m1PowerOfTwo.
  template <typename Quotient>
  __device__ __forceinline__ Fp4Bytes<kN> to_e2m1(float s, Fp4Ties ties, Quotient quotient,
                                                  float inverse = 0.0f) {
    static_assert(kN == 8 || kN == 16, "e2m1: 4 or 8 bytes a lane");
    bool per_value = false;
#if CACHESTORE_NATIVE_SHORT_CVT
    per_value = ties == Fp4Ties::kToEven;
#endif
    uint32_t w[kWords];
    words(w);
    per_value = per_value || any_bf16_nan_or_inf<kWords>(w);
    if (per_value) {
      decode();
      return pack_e2m1(v, ties, quotient);
    }
    if (ties == Fp4Ties::kToEven && inverse >= 0x1p-126f) {
      const E2m1PowerOfTwo by_inverse(inverse);
      if constexpr (kN == 8) {
        return by_inverse.codes(w);
      } else {
        return make_uint2(by_inverse.codes(w), by_inverse.codes(w + 4));
      }
    }
    const E2m1Thresholds thresholds(s, ties);
    if constexpr (kN == 8) {
      return thresholds.codes(w);
    } else {
      return make_uint2(thresholds.codes(w), thresholds.codes(w + 4));
    }
  }

  // e4m3(x / s), with the byte IEEE division would give.
  template <ScaleSource kSource>
  __device__ __forceinline__ Fp8Bytes<kN> to_e4m3_divided(float s) const {
    return fp8_divided<__NV_E4M3, kSource>(v, s);
  }
};

}  // namespace cachestore::kernels
