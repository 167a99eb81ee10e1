// The check layer's shared pieces: small predicates and the conversions the launchers reuse,
// and the refusals every family's check shares (check.cpp); each family's checks and its public
// check() overloads of cachestore.h are in check_<family>.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

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

inline long long ll(int64_t v) { return static_cast<long long>(v); }
inline bool aligned16(const void* p) { return aligned_to(p, 16); }

// The shared refusals (check.cpp), each naming the argument `name`.
Status check_batch(const Batch& batch);
Status check_slots(const SlotMapping& slots, int64_t rows, const char* name, bool paged);
Status check_owner(const SlotMapping& slots, int64_t local_capacity, const char* name);
Status check_bf16_rows(const void* data, int64_t row_stride, int64_t rows, int64_t width,
                       const char* name, const char* stride_name);
Status check_int32_row_stride(int64_t row_stride, int64_t rows, const char* stride_name);
Status check_page_size(int32_t page_size, const char* name);
Status check_paged_cache(void* data, int64_t num_pages, int32_t page_size,
                         int64_t page_stride_bytes, int64_t min_page_stride,
                         int64_t stride_alignment, const char* name);
Status check_cache(const IndexKFp8Cache& cache, const char* name);
Status check_cache(const IndexKFp4Cache& cache, const char* name);
Status check_cache(const MlaCache& cache, const char* name);

// The input a store rotates (K, or an MLA row's RoPE part): key_out must match it.
struct RotatedInput {
  const void* data;
  int64_t token_stride;
  int64_t head_stride;
  int32_t heads;
  int32_t head_dim;
  int64_t elem_bytes;
  int64_t rows;
};
Status check_rope_tensor(const void* data, int64_t token_stride, int64_t head_stride,
                         int32_t heads, int64_t elem_bytes, int64_t rows, const char* name);
Status check_rotation(const RotaryEmbedding& r, const char* name, const RotatedInput& k);
Status check_style_and_rounding(const RotaryEmbedding& r, const char* name);

// The nested-stride rule, by which no two elements of a strided view overlap: the dimensions,
// (stride, count) pairs, nested by stride, each stride of a dimension with more than one index
// at least the extent of everything finer (what every layout of the contract does; sufficient,
// not necessary). `extent` is the span of everything finer at the first failure, or of the
// whole view; kOverflow: that span overflows int64.
struct NestedStrides {
  enum Verdict { kOk, kOverlap, kOverflow } verdict;
  int64_t stride;  // kOverlap: the dimension that overlaps
  int64_t count;
  int64_t extent;
};
template <size_t kDims>
NestedStrides nested_strides(std::array<std::pair<int64_t, int64_t>, kDims> dims) {
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;  // one element, then the nested blocks
  for (const auto& [stride, count] : dims) {
    if (count <= 1) continue;
    if (stride < extent) return {NestedStrides::kOverlap, stride, count, extent};
    if (!product_fits(count - 1, stride) || extent > INT64_MAX - (count - 1) * stride)
      return {NestedStrides::kOverflow, stride, count, extent};
    extent += (count - 1) * stride;
  }
  return {NestedStrides::kOk, 0, 0, extent};
}

// log2 of a size already checked to be a power of two.
int32_t log2_exact(int64_t power_of_two);

// A row stride the MLA kernels keep in 32 bits (kernels::MlaArgs): the stride, or 0 with one
// row or none, where it is never multiplied. check(FusedStoreParams) has refused a larger one.
inline int32_t int32_row_stride(int64_t row_stride, int64_t rows) {
  return rows <= 1 ? 0 : static_cast<int32_t>(row_stride);
}

}  // namespace cachestore::detail
