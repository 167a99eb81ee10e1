// Host-side argument checks shared by the entry points. Each returns kSuccess or the failing
// status with a message that names the argument (`name` is its path in the params struct).
#pragma once

#include <cstdint>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"

namespace cachestore::detail {

inline bool aligned_to(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}
inline bool product_fits(int64_t a, int64_t b) {
  int64_t out;
  return !__builtin_mul_overflow(a, b, &out);
}

Status check_batch(const Batch& batch);
// Row data (slots, inputs) may be null when there are no rows: nothing is read then.
Status check_slots(const SlotMapping& slots, int64_t rows, const char* name);
// The owner-sharding fields of a paged store's slots, and the global capacity they imply
// (local_capacity * owner_size) without int64 overflow.
Status check_owner(const SlotMapping& slots, int64_t local_capacity, const char* name);
// A bf16 matrix [rows, width] read or written with 16-byte vectors.
Status check_bf16_rows(const void* data, int64_t row_stride, int64_t rows, int64_t width,
                       const char* name, const char* stride_name);
// A row stride that kernels keep in 32 bits (MlaArgs): at most 2^31 - 1 elements when there is
// more than one row. *out: the stride (0 with one row or none, where it is never multiplied).
Status int32_row_stride(int64_t row_stride, int64_t rows, const char* stride_name, int32_t* out);
Status check_index_k_fp8_cache(const IndexKFp8Cache& cache, const char* name);
Status check_index_k_fp4_cache(const IndexKFp4Cache& cache, const char* name);
Status check_mla_cache(const MlaCache& cache, const char* name);
// The smallest page stride of an MLA layout (layout.h), 0 for an unknown layout.
inline int64_t mla_min_page_stride(MlaLayout kind, int64_t page_size) {
  switch (kind) {
    case MlaLayout::kV4: return layout::v4_min_page_stride(page_size);
    case MlaLayout::kV32: return layout::v32_min_page_stride(page_size);
    case MlaLayout::kV41: return layout::split_min_page_stride(layout::kV41Rows, page_size);
    case MlaLayout::kV41Fp4: return layout::split_min_page_stride(layout::kV41Fp4Rows, page_size);
  }
  return 0;
}

// log2 of a page size already checked to be a power of two.
int32_t log2_exact(int64_t power_of_two);

}  // namespace cachestore::detail
