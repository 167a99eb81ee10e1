// torch.ops.cachestore.store_paged_kv: K/V of MHA / GQA / MQA models into paged caches of any
// strides (python/cachestore/torch/paged_kv.py has the same checks for the Python path and the
// fake).
#include "cachestore/layout.h"
#include "op_support.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace cachestore::torch_ops {
namespace {

// op-level `layout`: 0 NHD [pages, P, H, D], 1 HND [pages, H, P, D], 2 vLLM's paged attention
// (K [pages, H, D / x, P, x], V [pages, H, D, P]).
constexpr int64_t kNhd = 0, kPagedAttention = 2;
constexpr const char* kLayoutNames[] = {"nhd", "hnd", "paged_attention"};

std::string quoted(const char* name) { return std::string("'") + name + "'"; }
const char* cache_type_name(int64_t type) { return layout::kKvCacheTypes[type].name; }

// The input dtypes, which an auto cache holds as they are.
bool is_input_type(ScalarType t) {
  return t == ScalarType::BFloat16 || t == ScalarType::Half || t == ScalarType::Float;
}

// The cache type a side's cache tensor holds (checked against kv_cache_dtype).
int64_t side_cache_type(std::optional<int64_t> kv_cache_dtype, const char* cache_name,
                        const Tensor& cache, const Tensor& x, bool block_scales) {
  const ScalarType dtype = cache.scalar_type();
  int64_t side;
  if (kv_cache_dtype == CACHESTORE_KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD) {
    if (dtype != ScalarType::Float8_e4m3fn && dtype != ScalarType::Byte)
      type_error(std::string(cache_name) + ".dtype " + dtype_name(dtype) + ": an " +
                 cache_type_name(*kv_cache_dtype) + " cache is float8_e4m3fn (or uint8)");
    return *kv_cache_dtype;
  }
  if (block_scales && dtype != ScalarType::Byte)
    type_error(std::string(cache_name) + ".dtype " + dtype_name(dtype) +
               ": an nvfp4 cache (block scales given) is uint8");
  if (is_input_type(dtype)) {
    if (dtype != x.scalar_type())
      type_error(std::string(cache_name) + ".dtype " + dtype_name(dtype) +
                 ": an auto cache holds the input type " + dtype_name(x.scalar_type()));
    side = CACHESTORE_KV_CACHE_AUTO;
  } else if (dtype == ScalarType::Float8_e4m3fn) {
    side = CACHESTORE_KV_CACHE_FP8_E4M3;
  } else if (dtype == ScalarType::Float8_e5m2) {
    side = CACHESTORE_KV_CACHE_FP8_E5M2;
  } else if (block_scales) {  // uint8 with block scales: nvfp4 codes
    side = CACHESTORE_KV_CACHE_NVFP4;
  } else {
    if (kv_cache_dtype != CACHESTORE_KV_CACHE_FP8_E4M3 &&
        kv_cache_dtype != CACHESTORE_KV_CACHE_FP8_E5M2 &&
        kv_cache_dtype != CACHESTORE_KV_CACHE_NVFP4)
      value_error(std::string(cache_name) + " is uint8: pass kv_cache_dtype=" +
                  quoted(cache_type_name(CACHESTORE_KV_CACHE_FP8_E4M3)) + ", " +
                  quoted(cache_type_name(CACHESTORE_KV_CACHE_FP8_E5M2)) + " or " +
                  quoted(cache_type_name(CACHESTORE_KV_CACHE_NVFP4)));
    side = *kv_cache_dtype;
  }
  if (kv_cache_dtype.has_value() && *kv_cache_dtype != CACHESTORE_KV_CACHE_AUTO &&
      side != *kv_cache_dtype)
    value_error("kv_cache_dtype = " + quoted(cache_type_name(*kv_cache_dtype)) +
                " does not match " + cache_name + ".dtype " + dtype_name(dtype));
  return side;
}

// (heads, head dim) a cache tensor holds in `layout`, or (-1, -1) where its rank does not fit:
// [pages, P, D] (one head, any layout); NHD / HND 4-D; paged attention K [pages, H, D / x, P,
// x], V [pages, H, D, P].
std::pair<int64_t, int64_t> heads_and_dim(const Tensor& cache, int64_t layout, bool is_key) {
  const int64_t dim = cache.dim();
  if (dim == 3) return {1, cache.size(2)};
  if (layout == kPagedAttention) {
    if (is_key) return dim == 5 ? std::pair{cache.size(1), cache.size(2) * cache.size(4)}
                                : std::pair<int64_t, int64_t>{-1, -1};
    return dim == 4 ? std::pair{cache.size(1), cache.size(2)} : std::pair<int64_t, int64_t>{-1, -1};
  }
  if (dim != 4) return {-1, -1};
  return layout == kNhd ? std::pair{cache.size(2), cache.size(3)}
                        : std::pair{cache.size(1), cache.size(3)};
}

struct Side {
  bool is_key;
  const char* x_name;
  const Tensor* x;
  const char* cache_name;
  const OptTensor& cache;
  const char* scale_name;
  const OptTensor& scale;
  const char* block_scale_name;
  const OptTensor& block_scale;
};

// One side's checks; returns its cache type.
int64_t check_side(const Side& s, const Tensor& key, int64_t layout,
                   std::optional<int64_t> kv_cache_dtype) {
  const Tensor& x = *s.x;
  check_tensor(s.x_name, x, {ScalarType::BFloat16, ScalarType::Half, ScalarType::Float}, {2, 3});
  if (x.scalar_type() != key.scalar_type())
    type_error(std::string(s.x_name) + ".dtype " + dtype_name(x.scalar_type()) +
               " differs from key.dtype " + dtype_name(key.scalar_type()));
  if (x.stride(-1) != 1)
    value_error(std::string(s.x_name) + ": the last dimension must be contiguous");
  if (x.size(0) != key.size(0))
    value_error(std::string(s.x_name) + " has " + std::to_string(x.size(0)) + " rows, key " +
                std::to_string(key.size(0)));
  if (!s.cache.has_value())
    value_error(std::string(s.cache_name) + " is required with " + s.x_name);
  const Tensor& cache = *s.cache;
  check_tensor(s.cache_name, cache,
               {ScalarType::BFloat16, ScalarType::Half, ScalarType::Float, ScalarType::Byte,
                ScalarType::Float8_e4m3fn, ScalarType::Float8_e5m2},
               {3, 4, 5});
  const int64_t heads = x.dim() == 3 ? x.size(1) : 1;
  const int64_t head_dim = x.size(-1);
  const int64_t side = side_cache_type(kv_cache_dtype, s.cache_name, cache, x,
                                       s.block_scale.has_value());
  // nvfp4: the cache holds D / 2 bytes an entry (two codes a byte), a block scale per 16.
  const layout::KvCacheTypeInfo& type = layout::kKvCacheTypes[side];
  const int64_t per = type.values_per_element, block = type.block;
  if (block != 0 && layout == kPagedAttention)
    value_error(std::string(s.cache_name) + ": an nvfp4 cache takes layout 'nhd' or 'hnd'");
  if (block != 0 && head_dim % block != 0)
    value_error(std::string(s.x_name) + ": an nvfp4 cache needs a head dim that is a multiple "
                "of " + std::to_string(block) + ", got " + std::to_string(head_dim));
  auto [got_heads, got_dim] = heads_and_dim(cache, layout, s.is_key);
  got_dim *= per;
  if (cache.dim() == 3 && heads != 1)
    value_error(std::string(s.cache_name) + " is [pages, P, D] (one head) but " + s.x_name +
                " has " + std::to_string(heads) + " heads");
  if (got_heads != heads || got_dim != head_dim)
    value_error(std::string(s.cache_name) + " " + tuple_string(cache.sizes()) +
                " does not hold " + s.x_name + "'s " + std::to_string(heads) + " heads of " +
                std::to_string(head_dim) + " in layout " + quoted(kLayoutNames[layout]));
  if ((cache.dim() == 3 || layout != kPagedAttention) && cache.stride(-1) != 1)
    value_error(std::string(s.cache_name) + ": the last dimension must be contiguous");
  if (type.token_head_scales) {
    // The fp32 scale of each (slot, head): the cache's shape without its head dim.
    if (layout == kPagedAttention)
      value_error(std::string(s.cache_name) + ": an " + type.name +
                  " cache takes layout 'nhd' or 'hnd'");
    if (!s.block_scale.has_value())
      value_error(std::string(s.block_scale_name) + " is required for an " + type.name +
                  " cache (its fp32 scale of each slot and head)");
    const Tensor& bs = *s.block_scale;
    check_tensor(s.block_scale_name, bs, {ScalarType::Float}, {2, 3});
    bool fits = bs.dim() + 1 == cache.dim();
    for (int64_t i = 0; fits && i < bs.dim(); ++i) fits = bs.size(i) == cache.size(i);
    if (!fits)
      value_error(std::string(s.block_scale_name) + " " + tuple_string(bs.sizes()) +
                  " must be " + s.cache_name + "'s shape without its head dim, float32");
  }
  if (block != 0) {
    if (!s.block_scale.has_value())
      value_error(std::string(s.block_scale_name) + " is required for an nvfp4 cache");
    const Tensor& bs = *s.block_scale;
    check_tensor(s.block_scale_name, bs, {ScalarType::Byte, ScalarType::Float8_e4m3fn}, {3, 4});
    // The cache's shape with head_dim / block in place of head_dim / per.
    bool fits = bs.dim() == cache.dim() && bs.size(-1) * block == head_dim && bs.stride(-1) == 1;
    for (int64_t i = 0; fits && i + 1 < bs.dim(); ++i) fits = bs.size(i) == cache.size(i);
    if (!fits)
      value_error(std::string(s.block_scale_name) + " " + tuple_string(bs.sizes()) +
                  " must be " + s.cache_name + "'s pages with head dim / " +
                  std::to_string(block) + " = " + std::to_string(head_dim / block) +
                  " e4m3 bytes, the last dimension contiguous");
  }
  return side;
}

void check_scale(const Side& s, int64_t heads) {
  if (!s.scale.has_value())
    value_error(std::string(s.scale_name) + " is required for an fp8 or nvfp4 cache");
  const Tensor& scale = *s.scale;
  check_tensor(s.scale_name, scale, {ScalarType::Float}, {0, 1});
  if ((scale.numel() != 1 && scale.numel() != heads) || !scale.is_contiguous())
    value_error(std::string(s.scale_name) + " must hold 1 or " + std::to_string(heads) +
                " (one per head) float32");
}

// (entry, head) strides of a cache tensor in `layout`: [pages, P, D] (one head), NHD, HND, or
// vLLM's paged attention (entries at dim 3, heads at dim 1).
std::pair<int64_t, int64_t> entry_and_head_strides(const Tensor& cache, int64_t layout) {
  if (cache.dim() == 3) return {cache.stride(1), cache.size(-1)};
  if (layout == kPagedAttention) return {cache.stride(3), cache.stride(1)};
  if (layout == kNhd) return {cache.stride(1), cache.stride(2)};
  return {cache.stride(2), cache.stride(1)};
}

// One side's C description and its head-dim layout (chunk, chunk stride, d stride).
cachestore_kv_side_t side_struct(const Tensor& x, const Tensor& cache, int64_t layout,
                                 const OptTensor& scale, bool is_key, int32_t* chunk,
                                 int64_t* chunk_stride, int64_t* dim_stride) {
  cachestore_kv_side_t side{};
  side.data = x.data_ptr();
  side.token_stride = x.stride(0);
  side.head_dim = static_cast<int32_t>(x.size(-1));
  side.head_stride = x.dim() == 3 ? x.stride(1) : x.size(-1);
  side.cache = cache.data_ptr();
  side.page_stride = cache.stride(0);
  std::tie(side.entry_stride, side.cache_head_stride) = entry_and_head_strides(cache, layout);
  *chunk = 0;
  *chunk_stride = 0;
  *dim_stride = 1;
  if (cache.dim() != 3 && layout == kPagedAttention) {
    if (is_key) {
      *chunk = static_cast<int32_t>(cache.size(4));
      *chunk_stride = cache.stride(2);
      *dim_stride = cache.stride(4);
    } else {
      *dim_stride = cache.stride(2);
    }
  }
  if (scale.has_value()) {
    side.scale = static_cast<const float*>(scale->data_ptr());
    side.scale_stride = scale->numel() == 1 ? 0 : 1;
  }
  return side;
}

// An nvfp4 side's block-scale view: the strides of its tensor in the cache's layout (bytes).
cachestore_block_scales_t block_scales_struct(const Tensor& bs, int64_t layout) {
  cachestore_block_scales_t out{};
  out.data = bs.data_ptr();
  out.page_stride = bs.stride(0);
  std::tie(out.entry_stride, out.head_stride) = entry_and_head_strides(bs, layout);
  return out;
}

// An fp8_e4m3_per_token_head side's scale view: [pages, P, H] (NHD), [pages, H, P] (HND) or
// [pages, P] (one head), strides in fp32 elements.
cachestore_block_scales_t token_head_scales_struct(const Tensor& bs, int64_t layout) {
  cachestore_block_scales_t out{};
  out.data = bs.data_ptr();
  out.page_stride = bs.stride(0);
  if (bs.dim() == 2) {
    out.entry_stride = bs.stride(1);
  } else if (layout == kNhd) {
    out.entry_stride = bs.stride(1);
    out.head_stride = bs.stride(2);
  } else {
    out.entry_stride = bs.stride(2);
    out.head_stride = bs.stride(1);
  }
  return out;
}

// RoPE in the store (cos_sin_cache given): its tensors' checks; resolves rotary_dim (default:
// the cache's width).
void check_rope(const RopeTensors& r, std::optional<int64_t>& rotary_dim, const Tensor& key,
                int64_t rounding) {
  const int64_t rows = key.size(0), head_dim = key.size(-1);
  if (!check_rope_inputs(r, rounding, rows, {{"rotary_dim", rotary_dim.has_value()}})) return;
  const Tensor& cs = *r.cos_sin_cache;
  if (!rotary_dim.has_value()) rotary_dim = cs.size(1);
  const int64_t rot = *rotary_dim;
  if (rot <= 0 || rot > std::min(cs.size(1), head_dim) || rot % 2 != 0)
    value_error("rotary_dim = " + std::to_string(rot) + ": must be even, at most "
                "cos_sin_cache's width " + std::to_string(cs.size(1)) + " and the head dim " +
                std::to_string(head_dim));
  check_rope_outputs(r, rows, head_dim, key.scalar_type(), {2, 3}, "key", key);
}

void store_paged_kv(Tensor key, OptTensor value, Tensor slot_mapping, Tensor key_cache,
                    OptTensor value_cache, int64_t layout, std::optional<int64_t> kv_cache_dtype,
                    OptTensor k_scale, OptTensor v_scale, OptTensor num_tokens_non_padded,
                    int64_t reserved_slot, int64_t owner_rank, int64_t owner_size,
                    OptTensor diagnostics, bool enable_pdl, OptTensor positions,
                    OptTensor kv_indptr, OptTensor kv_indices, OptTensor key_block_scale,
                    OptTensor value_block_scale, OptTensor query, OptTensor cos_sin_cache,
                    OptTensor rope_positions, std::optional<int64_t> rotary_dim, bool is_neox,
                    int64_t rope_rounding, OptTensor query_out, OptTensor key_out) {
  const BatchOptions o{num_tokens_non_padded, reserved_slot, owner_rank, owner_size, diagnostics,
                       enable_pdl};
  check_id("layout", layout, 3);
  if (kv_cache_dtype.has_value()) check_id("kv_cache_dtype", *kv_cache_dtype,
                                           layout::kNumKvCacheTypes);
  const OptTensor key_cache_opt(key_cache);
  const Side k_side{true,      "key",           &key,           "key_cache", key_cache_opt,
                    "k_scale", k_scale,         "key_block_scale", key_block_scale};
  const Side v_side{false,     "value",         value.has_value() ? &*value : nullptr,
                    "value_cache", value_cache, "v_scale",       v_scale,
                    "value_block_scale", value_block_scale};
  if (!value.has_value() && value_cache.has_value())
    value_error("value_cache given without value");
  if (!value.has_value() && value_block_scale.has_value())
    value_error("value_block_scale given without value");
  int64_t cache_type = -1;
  for (const Side* s : {&k_side, &v_side}) {
    if (s->x == nullptr) continue;
    const int64_t side = check_side(*s, key, layout, kv_cache_dtype);
    if (cache_type >= 0 && side != cache_type)
      type_error("key_cache and value_cache must have the same cache type");
    cache_type = side;
    if (layout::kKvCacheTypes[side].scaled) check_scale(*s, s->x->dim() == 3 ? s->x->size(1) : 1);
  }
  check_slots("slot_mapping", slot_mapping, key.size(0));
  const PageTableTensors table{positions, kv_indptr, kv_indices};
  const bool paged_slots = check_page_table(slot_mapping, table, key.size(0));
  const RopeTensors rope{query, cos_sin_cache, rope_positions, query_out, key_out};
  check_rope(rope, rotary_dim, key, rope_rounding);
  check_options(o, cos_sin_cache.has_value() ? 3 : 2);
  const int32_t device = same_device(
      {named("key", key), named("value", value), named("slot_mapping", slot_mapping),
       named("positions", positions), named("kv_indptr", kv_indptr),
       named("kv_indices", kv_indices),
       named("key_cache", key_cache), named("value_cache", value_cache),
       named("k_scale", k_scale), named("v_scale", v_scale),
       named("key_block_scale", key_block_scale), named("value_block_scale", value_block_scale),
       named("num_tokens_non_padded", num_tokens_non_padded),
       named("diagnostics", diagnostics), named("cos_sin_cache", cos_sin_cache),
       named("rope_positions", rope_positions), named("query", query),
       named("query_out", query_out), named("key_out", key_out)});

  cachestore_paged_kv_params_t p;
  CACHESTORE_PARAMS_INIT(p);
  batch_fields(p, key.size(0), o);
  p.slots = slots_of(slot_mapping, reserved_slot, owner_rank, owner_size, paged_slots);
  p.page_table = page_table_of(table);
  p.num_heads = static_cast<int32_t>(key.dim() == 3 ? key.size(1) : 1);
  p.input_type = input_type_of(key.scalar_type());
  p.cache_type = static_cast<int32_t>(cache_type);
  p.num_pages = key_cache.size(0);
  p.page_size = static_cast<int32_t>(key_cache.dim() == 3 || layout == kNhd ? key_cache.size(1)
                                     : layout == kPagedAttention          ? key_cache.size(3)
                                                                          : key_cache.size(2));
  p.k = side_struct(key, key_cache, layout, k_scale, true, &p.k_chunk, &p.k_chunk_stride,
                    &p.k_dim_stride);
  if (value.has_value())
    p.v = side_struct(*value, *value_cache, layout, v_scale, false, &p.v_chunk,
                      &p.v_chunk_stride, &p.v_dim_stride);
  const auto scales_struct = layout::kKvCacheTypes[cache_type].token_head_scales
                                 ? token_head_scales_struct
                                 : block_scales_struct;
  if (key_block_scale.has_value()) p.k_block_scales = scales_struct(*key_block_scale, layout);
  if (value_block_scale.has_value())
    p.v_block_scales = scales_struct(*value_block_scale, layout);
  p.rope = rope_struct(rope, static_cast<int32_t>(rotary_dim.value_or(0)), is_neox,
                       rope_rounding);
  launch(cachestore_store_paged_kv, p, device);
}

}  // namespace
}  // namespace cachestore::torch_ops

using namespace cachestore::torch_ops;  // NOLINT: the registrations below name the ops

STABLE_TORCH_LIBRARY_FRAGMENT(cachestore, m) {
  m.def("store_paged_kv(Tensor key, Tensor? value, Tensor slot_mapping, Tensor(a!) key_cache, "
        "Tensor(b!)? value_cache, int layout=0, int? kv_cache_dtype=None, Tensor? k_scale=None, "
        "Tensor? v_scale=None, " CACHESTORE_BATCH_SCHEMA("c") ", "
        "Tensor(d!)? key_block_scale=None, Tensor(e!)? value_block_scale=None, "
        "Tensor(f!)? query=None, Tensor? cos_sin_cache=None, Tensor? rope_positions=None, "
        "int? rotary_dim=None, bool is_neox=True, int rope_rounding=0, "
        "Tensor(g!)? query_out=None, Tensor(h!)? key_out=None) -> ()");
}
void paged_kv_kernels(Library& m) { m.impl("store_paged_kv", TORCH_BOX(&store_paged_kv)); }
CACHESTORE_TORCH_KERNELS(paged_kv_kernels)
