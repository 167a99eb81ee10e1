// Warp reductions of the quantizing stores.
#pragma once

#include <cstdint>
#include <cuda/ptx>
#include <cuda_runtime.h>

namespace cachestore::kernels {

// Amax over the `kLanes` consecutive lanes that hold one quantization block, returned to every
// lane of the group (each lane scales its own values by it). The whole warp must take part
// (callers keep the lanes of rows past the batch until here): a mask of the group's lanes would
// make the compiler add a convergence check (MATCH.ANY, REDUX, a divergent-path branch) in front.
//  - Groups of 8 to 32 lanes: one warp-wide integer max (redux.sync, sm_80+) per group, each
//    group's lanes contributing their bits and the others 0. The amax is non-negative and never
//    NaN (Bf16Vals::amax), and non-negative floats order as their bit patterns. The reductions
//    are independent, so they overlap: one latency instead of log2(kLanes) dependent shuffles.
//  - Groups of 2 or 4 lanes: a butterfly of shuffles (one or two).
template <int kLanes>
__device__ __forceinline__ float group_amax(float local) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "power of two");
  if constexpr (kLanes >= 8) {
    const uint32_t bits = __float_as_uint(local);
    const uint32_t group = cuda::ptx::get_sreg_laneid() / kLanes;
    uint32_t result = 0;
#pragma unroll
    for (uint32_t g = 0; g < 32 / kLanes; ++g) {
      const uint32_t m = __reduce_max_sync(0xffffffffu, group == g ? bits : 0u);
      result = group == g ? m : result;
    }
    return __uint_as_float(result);
  } else {
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2)
      local = fmaxf(local, __shfl_xor_sync(0xffffffffu, local, offset));
    return local;
  }
}

}  // namespace cachestore::kernels
