// store_paged_kv's kernels and launcher with RoPE fused, for fp8 e4m3 caches.
#include "dispatch/paged_kv_rope_launch.cuh"

namespace cachestore::detail {
template Status launch_paged_kv_rope<KvCacheType::kFp8E4m3>(const PagedKvParams&, const ArchInfo&,
                                                            cudaStream_t);
}  // namespace cachestore::detail
