// The engines' bf16 store today, unguarded: cache.view(-1, D)[loc.long()] = k. One 16-byte
// vector per thread; a negative slot wraps to the end of the cache as a Python index does.
// The padded-replay test uses it as the control that proves the test sees the production bug;
// bench_store uses it as the baseline.
#pragma once

#include <cstdint>

namespace cachestore::test {

template <typename SlotT>
__global__ void naive_scatter_kernel(const uint4* __restrict__ k, const SlotT* __restrict__ slots,
                                     uint4* __restrict__ cache, int64_t num_tokens,
                                     int32_t vecs_per_row, int64_t num_slots) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_tokens * vecs_per_row) return;
  const int64_t row = i / vecs_per_row, vec = i % vecs_per_row;
  int64_t slot = slots[row];
  if (slot < 0) slot += num_slots;
  cache[slot * vecs_per_row + vec] = k[i];
}

template <typename SlotT>
inline cudaError_t naive_scatter(const void* k, const SlotT* slots, void* cache,
                                 int64_t num_tokens, int32_t head_dim, int64_t num_slots,
                                 cudaStream_t stream) {
  const int32_t vecs = head_dim / 8;
  const int64_t threads = num_tokens * vecs;
  if (threads == 0) return cudaSuccess;
  naive_scatter_kernel<SlotT><<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(
      static_cast<const uint4*>(k), slots, static_cast<uint4*>(cache), num_tokens, vecs, num_slots);
  return cudaGetLastError();
}

// The lean form (bench_store's baseline, and the floor of the decode-size targets): one 16-byte
// vector per thread, row and vector by shift and mask (vectors per row a power of two), a 32-bit
// thread index, no wrap of negative slots. `k_row_vecs` is the input row stride in vectors
// (engines scatter K and V sliced out of one tensor).
template <typename SlotT>
__global__ void lean_naive_scatter_kernel(const uint4* __restrict__ k, int32_t k_row_vecs,
                                          const SlotT* __restrict__ slots,
                                          uint4* __restrict__ cache, int32_t total_vecs,
                                          int32_t vec_shift) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= total_vecs) return;
  const int32_t row = i >> vec_shift, vec = i & ((1 << vec_shift) - 1);
  cache[(static_cast<int64_t>(slots[row]) << vec_shift) + vec] = k[row * k_row_vecs + vec];
}

template <typename SlotT>
inline cudaError_t lean_naive_scatter(const void* k, int64_t k_row_stride, const SlotT* slots,
                                      void* cache, int64_t num_tokens, int32_t width,
                                      cudaStream_t stream) {
  int32_t shift = 0;
  while ((8 << shift) < width) ++shift;
  const int64_t total = num_tokens << shift;
  if (total == 0) return cudaSuccess;
  lean_naive_scatter_kernel<SlotT><<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(
      static_cast<const uint4*>(k), static_cast<int32_t>(k_row_stride / 8), slots,
      static_cast<uint4*>(cache), static_cast<int32_t>(total), shift);
  return cudaGetLastError();
}

// K and V in one lean node (reshape_and_cache_flash's one launch for both): vectors of a row's
// K, then of its V (each `width` wide, a power of two of vectors), read at k + row * row_vecs and
// k + v_offset_vecs + row * row_vecs.
template <typename SlotT>
__global__ void lean_naive_kv_scatter_kernel(const uint4* __restrict__ k, int32_t row_vecs,
                                             int32_t v_offset_vecs, const SlotT* __restrict__ slots,
                                             uint4* __restrict__ k_cache,
                                             uint4* __restrict__ v_cache, int32_t total_vecs,
                                             int32_t vec_shift) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= total_vecs) return;
  const int32_t row = i >> (vec_shift + 1), vec = i & ((1 << vec_shift) - 1);
  const bool is_v = (i >> vec_shift) & 1;
  uint4* cache = is_v ? v_cache : k_cache;
  cache[(static_cast<int64_t>(slots[row]) << vec_shift) + vec] =
      k[row * row_vecs + (is_v ? v_offset_vecs : 0) + vec];
}

template <typename SlotT>
inline cudaError_t lean_naive_kv_scatter(const void* k, int64_t row_stride, int64_t v_offset,
                                         const SlotT* slots, void* k_cache, void* v_cache,
                                         int64_t num_tokens, int32_t width, cudaStream_t stream) {
  int32_t shift = 0;
  while ((8 << shift) < width) ++shift;
  const int64_t total = num_tokens << (shift + 1);
  if (total == 0) return cudaSuccess;
  lean_naive_kv_scatter_kernel<SlotT>
      <<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(
          static_cast<const uint4*>(k), static_cast<int32_t>(row_stride / 8),
          static_cast<int32_t>(v_offset / 8), slots, static_cast<uint4*>(k_cache),
          static_cast<uint4*>(v_cache), static_cast<int32_t>(total), shift);
  return cudaGetLastError();
}

}  // namespace cachestore::test
