// The C ABI: thin conversions to the C++ entry points.
#include "cachestore/cachestore_c.h"

#include <cstddef>
#include <cstring>

#include "cachestore/cachestore.h"
#include "detail/status.h"

namespace cs = cachestore;

namespace {

// A versioned params struct of this header's size with the flat arguments' batch fields.
template <typename T>
T params_with_batch(int64_t num_tokens, const int32_t* n, void* diagnostics, int32_t pdl) {
  T p{};
  p.struct_size = sizeof p;
  p.enable_pdl = pdl;
  p.num_tokens = num_tokens;
  p.num_tokens_non_padded = n;
  p.diagnostics = diagnostics;
  return p;
}

cachestore_slots_t c_slots(const void* data, int32_t type, int64_t reserved) {
  return {data, type, 0, reserved, 1, 0};
}

cachestore_status_t to_c(cs::Status s) { return static_cast<cachestore_status_t>(s); }

// The versioned-struct rule of cachestore_c.h: a caller's struct of `struct_size` bytes is
// copied over a zeroed T (fields it lacks keep their zero defaults); bytes past sizeof(T), which
// a newer header added, must be zero.
template <typename T>
cs::Status read_params(const T* params, const char* name, T* out) {
  if (params == nullptr)
    return cs::detail::fail(cs::Status::kErrorInvalidArgument, "%s is null", name);
  uint32_t size = 0;
  std::memcpy(&size, params, sizeof size);
  constexpr uint32_t kMinimum = offsetof(T, num_tokens) + sizeof(int64_t);
  if (size < kMinimum)
    return cs::detail::fail(cs::Status::kErrorInvalidArgument,
                            "%s->struct_size = %u: set it to sizeof the struct "
                            "(CACHESTORE_PARAMS_INIT)", name, size);
  const auto* bytes = reinterpret_cast<const unsigned char*>(params);
  for (uint32_t i = sizeof(T); i < size; ++i)
    if (bytes[i] != 0)
      return cs::detail::fail(cs::Status::kErrorNotSupported,
                              "%s: byte %u is set, a field this library (%u-byte struct) does not "
                              "know", name, i, static_cast<uint32_t>(sizeof(T)));
  std::memset(out, 0, sizeof(T));
  std::memcpy(out, params, size < sizeof(T) ? size : sizeof(T));
  return cs::Status::kSuccess;
}

template <typename T>
cs::Batch batch_of(const T& p) {
  return {p.num_tokens, p.num_tokens_non_padded, static_cast<cs::Diagnostics*>(p.diagnostics)};
}

cs::SlotMapping slots_of(const cachestore_slots_t& s) {
  return {s.data, static_cast<cs::SlotType>(s.slot_type), s.reserved_slot, s.owner_rank,
          s.owner_size == 0 ? 1 : s.owner_size};
}

cs::IndexKFp8Cache cache_of(const cachestore_index_k_fp8_cache_t& c) {
  return {c.data, c.num_pages, c.page_size, c.page_stride_bytes, c.head_dim,
          static_cast<cs::ScaleRule>(c.scale_rule)};
}

cs::IndexKFp4Cache cache_of(const cachestore_index_k_fp4_cache_t& c) {
  return {c.data, c.num_pages, c.page_size, c.page_stride_bytes, c.head_dim,
          static_cast<cs::Fp4Ties>(c.ties)};
}

#define CACHESTORE_READ_PARAMS(type, params, local)                                  \
  type local;                                                                        \
  do {                                                                               \
    const cs::Status read_status_ = read_params(params, "params", &local);           \
    if (read_status_ != cs::Status::kSuccess) return to_c(read_status_);             \
  } while (0)

// The paged index-K entry points (fp8 and fp4): the same fields, each with its own cache struct.
template <typename Params, typename CParams>
cachestore_status_t store_index_k_paged(const CParams* params, void* stream,
                                        cs::Status (*store)(const Params&, cudaStream_t)) {
  CACHESTORE_READ_PARAMS(CParams, params, c);
  Params p;
  p.batch = batch_of(c);
  p.slots = slots_of(c.slots);
  p.k = c.k;
  p.k_row_stride = c.k_row_stride;
  p.cache = cache_of(c.cache);
  p.launch.enable_pdl = c.enable_pdl != 0;
  return to_c(store(p, static_cast<cudaStream_t>(stream)));
}

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

// The frozen round-1 functions: their arguments in the versioned structs.
cachestore_status_t cachestore_store_index_k_bf16(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* slot_mapping, int32_t slot_type, int64_t reserved_slot, const void* k,
    int64_t k_row_stride, void* cache, int64_t cache_row_stride, int64_t num_slots,
    int32_t head_dim, int32_t enable_pdl, void* stream) {
  auto p = params_with_batch<cachestore_index_k_bf16_params_t>(num_tokens, num_tokens_non_padded,
                                   diagnostics, enable_pdl);
  p.slots = c_slots(slot_mapping, slot_type, reserved_slot);
  p.k = k;
  p.k_row_stride = k_row_stride;
  p.cache = cache;
  p.cache_row_stride = cache_row_stride;
  p.num_slots = num_slots;
  p.head_dim = head_dim;
  return cachestore_store_index_k_bf16_v2(&p, stream);
}

cachestore_status_t cachestore_store_index_k_fp8(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* slot_mapping, int32_t slot_type, int64_t reserved_slot, const void* k,
    int64_t k_row_stride, void* cache, int64_t num_pages, int32_t page_size,
    int64_t page_stride_bytes, int32_t head_dim, int32_t scale_rule, int32_t enable_pdl,
    void* stream) {
  auto p = params_with_batch<cachestore_index_k_fp8_params_t>(num_tokens, num_tokens_non_padded,
                                   diagnostics, enable_pdl);
  p.slots = c_slots(slot_mapping, slot_type, reserved_slot);
  p.k = k;
  p.k_row_stride = k_row_stride;
  p.cache = {cache, num_pages, page_stride_bytes, page_size, head_dim, scale_rule, 0};
  return cachestore_store_index_k_fp8_v2(&p, stream);
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
  auto p = params_with_batch<cachestore_fused_store_params_t>(num_tokens, num_tokens_non_padded,
                                   diagnostics, enable_pdl);
  p.kv_slots = c_slots(kv_slot_mapping, slot_type, kv_reserved_slot);
  p.nope = nope;
  p.nope_row_stride = nope_row_stride;
  p.rope = rope;
  p.rope_row_stride = rope_row_stride;
  p.layout = layout;
  p.kv_scale_rule = kv_scale_rule;
  p.kv_cache = kv_cache;
  p.kv_num_pages = kv_num_pages;
  p.kv_page_stride_bytes = kv_page_stride_bytes;
  p.kv_page_size = kv_page_size;
  p.index_k = index_k;
  p.index_k_row_stride = index_k_row_stride;
  p.index_slots = c_slots(index_slot_mapping, slot_type, index_reserved_slot);
  p.index_cache = {index_cache,     index_num_pages,  index_page_stride_bytes, index_page_size,
                   index_head_dim, index_scale_rule, 0};
  return cachestore_fused_store_cache_v2(&p, stream);
}

cachestore_status_t cachestore_store_index_k_bf16_v2(const cachestore_index_k_bf16_params_t* params,
                                                     void* stream) {
  CACHESTORE_READ_PARAMS(cachestore_index_k_bf16_params_t, params, c);
  cs::IndexKBf16Params p;
  p.batch = batch_of(c);
  p.slots = slots_of(c.slots);
  p.k = c.k;
  p.k_row_stride = c.k_row_stride;
  p.cache = c.cache;
  p.cache_row_stride = c.cache_row_stride;
  p.num_slots = c.num_slots;
  p.head_dim = c.head_dim;
  p.launch.enable_pdl = c.enable_pdl != 0;
  return to_c(cs::store_index_k_bf16(p, static_cast<cudaStream_t>(stream)));
}

cachestore_status_t cachestore_store_index_k_fp8_v2(const cachestore_index_k_fp8_params_t* params,
                                                    void* stream) {
  return store_index_k_paged<cs::IndexKFp8Params>(params, stream, cs::store_index_k_fp8);
}

cachestore_status_t cachestore_store_index_k_fp4(const cachestore_index_k_fp4_params_t* params,
                                                 void* stream) {
  return store_index_k_paged<cs::IndexKFp4Params>(params, stream, cs::store_index_k_fp4);
}

cachestore_status_t cachestore_fused_store_cache_v2(const cachestore_fused_store_params_t* params,
                                                    void* stream) {
  CACHESTORE_READ_PARAMS(cachestore_fused_store_params_t, params, c);
  cs::FusedStoreParams p;
  p.batch = batch_of(c);
  p.kv_slots = slots_of(c.kv_slots);
  p.nope = c.nope;
  p.nope_row_stride = c.nope_row_stride;
  p.rope = c.rope;
  p.rope_row_stride = c.rope_row_stride;
  p.kv_cache = {static_cast<cs::MlaLayout>(c.layout), c.kv_cache, c.kv_num_pages, c.kv_page_size,
                c.kv_page_stride_bytes, static_cast<cs::ScaleRule>(c.kv_scale_rule)};
  if (c.index_k != nullptr) {
    p.index_k = c.index_k;
    p.index_k_row_stride = c.index_k_row_stride;
    p.index_slots = slots_of(c.index_slots);
    p.index_format = static_cast<cs::IndexKFormat>(c.index_format);
    p.index_cache = cache_of(c.index_cache);
    p.index_fp4_cache = cache_of(c.index_fp4_cache);
  }
  p.launch.enable_pdl = c.enable_pdl != 0;
  return to_c(cs::fused_store_cache(p, static_cast<cudaStream_t>(stream)));
}

cachestore_status_t cachestore_store_paged_kv(const cachestore_paged_kv_params_t* params,
                                              void* stream) {
  CACHESTORE_READ_PARAMS(cachestore_paged_kv_params_t, params, c);
  cs::PagedKvParams p;
  p.batch = batch_of(c);
  p.slots = slots_of(c.slots);
  p.num_heads = c.num_heads;
  p.input_type = static_cast<cs::KvDataType>(c.input_type);
  p.cache_type = static_cast<cs::KvCacheType>(c.cache_type);
  p.num_pages = c.num_pages;
  p.page_size = c.page_size;
  const auto side = [](const cachestore_kv_side_t& s, cs::KvInput* in, cs::KvCacheView* cache) {
    *in = {s.data, s.token_stride, s.head_stride, s.head_dim};
    *cache = {s.cache, s.page_stride, s.entry_stride, s.cache_head_stride, s.scale, s.scale_stride};
  };
  side(c.k, &p.k, &p.k_cache);
  if (c.v.data != nullptr) side(c.v, &p.v, &p.v_cache);
  p.launch.enable_pdl = c.enable_pdl != 0;
  return to_c(cs::store_paged_kv(p, static_cast<cudaStream_t>(stream)));
}

}  // extern "C"
