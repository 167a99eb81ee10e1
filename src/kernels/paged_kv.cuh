// store_paged_kv: K and V of MHA / GQA / MQA models into a paged cache of any strides. One
// thread per 16-byte input vector (8 values of one head): blockDim = (vectors per block row,
// rows per block), grid = (row blocks, vector blocks). Each thread reads the count, its row's
// slot, its vector and (fp8) its head's scale together, applies the one guard, then writes 16
// bytes (auto) or 8 (fp8).
#pragma once

#include <cuda_fp16.h>

#include "kernels/common.cuh"

namespace cachestore::kernels {

// fp8(x / scale) of 8 bf16 or fp16 values, satfinite, round to nearest even: vLLM's bytes. The
// range decision is made once for the vector (the scale is the head's), never per value.
template <KvCacheType kCache, KvDataType kIn>
__device__ __forceinline__ uint2 kv_to_fp8(const uint4& x, float s) {
  constexpr __nv_fp8_interpretation_t kFormat =
      kCache == KvCacheType::kFp8E4m3 ? __NV_E4M3 : __NV_E5M2;
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
  float v[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kIn == KvDataType::kBf16) {
      v[2 * i] = detail::bf16_bits_to_float(static_cast<uint16_t>(w[i] & 0xffffu));
      v[2 * i + 1] = detail::bf16_bits_to_float(static_cast<uint16_t>(w[i] >> 16));
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  }
  if (scaled_quotient_applies(s)) {
    const float r = __frcp_rn(s);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = scaled_quotient(v[i], s, r);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __fdiv_rn(v[i], s);
  }
  uint32_t out[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * i], v[4 * i + 1]), __NV_SATFINITE, kFormat);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * i + 2], v[4 * i + 3]), __NV_SATFINITE, kFormat);
    out[i] = lo | (hi << 16);
  }
  return make_uint2(out[0], out[1]);
}

// Page of a slot: shifts for a power-of-two P; otherwise the launch-time divisor, valid for
// slots below 2^32 (the launcher refuses larger capacities for such P). A larger slot is out of
// range whatever its page; it is divided exactly so that sharding still decides whether it is
// counted.
__device__ __forceinline__ int64_t page_of(const PagedKvArgs& a, int64_t slot, int64_t* in_page) {
  if (a.page_shift >= 0) {
    *in_page = slot & ((int64_t{1} << a.page_shift) - 1);
    return slot >> a.page_shift;
  }
  if (static_cast<uint64_t>(slot) >> 32 != 0) {
    *in_page = slot % a.page_div.divisor;
    return slot / a.page_div.divisor;
  }
  const uint32_t page = a.page_div.div(static_cast<uint32_t>(slot));
  *in_page = static_cast<uint32_t>(slot) - page * a.page_div.divisor;
  return page;
}

template <typename SlotT, KvCacheType kCache, KvDataType kIn>
__global__ void __launch_bounds__(256) paged_kv_kernel(const GuardArgs guard, const PagedKvArgs a) {
  begin_store(guard);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int32_t j = static_cast<int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  if (row >= guard.num_tokens || j >= a.vecs_per_token) return;
  const bool is_v = j >= a.k_vecs;
  const KvSideArgs& side = is_v ? a.v : a.k;
  const uint32_t jj = static_cast<uint32_t>(is_v ? j - a.k_vecs : j);
  const uint32_t head = side.vecs_per_head.div(jj);
  const uint32_t vec = jj - head * side.vecs_per_head.divisor;
  const uint4 x = load_vec(side.src + row * side.token_stride + head * side.head_stride + 8 * vec);
  float scale = 0.0f;
  if constexpr (kCache != KvCacheType::kAuto) scale = side.scale[head * side.scale_stride];
  const int64_t n = load_token_count(guard);
  const int64_t slot = load_slot<SlotT>(a.slots, row);
  int64_t in_page;
  const int64_t page = page_of(a, slot, &in_page);
  if (!row_is_stored(guard, a.slots, row, n, slot, page, j == 0)) return;
  const int64_t element = (page >> a.slots.owner_log2) * side.page_stride +
                          in_page * side.entry_stride + head * side.cache_head_stride + 8 * vec;
  if constexpr (kCache == KvCacheType::kAuto) {
    store_vec(side.cache + 2 * element, x);
  } else {
    *reinterpret_cast<uint2*>(side.cache + element) = kv_to_fp8<kCache, kIn>(x, scale);
  }
}

}  // namespace cachestore::kernels
