// The C ABI: thin conversions to the C++ entry points.
#include "cachestore/cachestore_c.h"

#include <cstddef>
#include <cstdio>
#include <cstring>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"
#include "cachestore/move.h"
#include "c_api_support.h"
#include "detail/status.h"

namespace cs = cachestore;
using cs::c_api::to_c;

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

// The struct sizes each released cachestore_c.h had, oldest first (the versioned-struct rule:
// only these sizes, or larger ones from a newer header, are read).
template <typename T>
struct ReleasedSizes;
template <>
struct ReleasedSizes<cachestore_index_k_bf16_params_t> {
  static constexpr uint32_t kSizes[] = {112};  // 0.2
};
template <>
struct ReleasedSizes<cachestore_index_k_fp8_params_t> {
  static constexpr uint32_t kSizes[] = {120, 152};  // 0.2; 0.6 appended the page table
};
template <>
struct ReleasedSizes<cachestore_index_k_fp4_params_t> {
  static constexpr uint32_t kSizes[] = {120, 152};  // 0.3; 0.6 appended the page table
};
template <>
struct ReleasedSizes<cachestore_fused_store_params_t> {
  // 0.2; 0.3 the fp4 index-K; 0.6 tables; 0.8 RoPE; 0.9 cos_sin_rows
  static constexpr uint32_t kSizes[] = {224, 272, 336, 464, 472};
};
template <>
struct ReleasedSizes<cachestore_paged_kv_params_t> {
  // 0.2; 0.5 head-dim layouts; 0.6 the page table; 0.7 nvfp4 block scales; 0.8 RoPE;
  // 0.9 cos_sin_rows
  static constexpr uint32_t kSizes[] = {248, 288, 320, 384, 512, 520};
};

template <>
struct ReleasedSizes<cachestore_move_pages_params_t> {
  static constexpr uint32_t kSizes[] = {440};  // 0.9
};

template <typename T>
constexpr bool sizes_end_at_current() {
  constexpr auto& sizes = ReleasedSizes<T>::kSizes;
  return sizes[sizeof sizes / sizeof sizes[0] - 1] == sizeof(T);
}
static_assert(sizes_end_at_current<cachestore_index_k_bf16_params_t>() &&
                  sizes_end_at_current<cachestore_index_k_fp8_params_t>() &&
                  sizes_end_at_current<cachestore_index_k_fp4_params_t>() &&
                  sizes_end_at_current<cachestore_fused_store_params_t>() &&
                  sizes_end_at_current<cachestore_paged_kv_params_t>() &&
                  sizes_end_at_current<cachestore_move_pages_params_t>(),
              "a struct that grows appends its new size to ReleasedSizes");

