// torch.ops.cachestore.fused_store_cache: the DeepSeek MLA KV layouts of the layout table, with
// the fp8 or fp4 index-K of the same rows in the same launch (python/cachestore/torch/mla.py has
// the same checks for the Python path and the fake).
#include "cachestore/layout.h"
#include "index_k_ops.h"

namespace cachestore::torch_ops {
namespace {

void fused_store_cache(Tensor nope, Tensor rope, Tensor slot_mapping, Tensor kv_cache,
                       int64_t layout, std::optional<int64_t> page_size,
                       std::optional<int64_t> scale_rule, OptTensor index_k,
                       OptTensor index_slot_mapping, OptTensor index_cache, int64_t index_format,
                       std::optional<int64_t> index_page_size_arg,
                       std::optional<int64_t> index_rule, OptTensor num_tokens_non_padded,
                       int64_t reserved_slot, int64_t index_reserved_slot, int64_t owner_rank,
                       int64_t owner_size, OptTensor diagnostics, bool enable_pdl,
                       OptTensor positions, OptTensor kv_indptr, OptTensor kv_indices,
                       OptTensor query, OptTensor cos_sin_cache, OptTensor rope_positions,
                       bool is_neox, int64_t rope_rounding, OptTensor query_out,
                       OptTensor key_out, int64_t cos_sin_rows, int64_t cos_sin_layout) {
  const BatchOptions o{num_tokens_non_padded, reserved_slot, owner_rank, owner_size, diagnostics,
                       enable_pdl};
  check_id("layout", layout, layout::kNumMlaLayouts);
  const layout::MlaLayoutInfo& info = layout::kMlaLayouts[layout];
  check_rows("nope", nope, info.nope_dim);
  check_rows("rope", rope, layout::kRopeDim);
  if (rope.size(0) != nope.size(0))
    value_error("rope has " + std::to_string(rope.size(0)) + " rows, nope " +
                std::to_string(nope.size(0)));
  check_slots("slot_mapping", slot_mapping, nope.size(0));
  const PageTableTensors table{positions, kv_indptr, kv_indices};
  const bool paged_slots = check_page_table(slot_mapping, table, nope.size(0));
  check_paged_bytes("kv_cache", kv_cache);
  const int64_t rows = nope.size(0);
  const RopeTensors rotary{query,   cos_sin_cache, rope_positions,
                           query_out, key_out,     cos_sin_rows, cos_sin_layout};
  if (check_rope_inputs(rotary, rope_rounding, rows, {})) {
    if (cos_sin_cache->size(1) != layout::kRopeDim)
      value_error("cos_sin_cache has " + std::to_string(cos_sin_cache->size(1)) +
                  " columns; the RoPE part's cos | sin are " + std::to_string(layout::kRopeDim));
    check_rope_outputs(rotary, rows, layout::kRopeDim, rope.scalar_type(), {3}, "rope", rope);
  }
  check_options(o, cos_sin_cache.has_value() ? 3 : 2);
  const int64_t kv_rule = scale_rule.value_or(CACHESTORE_SCALE_POW2);
  const int32_t kv_pages = infer_page_size("kv_cache", page_size, kv_cache, [&](int32_t p) {
    return layout::min_page_stride(static_cast<MlaLayout>(layout), p);
  });
  OptTensor index_slots = index_slot_mapping;  // defaults to slot_mapping with index_k
  int32_t index_pages = 0;
  if (index_k.has_value()) {
    if (!index_cache.has_value()) value_error("index_cache is required with index_k");
    check_rows("index_k", *index_k);
    if (index_k->size(0) != nope.size(0))
      value_error("index_k has " + std::to_string(index_k->size(0)) + " rows, nope " +
                  std::to_string(nope.size(0)));
    if (!index_slots.has_value()) index_slots = slot_mapping;
    check_slots("index_slot_mapping", *index_slots, nope.size(0));
    if (index_slots->scalar_type() != slot_mapping.scalar_type())
      type_error("index_slot_mapping.dtype must equal slot_mapping.dtype");
    check_paged_bytes("index_cache", *index_cache);
    check_id("index_format", index_format, layout::kNumIndexKFormats);
    if (index_rule.has_value()) check_id("index_rule", *index_rule, 2);
    index_pages = index_page_size(static_cast<int32_t>(index_format), "index_cache",
                                  *index_cache, index_page_size_arg, index_k->size(1));
  }
  const int32_t device = same_device(
      {named("nope", nope), named("rope", rope), named("slot_mapping", slot_mapping),
       named("positions", positions), named("kv_indptr", kv_indptr),
       named("kv_indices", kv_indices), named("kv_cache", kv_cache), named("index_k", index_k),
       named("index_slot_mapping", index_slots),
       named("index_cache", index_cache), named("num_tokens_non_padded", num_tokens_non_padded),
       named("diagnostics", diagnostics), named("cos_sin_cache", cos_sin_cache),
       named("rope_positions", rope_positions), named("query", query),
       named("query_out", query_out), named("key_out", key_out)});

  cachestore_fused_store_params_t p;
  CACHESTORE_PARAMS_INIT(p);
  batch_fields(p, nope.size(0), o);
  // One page table for both caches, each at its own page size.
  p.kv_slots = slots_of(slot_mapping, reserved_slot, owner_rank, owner_size, paged_slots);
  p.kv_page_table = page_table_of(table);
  p.nope = nope.data_ptr();
  p.nope_row_stride = nope.stride(0);
  p.rope = rope.data_ptr();
  p.rope_row_stride = rope.stride(0);
  p.layout = static_cast<int32_t>(layout);
  p.kv_scale_rule = static_cast<int32_t>(kv_rule);
  p.kv_cache = kv_cache.data_ptr();
  p.kv_num_pages = kv_cache.size(0);
  p.kv_page_stride_bytes = kv_cache.stride(0);
  p.kv_page_size = kv_pages;
  if (index_k.has_value()) {
    p.index_k = index_k->data_ptr();
    p.index_k_row_stride = index_k->stride(0);
    p.index_slots =
        slots_of(*index_slots, index_reserved_slot, owner_rank, owner_size, paged_slots);
    p.index_page_table = p.kv_page_table;
    p.index_format = static_cast<int32_t>(index_format);
    const int64_t rule = index_rule.value_or(0);  // amax (fp8), ties to even (fp4)
    if (index_format == CACHESTORE_INDEX_K_FP4) {
      p.index_fp4_cache = index_cache_struct<cachestore_index_k_fp4_cache_t>(
          *index_cache, index_pages, index_k->size(1), rule);
    } else {
      p.index_cache = index_cache_struct<cachestore_index_k_fp8_cache_t>(
          *index_cache, index_pages, index_k->size(1), rule);
    }
  }
  p.rotary = rope_struct(rotary, layout::kRopeDim, is_neox, rope_rounding);
  launch(cachestore_fused_store_cache_v2, p, device);
}

}  // namespace
}  // namespace cachestore::torch_ops

