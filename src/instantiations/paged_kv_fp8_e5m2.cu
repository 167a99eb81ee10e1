// store_paged_kv's kernels and launcher for fp8_e5m2 caches.
#include "dispatch/paged_kv_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv<KvCacheType::kFp8E5m2>(const PagedKvParams&, const ArchInfo&,
                                                   cudaStream_t);
}  // namespace cachestore::detail