// The versioned-struct rule of cachestore_c.h: struct_size first; a released size is copied
// over a zeroed T (fields it lacks keep their zero defaults); a larger size, from a newer
// header, must have zeros in the bytes this library does not know; any other size is refused.
template <typename T>
cs::Status read_params(const T* params, const char* name, T* out) {
  if (params == nullptr)
    return cs::detail::fail(cs::Status::kErrorInvalidArgument, "%s is null", name);
  uint32_t size = 0;
  std::memcpy(&size, params, sizeof size);
  bool released = size > sizeof(T);
  for (const uint32_t s : ReleasedSizes<T>::kSizes) released = released || size == s;
  if (!released) {
    char list[64] = "";
    size_t used = 0;
    for (const uint32_t s : ReleasedSizes<T>::kSizes)
      used += std::snprintf(list + used, sizeof list - used, "%s%u", used ? ", " : "", s);
    return cs::detail::fail(cs::Status::kErrorInvalidArgument,
                            "%s->struct_size = %u: not a size of this struct in any release of "
                            "cachestore_c.h (%s); set it to sizeof the struct "
                            "(CACHESTORE_PARAMS_INIT)", name, size, list);
  }
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

cs::SlotMapping slots_of(const cachestore_slots_t& s, const cachestore_page_table_t& t = {}) {
  return {s.data, static_cast<cs::SlotType>(s.slot_type), s.reserved_slot, s.owner_rank,
          s.owner_size == 0 ? 1 : s.owner_size,
          {t.positions, t.indptr, t.indices, t.batch_size}};
}

cs::IndexKFp8Cache cache_of(const cachestore_index_k_fp8_cache_t& c) {
  return {c.data, c.num_pages, c.page_size, c.page_stride_bytes, c.head_dim,
          static_cast<cs::ScaleRule>(c.scale_rule)};
}

cs::IndexKFp4Cache cache_of(const cachestore_index_k_fp4_cache_t& c) {
  return {c.data, c.num_pages, c.page_size, c.page_stride_bytes, c.head_dim,
          static_cast<cs::Fp4Ties>(c.ties)};
}

// The C++ params of each C struct (read_params has read it).
template <typename C, typename Params>
void common_fields(const C& c, Params* p) {
  p->batch = batch_of(c);
  p->launch.enable_pdl = c.enable_pdl != 0;
}

cs::IndexKBf16Params to_cpp(const cachestore_index_k_bf16_params_t& c) {
  cs::IndexKBf16Params p;
  common_fields(c, &p);
  p.slots = slots_of(c.slots);
  p.k = c.k;
  p.k_row_stride = c.k_row_stride;
  p.cache = c.cache;
  p.cache_row_stride = c.cache_row_stride;
  p.num_slots = c.num_slots;
  p.head_dim = c.head_dim;
  return p;
}

// The paged index-K params (fp8 and fp4): the same fields, each with its own cache struct.
template <typename Params, typename C>
Params paged_index_k(const C& c) {
  Params p;
  common_fields(c, &p);
  p.slots = slots_of(c.slots, c.page_table);
  p.k = c.k;
  p.k_row_stride = c.k_row_stride;
  p.cache = cache_of(c.cache);
  return p;
}
cs::IndexKFp8Params to_cpp(const cachestore_index_k_fp8_params_t& c) {
  return paged_index_k<cs::IndexKFp8Params>(c);
}
cs::IndexKFp4Params to_cpp(const cachestore_index_k_fp4_params_t& c) {
  return paged_index_k<cs::IndexKFp4Params>(c);
}

cs::RotaryEmbedding rotary_of(const cachestore_rope_t& r) {
  return {r.positions, static_cast<cs::SlotType>(r.positions_type), r.cos_sin_cache,
          static_cast<cs::KvDataType>(r.cos_sin_type), r.cos_sin_stride, r.max_position,
          r.rotary_dim, static_cast<cs::RopeStyle>(r.style),
          static_cast<cs::RopeRounding>(r.rounding), r.num_query_heads, r.query,
          r.query_token_stride, r.query_head_stride, r.query_out, r.query_out_token_stride,
          r.query_out_head_stride, r.key_out, r.key_out_token_stride, r.key_out_head_stride,
          static_cast<cs::RopeCosSinRows>(r.cos_sin_rows),
          static_cast<cs::RopeCosSinLayout>(r.cos_sin_layout)};
}

cs::FusedStoreParams to_cpp(const cachestore_fused_store_params_t& c) {
  cs::FusedStoreParams p;
  common_fields(c, &p);
  p.kv_slots = slots_of(c.kv_slots, c.kv_page_table);
  p.nope = c.nope;
  p.nope_row_stride = c.nope_row_stride;
  p.rope = c.rope;
  p.rope_row_stride = c.rope_row_stride;
  p.kv_cache = {static_cast<cs::MlaLayout>(c.layout), c.kv_cache, c.kv_num_pages, c.kv_page_size,
                c.kv_page_stride_bytes, static_cast<cs::ScaleRule>(c.kv_scale_rule)};
  if (c.index_k != nullptr) {
    p.index_k = c.index_k;
    p.index_k_row_stride = c.index_k_row_stride;
    p.index_slots = slots_of(c.index_slots, c.index_page_table);
    p.index_format = static_cast<cs::IndexKFormat>(c.index_format);
    p.index_cache = cache_of(c.index_cache);
    p.index_fp4_cache = cache_of(c.index_fp4_cache);
  }
  p.rotary = rotary_of(c.rotary);
  return p;
}

cs::PagedKvParams to_cpp(const cachestore_paged_kv_params_t& c) {
  cs::PagedKvParams p;
  common_fields(c, &p);
  p.slots = slots_of(c.slots, c.page_table);
  p.num_heads = c.num_heads;
  p.input_type = static_cast<cs::KvDataType>(c.input_type);
  p.cache_type = static_cast<cs::KvCacheType>(c.cache_type);
  p.num_pages = c.num_pages;
  p.page_size = c.page_size;
  const auto side = [](const cachestore_kv_side_t& s, int32_t chunk, int64_t chunk_stride,
                       int64_t dim_stride, const cachestore_block_scales_t& b, cs::KvInput* in,
                       cs::KvCacheView* cache) {
    *in = {s.data, s.token_stride, s.head_stride, s.head_dim};
    *cache = {s.cache, s.page_stride, s.entry_stride, s.cache_head_stride, s.scale, s.scale_stride,
              chunk, chunk_stride, dim_stride == 0 ? 1 : dim_stride,
              b.data, b.page_stride, b.entry_stride, b.head_stride};
  };
  side(c.k, c.k_chunk, c.k_chunk_stride, c.k_dim_stride, c.k_block_scales, &p.k, &p.k_cache);
  if (c.v.data != nullptr)
    side(c.v, c.v_chunk, c.v_chunk_stride, c.v_dim_stride, c.v_block_scales, &p.v, &p.v_cache);
  p.rope = rotary_of(c.rope);
  return p;
}

cs::PageSide side_of(const cachestore_page_side_t& c) {
  cs::PageSide s;
  s.data = c.data;
  s.layer_stride = c.layer_stride;
  s.plane_bases = c.plane_bases;
  s.num_pages = c.num_pages;
  s.page_size = c.page_size;
  s.page_ids = c.page_ids;
  s.page_ids_type = static_cast<cs::SlotType>(c.page_ids_type);
  for (int j = 0; j < cs::kMaxPagePlanes; ++j)
    s.planes[j] = {c.planes[j].offset, c.planes[j].page_stride, c.planes[j].token_stride,
                   c.planes[j].head_stride};
  return s;
}

cs::MovePagesParams to_cpp(const cachestore_move_pages_params_t& c) {
  cs::MovePagesParams p;
  p.num_entries = c.num_entries;
  p.num_entries_non_padded = c.num_entries_non_padded;
  p.diagnostics = static_cast<cs::MoveDiagnostics*>(c.diagnostics);
  p.num_layers = c.num_layers;
  p.num_planes = c.num_planes;
  for (int j = 0; j < cs::kMaxPagePlanes; ++j) p.rows[j] = {c.num_heads[j], c.row_bytes[j]};
  p.src = side_of(c.src);
  p.dst = side_of(c.dst);
  p.enable_pdl = c.enable_pdl != 0;
  p.checksums = static_cast<uint32_t*>(c.checksums);
  p.expected_checksums = static_cast<const uint32_t*>(c.expected_checksums);
  return p;
}

// `f(params)` (a store or a check) on the C++ params of a versioned C struct.
template <typename C, typename F>
cachestore_status_t with_params(const C* params, F&& f) {
  C c;
  const cs::Status read = read_params(params, "params", &c);
  if (read != cs::Status::kSuccess) return to_c(read);
  return to_c(f(to_cpp(c)));
}

template <typename C, typename Params>
cachestore_status_t store(const C* params, void* stream,
                          cs::Status (*store_fn)(const Params&, cudaStream_t)) {
  return with_params(params, [&](const Params& p) {
    return store_fn(p, static_cast<cudaStream_t>(stream));
  });
}

template <typename C>
cachestore_status_t check(const C* params) {
  return with_params(params, [](const auto& p) { return cs::check(p); });
}

}  // namespace

