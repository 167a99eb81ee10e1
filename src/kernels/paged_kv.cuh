// store_paged_kv: K and V of MHA / GQA / MQA models into a paged cache of any strides. Two
// kernels with one indexing: blockDim = (vectors per block row, rows per block), grid = (row
// blocks, vector blocks); each thread reads the count, its row's slot, its vector and (fp8) its
// head's scale together, applies the one guard, then writes its vector.
//   - paged_kv_kernel: 8 values a thread, read as 16-byte vectors (bf16 / fp16: one, fp32: two)
//     and written as one 16-byte vector (auto 16-bit), two (auto fp32) or 8 bytes (fp8): what
//     every aligned cache with a contiguous head dim gets;
//   - paged_kv_general_kernel: `width` values a thread (8, 4, 2 or 1: the widest the alignment
//     allows), any head dim, and the head-dim layouts that chunk or stride d (vLLM's
//     paged-attention layout); a vector in one contiguous run of the cache is one store, else
//     each value is;
//   - paged_kv_nvfp4_kernel: one 16-value NVFP4 block a thread (two or four 16-byte loads), its
//     8 code bytes and its e4m3 scale byte; on large batches kVecs blocks a thread;
//   - paged_kv_token_head_kernel: fp8 with a scale per (token, head) from the head's amax (a
//     shuffle over the head's lanes), the scale into its fp32 view.
#pragma once

#include <cstring>

#include "kernels/core/fp4.cuh"
#include "kernels/core/fp8.cuh"
#include "kernels/core/guard.cuh"
#include "kernels/core/vector_io.cuh"
#include "tuning.h"

