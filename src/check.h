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

// Element bytes of store_paged_kv's inputs and caches (an auto cache holds the input type).
inline int64_t kv_input_bytes(KvDataType t) { return t == KvDataType::kFp32 ? 4 : 2; }
inline int64_t kv_cache_bytes(const PagedKvParams& p) {
  return layout::kv_cache_type(p.cache_type).scaled ? 1 : kv_input_bytes(p.input_type);
}

// log2 of a size already checked to be a power of two.
int32_t log2_exact(int64_t power_of_two);

// A row stride the MLA kernels keep in 32 bits (kernels::MlaArgs): the stride, or 0 with one
// row or none, where it is never multiplied. check(FusedStoreParams) has refused a larger one.
inline int32_t int32_row_stride(int64_t row_stride, int64_t rows) {
  return rows <= 1 ? 0 : static_cast<int32_t>(row_stride);
}

}  // namespace cachestore::detail