static_assert(sizeof(cs::Diagnostics) == 24,
              "diagnostics: three uint64 counters (the third written by RoPE stores only)");

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

// The frozen flat-argument functions (0.1): their arguments in the versioned structs.
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
  return store(params, stream, cs::store_index_k_bf16);
}

cachestore_status_t cachestore_store_index_k_fp8_v2(const cachestore_index_k_fp8_params_t* params,
                                                    void* stream) {
  return store(params, stream, cs::store_index_k_fp8);
}

cachestore_status_t cachestore_store_index_k_fp4(const cachestore_index_k_fp4_params_t* params,
                                                 void* stream) {
  return store(params, stream, cs::store_index_k_fp4);
}

cachestore_status_t cachestore_fused_store_cache_v2(const cachestore_fused_store_params_t* params,
                                                    void* stream) {
  return store(params, stream, cs::fused_store_cache);
}

cachestore_status_t cachestore_store_paged_kv(const cachestore_paged_kv_params_t* params,
                                              void* stream) {
  return store(params, stream, cs::store_paged_kv);
}

cachestore_status_t cachestore_check_index_k_bf16(const cachestore_index_k_bf16_params_t* params) {
  return check(params);
}
cachestore_status_t cachestore_check_index_k_fp8(const cachestore_index_k_fp8_params_t* params) {
  return check(params);
}
cachestore_status_t cachestore_check_index_k_fp4(const cachestore_index_k_fp4_params_t* params) {
  return check(params);
}
cachestore_status_t cachestore_check_fused_store_cache(
    const cachestore_fused_store_params_t* params) {
  return check(params);
}
cachestore_status_t cachestore_check_paged_kv(const cachestore_paged_kv_params_t* params) {
  return check(params);
}

cachestore_status_t cachestore_move_pages(const cachestore_move_pages_params_t* params,
                                          void* stream) {
  return store(params, stream, cs::move_pages);
}

cachestore_status_t cachestore_check_move_pages(const cachestore_move_pages_params_t* params) {
  return check(params);
}

}  // extern "C"
