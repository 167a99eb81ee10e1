// The naive fp8 index-K composition a framework builds from separate kernels, unguarded:
// amax per 128-value block, quantize into a temporary, scatter the data rows, scatter the
// scales (x.abs().amax(-1); (x / s).to(fp8); cache[slot] = q; scales[slot] = s).
// Same bytes as store_index_k_fp8 with the amax rule (D = 128).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace cachestore::bench {

__global__ void naive_amax_kernel(const uint16_t* k, float* scale, int64_t rows) {
  const int64_t row = blockIdx.x * int64_t{blockDim.y} + threadIdx.y;
  if (row >= rows) return;
  float a = 0.0f;
  for (int c = threadIdx.x; c < 128; c += 32)
    a = fmaxf(a, fabsf(__uint_as_float(uint32_t{k[row * 128 + c]} << 16)));
  for (int o = 16; o > 0; o /= 2) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  if (threadIdx.x == 0) scale[row] = fmaxf(a, 1e-4f) / 448.0f;
}

__global__ void naive_quantize_kernel(const uint16_t* k, const float* scale, uint8_t* q,
                                      int64_t elements) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= elements) return;
  const float x = __uint_as_float(uint32_t{k[i]} << 16) / scale[i / 128];
  q[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

__global__ void naive_scatter_rows_kernel(const uint4* q, const int64_t* slots, uint8_t* cache,
                                          int64_t rows, int32_t page_shift, int64_t page_stride) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * 8) return;
  const int64_t slot = slots[i / 8];
  const int64_t in_page = slot & ((int64_t{1} << page_shift) - 1);
  reinterpret_cast<uint4*>(cache + (slot >> page_shift) * page_stride + in_page * 128)[i % 8] = q[i];
}

__global__ void naive_scatter_scales_kernel(const float* scale, const int64_t* slots,
                                            uint8_t* cache, int64_t rows, int32_t page_shift,
                                            int64_t page_stride) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows) return;
  const int64_t slot = slots[i];
  const int64_t page_size = int64_t{1} << page_shift;
  *reinterpret_cast<float*>(cache + (slot >> page_shift) * page_stride + page_size * 128 +
                            (slot & (page_size - 1)) * 4) = scale[i];
}

// Four launches; `scale` [rows] and `q` [rows, 128] are the framework's temporaries.
inline cudaError_t naive_fp8_store(const uint16_t* k, const int64_t* slots, uint8_t* cache,
                                   int64_t rows, int32_t page_shift, int64_t page_stride,
                                   float* scale, uint8_t* q, cudaStream_t stream) {
  const unsigned row_blocks = static_cast<unsigned>((rows + 7) / 8);
  naive_amax_kernel<<<row_blocks, dim3(32, 8), 0, stream>>>(k, scale, rows);
  naive_quantize_kernel<<<static_cast<unsigned>((rows * 128 + 255) / 256), 256, 0, stream>>>(
      k, scale, q, rows * 128);
  naive_scatter_rows_kernel<<<static_cast<unsigned>((rows * 8 + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<const uint4*>(q), slots, cache, rows, page_shift, page_stride);
  naive_scatter_scales_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
      scale, slots, cache, rows, page_shift, page_stride);
  return cudaGetLastError();
}

}  // namespace cachestore::bench
