// store_paged_kv's kernels and launcher for auto caches.
#include "dispatch/paged_kv_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv<KvCacheType::kAuto>(const PagedKvParams&, const ArchInfo&,
                                                   cudaStream_t);
}  // namespace cachestore::detail
