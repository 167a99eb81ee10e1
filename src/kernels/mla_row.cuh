// The row shape every MLA layout shares: kN values per lane over 512 / kN lanes (one warp at
// kN = 16, two at kN = 8), the count, slot and input loaded together, the tile amax, the one
// guard. Each layout's kernel header specializes MlaRow with its quantization and writes.
#pragma once

#include "cachestore/layout.h"
#include "kernels/core/bf16_values.cuh"
#include "kernels/core/guard.cuh"
#include "kernels/core/reduce.cuh"

namespace cachestore::kernels {

// Lanes of one MLA row: 512 values (V4, V4.1: 448 NoPE + 64 RoPE; V3.2: 512 NoPE) at kN a lane.
template <int kN>
inline constexpr int kMlaRowLanes = 512 / kN;

// The row of a layout: `MlaRow<kLayout>::store<kRule, SlotT, kN, kPdl>(guard, kv, table, row,
// lane, live)`, specialized in the layout's kernel header. kRule is the cache's scale rule where
// the layout reads one (layout::MlaLayoutInfo::scale_rule_selectable), else kPow2 and unread.
template <MlaLayout kLayout>
struct MlaRow;

// Where an MLA row's lane reads its kN values: lanes below `nope_lanes` from the NoPE input,
// the rest from the RoPE input. Selected operand by operand, so that the address is a few selects
// rather than two branches that reconverge in front of the load.
template <int kN>
__device__ __forceinline__ const uint16_t* nope_or_rope_source(const MlaArgs& a, int64_t row,
                                                               int lane, int nope_lanes) {
  const bool is_nope = lane < nope_lanes;
  return (is_nope ? a.nope : a.rope) + (row * (is_nope ? a.nope_row_stride : a.rope_row_stride) +
                                        kN * (is_nope ? lane : lane - nope_lanes));
}

// The guard of an MLA row whose values `x` are loading: the count and the slot load beside
// them, then the tile's amax (the whole warp takes part), the row's page position and the
// verdict. The row returns when `stored` is false. A row past the batch (`live` false: the last
// block's spare rows) loads no slot (-1: never stored, never counted).
struct MlaRowGuard {
  float amax;
  PagePosition pos;
  bool stored;
};
template <int kTileLanes, bool kPdl, typename SlotT, int kN>
__device__ __forceinline__ MlaRowGuard guard_mla_row(const GuardArgs& guard, const MlaArgs& a,
                                                     const GuardSources<SlotT>& sources,
                                                     int64_t row, int lane, bool live,
                                                     const Bf16Vals<kN>& x) {
  const int64_t n = sources.template load_count<kPdl>(guard);
  const int64_t slot = live ? sources.template load_slot<kPdl>(n) : -1;
  const float amax = group_amax<kTileLanes>(x.amax());
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  return {amax, pos, row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0)};
}

// The row whose input an MLA row reads: its own, or for a row past the batch (`live` false) row
// 0's (a launch has a row), read and never stored. An exit of those rows before the loads, or a
// load under their condition, would put the first read of the inputs' constant-bank line behind
// the test of num_tokens (another line): two constant-cache misses one after the other on the
// way to the loads. A select keeps the two reads side by side.
__device__ __forceinline__ int64_t mla_input_row(int64_t row, bool live) { return live ? row : 0; }

// The start of a V4 / V4.1 row: each lane's kN values `x` from the NoPE input or, on the lanes
// from `nope_lanes` on, the RoPE input (nope_or_rope_source), loaded beside the count and the
// slot, then guard_mla_row.
template <typename SlotT, int kTileLanes, bool kPdl, int kN>
__device__ __forceinline__ MlaRowGuard load_nope_or_rope_row(const GuardArgs& guard,
                                                             const MlaArgs& a,
                                                             const PageTableArgs& table,
                                                             int64_t row, int lane, bool live,
                                                             int nope_lanes,
                                                             Bf16Vals<kN>& x) {
  const uint16_t* src = nope_or_rope_source<kN>(a, mla_input_row(row, live), lane, nope_lanes);
  GuardSources<SlotT> sources(guard, a.slots, table, row);
  begin_row<kPdl>(guard, sources, src);
  x = Bf16Vals<kN>::template load<kPdl>(src);
  return guard_mla_row<kTileLanes, kPdl>(guard, a, sources, row, lane, live, x);
}

// Where a stored row of a split-page layout (data rows, then scale rows) writes.
struct SplitRowPointers {
  uint8_t* data_row;
  uint8_t* scale_row;
};
__device__ __forceinline__ SplitRowPointers split_row_pointers(const layout::PagedRows& rows,
                                                               const MlaArgs& a,
                                                               const PagePosition& pos) {
  const int64_t page_size = int64_t{1} << a.cache.page_shift;
  return {a.cache.data + layout::data_offset(rows, pos.local_page, pos.in_page,
                                             a.cache.page_stride),
          a.cache.data + layout::scale_offset(rows, pos.local_page, pos.in_page, page_size,
                                              a.cache.page_stride)};
}

}  // namespace cachestore::kernels
