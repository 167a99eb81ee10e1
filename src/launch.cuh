// The one launch path of every entry point: arch policy, optional PDL, launch-error check.
#pragma once

#include <utility>

#include "arch.h"
#include "kernels/args.h"
#include "detail/status.h"
#include "detail/validate.h"

namespace cachestore::detail {

template <typename... KernelArgs, typename... Args>
Status launch_store(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t stream,
                    bool pdl, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  if (pdl) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the non-sticky launch error
    return fail(Status::kErrorCudaRuntime, "kernel launch failed: %s", cudaGetErrorString(err));
  }
  return succeed();
}

// Grid blocks for `rows` rows, `rows_per_block` a block; kErrorNotSupported past the grid limit.
inline Status grid_for_rows(int64_t rows, int64_t rows_per_block, dim3* grid) {
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (blocks > 0x7fffffff)
    return fail(Status::kErrorNotSupported, "batch.num_tokens = %lld needs more than 2^31-1 blocks",
                static_cast<long long>(rows));
  *grid = dim3(static_cast<unsigned>(blocks));
  return Status::kSuccess;
}

inline kernels::GuardArgs guard_args(const Batch& batch, bool pdl) {
  return {batch.num_tokens, batch.num_tokens_non_padded, batch.diagnostics, pdl};
}

inline kernels::SlotArgs slot_args(const SlotMapping& slots, int64_t capacity) {
  return {slots.data, slots.reserved_slot, capacity};
}

// Lanes per fp8 index-K row: 8 per 128-value block, rounded up to a power of two.
inline int32_t index_k_fp8_lanes_log2(int32_t head_dim) {
  int32_t log2 = 3;
  while ((1 << log2) * 16 < head_dim) ++log2;
  return log2;
}

inline kernels::IndexKFp8Args index_k_fp8_args(const SlotMapping& slots, const void* k,
                                               int64_t k_row_stride, const IndexKFp8Cache& cache) {
  return {slot_args(slots, cache.num_pages * cache.page_size),
          static_cast<const uint16_t*>(k),
          k_row_stride,
          {static_cast<uint8_t*>(cache.data), cache.page_stride_bytes, log2_exact(cache.page_size)},
          cache.head_dim,
          index_k_fp8_lanes_log2(cache.head_dim),
          cache.scale_rule};
}

}  // namespace cachestore::detail
