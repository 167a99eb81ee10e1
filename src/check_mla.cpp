// fused_store_cache's checks: the MLA cache and rows, the fused index-K, the rotation of the
// rows' RoPE part.
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
}  // namespace detail

using detail::fail;

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

}  // namespace cachestore
