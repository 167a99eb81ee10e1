// The row shape every paged index-K store shares (fp8, fp4, and the fused kernel's index rows):
// kN values per lane, the input, count and slot loaded together, the group amax, the one guard,
// then the format's quantization and writes.
#pragma once

#include "kernels/core/bf16_values.cuh"
#include "kernels/core/guard.cuh"
#include "kernels/core/reduce.cuh"

namespace cachestore::kernels {

// An index-K row's D: kDim where the kernel is compiled for one (0: the run-time head_dim).
template <int kDim>
__device__ __forceinline__ int index_k_dim(const IndexKArgs& a) {
  return kDim != 0 ? kDim : a.head_dim;
}

// The loads and the guard of an index-K row on kN values a lane, kGroupLanes lanes to a
// quantization group, then `store(x, amax, pos)`: the row's quantization and writes. The group's
// amax takes the whole warp (a row past the batch, `live` false, reads nothing but shuffles, as
// do lanes past D). Rows past the batch and lanes past D leave first, before the guard (lane 0,
// the leader, is active in every live row), then the rows the guard refuses: one condition per
// exit, so that no reconvergence point (BSSY / BSYNC) sits on the path of a stored row.
// kPinned: begin_row's addresses and loads (always with PDL; without, where D is compiled in).
template <typename SlotT, int kN, int kGroupLanes, bool kPdl, bool kPinned, int kDim,
          typename Store>
__device__ __forceinline__ void guarded_index_k_row(const GuardArgs& guard, const IndexKArgs& a,
                                                    const PageTableArgs& table,
                                                    int64_t row, int lane, bool live,
                                                    bool count_negative, Store&& store) {
  const bool active = live && lane * kN < index_k_dim<kDim>(a);
  const uint16_t* src = a.k + (row * a.k_row_stride + lane * kN);
  GuardSources<SlotT> sources(guard, a.slots, table, row);
  begin_row<kPdl, kPinned>(guard, sources, src);
  auto x = Bf16Vals<kN>::template load<kPinned>(src, active);
  const int64_t n = sources.template load_count<kPinned>(guard);
  const int64_t slot = live ? sources.template load_slot<kPinned>(n) : -1;
  const float amax = group_amax<kGroupLanes>(x.amax());
  if (!active) return;
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  if (!row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0, count_negative))
    return;
  store(x, amax, pos);
}

// The index-K row of a format, specialized by its kernel header: the fused kernel stores its
// index rows through it.
template <IndexKFormat kFormat>
struct IndexKRow;

}  // namespace cachestore::kernels
