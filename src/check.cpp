// The check layer: every refusal of every store, in one place (CUTLASS's can_implement). Each
// store calls its check() before it touches the device, and check() is exported on its own. A
// refusal returns its status with a message naming the argument by its path in the params
// struct.
#include "check.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "cachestore/layout.h"
#include "detail/status.h"

namespace cachestore {
namespace detail {
namespace {

inline long long ll(int64_t v) { return static_cast<long long>(v); }

bool aligned16(const void* p) { return aligned_to(p, 16); }

Status check_batch(const Batch& batch) {
  if (batch.num_tokens < 0)
    return fail(Status::kErrorInvalidArgument, "batch.num_tokens = %lld: must be >= 0",
                ll(batch.num_tokens));
  if (batch.num_tokens > (int64_t{1} << 40))
    return fail(Status::kErrorNotSupported, "batch.num_tokens = %lld: at most 2^40 rows",
                ll(batch.num_tokens));
  if ((reinterpret_cast<uintptr_t>(batch.num_tokens_non_padded) & 3u) != 0)
    return fail(Status::kErrorMisalignedOperand,
                "batch.num_tokens_non_padded must be 4-byte aligned");
  if ((reinterpret_cast<uintptr_t>(batch.diagnostics) & 7u) != 0)
    return fail(Status::kErrorMisalignedOperand, "batch.diagnostics must be 8-byte aligned");
  return Status::kSuccess;
}

// Row data (slots, inputs) may be null when there are no rows: nothing is read then. A page
// table is a slot source of the paged caches only (`paged`).
Status check_slots(const SlotMapping& slots, int64_t rows, const char* name, bool paged) {
  if (slots.type != SlotType::kInt32 && slots.type != SlotType::kInt64 &&
      slots.type != SlotType::kPageTable)
    return fail(Status::kErrorInvalidArgument, "%s.type = %d: not a SlotType", name,
                static_cast<int>(slots.type));
  if (slots.type == SlotType::kPageTable && !paged)
    return fail(Status::kErrorNotSupported,
                "%s.type = kPageTable: this cache has no pages (use a slot mapping)", name);
  // data: the slots, or the page table's int32 batch indices.
  if (slots.data == nullptr && rows > 0)
    return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  const uintptr_t align = slots.type == SlotType::kInt64 ? 8 : 4;
  if ((reinterpret_cast<uintptr_t>(slots.data) & (align - 1)) != 0)
    return fail(Status::kErrorMisalignedOperand, "%s.data must be %d-byte aligned", name,
                static_cast<int>(align));
  if (slots.type == SlotType::kPageTable) {
    const PageTable& t = slots.page_table;
    if (t.batch_size < 0)
      return fail(Status::kErrorInvalidArgument, "%s.page_table.batch_size = %d: must be >= 0",
                  name, t.batch_size);
    const struct {
      const int32_t* data;
      const char* field;
    } arrays[] = {{t.positions, "positions"}, {t.indptr, "indptr"}, {t.indices, "indices"}};
    for (const auto& a : arrays) {
      if (a.data == nullptr && rows > 0)
        return fail(Status::kErrorInvalidArgument, "%s.page_table.%s is null", name, a.field);
      if ((reinterpret_cast<uintptr_t>(a.data) & 3u) != 0)
        return fail(Status::kErrorMisalignedOperand,
                    "%s.page_table.%s must be 4-byte aligned (int32)", name, a.field);
    }
  }
  if (slots.reserved_slot < kNoReservedSlot)
    return fail(Status::kErrorInvalidArgument,
                "%s.reserved_slot = %lld: a slot >= 0, or -1 for none", name,
                ll(slots.reserved_slot));
  return Status::kSuccess;
}

// The owner-sharding fields of a paged store's slots, and the global capacity they imply
// (local_capacity * owner_size) without int64 overflow.
Status check_owner(const SlotMapping& slots, int64_t local_capacity, const char* name) {
  const int32_t size = slots.owner_size;
  if (size < 1 || size > (1 << 20) || (size & (size - 1)) != 0)
    return fail(Status::kErrorInvalidArgument,
                "%s.owner_size = %d: must be a power of two in [1, 2^20] (1 = no sharding)", name,
                size);
  if (slots.owner_rank < 0 || slots.owner_rank >= size)
    return fail(Status::kErrorInvalidArgument,
                "%s.owner_rank = %d: must be in [0, owner_size = %d)", name, slots.owner_rank,
                size);
  if (!product_fits(local_capacity, size))
    return fail(Status::kErrorCapacityOverflow,
                "%s: the cache's slots times owner_size = %d overflow int64", name, size);
  return Status::kSuccess;
}

// A bf16 matrix [rows, width] read or written with 16-byte vectors.
Status check_bf16_rows(const void* data, int64_t row_stride, int64_t rows, int64_t width,
                       const char* name, const char* stride_name) {
  if (data == nullptr && rows > 0) return fail(Status::kErrorInvalidArgument, "%s is null", name);
  if (row_stride < width)
    return fail(Status::kErrorInvalidArgument, "%s = %lld: must be >= the row width %lld",
                stride_name, ll(row_stride), ll(width));
  if (!aligned16(data) || row_stride % 8 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s must be 16-byte aligned and %s (%lld elements) a multiple of 8: the kernels "
                "move 16-byte vectors",
                name, stride_name, ll(row_stride));
  if (!product_fits(rows, 2 * row_stride))
    return fail(Status::kErrorCapacityOverflow, "%s: rows * %s overflows int64", name,
                stride_name);
  return Status::kSuccess;
}

// A row stride the MLA kernels keep in 32 bits: at most 2^31 - 1 elements when there is more
// than one row (with one row the stride is never multiplied).
Status check_int32_row_stride(int64_t row_stride, int64_t rows, const char* stride_name) {
  if (rows > 1 && row_stride > INT32_MAX)
    return fail(Status::kErrorNotSupported,
                "%s = %lld: more than 2^31 - 1 elements between rows is not supported (the kernel "
                "keeps the stride in 32 bits)",
                stride_name, ll(row_stride));
  return Status::kSuccess;
}

Status check_page_size(int32_t page_size, const char* name) {
  if (page_size < 1 || page_size > layout::kMaxPageSize || (page_size & (page_size - 1)) != 0)
    return fail(Status::kErrorNotSupported,
                "%s.page_size = %d: must be a power of two in [1, %d]", name, page_size,
                layout::kMaxPageSize);
  return Status::kSuccess;
}

// A paged byte cache: a page stride of at least the layout's minimum and a multiple of
// `stride_alignment` bytes; the data pointer 16-byte aligned.
Status check_paged_cache(void* data, int64_t num_pages, int32_t page_size,
                         int64_t page_stride_bytes, int64_t min_page_stride,
                         int64_t stride_alignment, const char* name) {
  if (data == nullptr) return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (num_pages < 0)
    return fail(Status::kErrorInvalidArgument, "%s.num_pages = %lld: must be >= 0", name,
                ll(num_pages));
  if (page_stride_bytes < min_page_stride)
    return fail(Status::kErrorInvalidArgument,
                "%s.page_stride_bytes = %lld: the layout needs at least %lld for page_size %d",
                name, ll(page_stride_bytes), ll(min_page_stride), page_size);
  if (!aligned16(data))
    return fail(Status::kErrorMisalignedOperand, "%s.data must be 16-byte aligned", name);
  if (page_stride_bytes % stride_alignment != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s.page_stride_bytes = %lld: must be a multiple of %lld bytes", name,
                ll(page_stride_bytes), ll(stride_alignment));
  if (!product_fits(num_pages, page_stride_bytes))
    return fail(Status::kErrorCapacityOverflow,
                "%s.num_pages * %s.page_stride_bytes overflows int64", name, name);
  return Status::kSuccess;
}

// The head dim of an index-K cache of `format`.
Status check_index_k_head_dim(IndexKFormat format, int32_t head_dim, const char* name) {
  const layout::IndexKFormatInfo& f = layout::index_k_format(format);
  if (head_dim <= 0 || head_dim % f.group != 0 || head_dim > f.max_head_dim)
    return fail(Status::kErrorNotSupported,
                "%s.head_dim = %d: must be a multiple of %d in [%d, %d]", name, head_dim, f.group,
                f.group, f.max_head_dim);
  return Status::kSuccess;
}

// The pages of an index-K cache of `format` whose head dim is checked. Index-K page strides are
// multiples of 4 bytes: pages of 1 or 2 slots are 132 or 264 bytes long.
template <typename Cache>
Status check_index_k_pages(IndexKFormat format, const Cache& c, const char* name) {
  CACHESTORE_RETURN_IF_ERROR(check_page_size(c.page_size, name));
  return check_paged_cache(
      c.data, c.num_pages, c.page_size, c.page_stride_bytes,
      layout::min_page_stride(layout::index_k_rows(format, c.head_dim), c.page_size),
      /*stride_alignment=*/4, name);
}

Status check_cache(const IndexKFp8Cache& cache, const char* name) {
  CACHESTORE_RETURN_IF_ERROR(check_index_k_head_dim(IndexKFormat::kFp8, cache.head_dim, name));
  if (cache.scale_rule != ScaleRule::kAmax && cache.scale_rule != ScaleRule::kPow2)
    return fail(Status::kErrorInvalidArgument, "%s.scale_rule = %d: not a ScaleRule", name,
                static_cast<int>(cache.scale_rule));
  return check_index_k_pages(IndexKFormat::kFp8, cache, name);
}

Status check_cache(const IndexKFp4Cache& cache, const char* name) {
  CACHESTORE_RETURN_IF_ERROR(check_index_k_head_dim(IndexKFormat::kFp4, cache.head_dim, name));
  if (cache.ties != Fp4Ties::kToEven && cache.ties != Fp4Ties::kTowardZero)
    return fail(Status::kErrorInvalidArgument, "%s.ties = %d: not an Fp4Ties", name,
                static_cast<int>(cache.ties));
  return check_index_k_pages(IndexKFormat::kFp4, cache, name);
}

Status check_cache(const MlaCache& cache, const char* name) {
  if (!layout::is_mla_layout(cache.layout))
    return fail(Status::kErrorInvalidArgument, "%s.layout = %d: not an MlaLayout", name,
                static_cast<int>(cache.layout));
  const layout::MlaLayoutInfo& info = layout::mla_layout(cache.layout);
  if (info.scale_rule != layout::RuleUse::kFixed && cache.scale_rule != ScaleRule::kAmax &&
      cache.scale_rule != ScaleRule::kPow2)
    return fail(Status::kErrorInvalidArgument, "%s.scale_rule = %d: not a ScaleRule", name,
                static_cast<int>(cache.scale_rule));
  if (info.scale_rule == layout::RuleUse::kPow2Only && cache.scale_rule != ScaleRule::kPow2)
    return fail(Status::kErrorNotSupported,
                "%s.scale_rule: the %s layout stores UE8M0 scales, only kPow2 applies", name,
                info.name);
  CACHESTORE_RETURN_IF_ERROR(check_page_size(cache.page_size, name));
  return check_paged_cache(cache.data, cache.num_pages, cache.page_size, cache.page_stride_bytes,
                           layout::min_page_stride(info.rows, cache.page_size),
                           /*stride_alignment=*/16, name);
}

// The paged index-K stores (fp8, fp4): the same checks with each one's cache.
template <typename Params>
Status check_index_k_store(const Params& p) {
  CACHESTORE_RETURN_IF_ERROR(check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(check_slots(p.slots, p.batch.num_tokens, "slots", true));
  CACHESTORE_RETURN_IF_ERROR(check_cache(p.cache, "cache"));
  CACHESTORE_RETURN_IF_ERROR(
      check_owner(p.slots, p.cache.num_pages * p.cache.page_size, "slots"));
  return check_bf16_rows(p.k, p.k_row_stride, p.batch.num_tokens, p.cache.head_dim, "k",
                         "k_row_stride");
}

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
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;  // elements spanned by one element, then by the nested blocks
  for (const auto& [stride, count] : dims) {
    if (count <= 1) continue;
    if (stride < extent)
      return fail(Status::kErrorInvalidArgument,
                  "%s: a stride of %lld (over %lld entries) is below the %lld elements the "
                  "finer dimensions span, so two elements overlap (page_size %d, num_heads %d, "
                  "%d elements a head)",
                  name, ll(stride), ll(count), ll(extent), p.page_size, p.num_heads,
                  elements_per_head);
    if (!product_fits(count - 1, stride) || extent > INT64_MAX - (count - 1) * stride)
      return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
    extent += (count - 1) * stride;
  }
  if (!product_fits(extent, elem_bytes))
    return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
  return Status::kSuccess;
}

// The nvfp4 parts of one side: D a multiple of 16, the 16-byte input vectors and 8-byte cache
// entries the kernel moves, d contiguous, and the block-scale view (1 byte per 16 values).
Status check_nvfp4_side(const KvCacheView& c, const KvInput& in, const PagedKvParams& p,
                        const char* name, const char* input_name) {
  const int32_t block = layout::kv_cache_type(KvCacheType::kNvfp4).block;
  if (in.head_dim % block != 0)
    return fail(Status::kErrorNotSupported, "%s.head_dim = %d: an nvfp4 cache needs a multiple "
                "of %d", input_name, in.head_dim, block);
  const int64_t in_bytes = kv_input_bytes(p.input_type);
  if (!aligned_to(in.data, 16) || in.token_stride * in_bytes % 16 != 0 ||
      in.head_stride * in_bytes % 16 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s: an nvfp4 cache reads 16-byte vectors; data and strides must be 16-byte "
                "aligned", input_name);
  if (c.chunk != 0 || c.dim_stride != 1)
    return fail(Status::kErrorNotSupported,
                "%s: an nvfp4 cache holds d contiguous (chunk 0, dim_stride 1)", name);
  if (!aligned_to(c.data, 8) || c.page_stride % 8 != 0 || c.entry_stride % 8 != 0 ||
      c.head_stride % 8 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s: an nvfp4 cache takes 8-byte stores; data and strides (bytes) must be "
                "8-byte aligned", name);
  if (c.block_scales == nullptr)
    return fail(Status::kErrorInvalidArgument,
                "%s.block_scales is null: an nvfp4 cache needs its e4m3 block scales", name);
  if (c.block_scale_page_stride < 0 || c.block_scale_entry_stride < 0 ||
      c.block_scale_head_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s block-scale strides must be >= 0", name);
  const int32_t blocks = in.head_dim / block;
  const std::string scales = std::string(name) + ".block_scales";
  return check_nested_strides({{{1, blocks},
                                {0, 1},
                                {c.block_scale_head_stride, p.num_heads},
                                {c.block_scale_entry_stride, p.page_size},
                                {c.block_scale_page_stride, p.num_pages}}},
                              1, p, blocks, scales.c_str());
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

// A tensor of `heads` heads of `head_dim` input values a row: 16-byte aligned vectors (the
// rotating kernel moves 8 or 16 values a thread) and offsets that fit.
Status check_rope_tensor(const void* data, int64_t token_stride, int64_t head_stride,
                         int32_t heads, int64_t elem_bytes, int64_t rows, const char* name) {
  if (data == nullptr) return fail(Status::kErrorInvalidArgument, "%s is null", name);
  if (token_stride < 0 || head_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s strides must be >= 0", name);
  if (!aligned_to(data, 16) || token_stride * elem_bytes % 16 != 0 ||
      head_stride * elem_bytes % 16 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s: RoPE moves 16-byte vectors; the pointer and its strides (bytes) must be "
                "16-byte aligned", name);
  if (!product_fits(rows, token_stride) || !product_fits(heads, head_stride))
    return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
  return Status::kSuccess;
}

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

// The operands of a rotation `name` ("rope", "rotary") whose rotary_dim the store has checked:
// positions, style, rounding, the cos/sin cache, Q (of `k`'s head dim) and key_out.
Status check_rotation(const RotaryEmbedding& r, const char* name, const RotatedInput& k) {
  if (r.cos_sin_rows != RopeCosSinRows::kByPosition && r.cos_sin_rows != RopeCosSinRows::kByRow)
    return fail(Status::kErrorInvalidArgument, "%s.cos_sin_rows = %d: not a RopeCosSinRows", name,
                static_cast<int>(r.cos_sin_rows));
  const bool by_row = r.cos_sin_rows == RopeCosSinRows::kByRow;
  if (by_row && r.max_position < k.rows)
    return fail(Status::kErrorInvalidArgument,
                "%s.max_position = %lld: a cos/sin row a row (cos_sin_rows kByRow) needs at "
                "least num_tokens = %lld rows", name, ll(r.max_position), ll(k.rows));
  if (!by_row && r.positions_type != SlotType::kInt32 && r.positions_type != SlotType::kInt64)
    return fail(Status::kErrorInvalidArgument, "%s.positions_type = %d: kInt32 or kInt64", name,
                static_cast<int>(r.positions_type));
  if (!by_row && !aligned_to(r.positions, r.positions_type == SlotType::kInt64 ? 8 : 4))
    return fail(Status::kErrorMisalignedOperand, "%s.positions must be aligned to its type",
                name);
  if (r.cos_sin_cache == nullptr)
    return fail(Status::kErrorInvalidArgument, "%s.cos_sin_cache is null", name);
  if (r.cos_sin_type != KvDataType::kBf16 && r.cos_sin_type != KvDataType::kFp16 &&
      r.cos_sin_type != KvDataType::kFp32)
    return fail(Status::kErrorInvalidArgument, "%s.cos_sin_type = %d: not a KvDataType", name,
                static_cast<int>(r.cos_sin_type));
  if (r.max_position < 1)
    return fail(Status::kErrorInvalidArgument, "%s.max_position = %lld: must be >= 1", name,
                ll(r.max_position));
  const int64_t stride = r.cos_sin_stride == 0 ? r.rotary_dim : r.cos_sin_stride;
  if (stride < r.rotary_dim)
    return fail(Status::kErrorInvalidArgument,
                "%s.cos_sin_stride = %lld: must be 0 or >= rotary_dim (%d)", name, ll(stride),
                r.rotary_dim);
  const int64_t cs_bytes = kv_input_bytes(r.cos_sin_type);
  if (!aligned_to(r.cos_sin_cache, 16) || stride * cs_bytes % 16 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s.cos_sin_cache: the pointer and its row stride (bytes) must be 16-byte "
                "aligned", name);
  if (!product_fits(r.max_position, stride * cs_bytes))
    return fail(Status::kErrorCapacityOverflow, "%s.cos_sin_cache: offsets overflow int64",
                name);

  char what[32];
  constexpr int32_t kMaxQueryHeads = 4 * layout::kMaxKvHeads;
  if (r.num_query_heads < 0 || r.num_query_heads > kMaxQueryHeads)
    return fail(Status::kErrorNotSupported, "%s.num_query_heads = %d: must be in [0, %d]", name,
                r.num_query_heads, kMaxQueryHeads);
  if (r.num_query_heads > 0) {
    std::snprintf(what, sizeof what, "%s.query", name);
    CACHESTORE_RETURN_IF_ERROR(check_rope_tensor(r.query, r.query_token_stride,
                                                 r.query_head_stride, r.num_query_heads,
                                                 k.elem_bytes, k.rows, what));
    if (r.query_out != nullptr && r.query_out != r.query) {
      std::snprintf(what, sizeof what, "%s.query_out", name);
      CACHESTORE_RETURN_IF_ERROR(check_rope_tensor(r.query_out, r.query_out_token_stride,
                                                   r.query_out_head_stride, r.num_query_heads,
                                                   k.elem_bytes, k.rows, what));
    }
    if (r.query_out == r.query && (r.query_out_token_stride != r.query_token_stride ||
                                   r.query_out_head_stride != r.query_head_stride))
      return fail(Status::kErrorInvalidArgument,
                  "%s.query_out == %s.query (in place) needs the query's strides (or "
                  "query_out = nullptr)", name, name);
  }
  if (r.key_out != nullptr) {
    std::snprintf(what, sizeof what, "%s.key_out", name);
    CACHESTORE_RETURN_IF_ERROR(check_rope_tensor(r.key_out, r.key_out_token_stride,
                                                 r.key_out_head_stride, k.heads, k.elem_bytes,
                                                 k.rows, what));
    if (r.key_out == k.data &&
        (r.key_out_token_stride != k.token_stride ||
         (k.heads > 1 && r.key_out_head_stride != k.head_stride)))
      return fail(Status::kErrorInvalidArgument,
                  "%s.key_out == the rotated input (in place) needs its strides", name);
  }
  return Status::kSuccess;
}

Status check_style_and_rounding(const RotaryEmbedding& r, const char* name) {
  if (r.style != RopeStyle::kNeox && r.style != RopeStyle::kGptj)
    return fail(Status::kErrorInvalidArgument, "%s.style = %d: not a RopeStyle", name,
                static_cast<int>(r.style));
  if (r.rounding != RopeRounding::kInputType && r.rounding != RopeRounding::kFp32)
    return fail(Status::kErrorInvalidArgument, "%s.rounding = %d: not a RopeRounding", name,
                static_cast<int>(r.rounding));
  return Status::kSuccess;
}

// RoPE fused into store_paged_kv (rotates(p.rope)): the rotation's operands, Q and key_out,
// and the 16-byte kernel's layout on both sides, which is the only kernel that rotates.
Status check_rope(const PagedKvParams& p) {
  const RotaryEmbedding& r = p.rope;
  const bool nvfp4 = p.cache_type == KvCacheType::kNvfp4;
  const int32_t width = nvfp4 ? 16 : 8;  // values a thread
  CACHESTORE_RETURN_IF_ERROR(check_style_and_rounding(r, "rope"));
  if (r.cos_sin_rows == RopeCosSinRows::kByRow)
    return fail(Status::kErrorNotSupported,
                "rope.cos_sin_rows = kByRow: store_paged_kv rotates by position (positions and a "
                "cos/sin table; fused_store_cache takes a cos/sin row a row)");
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

// RoPE fused into fused_store_cache (rotates(p.rotary)): the RoPE part's 64 bf16 values
// rotate, as Q's RoPE part of 64 does.
Status check_rotary(const FusedStoreParams& p) {
  const RotaryEmbedding& r = p.rotary;
  CACHESTORE_RETURN_IF_ERROR(check_style_and_rounding(r, "rotary"));
  if (r.rotary_dim != layout::kRopeDim)
    return fail(Status::kErrorNotSupported,
                "rotary.rotary_dim = %d: must be %d (the rows' RoPE part)", r.rotary_dim,
                layout::kRopeDim);
  return check_rotation(r, "rotary", {p.rope, p.rope_row_stride, 0, 1, layout::kRopeDim, 2,
                                      p.batch.num_tokens});
}

}  // namespace

int32_t log2_exact(int64_t power_of_two) {
  int32_t shift = 0;
  while ((int64_t{1} << shift) < power_of_two) ++shift;
  return shift;
}

}  // namespace detail

using detail::fail;

Status check(const IndexKBf16Params& p) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(detail::check_slots(p.slots, p.batch.num_tokens, "slots", false));
  if (p.head_dim <= 0 || p.head_dim % 8 != 0 || p.head_dim > 8192)
    return fail(Status::kErrorNotSupported,
                "head_dim = %d: must be a multiple of 8 in [8, 8192]", p.head_dim);
  if (p.num_slots < 0)
    return fail(Status::kErrorInvalidArgument, "num_slots = %lld: must be >= 0",
                detail::ll(p.num_slots));
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.k, p.k_row_stride, p.batch.num_tokens,
                                                     p.head_dim, "k", "k_row_stride"));
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.cache, p.cache_row_stride, p.num_slots,
                                                     p.head_dim, "cache", "cache_row_stride"));
  return detail::succeed();
}

