// The index-K stores' checks (store_index_k_bf16, _fp8, _fp4): check.h's shared refusals with
// each one's cache.
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

}  // namespace
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

}  // namespace cachestore
