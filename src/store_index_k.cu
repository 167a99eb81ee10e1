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
// and kernel (`kernel_for(SlotT{}, integral_constant<kN>, bool_constant<kPdl>)`); kFour: whether
// it takes kN = 4 at decode sizes (fp8; the fp4 kernel's e2m1 bytes come 4 or 8 a lane).
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
        [&](auto slot, auto pdl) { return kernel_for(slot, values, pdl); }, p.batch,
        p.slots.type, p.launch, arch, 1 << args.lanes_log2, args, stream);
  });
}
}  // namespace

Status store_index_k_fp8(const IndexKFp8Params& p, cudaStream_t stream) {
  // One instantiation per scale rule: no run-time branch on the chain after the loads.
  return store_index_k_paged<true>(
      p, detail::check_index_k_fp8_cache,
      [&p](auto slot, auto values, auto pdl) {
        using SlotT = decltype(slot);
        constexpr int kN = decltype(values)::value;
        constexpr bool kPdl = decltype(pdl)::value;
        // Decode sizes at the DeepSeek indexer's D = 128: D compiled in, and every address
        // computed before the loads without PDL too (kPinned). Either alone gains 0.00-0.04x of
        // the lean naive node, both together 0.04-0.08x (NOTES.md, item 24).
        if constexpr (kN < 16) {
          if (p.cache.head_dim == 128)
            return p.cache.scale_rule == ScaleRule::kPow2
                       ? kernels::index_k_fp8_kernel<SlotT, kN, ScaleRule::kPow2, kPdl, true, 128>
                       : kernels::index_k_fp8_kernel<SlotT, kN, ScaleRule::kAmax, kPdl, true, 128>;
        }
        return p.cache.scale_rule == ScaleRule::kPow2
                   ? kernels::index_k_fp8_kernel<SlotT, kN, ScaleRule::kPow2, kPdl>
                   : kernels::index_k_fp8_kernel<SlotT, kN, ScaleRule::kAmax, kPdl>;
      },
      stream);
}

Status store_index_k_fp4(const IndexKFp4Params& p, cudaStream_t stream) {
  return store_index_k_paged<false>(
      p, detail::check_index_k_fp4_cache,
      [&p](auto slot, auto values, auto pdl) {
        using SlotT = decltype(slot);
        constexpr int kN = decltype(values)::value;
        constexpr bool kPdl = decltype(pdl)::value;
        // D = 128 compiled in at decode sizes, as for fp8.
        if constexpr (kN < 16) {
          if (p.cache.head_dim == 128) return kernels::index_k_fp4_kernel<SlotT, kN, kPdl, 128>;
        }
        return kernels::index_k_fp4_kernel<SlotT, kN, kPdl>;
      },
      stream);
}

}  // namespace cachestore
