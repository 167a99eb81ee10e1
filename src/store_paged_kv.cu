// store_paged_kv: validation, dispatch, launch.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "cachestore/layout.h"
#include "detail/validate.h"
#include "kernels/paged_kv.cuh"
#include "launch.cuh"

namespace cachestore {
namespace {

using detail::fail;

inline long long ll(int64_t v) { return static_cast<long long>(v); }

Status check_input(const KvInput& in, int64_t num_tokens, int32_t heads, bool fp8,
                   const char* name) {
  const int32_t d = in.head_dim;
  const int32_t multiple = fp8 ? 16 : 8;
  if (d < multiple || d > layout::kMaxKvHeadDim || d % multiple != 0)
    return fail(Status::kErrorNotSupported,
                "%s.head_dim = %d: must be a multiple of %d in [%d, %d]%s", name, d, multiple,
                multiple, layout::kMaxKvHeadDim, fp8 ? " for an fp8 cache" : "");
  if (in.data == nullptr && num_tokens > 0)
    return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (in.token_stride < 0 || in.head_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s strides must be >= 0", name);
  if (!detail::aligned_to(in.data, 16) || in.token_stride % 8 != 0 || in.head_stride % 8 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s.data must be 16-byte aligned and %s.token_stride (%lld) and %s.head_stride "
                "(%lld) multiples of 8 elements: the kernel reads 16-byte vectors",
                name, name, ll(in.token_stride), name, ll(in.head_stride));
  if (!detail::product_fits(num_tokens, in.token_stride) ||
      !detail::product_fits(heads, in.head_stride))
    return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
  return Status::kSuccess;
}

// The cache view of one side: alignment for its vector width, and no two (slot, head) entries
// overlapping. The dimensions (index d: extent D; heads; entries in a page; pages) are nested by
// stride: each stride must clear the extent of everything finer, which is what every layout of
// the contract does (sufficient, not necessary; a layout it refuses would need another proof).
Status check_cache(const KvCacheView& c, const KvInput& in, const PagedKvParams& p, bool fp8,
                   const char* name) {
  const int64_t elem_bytes = fp8 ? 1 : 2;
  if (c.data == nullptr) return fail(Status::kErrorInvalidArgument, "%s.data is null", name);
  if (c.page_stride < 0 || c.entry_stride < 0 || c.head_stride < 0)
    return fail(Status::kErrorInvalidArgument, "%s strides must be >= 0", name);
  if (!detail::aligned_to(c.data, 8 * elem_bytes) || c.page_stride % 8 != 0 ||
      c.entry_stride % 8 != 0 || c.head_stride % 8 != 0)
    return fail(Status::kErrorMisalignedOperand,
                "%s.data must be %lld-byte aligned and its page, entry and head strides "
                "(%lld, %lld, %lld) multiples of 8 elements: the kernel writes %lld-byte vectors",
                name, ll(8 * elem_bytes), ll(c.page_stride), ll(c.entry_stride),
                ll(c.head_stride), ll(8 * elem_bytes));
  std::array<std::pair<int64_t, int64_t>, 3> dims{{{c.head_stride, p.num_heads},
                                                   {c.entry_stride, p.page_size},
                                                   {c.page_stride, p.num_pages}}};
  std::sort(dims.begin(), dims.end());
  int64_t extent = in.head_dim;  // elements spanned by one (slot, head) entry, then nested blocks
  for (const auto& [stride, count] : dims) {
    if (count <= 1) continue;
    if (stride < extent)
      return fail(Status::kErrorInvalidArgument,
                  "%s: strides (page %lld, entry %lld, head %lld) let two slots or heads overlap "
                  "for page_size %d, num_heads %d, head_dim %d",
                  name, ll(c.page_stride), ll(c.entry_stride), ll(c.head_stride), p.page_size,
                  p.num_heads, in.head_dim);
    if (!detail::product_fits(count - 1, stride) || extent > INT64_MAX - (count - 1) * stride)
      return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
    extent += (count - 1) * stride;
  }
  if (!detail::product_fits(extent, elem_bytes))
    return fail(Status::kErrorCapacityOverflow, "%s: offsets overflow int64", name);
  if (fp8) {
    if (c.scale == nullptr)
      return fail(Status::kErrorInvalidArgument, "%s.scale is null: an fp8 cache needs scales",
                  name);
    if (!detail::aligned_to(c.scale, 4))
      return fail(Status::kErrorMisalignedOperand, "%s.scale must be 4-byte aligned", name);
    if (c.scale_stride != 0 && c.scale_stride != 1)
      return fail(Status::kErrorInvalidArgument,
                  "%s.scale_stride = %d: 0 (one per tensor) or 1 (one per head)", name,
                  c.scale_stride);
  }
  return Status::kSuccess;
}

Status check_params(const PagedKvParams& p) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(detail::check_slots(p.slots, p.batch.num_tokens, "slots"));
  if (p.input_type != KvDataType::kBf16 && p.input_type != KvDataType::kFp16)
    return fail(Status::kErrorInvalidArgument, "input_type = %d: not a KvDataType",
                static_cast<int>(p.input_type));
  if (p.cache_type != KvCacheType::kAuto && p.cache_type != KvCacheType::kFp8E4m3 &&
      p.cache_type != KvCacheType::kFp8E5m2)
    return fail(Status::kErrorInvalidArgument, "cache_type = %d: not a KvCacheType",
                static_cast<int>(p.cache_type));
  if (p.num_heads < 1 || p.num_heads > layout::kMaxKvHeads)
    return fail(Status::kErrorNotSupported, "num_heads = %d: must be in [1, %d]", p.num_heads,
                layout::kMaxKvHeads);
  if (p.page_size < 1 || p.page_size > (1 << 20))
    return fail(Status::kErrorNotSupported, "page_size = %d: must be in [1, 2^20]", p.page_size);
  if (p.num_pages < 0)
    return fail(Status::kErrorInvalidArgument, "num_pages = %lld: must be >= 0", ll(p.num_pages));
  if (!detail::product_fits(p.num_pages, p.page_size))
    return fail(Status::kErrorCapacityOverflow, "num_pages * page_size overflows int64");
  const int64_t capacity = p.num_pages * p.page_size;
  CACHESTORE_RETURN_IF_ERROR(detail::check_owner(p.slots, capacity, "slots"));
  const bool pow2_page = (p.page_size & (p.page_size - 1)) == 0;
  if (!pow2_page && capacity * p.slots.owner_size > (int64_t{1} << 32))
    return fail(Status::kErrorNotSupported,
                "num_pages * page_size * slots.owner_size = %lld: at most 2^32 slots when "
                "page_size (%d) is not a power of two",
                ll(capacity * p.slots.owner_size), p.page_size);
  const bool fp8 = p.cache_type != KvCacheType::kAuto;
  CACHESTORE_RETURN_IF_ERROR(check_input(p.k, p.batch.num_tokens, p.num_heads, fp8, "k"));
  CACHESTORE_RETURN_IF_ERROR(check_cache(p.k_cache, p.k, p, fp8, "k_cache"));
  if (p.v.data != nullptr) {
    CACHESTORE_RETURN_IF_ERROR(check_input(p.v, p.batch.num_tokens, p.num_heads, fp8, "v"));
    CACHESTORE_RETURN_IF_ERROR(check_cache(p.v_cache, p.v, p, fp8, "v_cache"));
  }
  return Status::kSuccess;
}

kernels::KvSideArgs side_args(const KvInput& in, const KvCacheView& c) {
  return {static_cast<const uint16_t*>(in.data),
          in.token_stride,
          in.head_stride,
          static_cast<uint8_t*>(c.data),
          {c.page_stride, c.entry_stride, c.head_stride},
          c.scale,
          c.scale_stride,
          kernels::FastDivmod::make(static_cast<uint32_t>(in.head_dim / 8))};
}

template <KvCacheType kCache, KvDataType kIn>
Status launch(const PagedKvParams& p, const kernels::PagedKvArgs& args, const dim3& grid,
              const dim3& block, const detail::ArchInfo& arch, cudaStream_t stream) {
  const bool pdl = detail::use_pdl(p.launch, arch);
  const kernels::GuardArgs guard = detail::guard_args(p.batch, pdl, grid, arch);
  return detail::with_pdl(pdl, [&](auto pdl_constant) {
    constexpr bool kPdl = decltype(pdl_constant)::value;
    return p.slots.type == SlotType::kInt32
               ? detail::launch_store(kernels::paged_kv_kernel<int32_t, kCache, kIn, kPdl>, grid,
                                      block, stream, pdl_constant, guard, args)
               : detail::launch_store(kernels::paged_kv_kernel<int64_t, kCache, kIn, kPdl>, grid,
                                      block, stream, pdl_constant, guard, args);
  });
}

}  // namespace

Status store_paged_kv(const PagedKvParams& p, cudaStream_t stream) {
  CACHESTORE_RETURN_IF_ERROR(check_params(p));
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (p.batch.num_tokens == 0) return detail::succeed();

  const bool has_v = p.v.data != nullptr;
  const int32_t k_vecs = p.num_heads * (p.k.head_dim / 8);
  const int32_t vecs = k_vecs + (has_v ? p.num_heads * (p.v.head_dim / 8) : 0);
  const bool pow2_page = (p.page_size & (p.page_size - 1)) == 0;
  kernels::PagedKvArgs args{
      detail::slot_args(p.slots, p.num_pages * p.page_size),
      side_args(p.k, p.k_cache),
      has_v ? side_args(p.v, p.v_cache) : kernels::KvSideArgs{},
      k_vecs,
      vecs,
      pow2_page ? detail::log2_exact(p.page_size) : -1,
      kernels::FastDivmod::make(static_cast<uint32_t>(p.page_size))};

  // A row's vectors across the block's x (a warp's worth at least, when there are that many),
  // rows across y: rows per block from n as for the other stores, at most 256 threads.
  constexpr int32_t kMaxThreads = 256;
  int32_t bx = 1;
  while (bx < vecs && bx < 32) bx *= 2;
  if (vecs > 32) bx = std::min((vecs + 31) / 32 * 32, kMaxThreads);
  const int32_t rows = detail::rows_per_block(p.batch.num_tokens, std::max(1, 64 / bx),
                                              std::max(1, kMaxThreads / bx), arch.sm_count);
  dim3 grid;
  CACHESTORE_RETURN_IF_ERROR(detail::grid_for_rows(p.batch.num_tokens, rows, &grid));
  grid.y = static_cast<unsigned>((vecs + bx - 1) / bx);
  const dim3 block(bx, rows);

  const bool bf16 = p.input_type == KvDataType::kBf16;
  switch (p.cache_type) {
    case KvCacheType::kAuto:  // bits copied: the input type does not matter
      return launch<KvCacheType::kAuto, KvDataType::kBf16>(p, args, grid, block, arch, stream);
    case KvCacheType::kFp8E4m3:
      return bf16 ? launch<KvCacheType::kFp8E4m3, KvDataType::kBf16>(p, args, grid, block, arch, stream)
                  : launch<KvCacheType::kFp8E4m3, KvDataType::kFp16>(p, args, grid, block, arch, stream);
    case KvCacheType::kFp8E5m2:
      return bf16 ? launch<KvCacheType::kFp8E5m2, KvDataType::kBf16>(p, args, grid, block, arch, stream)
                  : launch<KvCacheType::kFp8E5m2, KvDataType::kFp16>(p, args, grid, block, arch, stream);
  }
  return fail(Status::kErrorInvalidArgument, "cache_type: not a KvCacheType");
}

}  // namespace cachestore
