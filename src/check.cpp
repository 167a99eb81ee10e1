// The check layer's shared refusals (check.h): the batch, the slots and owners, bf16 rows, the
// paged caches, a rotation's operands. Each family's checks and its public check() overloads
// are in check_<family>.cpp; every refusal names the argument by its path in the params struct.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "cachestore/layout.h"
#include "check.h"
#include "detail/status.h"

namespace cachestore::detail {
namespace {

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

}  // namespace

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

// The operands of a rotation `name` ("rope", "rotary") whose rotary_dim the store has checked:
// positions, style, rounding, the cos/sin cache, Q (of `k`'s head dim) and key_out.
Status check_rotation(const RotaryEmbedding& r, const char* name, const RotatedInput& k) {
  if (r.cos_sin_rows != RopeCosSinRows::kByPosition && r.cos_sin_rows != RopeCosSinRows::kByRow)
    return fail(Status::kErrorInvalidArgument, "%s.cos_sin_rows = %d: not a RopeCosSinRows", name,
                static_cast<int>(r.cos_sin_rows));
  if (r.cos_sin_layout != RopeCosSinLayout::kHalves &&
      r.cos_sin_layout != RopeCosSinLayout::kInterleaved)
    return fail(Status::kErrorInvalidArgument, "%s.cos_sin_layout = %d: not a RopeCosSinLayout",
                name, static_cast<int>(r.cos_sin_layout));
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

int32_t log2_exact(int64_t power_of_two) {
  int32_t shift = 0;
  while ((int64_t{1} << shift) < power_of_two) ++shift;
  return shift;
}

}  // namespace cachestore::detail
