#include "detail/validate.h"

#include <cstdint>

#include "cachestore/layout.h"
#include "detail/status.h"

namespace cachestore::detail {
namespace {

bool aligned16(const void* p) { return aligned_to(p, 16); }

Status check_page_size(int32_t page_size, const char* name) {
  if (page_size < 1 || page_size > layout::kMaxPageSize || (page_size & (page_size - 1)) != 0)
    return fail(Status::kErrorNotSupported,
                "%s.page_size = %d: must be a power of two in [1, %d]", name, page_size,
                layout::kMaxPageSize);
  return Status::kSuccess;
}

// Page strides: a multiple of `stride_alignment` bytes; the data pointer 16-byte aligned.
Status check_paged_cache(void* data, int64_t num_pages, int32_t page_size,
                         int64_t page_stride_bytes, int64_t min_page_stride,
                         int64_t stride_alignment, const char* name) {
  if (data == nullptr) return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (num_pages < 0)
    return fail(Status::kErrorInvalidArgument, "%s.num_pages = %lld: must be >= 0", name,
                static_cast<long long>(num_pages));
  if (page_stride_bytes < min_page_stride)
    return fail(Status::kErrorInvalidArgument,
                "%s.page_stride_bytes = %lld: the layout needs at least %lld for page_size %d",
                name, static_cast<long long>(page_stride_bytes),
                static_cast<long long>(min_page_stride), page_size);
  if (!aligned16(data))
    return fail(Status::kErrorMisalignedOperand, "%s.data must be 16-byte aligned", name);
  if (page_stride_bytes % stride_alignment != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s.page_stride_bytes = %lld: must be a multiple of %lld bytes", name,
                static_cast<long long>(page_stride_bytes), static_cast<long long>(stride_alignment));
  if (!product_fits(num_pages, page_stride_bytes))
    return fail(Status::kErrorCapacityOverflow,
                "%s.num_pages * %s.page_stride_bytes overflows int64", name, name);
  return Status::kSuccess;
}

}  // namespace

int32_t log2_exact(int64_t power_of_two) {
  int32_t shift = 0;
  while ((int64_t{1} << shift) < power_of_two) ++shift;
  return shift;
}

Status check_batch(const Batch& batch) {
  if (batch.num_tokens < 0)
    return fail(Status::kErrorInvalidArgument, "batch.num_tokens = %lld: must be >= 0",
                static_cast<long long>(batch.num_tokens));
  if (batch.num_tokens > (int64_t{1} << 40))
    return fail(Status::kErrorNotSupported, "batch.num_tokens = %lld: at most 2^40 rows",
                static_cast<long long>(batch.num_tokens));
  if ((reinterpret_cast<uintptr_t>(batch.num_tokens_non_padded) & 3u) != 0)
    return fail(Status::kErrorMisalignedOperand,
                "batch.num_tokens_non_padded must be 4-byte aligned");
  if ((reinterpret_cast<uintptr_t>(batch.diagnostics) & 7u) != 0)
    return fail(Status::kErrorMisalignedOperand, "batch.diagnostics must be 8-byte aligned");
  return Status::kSuccess;
}

Status check_slots(const SlotMapping& slots, int64_t rows, const char* name) {
  if (slots.data == nullptr && rows > 0)
    return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (slots.type != SlotType::kInt32 && slots.type != SlotType::kInt64)
    return fail(Status::kErrorInvalidArgument, "%s.type = %d: not a SlotType", name,
                static_cast<int>(slots.type));
  const uintptr_t align = slots.type == SlotType::kInt32 ? 4 : 8;
  if ((reinterpret_cast<uintptr_t>(slots.data) & (align - 1)) != 0)
    return fail(Status::kErrorMisalignedOperand, "%s.data must be %d-byte aligned", name,
                static_cast<int>(align));
  if (slots.reserved_slot < kNoReservedSlot)
    return fail(Status::kErrorInvalidArgument,
                "%s.reserved_slot = %lld: a slot >= 0, or -1 for none", name,
                static_cast<long long>(slots.reserved_slot));
  return Status::kSuccess;
}

Status check_owner(const SlotMapping& slots, int64_t local_capacity, const char* name) {
  const int32_t size = slots.owner_size;
  if (size < 1 || size > (1 << 20) || (size & (size - 1)) != 0)
    return fail(Status::kErrorInvalidArgument,
                "%s.owner_size = %d: must be a power of two in [1, 2^20] (1 = no sharding)", name,
                size);
  if (slots.owner_rank < 0 || slots.owner_rank >= size)
    return fail(Status::kErrorInvalidArgument, "%s.owner_rank = %d: must be in [0, owner_size = %d)",
                name, slots.owner_rank, size);
  if (!product_fits(local_capacity, size))
    return fail(Status::kErrorCapacityOverflow,
                "%s: the cache's slots times owner_size = %d overflow int64", name, size);
  return Status::kSuccess;
}

Status check_bf16_rows(const void* data, int64_t row_stride, int64_t rows, int64_t width,
                       const char* name, const char* stride_name) {
  if (data == nullptr && rows > 0) return fail(Status::kErrorInvalidArgument, "%s is null", name);
  if (row_stride < width)
    return fail(Status::kErrorInvalidArgument, "%s = %lld: must be >= the row width %lld",
                stride_name, static_cast<long long>(row_stride), static_cast<long long>(width));
  if (!aligned16(data) || row_stride % 8 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s must be 16-byte aligned and %s (%lld elements) a multiple of 8: the kernels "
                "move 16-byte vectors",
                name, stride_name, static_cast<long long>(row_stride));
  if (!product_fits(rows, 2 * row_stride))
    return fail(Status::kErrorCapacityOverflow, "%s: rows * %s overflows int64", name,
                stride_name);
  return Status::kSuccess;
}

Status int32_row_stride(int64_t row_stride, int64_t rows, const char* stride_name, int32_t* out) {
  if (rows <= 1) {
    *out = 0;
    return Status::kSuccess;
  }
  if (row_stride > INT32_MAX)
    return fail(Status::kErrorNotSupported,
                "%s = %lld: more than 2^31 - 1 elements between rows is not supported (the kernel "
                "keeps the stride in 32 bits)",
                stride_name, static_cast<long long>(row_stride));
  *out = static_cast<int32_t>(row_stride);
  return Status::kSuccess;
}

Status check_index_k_fp8_cache(const IndexKFp8Cache& cache, const char* name) {
  const int32_t d = cache.head_dim;
  if (d <= 0 || d % layout::kQuantBlock != 0 || d > layout::kMaxIndexKHeadDim)
    return fail(Status::kErrorNotSupported,
                "%s.head_dim = %d: must be a multiple of 128 in [128, %d]", name, d,
                layout::kMaxIndexKHeadDim);
  if (cache.scale_rule != ScaleRule::kAmax && cache.scale_rule != ScaleRule::kPow2)
    return fail(Status::kErrorInvalidArgument, "%s.scale_rule = %d: not a ScaleRule", name,
                static_cast<int>(cache.scale_rule));
  CACHESTORE_RETURN_IF_ERROR(check_page_size(cache.page_size, name));
  return check_paged_cache(cache.data, cache.num_pages, cache.page_size, cache.page_stride_bytes,
                           layout::index_k_fp8_min_page_stride(cache.page_size, d),
                           /*stride_alignment=*/4, name);
}

Status check_index_k_fp4_cache(const IndexKFp4Cache& cache, const char* name) {
  const int32_t d = cache.head_dim;
  if (d <= 0 || d % layout::kFp4Group != 0 || d > layout::kMaxIndexKFp4HeadDim)
    return fail(Status::kErrorNotSupported,
                "%s.head_dim = %d: must be a multiple of 32 in [32, %d]", name, d,
                layout::kMaxIndexKFp4HeadDim);
  if (cache.ties != Fp4Ties::kToEven && cache.ties != Fp4Ties::kTowardZero)
    return fail(Status::kErrorInvalidArgument, "%s.ties = %d: not an Fp4Ties", name,
                static_cast<int>(cache.ties));
  CACHESTORE_RETURN_IF_ERROR(check_page_size(cache.page_size, name));
  return check_paged_cache(cache.data, cache.num_pages, cache.page_size, cache.page_stride_bytes,
                           layout::index_k_fp4_min_page_stride(cache.page_size, d),
                           /*stride_alignment=*/4, name);
}

Status check_mla_cache(const MlaCache& cache, const char* name) {
  // mla_min_page_stride's switch is the one list of the layouts: 0 for any other value.
  if (mla_min_page_stride(cache.layout, 1) == 0)
    return fail(Status::kErrorInvalidArgument, "%s.layout = %d: not an MlaLayout", name,
                static_cast<int>(cache.layout));
  // The V4.1 layouts fix their scale formats: scale_rule is not read.
  const bool v41 = cache.layout == MlaLayout::kV41 || cache.layout == MlaLayout::kV41Fp4;
  if (!v41 && cache.scale_rule != ScaleRule::kAmax && cache.scale_rule != ScaleRule::kPow2)
    return fail(Status::kErrorInvalidArgument, "%s.scale_rule = %d: not a ScaleRule", name,
                static_cast<int>(cache.scale_rule));
  if (cache.layout == MlaLayout::kV4 && cache.scale_rule != ScaleRule::kPow2)
    return fail(Status::kErrorNotSupported,
                "%s.scale_rule: the V4 layout stores UE8M0 scales, only kPow2 applies", name);
  CACHESTORE_RETURN_IF_ERROR(check_page_size(cache.page_size, name));
  return check_paged_cache(cache.data, cache.num_pages, cache.page_size, cache.page_stride_bytes,
                           mla_min_page_stride(cache.layout, cache.page_size),
                           /*stride_alignment=*/16, name);
}

}  // namespace cachestore::detail
