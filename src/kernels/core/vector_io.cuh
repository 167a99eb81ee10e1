// Vector loads and stores of the store kernels, and the exact decoding of their inputs to fp32.
#pragma once

#include <cstdint>
#include <cstring>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cachestore/cachestore.h"
#include "kernels/core/guard.cuh"

namespace cachestore::kernels {

__device__ __forceinline__ uint4 load_vec(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_vec(uint8_t* p, const uint4& v) {
  *reinterpret_cast<uint4*>(p) = v;
}
// kLoads 16-byte vectors to consecutive addresses from p (16-byte aligned).
template <int kLoads>
__device__ __forceinline__ void store_vectors(uint8_t* p, const uint4 (&x)[kLoads]) {
#pragma unroll
  for (int i = 0; i < kLoads; ++i) store_vec(p + 16 * i, x[i]);
}

// An 8- or 16-byte vector to `p`: one store when p is aligned for it, else 4-byte stores (the
// index-K pages of 1 or 2 slots are 132 or 264 bytes long, so their rows are 4-byte aligned).
template <typename Vec>
__device__ __forceinline__ void store_bytes(uint8_t* p, const Vec& v, bool aligned) {
  if (aligned) {
    *reinterpret_cast<Vec*>(p) = v;
    return;
  }
  const auto* w = reinterpret_cast<const uint32_t*>(&v);
  auto* out = reinterpret_cast<uint32_t*>(p);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(Vec) / 4); ++i) out[i] = w[i];
}

// kBytes bytes to p (aligned to min(kBytes, 16)): one store, or two 16-byte ones.
template <int kBytes>
__device__ __forceinline__ void store_bytes_aligned(uint8_t* p, const void* in) {
  if constexpr (kBytes == 32) {
    store_bytes_aligned<16>(p, in);
    store_bytes_aligned<16>(p + 16, static_cast<const uint8_t*>(in) + 16);
  } else {
    using V = std::conditional_t<
        kBytes == 1, uint8_t,
        std::conditional_t<
            kBytes == 2, uint16_t,
            std::conditional_t<kBytes == 4, uint32_t,
                               std::conditional_t<kBytes == 8, uint2, uint4>>>>;
    V v;
    memcpy(&v, in, kBytes);
    *reinterpret_cast<V*>(p) = v;
  }
}

// The two bf16 values of a 32-bit word decoded to fp32 (exact), the low half first.
__device__ __forceinline__ void decode_bf16x2(uint32_t w, float* out) {
  out[0] = __uint_as_float(w << 16);
  out[1] = __uint_as_float(w & 0xffff0000u);
}

// The 8 16-bit values of one vector decoded to fp32 (exact), in memory order.
template <KvDataType kType>
__device__ __forceinline__ void decode_vec(const uint4& x, float* out) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kType == KvDataType::kBf16) {
      decode_bf16x2(w[i], out + 2 * i);
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

// The element type of an input (and of an auto cache).
template <KvDataType kIn>
using KvElement = std::conditional_t<kIn == KvDataType::kFp32, float, uint16_t>;

// One input value as fp32 (exact).
template <KvDataType kIn>
__device__ __forceinline__ float kv_value(KvElement<kIn> x) {
  if constexpr (kIn == KvDataType::kFp32) {
    return x;
  } else if constexpr (kIn == KvDataType::kBf16) {
    return __uint_as_float(static_cast<uint32_t>(x) << 16);
  } else {
    return __half2float(__ushort_as_half(x));
  }
}

// The kW input values held in the 16-byte vectors x, as fp32 (exact).
template <KvDataType kIn, int kW, int kLoads>
__device__ __forceinline__ void decode_values(const uint4 (&x)[kLoads], float (&v)[kW]) {
  if constexpr (kIn == KvDataType::kFp32) {
    memcpy(v, x, sizeof v);
  } else {
#pragma unroll
    for (int i = 0; i < kW / 8; ++i) decode_vec<kIn>(x[i], v + 8 * i);
  }
}

// kBytes bytes from p (aligned to min(kBytes, 16)) into out: one load, or 16-byte ones.
template <bool kPdl, int kBytes>
__device__ __forceinline__ void load_bytes(const void* p, void* out) {
  if constexpr (kBytes > 16) {
    static_assert(kBytes % 16 == 0, "16-byte vectors");
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const uint4 v = load_global<kPdl>(static_cast<const uint4*>(p) + i);
      memcpy(static_cast<uint8_t*>(out) + 16 * i, &v, 16);
    }
  } else {
    using V = std::conditional_t<
        kBytes == 2, uint16_t,
        std::conditional_t<kBytes == 4, uint32_t, std::conditional_t<kBytes == 8, uint2, uint4>>>;
    const V v = load_global<kPdl>(static_cast<const V*>(p));
    memcpy(out, &v, kBytes);
  }
}

}  // namespace cachestore::kernels
