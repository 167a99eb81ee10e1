// store_paged_kv's kernels and launcher with RoPE fused, for nvfp4 caches.
#include "dispatch/paged_kv_rope_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv_rope<KvCacheType::kNvfp4>(const PagedKvParams&, const ArchInfo&,
                                                            cudaStream_t);
}  // namespace cachestore::detail
