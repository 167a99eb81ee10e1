// fused_store_cache's kernels and launcher with RoPE fused, for the v41 layout.
#include "kernels/mla_v41.cuh"
#include "dispatch/mla_launch.cuh"

namespace cachestore::detail {
template Status launch_mla_rope<MlaLayout::kV41>(const FusedStoreParams&, const ArchInfo&,
                                                      cudaStream_t);
}  // namespace cachestore::detail
