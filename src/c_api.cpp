// The C ABI: thin conversions to the C++ entry points.
#include "cachestore/cachestore_c.h"

#include "cachestore/cachestore.h"

namespace cs = cachestore;

namespace {

cs::Batch batch(int64_t num_tokens, const int32_t* n, void* diagnostics) {
  return {num_tokens, n, static_cast<cs::Diagnostics*>(diagnostics)};
}

cs::SlotMapping slots(const void* data, int32_t type, int64_t reserved) {
  return {data, static_cast<cs::SlotType>(type), reserved};
}

cachestore_status_t to_c(cs::Status s) { return static_cast<cachestore_status_t>(s); }

}  // namespace

static_assert(sizeof(cs::Diagnostics) == 16, "diagnostics: two uint64 counters");

extern "C" {

const char* cachestore_status_string(cachestore_status_t status) {
  return cs::status_string(static_cast<cs::Status>(status));
}

const char* cachestore_last_error_message(void) { return cs::last_error_message(); }

int32_t cachestore_version(void) { return cs::version(); }

cachestore_status_t cachestore_query_device(int32_t device, int32_t* path,
                                            int32_t* binary_version,
                                            int32_t* compute_capability) {
  cs::DeviceInfo info;
  const cs::Status s = cs::query_device(device, &info);
  if (s != cs::Status::kSuccess) return to_c(s);
  if (path != nullptr) *path = static_cast<int32_t>(info.path);
  if (binary_version != nullptr) *binary_version = info.binary_version;
  if (compute_capability != nullptr) *compute_capability = info.compute_capability;
  return CACHESTORE_SUCCESS;
}

cachestore_status_t cachestore_store_index_k_bf16(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* slot_mapping, int32_t slot_type, int64_t reserved_slot, const void* k,
    int64_t k_row_stride, void* cache, int64_t cache_row_stride, int64_t num_slots,
    int32_t head_dim, int32_t enable_pdl, void* stream) {
  cs::IndexKBf16Params p;
  p.batch = batch(num_tokens, num_tokens_non_padded, diagnostics);
  p.slots = slots(slot_mapping, slot_type, reserved_slot);
  p.k = k;
  p.k_row_stride = k_row_stride;
  p.cache = cache;
  p.cache_row_stride = cache_row_stride;
  p.num_slots = num_slots;
  p.head_dim = head_dim;
  p.launch.enable_pdl = enable_pdl != 0;
  return to_c(cs::store_index_k_bf16(p, static_cast<cudaStream_t>(stream)));
}

cachestore_status_t cachestore_store_index_k_fp8(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* slot_mapping, int32_t slot_type, int64_t reserved_slot, const void* k,
    int64_t k_row_stride, void* cache, int64_t num_pages, int32_t page_size,
    int64_t page_stride_bytes, int32_t head_dim, int32_t scale_rule, int32_t enable_pdl,
    void* stream) {
  cs::IndexKFp8Params p;
  p.batch = batch(num_tokens, num_tokens_non_padded, diagnostics);
  p.slots = slots(slot_mapping, slot_type, reserved_slot);
  p.k = k;
  p.k_row_stride = k_row_stride;
  p.cache = {cache, num_pages, page_size, page_stride_bytes, head_dim,
             static_cast<cs::ScaleRule>(scale_rule)};
  p.launch.enable_pdl = enable_pdl != 0;
  return to_c(cs::store_index_k_fp8(p, static_cast<cudaStream_t>(stream)));
}

cachestore_status_t cachestore_fused_store_cache(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* kv_slot_mapping, int32_t slot_type, int64_t kv_reserved_slot, const void* nope,
    int64_t nope_row_stride, const void* rope, int64_t rope_row_stride, int32_t layout,
    void* kv_cache, int64_t kv_num_pages, int32_t kv_page_size, int64_t kv_page_stride_bytes,
    int32_t kv_scale_rule, const void* index_k, int64_t index_k_row_stride,
    const void* index_slot_mapping, int64_t index_reserved_slot, void* index_cache,
    int64_t index_num_pages, int32_t index_page_size, int64_t index_page_stride_bytes,
    int32_t index_head_dim, int32_t index_scale_rule, int32_t enable_pdl, void* stream) {
  cs::FusedStoreParams p;
  p.batch = batch(num_tokens, num_tokens_non_padded, diagnostics);
  p.kv_slots = slots(kv_slot_mapping, slot_type, kv_reserved_slot);
  p.nope = nope;
  p.nope_row_stride = nope_row_stride;
  p.rope = rope;
  p.rope_row_stride = rope_row_stride;
  p.kv_cache = {static_cast<cs::MlaLayout>(layout), kv_cache, kv_num_pages, kv_page_size,
                kv_page_stride_bytes, static_cast<cs::ScaleRule>(kv_scale_rule)};
  if (index_k != nullptr) {
    p.index_k = index_k;
    p.index_k_row_stride = index_k_row_stride;
    p.index_slots = slots(index_slot_mapping, slot_type, index_reserved_slot);
    p.index_cache = {index_cache, index_num_pages, index_page_size, index_page_stride_bytes,
                     index_head_dim, static_cast<cs::ScaleRule>(index_scale_rule)};
  }
  p.launch.enable_pdl = enable_pdl != 0;
  return to_c(cs::fused_store_cache(p, static_cast<cudaStream_t>(stream)));
}

}  // extern "C"
