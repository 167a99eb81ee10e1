// store_paged_kv's kernels and launcher for nvfp4 caches.
#include "dispatch/paged_kv_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv<KvCacheType::kNvfp4>(const PagedKvParams&, const ArchInfo&,
                                                     cudaStream_t);
}  // namespace cachestore::detail
