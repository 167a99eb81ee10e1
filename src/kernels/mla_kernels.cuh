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
template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl, int kRope,
          typename Rope = RopeArgs>
__device__ __forceinline__ void mla_store_rows(const GuardArgs& guard, const MlaArgs& kv,
                                               const PageTableArgs& kv_table, const Rope* rope) {
  constexpr int kWarpsPerRow = kMlaRowLanes<kN> / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.y / kWarpsPerRow) +
                      threadIdx.y / kWarpsPerRow;
  const int lane = static_cast<int>(threadIdx.y % kWarpsPerRow) * 32 + static_cast<int>(threadIdx.x);
  MlaRow<kLayout>::template store<kRule, SlotT, kN, kPdl, kRope>(guard, kv, kv_table, row, lane,
                                                                 row < guard.num_tokens, rope);
}

template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaThreadsPerSm / tuning::kMaxBlockThreads)
mla_store_kernel(const GuardArgs guard, const MlaArgs kv, const PageTableArgs kv_table) {
  mla_store_rows<kLayout, kRule, SlotT, kN, kPdl, kRopeNone>(
      guard, kv, kv_table, static_cast<const RopeArgs*>(nullptr));
}

// SGLang's freqs_cis form (V4.1 layouts, no Q): the rows alone, with the rotation's few fields
// (FreqsCisArgs: 32 bytes, where MlaRopeArgs is 152). The rotating kernels' launch bounds: under
// the store's (1536 threads an SM) it fits 40 registers, but with PDL it read 87% of copy at
// n = 262144 against 90% here (the same 90-93% without PDL either way).
template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaRopeThreadsPerSm / tuning::kMaxBlockThreads)
mla_freqs_cis_store_kernel(const GuardArgs guard, const MlaArgs kv,
                           const __grid_constant__ FreqsCisArgs freqs,
                           const PageTableArgs kv_table) {
  mla_store_rows<kLayout, kRule, SlotT, kN, kPdl, kRopeFreqsCis>(guard, kv, kv_table, &freqs);
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
          bool kPdl, int kIndexDim, int kRope>
__device__ __forceinline__ void fused_store_rows(const GuardArgs& guard, const MlaArgs& kv,
                                                 const IndexKArgs& index,
                                                 const PageTableArgs& kv_table,
                                                 const PageTableArgs& index_table,
                                                 const RopeArgs* rope) {
  constexpr int kWarpsPerRow = kMlaRowLanes<kN> / 32;
  const int32_t rows_per_block = guard.rows_per_block;
  const int warp = threadIdx.y;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  if (warp < rows_per_block * kWarpsPerRow) {
    const int64_t row = first_row + warp / kWarpsPerRow;
    const int lane = (warp % kWarpsPerRow) * 32 + static_cast<int>(threadIdx.x);
    MlaRow<kLayout>::template store<kKvRule, SlotT, kN, kPdl, kRope>(
        guard, kv, kv_table, row, lane, row < guard.num_tokens, rope);
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

template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN,
          bool kPdl, int kIndexDim = 0>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaThreadsPerSm / tuning::kMaxBlockThreads)
fused_store_kernel(const GuardArgs guard, const MlaArgs kv, const IndexKArgs index,
                   const PageTableArgs kv_table, const PageTableArgs index_table) {
  fused_store_rows<kLayout, kKvRule, kIndex, SlotT, kN, kPdl, kIndexDim, kRopeNone>(
      guard, kv, index, kv_table, index_table, nullptr);
}

// ---- fused_store_cache with RoPE: the kernels above with the rows' RoPE parts rotated
// (blockIdx.y 0), and Q's RoPE part rotated by the blocks after them (blockIdx.y >= 1, each of
// the block's threads one unit of the block's rows: rotate_query_unit). The rotation's
// parameters are __grid_constant__: the rows hold a reference to them, which would otherwise
// copy them to local memory.

// One unit of Q's RoPE part (8 bf16 values, or a NeoX pair of them 32 apart) in one head of one
// of the block's rows (the launcher's q_units_per_row counts a row's threads): rotated into q_out
// when the row is real and its position in the cos/sin cache (the KV lanes count a position past
// it). Q blocks read the count and the position, no slot.
template <bool kPdl>
__device__ __forceinline__ void rotate_query_unit(const GuardArgs& guard, const MlaRopeArgs& a) {
  const RopeArgs& r = a.rope;
  const uint32_t threads = blockDim.x * blockDim.y;
  const uint32_t u =
      (blockIdx.y - 1) * threads + threadIdx.y * blockDim.x + threadIdx.x;
  const uint32_t row_in_block = a.q_units_per_row.div(u);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * guard.rows_per_block + row_in_block;
  if (static_cast<int32_t>(row_in_block) >= guard.rows_per_block || row >= guard.num_tokens)
    return;
  const RopeUnit unit = RopeUnit::rotating(r, a.q_units_per_head,
                                           u - row_in_block * a.q_units_per_row.divisor);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(r.q) +
                        (row * r.q_token_stride + unit.head * r.q_head_stride + 8 * unit.vec);
  const uint16_t* partner_src = src + r.half_rot;  // read by NeoX pairs only
  const uint8_t* position_src = rotation_position_address(r, row);
  CountSource count{guard.n_ptr, guard.n_ptr};
  if constexpr (kPdl) {  // pinned as begin_row pins: without a count, read the position's word
    if (count.count == nullptr) count.count_read = reinterpret_cast<const int32_t*>(position_src);
    compute_before_wait(count.count_read);
    compute_before_wait(src);
    compute_before_wait(partner_src);
    compute_before_wait(position_src);
  }
  begin_store<kPdl>(guard);
  uint4 x[1], y[1];
  x[0] = load_global<kPdl>(reinterpret_cast<const uint4*>(src));
  if (unit.pair) y[0] = load_global<kPdl>(reinterpret_cast<const uint4*>(partner_src));
  const int64_t position = load_rotation_position<kPdl>(r, position_src, row);
  const int64_t n = count.template load_count<kPdl>(guard);
  if (row >= n || position < 0 || position >= r.max_position) return;
  float v[8], w[8];
  rotate_unit<KvDataType::kBf16, 8, 1, true>(r, unit, position, x, y, v, w);
  uint8_t* base = r.q_out + 2 * (row * r.q_out_token_stride + unit.head * r.q_out_head_stride);
  store_vectors(base + 16 * unit.vec, x);
  if (unit.pair) store_vectors(base + 16 * (unit.vec + static_cast<uint32_t>(r.pair_units)), y);
}

template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaRopeThreadsPerSm / tuning::kMaxBlockThreads)
mla_rope_store_kernel(const GuardArgs guard, const MlaArgs kv,
                      const __grid_constant__ MlaRopeArgs rope, const PageTableArgs kv_table) {
  if (blockIdx.y != 0) return rotate_query_unit<kPdl>(guard, rope);
  mla_store_rows<kLayout, kRule, SlotT, kN, kPdl, kRopeAny>(guard, kv, kv_table, &rope.rope);
}

template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN,
          bool kPdl, int kIndexDim>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kMlaRopeThreadsPerSm / tuning::kMaxBlockThreads)
fused_rope_store_kernel(const GuardArgs guard, const MlaArgs kv, const IndexKArgs index,
                        const __grid_constant__ MlaRopeArgs rope, const PageTableArgs kv_table,
                        const PageTableArgs index_table) {
  if (blockIdx.y != 0) return rotate_query_unit<kPdl>(guard, rope);
  fused_store_rows<kLayout, kKvRule, kIndex, SlotT, kN, kPdl, kIndexDim, kRopeAny>(
      guard, kv, index, kv_table, index_table, &rope.rope);
}

}  // namespace cachestore::kernels
