// store_index_k_bf16: row-per-slot bf16 copy. blockDim = (lanes per row, rows per block); each
// lane moves 16-byte vectors. No pages: no owner sharding.
#pragma once

#include "kernels/core/guard.cuh"
#include "kernels/core/vector_io.cuh"

namespace cachestore::kernels {

// The row pins its addresses with or without PDL (begin_row's kPinned): the count's address
// without a null test and the input's before the row check, which ptxas would otherwise read
// with per-thread constant loads on the way to the loads.
template <typename SlotT, bool kPdl>
__global__ void index_k_bf16_kernel(const GuardArgs guard, const IndexKBf16Args a) {
  constexpr bool kPinned = true;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  int vec = threadIdx.x;
  const uint16_t* first = a.k + (row * a.k_row_stride + 8 * vec);
  const bool has_first = vec < a.vecs_per_row;
  GuardSources<SlotT> sources(guard, a.slots, PageTableArgs{}, row);
  begin_row<kPdl, kPinned>(guard, sources, first);
  if (row >= guard.num_tokens) return;
  const uint16_t* src = a.k + row * a.k_row_stride;
  const uint4 first_vec = has_first ? load_global<kPinned>(reinterpret_cast<const uint4*>(first))
                                    : uint4{};
  const int64_t n = sources.template load_count<kPinned>(guard);
  const int64_t slot = sources.template load_slot<kPinned>(n);
  // No exit between the loads: an EXIT waits for the loads in flight, and the compiler would
  // issue the count and slot loads after it.
  if (!row_is_stored(guard, a.slots, row, n, slot, 0, threadIdx.x == 0)) return;
  auto* dst = reinterpret_cast<uint8_t*>(a.cache + slot * a.cache_row_stride);
  if (has_first) store_vec(dst + 16 * vec, first_vec);
  for (vec += blockDim.x; vec < a.vecs_per_row; vec += blockDim.x)
    store_vec(dst + 16 * vec, load_vec(src + 8 * vec));
}

}  // namespace cachestore::kernels
