// store_index_k_bf16's kernels and launcher.
#include "dispatch/index_k_launch.cuh"
#include "dispatch/launchers.h"
#include "kernels/index_k_bf16.cuh"

namespace cachestore::detail {

Status launch_index_k_bf16(const IndexKBf16Params& p, const ArchInfo& arch, cudaStream_t stream) {
  const int32_t vecs_per_row = p.head_dim / 8;
  int32_t lanes = 1;
  while (lanes < vecs_per_row && lanes < 32) lanes *= 2;
  const kernels::IndexKBf16Args args{flat_slot_args(p.slots, p.num_slots),
                                     static_cast<const uint16_t*>(p.k), p.k_row_stride,
                                     static_cast<uint16_t*>(p.cache), p.cache_row_stride,
                                     vecs_per_row};
  return launch_index_k(
      [](auto slot, auto pdl) {
        return kernels::index_k_bf16_kernel<decltype(slot), decltype(pdl)::value>;
      },
      p.batch, p.slots.type, p.launch, arch, lanes, args, stream);
}

}  // namespace cachestore::detail
