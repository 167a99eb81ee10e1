// The quantized paged index-K stores' kernels and launchers: store_index_k_fp8 (one
// instantiation per scale rule, so that no run-time branch sits on the chain after the loads;
// with D compiled in, the row's addresses are pinned before its loads without PDL too) and
// store_index_k_fp4. The two formats share this translation unit: the inlining of the scale
// helpers they share depends on the unit, and this one keeps their kernels' code as measured.
#include "dispatch/index_k_launch.cuh"
#include "dispatch/launchers.h"
#include "kernels/index_k_fp4.cuh"
#include "kernels/index_k_fp8.cuh"

namespace cachestore::detail {

Status launch_index_k_fp8(const IndexKFp8Params& p, const ArchInfo& arch, cudaStream_t stream) {
  return launch_paged_index_k<true>(
      p, arch,
      [&p](auto slot, auto values, auto pdl, auto dim) {
        using SlotT = decltype(slot);
        constexpr int kN = decltype(values)::value;
        constexpr bool kPdl = decltype(pdl)::value;
        constexpr int kDim = decltype(dim)::value;
        constexpr bool kPinned = kPdl || kDim != 0;
        return with_scale_rule<true>(p.cache.scale_rule, [](auto rule) {
          return kernels::index_k_fp8_kernel<SlotT, kN, decltype(rule)::value, kPdl, kPinned, kDim>;
        });
      },
      stream);
}

Status launch_index_k_fp4(const IndexKFp4Params& p, const ArchInfo& arch, cudaStream_t stream) {
  return launch_paged_index_k<false>(
      p, arch,
      [](auto slot, auto values, auto pdl, auto dim) {
        return kernels::index_k_fp4_kernel<decltype(slot), decltype(values)::value,
                                           decltype(pdl)::value, decltype(dim)::value>;
      },
      stream);
}

}  // namespace cachestore::detail
