// store_paged_kv's checks: the inputs and cache views of K and V (every layout by strides, fp8
// scales, NVFP4 block scales, per-token-head fp8 scale views), RoPE.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "cachestore/layout.h"
#include "check.h"
#include "detail/status.h"

namespace cachestore {
namespace detail {
namespace {

// ---- store_paged_kv -------------------------------------------------------------------------
// Any head dim in [1, kMaxKvHeadDim] and any element-aligned input: the launcher picks the
// widest vector the alignment allows (down to one element).
Status check_kv_input(const KvInput& in, const PagedKvParams& p, const char* name) {
  const int32_t d = in.head_dim;
  if (d < 1 || d > layout::kMaxKvHeadDim)
    return fail(Status::kErrorNotSupported, "%s.head_dim = %d: must be in [1, %d]", name, d,
                layout::kMaxKvHeadDim);
  if (in.data == nullptr && p.batch.num_tokens > 0)
    return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (in.token_stride < 0 || in.head_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s strides must be >= 0", name);
  const int64_t bytes = kv_input_bytes(p.input_type);
  if (!aligned_to(in.data, bytes))
    return fail(Status::kErrorMisalignedOperand, "%s.data must be %lld-byte aligned (its element)",
                name, ll(bytes));
  if (!product_fits(p.batch.num_tokens, in.token_stride) ||
      !product_fits(p.num_heads, in.head_stride))
    return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
  return Status::kSuccess;
}

// No two elements of any (slot, head, d) of a view overlap: the dimensions (d within a chunk;
// chunks; heads; entries in a page; pages) are nested by stride, and each stride must clear the
// extent of everything finer, which is what every layout of the contract does (sufficient, not
// necessary; a layout it refuses would need another proof). `dims` pairs each stride with its
// count; `elem_bytes` bounds the byte offsets.
Status check_nested_strides(std::array<std::pair<int64_t, int64_t>, 5> dims, int64_t elem_bytes,
                            const PagedKvParams& p, int32_t elements_per_head,
                            const char* name) {
  const NestedStrides r = nested_strides(dims);
  if (r.verdict == NestedStrides::kOverlap)
    return fail(Status::kErrorInvalidArgument,
                "%s: a stride of %lld (over %lld entries) is below the %lld elements the "
                "finer dimensions span, so two elements overlap (page_size %d, num_heads %d, "
                "%d elements a head)",
                name, ll(r.stride), ll(r.count), ll(r.extent), p.page_size, p.num_heads,
                elements_per_head);
  if (r.verdict == NestedStrides::kOverflow || !product_fits(r.extent, elem_bytes))
    return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
  return Status::kSuccess;
}

// What the 16-byte kernel's quantized types with a second view need of one side (nvfp4,
// fp8_e4m3_per_token_head): the 16-byte input vectors and 8-byte cache entries the kernel
// moves, d contiguous, and the view itself (non-null, strides >= 0).
Status check_vector_side(const KvCacheView& c, const KvInput& in, const PagedKvParams& p,
                         const char* name, const char* input_name, const char* view) {
  const char* type = layout::kv_cache_type(p.cache_type).name;
  const int64_t in_bytes = kv_input_bytes(p.input_type);
  if (!aligned_to(in.data, 16) || in.token_stride * in_bytes % 16 != 0 ||
      in.head_stride * in_bytes % 16 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s: an %s cache reads 16-byte vectors; data and strides must be 16-byte "
                "aligned", input_name, type);
  if (c.chunk != 0 || c.dim_stride != 1)
    return fail(Status::kErrorNotSupported,
                "%s: an %s cache holds d contiguous (chunk 0, dim_stride 1)", name, type);
  if (!aligned_to(c.data, 8) || c.page_stride % 8 != 0 || c.entry_stride % 8 != 0 ||
      c.head_stride % 8 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s: an %s cache takes 8-byte stores; data and strides (bytes) must be "
                "8-byte aligned", name, type);
  if (c.block_scales == nullptr)
    return fail(Status::kErrorInvalidArgument, "%s.block_scales is null: an %s cache needs %s",
                name, type, view);
  if (c.block_scale_page_stride < 0 || c.block_scale_entry_stride < 0 ||
      c.block_scale_head_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s block-scale strides must be >= 0", name);
  return Status::kSuccess;
}

// The nvfp4 parts of one side: D a multiple of 16, check_vector_side, and the block-scale view
// (1 byte per 16 values).
Status check_nvfp4_side(const KvCacheView& c, const KvInput& in, const PagedKvParams& p,
                        const char* name, const char* input_name) {
  const int32_t block = layout::kv_cache_type(KvCacheType::kNvfp4).block;
  if (in.head_dim % block != 0)
    return fail(Status::kErrorNotSupported, "%s.head_dim = %d: an nvfp4 cache needs a multiple "
                "of %d", input_name, in.head_dim, block);
  CACHESTORE_RETURN_IF_ERROR(
      check_vector_side(c, in, p, name, input_name, "its e4m3 block scales"));
  const int32_t blocks = in.head_dim / block;
  const std::string scales = std::string(name) + ".block_scales";
  return check_nested_strides({{{1, blocks},
                                {0, 1},
                                {c.block_scale_head_stride, p.num_heads},
                                {c.block_scale_entry_stride, p.page_size},
                                {c.block_scale_page_stride, p.num_pages}}},
                              1, p, blocks, scales.c_str());
}

// The fp8_e4m3_per_token_head parts of one side: D a power of two in [8, 256] (a head's vectors
// are the lanes of one shuffle group: 1 to 32), check_vector_side, and the fp32 scale view (one
// scale per (slot, head), strides in fp32 elements).
Status check_token_head_side(const KvCacheView& c, const KvInput& in, const PagedKvParams& p,
                             const char* name, const char* input_name) {
  const int32_t d = in.head_dim;
  if (d < 8 || d > 256 || (d & (d - 1)) != 0)
    return fail(Status::kErrorNotSupported,
                "%s.head_dim = %d: an fp8_e4m3_per_token_head cache needs a power of two in "
                "[8, 256]", input_name, d);
  CACHESTORE_RETURN_IF_ERROR(
      check_vector_side(c, in, p, name, input_name, "its fp32 scale view"));
  if (!aligned_to(c.block_scales, 4))
    return fail(Status::kErrorMisalignedOperand, "%s.block_scales must be 4-byte aligned (fp32)",
                name);
  const std::string scales = std::string(name) + ".block_scales";
  return check_nested_strides({{{1, 1},
                                {0, 1},
                                {c.block_scale_head_stride, p.num_heads},
                                {c.block_scale_entry_stride, p.page_size},
                                {c.block_scale_page_stride, p.num_pages}}},
                              4, p, 1, scales.c_str());
}

// The cache view of one side: element alignment, the head-dim layout, no overlap
// (check_nested_strides) and the scales.
Status check_kv_cache(const KvCacheView& c, const KvInput& in, const PagedKvParams& p,
                      const char* name, const char* input_name) {
  const layout::KvCacheTypeInfo& type = layout::kv_cache_type(p.cache_type);
  const int64_t elem_bytes = kv_cache_bytes(p);
  if (c.data == nullptr) return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (c.page_stride < 0 || c.entry_stride < 0 || c.head_stride < 0 || c.chunk_stride < 0 ||
      c.dim_stride < 1)
    return fail(Status::kErrorInvalidArgument,
                "%s strides must be >= 0 (dim_stride >= 1)", name);
  if (!aligned_to(c.data, elem_bytes))
    return fail(Status::kErrorMisalignedOperand, "%s.data must be %lld-byte aligned (its element)",
                name, ll(elem_bytes));
  if (p.cache_type == KvCacheType::kNvfp4)
    CACHESTORE_RETURN_IF_ERROR(check_nvfp4_side(c, in, p, name, input_name));
  if (type.token_head_scales)
    CACHESTORE_RETURN_IF_ERROR(check_token_head_side(c, in, p, name, input_name));
  if (c.chunk != 0 && (c.chunk < 0 || (c.chunk & (c.chunk - 1)) != 0 || in.head_dim % c.chunk != 0))
    return fail(Status::kErrorInvalidArgument,
                "%s.chunk = %d: 0 or a power of two dividing the head dim (%d)", name, c.chunk,
                in.head_dim);
  const int32_t elements = in.head_dim / type.values_per_element;
  const int64_t chunk = c.chunk == 0 ? elements : c.chunk;
  CACHESTORE_RETURN_IF_ERROR(check_nested_strides({{{c.dim_stride, chunk},
                                                    {c.chunk_stride, elements / chunk},
                                                    {c.head_stride, p.num_heads},
                                                    {c.entry_stride, p.page_size},
                                                    {c.page_stride, p.num_pages}}},
                                                  elem_bytes, p, elements, name));
  if (type.scaled) {
    if (c.scale == nullptr)
      return fail(Status::kErrorInvalidArgument, "%s.scale is null: an %s cache needs %s", name,
                  type.name, p.cache_type == KvCacheType::kNvfp4 ? "its global scale" : "scales");
    if (!aligned_to(c.scale, 4))
      return fail(Status::kErrorMisalignedOperand, "%s.scale must be 4-byte aligned", name);
    if (c.scale_stride != 0 && c.scale_stride != 1)
      return fail(Status::kErrorInvalidArgument,
                  "%s.scale_stride = %d: 0 (one per tensor) or 1 (one per head)", name,
                  c.scale_stride);
  }
  return Status::kSuccess;
}

// RoPE fused into store_paged_kv (rotates(p.rope)): the rotation's operands, Q and key_out,
// and the 16-byte kernel's layout on both sides, which is the only kernel that rotates.
Status check_rope(const PagedKvParams& p) {
  const RotaryEmbedding& r = p.rope;
  const bool nvfp4 = p.cache_type == KvCacheType::kNvfp4;
  const int32_t width = layout::kv_cache_type(p.cache_type).values_per_thread;
  CACHESTORE_RETURN_IF_ERROR(check_style_and_rounding(r, "rope"));
  if (r.cos_sin_rows == RopeCosSinRows::kByRow)
    return fail(Status::kErrorNotSupported,
                "rope.cos_sin_rows = kByRow: store_paged_kv rotates by position (positions and a "
                "cos/sin table; fused_store_cache takes a cos/sin row a row)");
  if (r.cos_sin_layout == RopeCosSinLayout::kInterleaved)
    return fail(Status::kErrorNotSupported,
                "rope.cos_sin_layout = kInterleaved: store_paged_kv reads cos and sin as halves "
                "of a row (vLLM's and FlashInfer's cos_sin_cache; fused_store_cache takes both)");
  const int32_t multiple = r.style == RopeStyle::kNeox ? 2 * width : width;
  if (r.rotary_dim <= 0 || r.rotary_dim > p.k.head_dim || r.rotary_dim % multiple != 0)
    return fail(Status::kErrorNotSupported,
                "rope.rotary_dim = %d: must be in [1, k.head_dim = %d] and a multiple of %d "
                "(%s style, %d values a thread)",
                r.rotary_dim, p.k.head_dim, multiple,
                r.style == RopeStyle::kNeox ? "NeoX" : "GPT-J", width);
  const int64_t bytes = kv_input_bytes(p.input_type);
  CACHESTORE_RETURN_IF_ERROR(check_rotation(
      r, "rope", {p.k.data, p.k.token_stride, p.k.head_stride, p.num_heads, p.k.head_dim, bytes,
                  p.batch.num_tokens}));

  const int64_t cache_bytes = kv_cache_bytes(p);
  const auto side = [&](const KvInput& in, const KvCacheView& c, const char* name) {
    if (in.head_dim % width != 0)
      return fail(Status::kErrorNotSupported,
                  "%s.head_dim = %d: RoPE in the store needs a multiple of %d", name, in.head_dim,
                  width);
    if (c.chunk != 0 || c.dim_stride != 1)
      return fail(Status::kErrorNotSupported,
                  "%s_cache: RoPE in the store needs d contiguous (chunk 0, dim_stride 1)", name);
    CACHESTORE_RETURN_IF_ERROR(check_rope_tensor(in.data, in.token_stride, in.head_stride,
                                                 p.num_heads, bytes, p.batch.num_tokens, name));
    const int64_t store = std::min<int64_t>(16, nvfp4 ? 8 : width * cache_bytes);
    if (!aligned_to(c.data, store) || c.page_stride * cache_bytes % store != 0 ||
        c.entry_stride * cache_bytes % store != 0 || c.head_stride * cache_bytes % store != 0)
      return fail(Status::kErrorMisalignedOperand,
                  "%s_cache: RoPE in the store writes %lld-byte vectors; data and strides must "
                  "be aligned to them", name, ll(store));
    return Status::kSuccess;
  };
  CACHESTORE_RETURN_IF_ERROR(side(p.k, p.k_cache, "k"));
  if (p.v.data != nullptr) CACHESTORE_RETURN_IF_ERROR(side(p.v, p.v_cache, "v"));
  return Status::kSuccess;
}

}  // namespace
}  // namespace detail

using detail::fail;

Status check(const PagedKvParams& p) {
  using namespace detail;
  CACHESTORE_RETURN_IF_ERROR(check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(check_slots(p.slots, p.batch.num_tokens, "slots", true));
  if (p.input_type != KvDataType::kBf16 && p.input_type != KvDataType::kFp16 &&
      p.input_type != KvDataType::kFp32)
    return fail(Status::kErrorInvalidArgument, "input_type = %d: not a KvDataType",
                static_cast<int>(p.input_type));
  if (!layout::is_kv_cache_type(p.cache_type))
    return fail(Status::kErrorInvalidArgument, "cache_type = %d: not a KvCacheType",
                static_cast<int>(p.cache_type));
  if (p.num_heads < 1 || p.num_heads > layout::kMaxKvHeads)
    return fail(Status::kErrorNotSupported, "num_heads = %d: must be in [1, %d]", p.num_heads,
                layout::kMaxKvHeads);
  if (p.page_size < 1 || p.page_size > (1 << 20))
    return fail(Status::kErrorNotSupported, "page_size = %d: must be in [1, 2^20]", p.page_size);
  if (p.num_pages < 0)
    return fail(Status::kErrorInvalidArgument, "num_pages = %lld: must be >= 0", ll(p.num_pages));
  if (!product_fits(p.num_pages, p.page_size))
    return fail(Status::kErrorCapacityOverflow, "num_pages * page_size overflows int64");
  const int64_t capacity = p.num_pages * p.page_size;
  CACHESTORE_RETURN_IF_ERROR(check_owner(p.slots, capacity, "slots"));
  const bool pow2_page = (p.page_size & (p.page_size - 1)) == 0;
  if (!pow2_page && capacity * p.slots.owner_size > (int64_t{1} << 32))
    return fail(Status::kErrorNotSupported,
                "num_pages * page_size * slots.owner_size = %lld: at most 2^32 slots when "
                "page_size (%d) is not a power of two",
                ll(capacity * p.slots.owner_size), p.page_size);
  CACHESTORE_RETURN_IF_ERROR(check_kv_input(p.k, p, "k"));
  CACHESTORE_RETURN_IF_ERROR(check_kv_cache(p.k_cache, p.k, p, "k_cache", "k"));
  if (p.v.data != nullptr) {
    CACHESTORE_RETURN_IF_ERROR(check_kv_input(p.v, p, "v"));
    CACHESTORE_RETURN_IF_ERROR(check_kv_cache(p.v_cache, p.v, p, "v_cache", "v"));
    // Per-token-head: V's heads start after K's H * Dk / 8 vectors, on whole shuffle groups.
    if (layout::kv_cache_type(p.cache_type).token_head_scales &&
        (static_cast<int64_t>(p.num_heads) * p.k.head_dim / 8) % (p.v.head_dim / 8) != 0)
      return fail(Status::kErrorNotSupported,
                  "v.head_dim = %d: an fp8_e4m3_per_token_head cache needs num_heads * "
                  "k.head_dim (%d * %d) to be a multiple of it",
                  p.v.head_dim, p.num_heads, p.k.head_dim);
  }
  if (rotates(p.rope)) {
    if (!layout::kv_cache_type(p.cache_type).rope)
      return fail(Status::kErrorNotSupported, "rope: an %s cache takes no RoPE in its store",
                  layout::kv_cache_type(p.cache_type).name);
    CACHESTORE_RETURN_IF_ERROR(check_rope(p));
  }
  return succeed();
}

}  // namespace cachestore
