// The layout write-pattern control of bench_store (layout_pattern.cuh).
#include "layout_pattern.cuh"

namespace cachestore::bench {
namespace {

// blockDim = (in_vectors, rows per block): thread x of a row reads input vector x; the first
// data_row / 16 threads write the data row, the next ones the scale row (4, 8, 16 or 32 bytes).
__global__ void layout_pattern_kernel(const uint4* __restrict__ in, int32_t in_vectors,
                                      const int64_t* __restrict__ slots, uint8_t* cache,
                                      int32_t num_tokens, int32_t page_shift, int64_t page_stride,
                                      layout::PagedRows rows) {
  const int32_t row = static_cast<int32_t>(blockIdx.x * blockDim.y + threadIdx.y);
  const int32_t t = static_cast<int32_t>(threadIdx.x);
  if (row >= num_tokens) return;
  const uint4 v = in[static_cast<int64_t>(row) * in_vectors + t];
  const int64_t slot = slots[row];
  const int64_t page = slot >> page_shift, in_page = slot & ((int64_t{1} << page_shift) - 1);
  const int32_t data_vectors = static_cast<int32_t>(rows.data_row / 16);
  if (t < data_vectors) {
    *reinterpret_cast<uint4*>(cache + layout::data_offset(rows, page, in_page, page_stride) +
                              16 * t) = v;
    return;
  }
  const int64_t scale_bytes = layout::scale_row_bytes(rows);
  const int64_t at = 16 * static_cast<int64_t>(t - data_vectors);
  if (at >= scale_bytes) return;
  uint8_t* p = cache + at +
               layout::scale_offset(rows, page, in_page, int64_t{1} << page_shift, page_stride);
  if (scale_bytes - at >= 16) {
    *reinterpret_cast<uint4*>(p) = v;
  } else if (scale_bytes - at == 8) {
    *reinterpret_cast<uint2*>(p) = make_uint2(v.x, v.y);
  } else {
    *reinterpret_cast<uint32_t*>(p) = v.x;
  }
}

}  // namespace

cudaError_t layout_pattern(const uint16_t* in, int32_t in_width, const int64_t* slots,
                           uint8_t* cache, int64_t num_tokens, int32_t page_shift,
                           int64_t page_stride, layout::PagedRows rows, cudaStream_t stream) {
  if (num_tokens == 0) return cudaSuccess;
  const int32_t in_vectors = in_width / 8;
  const int32_t rows_per_block = 256 / in_vectors > 0 ? 256 / in_vectors : 1;
  const dim3 block(in_vectors, rows_per_block);
  const auto blocks = static_cast<unsigned>((num_tokens + rows_per_block - 1) / rows_per_block);
  layout_pattern_kernel<<<blocks, block, 0, stream>>>(
      reinterpret_cast<const uint4*>(in), in_vectors, slots, cache,
      static_cast<int32_t>(num_tokens), page_shift, page_stride, rows);
  return cudaGetLastError();
}

}  // namespace cachestore::bench
