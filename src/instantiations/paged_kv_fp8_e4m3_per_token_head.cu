// store_paged_kv's kernels and launcher for fp8_e4m3_per_token_head caches.
#include "dispatch/paged_kv_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv<KvCacheType::kFp8E4m3PerTokenHead>(const PagedKvParams&,
                                                                   const ArchInfo&, cudaStream_t);
}  // namespace cachestore::detail