Status check(const IndexKFp8Params& p) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_index_k_store(p));
  return detail::succeed();
}

Status check(const IndexKFp4Params& p) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_index_k_store(p));
  return detail::succeed();
}

Status check(const FusedStoreParams& p) {
  using namespace detail;
  CACHESTORE_RETURN_IF_ERROR(check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(check_slots(p.kv_slots, p.batch.num_tokens, "kv_slots", true));
  CACHESTORE_RETURN_IF_ERROR(check_cache(p.kv_cache, "kv_cache"));
  CACHESTORE_RETURN_IF_ERROR(
      check_owner(p.kv_slots, p.kv_cache.num_pages * p.kv_cache.page_size, "kv_slots"));
  const int64_t nope_dim = layout::mla_layout(p.kv_cache.layout).nope_dim;
  CACHESTORE_RETURN_IF_ERROR(check_bf16_rows(p.nope, p.nope_row_stride, p.batch.num_tokens,
                                             nope_dim, "nope", "nope_row_stride"));
  CACHESTORE_RETURN_IF_ERROR(check_bf16_rows(p.rope, p.rope_row_stride, p.batch.num_tokens,
                                             layout::kRopeDim, "rope", "rope_row_stride"));
  CACHESTORE_RETURN_IF_ERROR(
      check_int32_row_stride(p.nope_row_stride, p.batch.num_tokens, "nope_row_stride"));
  CACHESTORE_RETURN_IF_ERROR(
      check_int32_row_stride(p.rope_row_stride, p.batch.num_tokens, "rope_row_stride"));
  if (rotates(p.rotary)) CACHESTORE_RETURN_IF_ERROR(check_rotary(p));
  if (p.index_k == nullptr) return succeed();

  CACHESTORE_RETURN_IF_ERROR(
      check_slots(p.index_slots, p.batch.num_tokens, "index_slots", true));
  if (p.index_slots.type != p.kv_slots.type)
    return fail(Status::kErrorNotSupported,
                "index_slots.type must equal kv_slots.type (one kernel reads both)");
  int64_t index_capacity = 0;
  int32_t index_head_dim = 0;
  if (p.index_format == IndexKFormat::kFp8) {
    CACHESTORE_RETURN_IF_ERROR(check_cache(p.index_cache, "index_cache"));
    index_capacity = p.index_cache.num_pages * p.index_cache.page_size;
    index_head_dim = p.index_cache.head_dim;
  } else if (p.index_format == IndexKFormat::kFp4) {
    CACHESTORE_RETURN_IF_ERROR(check_cache(p.index_fp4_cache, "index_fp4_cache"));
    index_capacity = p.index_fp4_cache.num_pages * p.index_fp4_cache.page_size;
    index_head_dim = p.index_fp4_cache.head_dim;
  } else {
    return fail(Status::kErrorInvalidArgument, "index_format = %d: not an IndexKFormat",
                static_cast<int>(p.index_format));
  }
  CACHESTORE_RETURN_IF_ERROR(check_owner(p.index_slots, index_capacity, "index_slots"));
  CACHESTORE_RETURN_IF_ERROR(check_bf16_rows(p.index_k, p.index_k_row_stride, p.batch.num_tokens,
                                             index_head_dim, "index_k", "index_k_row_stride"));
  return succeed();
}

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
  }
  if (rotates(p.rope)) CACHESTORE_RETURN_IF_ERROR(check_rope(p));
  return succeed();
}

}  // namespace cachestore