using namespace cachestore::torch_ops;  // NOLINT: the registrations below name the ops

STABLE_TORCH_LIBRARY_FRAGMENT(cachestore, m) {
  m.def("fused_store_cache(Tensor nope, Tensor rope, Tensor slot_mapping, Tensor(a!) kv_cache, "
        "int layout=0, int? page_size=None, int? scale_rule=None, Tensor? index_k=None, "
        "Tensor? index_slot_mapping=None, Tensor(b!)? index_cache=None, int index_format=0, "
        "int? index_page_size=None, int? index_rule=None, Tensor? num_tokens_non_padded=None, "
        "int reserved_slot=-1, int index_reserved_slot=-1, int owner_rank=0, int owner_size=1, "
        "Tensor(c!)? diagnostics=None, bool enable_pdl=False, Tensor? positions=None, "
        "Tensor? kv_indptr=None, Tensor? kv_indices=None, Tensor(d!)? query=None, "
        "Tensor? cos_sin_cache=None, Tensor? rope_positions=None, bool is_neox=False, "
        "int rope_rounding=0, Tensor(e!)? query_out=None, Tensor(f!)? key_out=None, "
        "int cos_sin_rows=0, int cos_sin_layout=0) -> ()");
}
void mla_kernels(Library& m) { m.impl("fused_store_cache", TORCH_BOX(&fused_store_cache)); }
CACHESTORE_TORCH_KERNELS(mla_kernels)
