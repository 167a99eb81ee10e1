// store_index_k_bf16, store_index_k_fp8 and store_index_k_fp4: validation, dispatch, launch.
#include "cachestore/layout.h"
#include "detail/validate.h"
#include "kernels/store_kernels.cuh"
#include "launch.cuh"

namespace cachestore {
using detail::fail;

Status store_index_k_bf16(const IndexKBf16Params& p, cudaStream_t stream) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(detail::check_slots(p.slots, p.batch.num_tokens, "slots"));
  if (p.head_dim <= 0 || p.head_dim % 8 != 0 || p.head_dim > 8192)
    return fail(Status::kErrorNotSupported,
                "head_dim = %d: must be a multiple of 8 in [8, 8192]", p.head_dim);
  if (p.num_slots < 0)
    return fail(Status::kErrorInvalidArgument, "num_slots = %lld: must be >= 0",
                static_cast<long long>(p.num_slots));
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.k, p.k_row_stride, p.batch.num_tokens,
                                                     p.head_dim, "k", "k_row_stride"));
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.cache, p.cache_row_stride, p.num_slots,
                                                     p.head_dim, "cache", "cache_row_stride"));
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (p.batch.num_tokens == 0) return detail::succeed();

  const int32_t vecs_per_row = p.head_dim / 8;
  int32_t lanes = 1;
  while (lanes < vecs_per_row && lanes < 32) lanes *= 2;
  const kernels::IndexKBf16Args args{detail::flat_slot_args(p.slots, p.num_slots),
                                     static_cast<const uint16_t*>(p.k), p.k_row_stride,
                                     static_cast<uint16_t*>(p.cache), p.cache_row_stride,
                                     vecs_per_row};
  return detail::launch_index_k(
      [](auto slot, auto pdl) {
        return kernels::index_k_bf16_kernel<decltype(slot), decltype(pdl)::value>;
      },
      p.batch, p.slots.type, p.launch, arch, lanes, args, stream);
}

namespace {
// The paged (fp8 and fp4) index-K stores: the same checks and launch, each with its cache's check
// and kernel (`kernel_for(SlotT{}, integral_constant<kN>, bool_constant<kPdl>,
// integral_constant<kDim>)`, kDim from with_index_k_dim); kFour: whether it takes kN = 4 at
// decode sizes (fp8; the fp4 kernel's e2m1 bytes come 4 or 8 a lane).
template <bool kFour, typename Params, typename Cache, typename KernelFor>
Status store_index_k_paged(const Params& p, Status (*check_cache)(const Cache&, const char*),
                           KernelFor kernel_for, cudaStream_t stream) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(detail::check_slots(p.slots, p.batch.num_tokens, "slots"));
  CACHESTORE_RETURN_IF_ERROR(check_cache(p.cache, "cache"));
  CACHESTORE_RETURN_IF_ERROR(
      detail::check_owner(p.slots, p.cache.num_pages * p.cache.page_size, "slots"));
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.k, p.k_row_stride, p.batch.num_tokens,
                                                     p.cache.head_dim, "k", "k_row_stride"));
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (p.batch.num_tokens == 0) return detail::succeed();

  return detail::with_values_per_lane<kFour>(p.batch.num_tokens, [&](auto values) {
    const kernels::IndexKArgs args =
        detail::index_k_args(p.slots, p.k, p.k_row_stride, p.cache, decltype(values)::value);
    return detail::launch_index_k(
        [&](auto slot, auto pdl) {
          return detail::with_index_k_dim<decltype(values)::value>(
              p.cache.head_dim, [&](auto dim) { return kernel_for(slot, values, pdl, dim); });
        },
        p.batch, p.slots.type, p.launch, arch, 1 << args.lanes_log2, args, stream);
  });
}
}  // namespace

Status store_index_k_fp8(const IndexKFp8Params& p, cudaStream_t stream) {
  // One instantiation per scale rule: no run-time branch on the chain after the loads. With D
  // compiled in, the row's addresses are pinned before its loads without PDL too (kPinned).
  return store_index_k_paged<true>(
      p, detail::check_index_k_fp8_cache,
      [&p](auto slot, auto values, auto pdl, auto dim) {
        using SlotT = decltype(slot);
        constexpr int kN = decltype(values)::value;
        constexpr bool kPdl = decltype(pdl)::value;
        constexpr int kDim = decltype(dim)::value;
        constexpr bool kPinned = kPdl || kDim != 0;
        return detail::with_scale_rule(p.cache.scale_rule, true, [](auto rule) {
          return kernels::index_k_fp8_kernel<SlotT, kN, decltype(rule)::value, kPdl, kPinned, kDim>;
        });
      },
      stream);
}

Status store_index_k_fp4(const IndexKFp4Params& p, cudaStream_t stream) {
  return store_index_k_paged<false>(
      p, detail::check_index_k_fp4_cache,
      [](auto slot, auto values, auto pdl, auto dim) {
        return kernels::index_k_fp4_kernel<decltype(slot), decltype(values)::value,
                                           decltype(pdl)::value, decltype(dim)::value>;
      },
      stream);
}

}  // namespace cachestore
