// fused_store_cache's kernels and launcher with RoPE fused, for the v4 layout.
#include "kernels/mla_v4.cuh"
#include "dispatch/mla_launch.cuh"

namespace cachestore::detail {
template Status launch_mla_rope<MlaLayout::kV4>(const FusedStoreParams&, const ArchInfo&,
                                                      cudaStream_t);
}  // namespace cachestore::detail
