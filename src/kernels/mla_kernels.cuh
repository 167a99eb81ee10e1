// The MLA store kernels, generic over the layout (MlaRow<kLayout>, from the layout's kernel
// header) and, in the fused kernel, the index-K format (IndexKRow<kIndex>).
#pragma once

#include "kernels/index_k_row.cuh"
#include "kernels/mla_row.cuh"
#include "tuning.h"

namespace cachestore::kernels {

// ---- fused_store_cache without an index-K: blockDim = (32, rows per block * warps per row).
// A kernel of its own rather than the fused kernel without index warps: a row runs slower in a
// kernel that also holds the other kind of row, even where that code never executes.
template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaThreadsPerSm / tuning::kMaxBlockThreads)
mla_store_kernel(const GuardArgs guard, const MlaArgs kv, const PageTableArgs kv_table) {
  constexpr int kWarpsPerRow = kMlaRowLanes<kN> / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.y / kWarpsPerRow) +
                      threadIdx.y / kWarpsPerRow;
  const int lane = static_cast<int>(threadIdx.y % kWarpsPerRow) * 32 + static_cast<int>(threadIdx.x);
  MlaRow<kLayout>::template store<kRule, SlotT, kN, kPdl>(guard, kv, kv_table, row, lane,
                                                          row < guard.num_tokens);
}

// ---- fused_store_cache with an index-K: blockDim = (32, rows_per_block * warps per row + index
// warps). The first rows_per_block rows' KV records take kMlaRowLanes<kN> / 32 warps each; the
// warps after them store the index-K (fp8 or fp4: kIndex) of the same rows (2^lanes_log2 lanes
// per row). Every warp reads guard.rows_per_block first (its role and row depend on it), so it
// sits in the parameters' first constant-bank line, which every warp reads anyway.
// kIndexDim: the index-K row's D compiled in (0: the run-time head_dim), its rows then pinned
// without PDL too, as in the index-K kernels. kKvRule: the KV layout's scale rule, compiled in as
// in mla_store_kernel.
template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN,
          bool kPdl, int kIndexDim = 0>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaThreadsPerSm / tuning::kMaxBlockThreads)
fused_store_kernel(const GuardArgs guard, const MlaArgs kv, const IndexKArgs index,
                   const PageTableArgs kv_table, const PageTableArgs index_table) {
  constexpr int kWarpsPerRow = kMlaRowLanes<kN> / 32;
  const int32_t rows_per_block = guard.rows_per_block;
  const int warp = threadIdx.y;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  if (warp < rows_per_block * kWarpsPerRow) {
    const int64_t row = first_row + warp / kWarpsPerRow;
    const int lane = (warp % kWarpsPerRow) * 32 + static_cast<int>(threadIdx.x);
    MlaRow<kLayout>::template store<kKvRule, SlotT, kN, kPdl>(guard, kv, kv_table, row, lane,
                                                              row < guard.num_tokens);
  } else {
    // Whole index warps: lanes past the block's rows or the batch stay for the shuffles.
    const int local = (warp - rows_per_block * kWarpsPerRow) * 32 + threadIdx.x;
    const int lanes_log2 = kIndexDim != 0 ? index_k_lanes_log2(kIndexDim, kN) : index.lanes_log2;
    const int row_in_block = local >> lanes_log2;
    const int64_t row = first_row + row_in_block;
    const bool live = row_in_block < rows_per_block && row < guard.num_tokens;
    // The KV warps count a negative n for the launch.
    const int lane = local & ((1 << lanes_log2) - 1);
    constexpr bool kPinned = kPdl || kIndexDim != 0;
    IndexKRow<kIndex>::template store<SlotT, kN, kPdl, kPinned, kIndexDim>(
        guard, index, index_table, row, lane, live, false);
  }
}

}  // namespace cachestore::kernels
