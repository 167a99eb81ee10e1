// fused_store_cache's kernels and launcher with RoPE fused, for the v32 layout.
#include "kernels/mla_v32.cuh"
#include "dispatch/mla_launch.cuh"

namespace cachestore::detail {
template Status launch_mla_rope<MlaLayout::kV32>(const FusedStoreParams&, const ArchInfo&,
                                                      cudaStream_t);
}  // namespace cachestore::detail
