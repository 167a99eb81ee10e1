// store_paged_kv's kernels and launcher with RoPE fused, for fp8 e5m2 caches.
#include "dispatch/paged_kv_rope_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv_rope<KvCacheType::kFp8E5m2>(const PagedKvParams&, const ArchInfo&,
                                                            cudaStream_t);
}  // namespace cachestore::detail
