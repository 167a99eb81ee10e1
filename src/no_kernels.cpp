// A build without kernels (-DCACHESTORE_HOST_ONLY=ON): every launcher refuses, so the library
// is its host side only (the checks, the layout table, the C ABI, the torch ops' host side).
// The Python package test builds it on machines without an NVIDIA driver, where no store gets
// past its device query anyway; it is never what a user installs.
#include <cstdint>
#include <tuple>
#include <utility>

#include "dispatch/launchers.h"

namespace cachestore::detail {
namespace {
Status no_kernels() {
  return fail(Status::kErrorNotSupported,
              "this build of cachestore has no kernels (CACHESTORE_HOST_ONLY)");
}
}  // namespace

Status launch_index_k_bf16(const IndexKBf16Params&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
Status launch_index_k_fp8(const IndexKFp8Params&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
Status launch_index_k_fp4(const IndexKFp4Params&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
Status launch_move_pages(const MovePagesParams&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
template <MlaLayout kLayout>
Status launch_mla(const FusedStoreParams&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
template <MlaLayout kLayout>
Status launch_mla_rope(const FusedStoreParams&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
template <KvCacheType kCache>
Status launch_paged_kv(const PagedKvParams&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}
template <KvCacheType kCache>
Status launch_paged_kv_rope(const PagedKvParams&, const ArchInfo&, cudaStream_t) {
  return no_kernels();
}

// Every layout table entry's launchers, instantiated (their addresses taken).
template <typename Layouts, typename CacheTypes>
struct AllLaunchers;
template <int32_t... kL, int32_t... kC>
struct AllLaunchers<std::integer_sequence<int32_t, kL...>, std::integer_sequence<int32_t, kC...>> {
  static constexpr auto kLaunchers = std::make_tuple(
      &launch_mla<static_cast<MlaLayout>(kL)>..., &launch_mla_rope<static_cast<MlaLayout>(kL)>...,
      &launch_paged_kv<static_cast<KvCacheType>(kC)>...,
      &launch_paged_kv_rope<static_cast<KvCacheType>(kC)>...);
};
template struct AllLaunchers<std::make_integer_sequence<int32_t, layout::kNumMlaLayouts>,
                             std::make_integer_sequence<int32_t, layout::kNumKvCacheTypes>>;

}  // namespace cachestore::detail
