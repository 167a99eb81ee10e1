// torch.ops.cachestore.store_index_k_bf16 / _fp8 / _fp4 (python/cachestore/torch/index_k.py
// has the same checks for the Python path and the fake).
#include "index_k_ops.h"

#include <type_traits>

namespace cachestore::torch_ops {
namespace {

void store_index_k_bf16(Tensor k, Tensor slot_mapping, Tensor cache,
                        OptTensor num_tokens_non_padded, int64_t reserved_slot,
                        OptTensor diagnostics, bool enable_pdl) {
  const BatchOptions o{num_tokens_non_padded, reserved_slot, 0, 1, diagnostics, enable_pdl};
  check_rows("k", k);
  check_slots("slot_mapping", slot_mapping, k.size(0));
  check_tensor("cache", cache, {ScalarType::BFloat16}, {2});
  if (cache.size(1) != k.size(1) || (cache.size(1) > 1 && cache.stride(1) != 1))
    value_error("cache must be [num_slots, " + std::to_string(k.size(1)) +
                "] with contiguous rows, got " + tuple_string(cache.sizes()) + " strides " +
                tuple_string(cache.strides()));
  check_options(o);
  const int32_t device =
      same_device({named("k", k), named("slot_mapping", slot_mapping), named("cache", cache),
                   named("num_tokens_non_padded", num_tokens_non_padded),
                   named("diagnostics", diagnostics)});
  cachestore_index_k_bf16_params_t p;
  CACHESTORE_PARAMS_INIT(p);
  batch_fields(p, k.size(0), o);
  p.slots = slots_of(slot_mapping, reserved_slot);
  p.k = k.data_ptr();
  p.k_row_stride = k.stride(0);
  p.cache = cache.data_ptr();
  p.cache_row_stride = cache.stride(0);
  p.num_slots = cache.size(0);
  p.head_dim = static_cast<int32_t>(k.size(1));
  launch(cachestore_store_index_k_bf16_v2, p, device);
}

}  // namespace

int32_t index_page_size(int32_t format, const char* name, const Tensor& cache,
                        std::optional<int64_t> page_size, int64_t head_dim) {
  return infer_page_size(name, page_size, cache, [&](int32_t p) {
    int64_t bytes = 0;
    check_status(cachestore_index_k_min_page_stride(format, p, static_cast<int32_t>(head_dim),
                                                    &bytes));
    return bytes;
  });
}

template <class Cache>
Cache index_cache_struct(const Tensor& cache, int32_t page_size, int64_t head_dim, int64_t rule) {
  Cache c{};
  c.data = cache.data_ptr();
  c.num_pages = cache.size(0);
  c.page_stride_bytes = cache.stride(0);
  c.page_size = page_size;
  c.head_dim = static_cast<int32_t>(head_dim);
  if constexpr (std::is_same_v<Cache, cachestore_index_k_fp4_cache_t>) {
    c.ties = static_cast<int32_t>(rule);
  } else {
    c.scale_rule = static_cast<int32_t>(rule);
  }
  return c;
}
template cachestore_index_k_fp8_cache_t index_cache_struct(const Tensor&, int32_t, int64_t,
                                                           int64_t);
template cachestore_index_k_fp4_cache_t index_cache_struct(const Tensor&, int32_t, int64_t,
                                                           int64_t);

namespace {

template <int32_t kFormat>
void store_index_k_paged(Tensor k, Tensor slot_mapping, Tensor cache,
                         std::optional<int64_t> page_size, int64_t rule,
                         OptTensor num_tokens_non_padded, int64_t reserved_slot,
                         int64_t owner_rank, int64_t owner_size, OptTensor diagnostics,
                         bool enable_pdl, OptTensor positions, OptTensor kv_indptr,
                         OptTensor kv_indices) {
  const BatchOptions o{num_tokens_non_padded, reserved_slot, owner_rank, owner_size, diagnostics,
                       enable_pdl};
  check_rows("k", k);
  check_slots("slot_mapping", slot_mapping, k.size(0));
  const PageTableTensors table{positions, kv_indptr, kv_indices};
  const bool paged_slots = check_page_table(slot_mapping, table, k.size(0));
  check_paged_bytes("cache", cache);
  check_options(o);
  const int32_t pages = index_page_size(kFormat, "cache", cache, page_size, k.size(1));
  const int32_t device =
      same_device({named("k", k), named("slot_mapping", slot_mapping),
                   named("positions", positions), named("kv_indptr", kv_indptr),
                   named("kv_indices", kv_indices), named("cache", cache),
                   named("num_tokens_non_padded", num_tokens_non_padded),
                   named("diagnostics", diagnostics)});
  using Params = std::conditional_t<kFormat == CACHESTORE_INDEX_K_FP4,
                                    cachestore_index_k_fp4_params_t,
                                    cachestore_index_k_fp8_params_t>;
  Params p;
  CACHESTORE_PARAMS_INIT(p);
  batch_fields(p, k.size(0), o);
  p.slots = slots_of(slot_mapping, reserved_slot, owner_rank, owner_size, paged_slots);
  p.page_table = page_table_of(table);
  p.k = k.data_ptr();
  p.k_row_stride = k.stride(0);
  p.cache = index_cache_struct<decltype(p.cache)>(cache, pages, k.size(1), rule);
  if constexpr (kFormat == CACHESTORE_INDEX_K_FP4) {
    launch(cachestore_store_index_k_fp4, p, device);
  } else {
    launch(cachestore_store_index_k_fp8_v2, p, device);
  }
}

}  // namespace
}  // namespace cachestore::torch_ops

using namespace cachestore::torch_ops;  // NOLINT: the registrations below name the ops

STABLE_TORCH_LIBRARY_FRAGMENT(cachestore, m) {
  m.def("store_index_k_bf16(Tensor k, Tensor slot_mapping, Tensor(a!) cache, "
        "Tensor? num_tokens_non_padded=None, int reserved_slot=-1, "
        "Tensor(b!)? diagnostics=None, bool enable_pdl=False) -> ()");
  m.def("store_index_k_fp8(Tensor k, Tensor slot_mapping, Tensor(a!) cache, "
        "int? page_size=None, int scale_rule=0, " CACHESTORE_BATCH_SCHEMA("b") ") -> ()");
  m.def("store_index_k_fp4(Tensor k, Tensor slot_mapping, Tensor(a!) cache, "
        "int? page_size=None, int ties=0, " CACHESTORE_BATCH_SCHEMA("b") ") -> ()");
}

void index_k_kernels(Library& m) {
  m.impl("store_index_k_bf16", TORCH_BOX(&store_index_k_bf16));
  m.impl("store_index_k_fp8", TORCH_BOX(&store_index_k_paged<CACHESTORE_INDEX_K_FP8>));
  m.impl("store_index_k_fp4", TORCH_BOX(&store_index_k_paged<CACHESTORE_INDEX_K_FP4>));
}
CACHESTORE_TORCH_KERNELS(index_k_kernels)