namespace cachestore::kernels {

// fp8(v / scale) of an fp8 cache type: vLLM's bytes (the shared quantizer, fp8_divided).
template <KvCacheType kCache, int kW>
__device__ __forceinline__ Fp8Bytes<kW> kv_fp8(const float (&v)[kW], float scale) {
  return fp8_divided<kCache == KvCacheType::kFp8E4m3 ? __NV_E4M3 : __NV_E5M2,
                     ScaleSource::kGiven>(v, scale);
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

// Element offset of index d within a (slot, head) entry (layout::kv_dim_offset).
__device__ __forceinline__ int64_t dim_offset(const KvDimArgs& l, int64_t d) {
  if (l.chunk_shift < 0) return d * l.dim_stride;
  return (d >> l.chunk_shift) * l.chunk_stride +
         (d & ((int64_t{1} << l.chunk_shift) - 1)) * l.dim_stride;
}

// kW values v (fp32, each exactly a value of the input) into their quantized cache entry at
// (pos, head, vector vec): fp8 (kW = 8) quantizes them, nvfp4 (kW = 16) writes its 8 code bytes
// and its scale byte (bs). d contiguous and aligned (the 16-byte kernel's caches).
template <int kW, KvCacheType kCache>
__device__ __forceinline__ void store_kv_values(const KvSideArgs& side, const BlockScaleSide bs,
                                                const PagePosition& pos, uint32_t head,
                                                uint32_t vec, const float (&v)[kW], float scale) {
  if constexpr (kCache == KvCacheType::kNvfp4) {
    static_assert(kW == 16, "nvfp4: one 16-value block");
    const Nvfp4Block q = nvfp4_block(v, scale);
    *reinterpret_cast<uint2*>(side.cache + layout::kv_element_offset(
                                               side.cache_strides, pos.local_page, pos.in_page,
                                               head, 8 * vec)) = q.codes;
    bs.scales[layout::kv_element_offset(bs.strides, pos.local_page, pos.in_page, head, vec)] =
        q.scale;
  } else if constexpr (kCache == KvCacheType::kFp8E4m3PerTokenHead) {
    // The head's amax over its vecs_per_head lanes, one shuffle group (paged_kv_vector keeps a
    // head's vectors on aligned lanes of one warp, and the whole group shares the row's
    // verdict), s = max(amax / 448, 1e-6), e4m3(x * RN(1 / s)); the head's first lane writes s.
    static_assert(kW == 8, "fp8_e4m3_per_token_head: 8 values, 8 bytes");
    const uint32_t group = side.vecs_per_head.divisor;
    const uint32_t lane = (threadIdx.y * blockDim.x + threadIdx.x) & 31u;
    const uint32_t mask =
        group >= 32u ? 0xffffffffu : ((1u << group) - 1u) << (lane & ~(group - 1u));
    float amax = magnitude_max(v);
    for (uint32_t offset = 1; offset < group; offset <<= 1)
      amax = fmaxf(amax, __shfl_xor_sync(mask, amax, offset));
    const float s = fmaxf(__fdiv_rn(amax, 448.0f), 1e-6f);
    const float r = __frcp_rn(s);
    const int64_t element =
        layout::kv_element_offset(side.cache_strides, pos.local_page, pos.in_page, head, 8 * vec);
    *reinterpret_cast<uint2*>(side.cache + element) =
        pack_fp8<__NV_E4M3, 8>(v, [r](float x) { return x * r; });
    if (vec == 0)
      reinterpret_cast<float*>(bs.scales)[layout::kv_element_offset(
          bs.strides, pos.local_page, pos.in_page, head, 0)] = s;
  } else {
    static_assert(kW == 8 && kCache != KvCacheType::kAuto, "fp8: 8 values, 8 bytes");
    const int64_t element =
        layout::kv_element_offset(side.cache_strides, pos.local_page, pos.in_page, head, 8 * vec);
    *reinterpret_cast<uint2*>(side.cache + element) = kv_fp8<kCache>(v, scale);
  }
}

// A vector of kW input values (the 16-byte vectors x) into its cache entry: auto copies it, the
// quantized types decode it for store_kv_values.
template <int kW, KvCacheType kCache, KvDataType kIn, int kLoads>
__device__ __forceinline__ void store_kv_vector(const KvSideArgs& side, const BlockScaleSide bs,
                                                const PagePosition& pos, uint32_t head,
                                                uint32_t vec, const uint4 (&x)[kLoads],
                                                float scale) {
  if constexpr (kCache == KvCacheType::kAuto) {
    static_assert(kW == 8, "8 values: one 16-byte input vector (two for fp32)");
    const int64_t element =
        layout::kv_element_offset(side.cache_strides, pos.local_page, pos.in_page, head, 8 * vec);
    store_vectors(side.cache + sizeof(KvElement<kIn>) * element, x);
  } else if constexpr (kCache == KvCacheType::kFp8E4m3 ||
                       kCache == KvCacheType::kFp8E5m2) {  // the offset first, as ptxas likes it
    const int64_t element =
        layout::kv_element_offset(side.cache_strides, pos.local_page, pos.in_page, head, 8 * vec);
    float v[kW];
    decode_values<kIn>(x, v);
    *reinterpret_cast<uint2*>(side.cache + element) = kv_fp8<kCache>(v, scale);
  } else {  // nvfp4 and fp8_e4m3_per_token_head: their second view
    float v[kW];
    decode_values<kIn>(x, v);
    store_kv_values<kW, kCache>(side, bs, pos, head, vec, v, scale);
  }
}

// Where vector j of a row comes from and goes: its side (K for j < k_vecs), head and vector in
// the head, its input and (kScaled: fp8 and nvfp4 caches) its scale.
template <int kW, KvDataType kIn, bool kScaled>
struct KvVectorAt {
  const KvSideArgs* side;
  bool is_v;
  uint32_t head;
  uint32_t vec;
  const KvElement<kIn>* src;
  const float* scale_src;

  KvVectorAt() = default;
  __device__ __forceinline__ KvVectorAt(const PagedKvArgs& a, int64_t row, int32_t j) {
    is_v = j >= a.k_vecs;
    side = is_v ? &a.v : &a.k;
    const uint32_t jj = static_cast<uint32_t>(is_v ? j - a.k_vecs : j);
    head = side->vecs_per_head.div(jj);
    vec = jj - head * side->vecs_per_head.divisor;
    src = reinterpret_cast<const KvElement<kIn>*>(side->src) +
          (row * side->token_stride + head * side->head_stride + kW * vec);
    scale_src = side->scale + static_cast<int64_t>(head) * side->scale_stride;
  }
};

// begin_row's pinning of a thread's vectors: the addresses it loads (found by argument-dependent
// lookup).
template <int kW, KvDataType kIn, bool kScaled, int kN>
__device__ __forceinline__ void compute_before_wait(KvVectorAt<kW, kIn, kScaled> (&at)[kN]) {
#pragma unroll
  for (int v = 0; v < kN; ++v) {
    compute_before_wait(at[v].src);
    if constexpr (kScaled) compute_before_wait(at[v].scale_src);
  }
}

// One thread's kVecs vectors of kW values of one row (vectors j + v * vecs_per_token / kVecs),
// from the row's guard to their stores: their loads all issue before the guard's verdict, so a
// large batch keeps kVecs times the bytes in flight a thread under one count, slot and verdict.
// kFast: the 16-byte kernel (kW = 8; 16-byte loads; d contiguous, aligned: one store); else the
// general kernel's (one vector; loads of kW values; a store per contiguous vector, or per
// value). nvfp4 (kW = 16, kFast): one block a vector; its 8 code bytes and its scale byte.
template <int kW, bool kFast, typename SlotT, KvCacheType kCache, KvDataType kIn, bool kPdl,
          int kVecs = 1>
__device__ __forceinline__ void paged_kv_vector(const GuardArgs& guard, const PagedKvArgs& a,
                                                const PageTableArgs& table,
                                                const BlockScaleArgs& block_scales = {}) {
  static_assert(kVecs == 1 || kFast, "several vectors a thread: the 16-byte kernel");
  using In = KvElement<kIn>;
  using Out = std::conditional_t<kCache == KvCacheType::kAuto, In, uint8_t>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int32_t j = static_cast<int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  const int32_t split = kVecs == 1 ? a.vecs_per_token : a.vecs_per_token / kVecs;
  if (row >= guard.num_tokens || j >= split) return;
  constexpr bool kScaled = layout::kv_cache_type(kCache).scaled;  // reads the caller's scale
  using VectorAt = KvVectorAt<kW, kIn, kScaled>;
  VectorAt at[kVecs];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) at[v] = VectorAt(a, row, j + v * split);
  GuardSources<SlotT> sources(guard, a.slots, table, row);
  begin_row<kPdl>(guard, sources, at);
  constexpr int kLoads = (kW * static_cast<int>(sizeof(In)) + 15) / 16;  // 16-byte vectors
  uint4 x[kVecs][kLoads];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    if constexpr (kFast) {
#pragma unroll
      for (int i = 0; i < kLoads; ++i)
        x[v][i] = load_global<kPdl>(reinterpret_cast<const uint4*>(at[v].src) + i);
    } else {
      load_bytes<kPdl, kW * sizeof(In)>(at[v].src, x[v]);
    }
  }
  float scale[kVecs] = {};
  if constexpr (kScaled) {
#pragma unroll
    for (int v = 0; v < kVecs; ++v) scale[v] = load_global<kPdl>(at[v].scale_src);
  }
  const int64_t n = sources.template load_count<kPdl>(guard);
  const int64_t slot = sources.template load_slot<kPdl>(n);
  const PagePosition pos = position_of(a, slot);
  if (!row_is_stored(guard, a.slots, row, n, slot, pos.global_page, j == 0)) return;
  if constexpr (kFast) {
    static_assert(kCache != KvCacheType::kNvfp4 || kW == 16, "nvfp4: one 16-value block a thread");
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
      store_kv_vector<kW, kCache, kIn>(*at[v].side, at[v].is_v ? block_scales.v : block_scales.k,
                                       pos, at[v].head, at[v].vec, x[v], scale[v]);
  } else {
    const VectorAt& one = at[0];
    In values[kW];
    memcpy(values, x[0], sizeof values);
    Out out[kW];
    if constexpr (kCache == KvCacheType::kAuto) {
      memcpy(out, values, sizeof out);
    } else {  // the 16-byte kernel's quantizer at kW values
      float v[kW];
#pragma unroll
      for (int i = 0; i < kW; ++i) v[i] = kv_value<kIn>(values[i]);
      const Fp8Bytes<kW> q = kv_fp8<kCache>(v, scale[0]);
      memcpy(out, &q, sizeof out);
    }
    const KvDimArgs& dim = one.is_v ? a.v_dim : a.k_dim;
    Out* base = reinterpret_cast<Out*>(one.side->cache) +
                layout::kv_element_offset(one.side->cache_strides, pos.local_page, pos.in_page,
                                          one.head, 0);
    const int64_t d0 = static_cast<int64_t>(kW) * one.vec;
    if (dim.dim_stride == 1) {  // the launcher's width keeps a vector within one chunk
      store_bytes_aligned<kW * sizeof(Out)>(reinterpret_cast<uint8_t*>(base + dim_offset(dim, d0)),
                                            out);
    } else {
#pragma unroll
      for (int i = 0; i < kW; ++i) base[dim_offset(dim, d0 + i)] = out[i];
    }
  }
}

