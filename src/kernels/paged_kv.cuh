// store_paged_kv: K and V of MHA / GQA / MQA models into a paged cache of any strides. One
// thread per 16-byte input vector (8 values of one head): blockDim = (vectors per block row,
// rows per block), grid = (row blocks, vector blocks). Each thread reads the count, its row's
// slot, its vector and (fp8) its head's scale together, applies the one guard, then writes 16
// bytes (auto) or 8 (fp8).
#pragma once

#include "kernels/core/fp8.cuh"
#include "kernels/core/guard.cuh"
#include "kernels/core/vector_io.cuh"
#include "tuning.h"

namespace cachestore::kernels {

// fp8(x / scale) of 8 bf16 or fp16 values: vLLM's bytes (the shared quantizer, fp8_divided).
template <KvCacheType kCache, KvDataType kIn>
__device__ __forceinline__ uint2 kv_to_fp8(const uint4& x, float s) {
  float v[8];
  decode_vec<kIn>(x, v);
  return fp8_divided<kCache == KvCacheType::kFp8E4m3 ? __NV_E4M3 : __NV_E5M2, ScaleSource::kGiven>(v, s);
}

// Page of a slot: shifts for a power-of-two P; otherwise the launch-time divisor, valid for
// slots below 2^32 (the launcher refuses larger capacities for such P). A larger slot is out of
// range whatever its page; it is divided exactly so that sharding still decides whether it is
// counted.
__device__ __forceinline__ PagePosition position_of(const PagedKvArgs& a, int64_t slot) {
  if (a.page_shift >= 0) return PagePosition::of_slot(slot, a.page_shift, a.slots);
  const uint32_t p = a.page_div.divisor;
  if (static_cast<uint64_t>(slot) >> 32 != 0) return {slot / p, slot % p, a.slots};
  const uint32_t page = a.page_div.div(static_cast<uint32_t>(slot));
  return {page, static_cast<uint32_t>(slot) - page * p, a.slots};
}

template <typename SlotT, KvCacheType kCache, KvDataType kIn, bool kPdl>
__global__ void __launch_bounds__(tuning::kPagedKvMaxThreads)
paged_kv_kernel(const GuardArgs guard, const PagedKvArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int32_t j = static_cast<int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  if (row >= guard.num_tokens || j >= a.vecs_per_token) return;
  const bool is_v = j >= a.k_vecs;
  const KvSideArgs& side = is_v ? a.v : a.k;
  const uint32_t jj = static_cast<uint32_t>(is_v ? j - a.k_vecs : j);
  const uint32_t head = side.vecs_per_head.div(jj);
  const uint32_t vec = jj - head * side.vecs_per_head.divisor;
  const uint16_t* src = side.src + (row * side.token_stride + head * side.head_stride + 8 * vec);
  const float* scale_src = side.scale + static_cast<int64_t>(head) * side.scale_stride;
  GuardSources<SlotT> sources(guard, a.slots, row);
  if constexpr (kCache == KvCacheType::kAuto) {
    begin_row<kPdl>(guard, sources, src);
  } else {
    begin_row<kPdl>(guard, sources, src, scale_src);
  }
  const uint4 x = load_global<kPdl>(reinterpret_cast<const uint4*>(src));
  float scale = 0.0f;
  if constexpr (kCache != KvCacheType::kAuto) scale = load_global<kPdl>(scale_src);
  const int64_t n = sources.template load_count<kPdl>(guard);
  const int64_t slot = sources.template load_slot<kPdl>();
  const PagePosition pos = position_of(a, slot);
  if (!row_is_stored(guard, a.slots, row, n, slot, pos.global_page, j == 0)) return;
  const int64_t element =
      layout::kv_element_offset(side.cache_strides, pos.local_page, pos.in_page, head, 8 * vec);
  if constexpr (kCache == KvCacheType::kAuto) {
    store_vec(side.cache + 2 * element, x);
  } else {
    *reinterpret_cast<uint2*>(side.cache + element) = kv_to_fp8<kCache, kIn>(x, scale);
  }
}

}  // namespace cachestore::kernels
