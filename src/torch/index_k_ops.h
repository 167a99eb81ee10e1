// The index-K pieces the MLA ops reuse for their fused index-K.
#pragma once

#include "op_support.h"

namespace cachestore::torch_ops {

// The page size of an index-K cache: given, or inferred from its bytes per page.
int32_t index_page_size(int32_t format, const char* name, const Tensor& cache,
                        std::optional<int64_t> page_size, int64_t head_dim);

// The C description of an index-K cache tensor; `rule` is the fp8 scale rule or the fp4 ties.
template <class Cache>
Cache index_cache_struct(const Tensor& cache, int32_t page_size, int64_t head_dim, int64_t rule);

}  // namespace cachestore::torch_ops