// kVecs vectors a thread: 1 at decode sizes, tuning::kPagedKvWideVectors on large batches.
template <typename SlotT, KvCacheType kCache, KvDataType kIn, bool kPdl, int kVecs>
__global__ void __launch_bounds__(tuning::kPagedKvMaxThreads)
paged_kv_kernel(const GuardArgs guard, const PagedKvArgs a, const PageTableArgs table) {
  paged_kv_vector<8, true, SlotT, kCache, kIn, kPdl, kVecs>(guard, a, table);
}

// kVecs blocks a thread: 1 at decode sizes, tuning::kPagedKvWideVectors on large batches (the
// count, the slot, the guard and the addressing shared by the blocks of one thread).
template <typename SlotT, KvDataType kIn, bool kPdl, int kVecs>
__global__ void __launch_bounds__(tuning::kPagedKvMaxThreads)
paged_kv_nvfp4_kernel(const GuardArgs guard, const PagedKvArgs a, const PageTableArgs table,
                      const BlockScaleArgs block_scales) {
  paged_kv_vector<16, true, SlotT, KvCacheType::kNvfp4, kIn, kPdl, kVecs>(guard, a, table,
                                                                          block_scales);
}

// fp8_e4m3_per_token_head: one vector of 8 values a thread, a head's vectors on one shuffle
// group of lanes; the scale views are its trailing parameter.
template <typename SlotT, KvDataType kIn, bool kPdl>
__global__ void __launch_bounds__(tuning::kPagedKvMaxThreads)
paged_kv_token_head_kernel(const GuardArgs guard, const PagedKvArgs a, const PageTableArgs table,
                           const BlockScaleArgs scales) {
  paged_kv_vector<8, true, SlotT, KvCacheType::kFp8E4m3PerTokenHead, kIn, kPdl, 1>(guard, a, table,
                                                                                 scales);
}

template <typename SlotT, KvCacheType kCache, KvDataType kIn, bool kPdl>
__global__ void __launch_bounds__(tuning::kPagedKvMaxThreads)
paged_kv_general_kernel(const GuardArgs guard, const PagedKvArgs a,
                        const PageTableArgs table) {
  switch (a.width) {  // uniform over the launch
    case 8: return paged_kv_vector<8, false, SlotT, kCache, kIn, kPdl>(guard, a, table);
    case 4: return paged_kv_vector<4, false, SlotT, kCache, kIn, kPdl>(guard, a, table);
    case 2: return paged_kv_vector<2, false, SlotT, kCache, kIn, kPdl>(guard, a, table);
    default: return paged_kv_vector<1, false, SlotT, kCache, kIn, kPdl>(guard, a, table);
  }
}

}  // namespace cachestore::kernels
