// The C ABI's layout-table queries (cachestore_c.h: the tables of layout.h as C structs) and
// the C spellings of the table's enums.
#include "c_api_support.h"
#include "cachestore/layout.h"

namespace cs = cachestore;
using cs::c_api::table_id;
using cs::c_api::to_c;
using cs::c_api::write_info;

extern "C" {

cachestore_status_t cachestore_mla_layout_info(int32_t layout,
                                               cachestore_mla_layout_info_t* info) {
  const cs::Status id = table_id(layout, cs::layout::kNumMlaLayouts, "layout");
  if (id != cs::Status::kSuccess) return to_c(id);
  const cs::layout::MlaLayoutInfo& l = cs::layout::kMlaLayouts[layout];
  cachestore_mla_layout_info_t out{};
  out.layout = layout;
  out.name = l.name;
  out.nope_dim = l.nope_dim;
  out.rope_dim = cs::layout::kRopeDim;
  out.quantized_values = l.quantized_values;
  out.tile = l.tile;
  out.value_encoding = static_cast<int32_t>(l.values);
  out.scale_encoding = static_cast<int32_t>(l.scales);
  out.rope_quantized = l.rope_quantized ? 1 : 0;
  out.scale_rule_use = static_cast<int32_t>(l.scale_rule);
  out.data_row_bytes = l.rows.data_row;
  out.scale_row_bytes = cs::layout::scale_row_bytes(l.rows);
  out.page_round_bytes = l.rows.page_round;
  return to_c(write_info(out, info, "info"));
}

cachestore_status_t cachestore_index_k_format_info(int32_t format,
                                                   cachestore_index_k_format_info_t* info) {
  const cs::Status id = table_id(format, cs::layout::kNumIndexKFormats, "format");
  if (id != cs::Status::kSuccess) return to_c(id);
  const cs::layout::IndexKFormatInfo& f = cs::layout::kIndexKFormats[format];
  cachestore_index_k_format_info_t out{};
  out.format = format;
  out.name = f.name;
  out.group = f.group;
  out.max_head_dim = f.max_head_dim;
  out.value_encoding = static_cast<int32_t>(f.values);
  out.scale_encoding = static_cast<int32_t>(f.scales);
  out.scale_bytes = f.scale_bytes;
  out.values_per_byte = f.values_per_byte;
  return to_c(write_info(out, info, "info"));
}

cachestore_status_t cachestore_kv_cache_type_info(int32_t cache_type,
                                                  cachestore_kv_cache_type_info_t* info) {
  const cs::Status id = table_id(cache_type, cs::layout::kNumKvCacheTypes, "cache_type");
  if (id != cs::Status::kSuccess) return to_c(id);
  const cs::layout::KvCacheTypeInfo& t = cs::layout::kKvCacheTypes[cache_type];
  cachestore_kv_cache_type_info_t out{};
  out.cache_type = cache_type;
  out.name = t.name;
  out.element_bytes = t.element_bytes;
  out.scaled = t.scaled ? 1 : 0;
  out.head_dim_multiple = t.head_dim_multiple;
  out.values_per_element = t.values_per_element;
  out.block = t.block;
  out.values_per_thread = t.values_per_thread;
  return to_c(write_info(out, info, "info"));
}

cachestore_status_t cachestore_mla_min_page_stride(int32_t layout, int32_t page_size,
                                                   int64_t* bytes) {
  const cs::Status id = table_id(layout, cs::layout::kNumMlaLayouts, "layout");
  if (id != cs::Status::kSuccess) return to_c(id);
  if (page_size < 1 || bytes == nullptr)
    return to_c(cs::detail::fail(cs::Status::kErrorInvalidArgument,
                                 "page_size = %d: must be >= 1, and bytes not null", page_size));
  *bytes = cs::layout::min_page_stride(cs::layout::kMlaLayouts[layout].rows, page_size);
  return to_c(cs::detail::succeed());
}

cachestore_status_t cachestore_index_k_min_page_stride(int32_t format, int32_t page_size,
                                                       int32_t head_dim, int64_t* bytes) {
  const cs::Status id = table_id(format, cs::layout::kNumIndexKFormats, "format");
  if (id != cs::Status::kSuccess) return to_c(id);
  const cs::layout::IndexKFormatInfo& f = cs::layout::kIndexKFormats[format];
  if (page_size < 1 || bytes == nullptr || head_dim <= 0 || head_dim % f.group != 0)
    return to_c(cs::detail::fail(cs::Status::kErrorInvalidArgument,
                                 "page_size = %d, head_dim = %d: page_size >= 1, head_dim a "
                                 "positive multiple of %d, and bytes not null",
                                 page_size, head_dim, f.group));
  *bytes = cs::layout::min_page_stride(cs::layout::index_k_rows(f, head_dim), page_size);
  return to_c(cs::detail::succeed());
}

}  // extern "C"

// The C spellings of the layout table's enums.
static_assert(CACHESTORE_MLA_V4 == static_cast<int>(cs::MlaLayout::kV4) &&
                  CACHESTORE_MLA_V32 == static_cast<int>(cs::MlaLayout::kV32) &&
                  CACHESTORE_MLA_V41 == static_cast<int>(cs::MlaLayout::kV41) &&
                  CACHESTORE_MLA_V41_FP4 == static_cast<int>(cs::MlaLayout::kV41Fp4),
              "MLA layout ids");
static_assert(CACHESTORE_INDEX_K_FP8 == static_cast<int>(cs::IndexKFormat::kFp8) &&
                  CACHESTORE_INDEX_K_FP4 == static_cast<int>(cs::IndexKFormat::kFp4),
              "index-K format ids");
static_assert(CACHESTORE_KV_CACHE_AUTO == static_cast<int>(cs::KvCacheType::kAuto) &&
                  CACHESTORE_KV_CACHE_FP8_E4M3 == static_cast<int>(cs::KvCacheType::kFp8E4m3) &&
                  CACHESTORE_KV_CACHE_FP8_E5M2 == static_cast<int>(cs::KvCacheType::kFp8E5m2),
              "KV cache type ids");
static_assert(CACHESTORE_ROPE_NEOX == static_cast<int>(cs::RopeStyle::kNeox) &&
                  CACHESTORE_ROPE_GPTJ == static_cast<int>(cs::RopeStyle::kGptj) &&
                  CACHESTORE_ROPE_ROUND_INPUT_TYPE ==
                      static_cast<int>(cs::RopeRounding::kInputType) &&
                  CACHESTORE_ROPE_ROUND_FP32 == static_cast<int>(cs::RopeRounding::kFp32),
              "RoPE ids");
static_assert(CACHESTORE_ROPE_COS_SIN_BY_ROW == static_cast<int>(cs::RopeCosSinRows::kByRow) &&
                  CACHESTORE_ROPE_COS_SIN_INTERLEAVED ==
                      static_cast<int>(cs::RopeCosSinLayout::kInterleaved),
              "RoPE cos/sin ids");
static_assert(CACHESTORE_ENCODING_UE8M0 == static_cast<int>(cs::layout::Encoding::kUe8m0) &&
                  CACHESTORE_ENCODING_E2M1 == static_cast<int>(cs::layout::Encoding::kE2m1) &&
                  CACHESTORE_RULE_FIXED == static_cast<int>(cs::layout::RuleUse::kFixed),
              "encoding and rule-use ids");
