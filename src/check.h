// The check layer's shared pieces (check.cpp has every store's check, the public check()
// overloads of cachestore.h): small predicates and the conversions the launchers reuse.
#pragma once

#include <cstdint>

#include "cachestore/cachestore.h"

namespace cachestore::detail {

inline bool aligned_to(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}
inline bool product_fits(int64_t a, int64_t b) {
  int64_t out;
  return !__builtin_mul_overflow(a, b, &out);
}

// log2 of a size already checked to be a power of two.
int32_t log2_exact(int64_t power_of_two);

// A row stride the MLA kernels keep in 32 bits (kernels::MlaArgs): the stride, or 0 with one
// row or none, where it is never multiplied. check(FusedStoreParams) has refused a larger one.
inline int32_t int32_row_stride(int64_t row_stride, int64_t rows) {
  return rows <= 1 ? 0 : static_cast<int32_t>(row_stride);
}

// The index-K cache of a fused call in its format's struct, as the kernels' index_k_args reads
// it: the fp8 or fp4 cache's fields.
struct IndexKCacheView {
  void* data;
  int64_t num_pages;
  int32_t page_size;
  int64_t page_stride_bytes;
  int32_t head_dim;
};
inline IndexKCacheView view_of(const IndexKFp8Cache& c) {
  return {c.data, c.num_pages, c.page_size, c.page_stride_bytes, c.head_dim};
}
inline IndexKCacheView view_of(const IndexKFp4Cache& c) {
  return {c.data, c.num_pages, c.page_size, c.page_stride_bytes, c.head_dim};
}

}  // namespace cachestore::detail
