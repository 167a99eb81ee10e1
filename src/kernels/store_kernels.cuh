// The DeepSeek store kernels (index-K bf16 and fp8, FlashMLA V4 and V3.2, fused). One group of
// lanes per row: each lane moves 8- or 16-byte vectors, reads the count, its row's slot and its
// input together (so their latencies overlap), applies the one guard, and only then writes. Rows
// at or past num_tokens store nothing: the index-K rows read nothing either, the MLA rows read row
// 0's input and no slot (mla_input_row). The quantizing kernels take kN = 4, 8 or 16 values per lane
// (launchers, launch.cuh: 8 for decode-size batches, where the chain after the loads is the
// latency, 16 for large ones, where fewer lanes per row move the same bytes; the fp8 index-K
// kernel 4 up to 512 rows, and D = 128 compiled in up to 1024).
#pragma once

#include "cachestore/layout.h"
#include "kernels/common.cuh"
#include "kernels/v41_kernels.cuh"

namespace cachestore::kernels {

// The largest block a launch policy uses (arch.h); the launch bounds cap registers so that
// the index-K kernels run 2048 threads per SM and the MLA kernels 1536.
inline constexpr int kMaxBlockThreads = 512;

// ---- bf16 index-K: blockDim = (lanes per row, rows per block). No pages: no owner sharding.
// The row pins its addresses with or without PDL (begin_row's kPinned): without PDL that took
// 0.03-0.04x of the lean naive node off it at n <= 512 (probe_small_n: the count's address
// without a null test and the input's before the row check; ptxas otherwise read the count
// pointer twice and the input's base and stride by per-thread constant loads on the way to
// the loads). The quantizing rows gained nothing from it (V4), so they pin only with PDL.
template <typename SlotT, bool kPdl>
__global__ void index_k_bf16_kernel(const GuardArgs guard, const IndexKBf16Args a) {
  constexpr bool kPinned = true;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  int vec = threadIdx.x;
  const uint16_t* first = a.k + (row * a.k_row_stride + 8 * vec);
  const bool has_first = vec < a.vecs_per_row;
  GuardSources<SlotT> sources(guard, a.slots, row);
  begin_row<kPdl, kPinned>(guard, sources, first);
  if (row >= guard.num_tokens) return;
  const uint16_t* src = a.k + row * a.k_row_stride;
  const uint4 first_vec = has_first ? load_global<kPinned>(reinterpret_cast<const uint4*>(first))
                                    : uint4{};
  const int64_t n = sources.template load_count<kPinned>(guard);
  const int64_t slot = sources.template load_slot<kPinned>();
  // No exit between the loads: an EXIT waits for the loads in flight, and the compiler would
  // issue the count and slot loads after it (measured: +0.1 us a node).
  if (!row_is_stored(guard, a.slots, row, n, slot, 0, threadIdx.x == 0)) return;
  auto* dst = reinterpret_cast<uint8_t*>(a.cache + slot * a.cache_row_stride);
  if (has_first) store_vec(dst + 16 * vec, first_vec);
  for (vec += blockDim.x; vec < a.vecs_per_row; vec += blockDim.x)
    store_vec(dst + 16 * vec, load_vec(src + 8 * vec));
}

// ---- fp8 index-K (132-byte layout): one row on 2^lanes_log2 lanes, kN values per lane ------
// 128 / kN lanes hold one 128-value block; lanes past D / kN (D = 384) only pad the group. A
// row past the batch (`live` false: the last block's, or the fused kernel's spare index lanes)
// reads nothing but still takes part in the group's shuffles, which need the whole warp.
template <typename SlotT, int kN, ScaleRule kRule, bool kPdl, bool kPinned = kPdl, int kDim = 0>
__device__ __forceinline__ void store_index_k_fp8_row(const GuardArgs& guard,
                                                      const IndexKArgs& a, int64_t row,
                                                      int lane, bool live,
                                                      bool count_negative = true) {
  constexpr int kBlockLanes = layout::kQuantBlock / kN;
  guarded_index_k_row<SlotT, kN, kBlockLanes, kPdl, kPinned, kDim>(guard, a, row, lane, live,
                                                          count_negative,
                                                    [&](Bf16Vals<kN>& x, float amax,
                                                        const PagePosition& pos) {
    x.decode();
    float scale;
    Fp8Bytes<kN> q;
    if constexpr (kRule == ScaleRule::kPow2) {
      const uint8_t e8 =
          pow2_scale_byte(amax, [](float a) { return detail::index_k_scale_base(a); },
                          [](float a) { return detail::index_k_pow2_scale_byte(a); });
      scale = detail::ue8m0_to_float(e8);
      q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));  // x * 2^-e == x / 2^e exactly
    } else {
      scale = detail::index_k_scale_base(amax);
      q = x.template to_e4m3_divided<ScaleSource::kIndexKAmax>(scale);
    }
    // Both addresses before either store, so that the scale store issues right after the data.
    const int head_dim = index_k_dim<kDim>(a);
    uint8_t* const data =
        a.cache.data + layout::index_k_fp8_data_offset(pos.local_page, pos.in_page,
                                                       a.cache.page_stride, head_dim);
    float* const scales = reinterpret_cast<float*>(
        a.cache.data + layout::index_k_fp8_scale_offset(pos.local_page, pos.in_page,
                                                        int64_t{1} << a.cache.page_shift,
                                                        a.cache.page_stride, head_dim));
    store_bytes(data + kN * lane, q, a.cache.page_stride % sizeof(q) == 0);
    // At decode sizes (kN <= 8) every lane of a block writes the block's scale: the same value at
    // the same address, one transaction a warp. Written from one lane, the row ended in an EXIT
    // between the data and the scale store: 0.01-0.025x of the lean naive node slower at
    // n <= 512, the fused kernel's index rows too (NOTES.md, item 28). kN = 16 (large batches)
    // keeps one lane a block: there the extra stores were not measured.
    if (kN <= 8 || lane % kBlockLanes == 0) scales[lane / kBlockLanes] = scale;
  });
}

// The row above for the cache's run-time rule (the fused kernel's index rows: a uniform branch
// before the loads; compiled in, the rule gained <= 0.01x there, NOTES.md, item 26).
template <typename SlotT, int kN, bool kPdl, bool kPinned, int kDim>
__device__ __forceinline__ void store_index_k_fp8_row_any_rule(const GuardArgs& guard,
                                                               const IndexKArgs& a, int64_t row,
                                                               int lane, bool live,
                                                               bool count_negative) {
  if (a.cache.rule == ScaleRule::kPow2) {
    store_index_k_fp8_row<SlotT, kN, ScaleRule::kPow2, kPdl, kPinned, kDim>(guard, a, row, lane,
                                                                            live, count_negative);
  } else {
    store_index_k_fp8_row<SlotT, kN, ScaleRule::kAmax, kPdl, kPinned, kDim>(guard, a, row, lane,
                                                                            live, count_negative);
  }
}

// blockDim = (2^lanes_log2, rows per block): a multiple of 32 threads, so every warp is whole.
template <typename SlotT, int kN, ScaleRule kRule, bool kPdl, bool kPinned = kPdl, int kDim = 0>
__global__ void __launch_bounds__(kMaxBlockThreads, 2048 / kMaxBlockThreads)
index_k_fp8_kernel(const GuardArgs guard, const IndexKArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  store_index_k_fp8_row<SlotT, kN, kRule, kPdl, kPinned, kDim>(guard, a, row, threadIdx.x,
                                                               row < guard.num_tokens);
}

// Lanes of one MLA row: 512 values (V4, V4.1: 448 NoPE + 64 RoPE; V3.2: 512 NoPE) at kN per lane,
// so one warp (kN = 16) or two (kN = 8).
template <int kN>
inline constexpr int kMlaRowLanes = 512 / kN;

// ---- MLA V4: lanes 0..448/kN-1 hold kN NoPE values each (64/kN lanes per 64-value tile); the
// last 64/kN lanes hold kN RoPE values each, copied raw.
template <typename SlotT, int kN, bool kPdl>
__device__ __forceinline__ void store_mla_v4_row(const GuardArgs& guard, const MlaArgs& a,
                                                 int64_t row, int lane, bool live) {
  constexpr int kNopeLanes = layout::kV4NopeDim / kN;
  constexpr int kTileLanes = layout::kV4TileSize / kN;
  const bool is_nope = lane < kNopeLanes;
  Bf16Vals<kN> x;
  const auto [amax, pos, stored] =
      load_nope_or_rope_row<SlotT, kTileLanes, kPdl>(guard, a, row, lane, live, kNopeLanes, x);
  if (!stored) return;

  const int64_t page_size = int64_t{1} << a.cache.page_shift;
  uint8_t* data_row =
      a.cache.data + layout::v4_data_offset(pos.local_page, pos.in_page, a.cache.page_stride);
  uint8_t* scale_row = a.cache.data + layout::v4_scale_offset(pos.local_page, pos.in_page,
                                                              page_size, a.cache.page_stride);
  // Every lane quantizes (the RoPE lanes' results are dropped) and only the stores depend on the
  // kind of lane: the warp that holds both kinds then diverges for a store, not for the chain.
  x.decode();
  const uint8_t e8 = pow2_scale_byte(amax, [](float a) { return detail::v4_scale_base(a); },
                                     [](float a) { return detail::v4_scale_byte(a); });
  const Fp8Bytes<kN> q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
  if (is_nope) {
    *reinterpret_cast<Fp8Bytes<kN>*>(data_row + kN * lane) = q;
  } else {
    x.store_raw(data_row + layout::kV4NopeDim + 2 * kN * (lane - kNopeLanes));
  }
  // Every lane of a tile writes its scale byte (the same value: the warp's store merges them);
  // the RoPE lanes' "tile" is the pad byte after the seven scales (kNopeLanes / kTileLanes ==
  // kV4NumTiles), which is 0. Writing from one lane of the tile put an EXIT between the two
  // stores, and the compiler moved the scale address's arithmetic behind it.
  static_assert(kNopeLanes / kTileLanes == layout::kV4NumTiles, "the pad byte follows the scales");
  scale_row[lane / kTileLanes] = is_nope ? e8 : 0;
}

// ---- MLA V3.2: lane l holds NoPE values kN*l..kN*l+kN-1 (128/kN lanes per 128-value tile);
// lanes 0..7 also copy one 16-byte RoPE vector. kRule: the cache's scale rule, compiled in (the
// launcher instantiates both): read at run time, its uniform branch after the guard cost
// 0.03x (amax) to 0.055x (pow2) of the lean naive node at n <= 512 (NOTES.md, item 26).
template <typename SlotT, int kN, bool kPdl, ScaleRule kRule>
__device__ __forceinline__ void store_mla_v32_row(const GuardArgs& guard, const MlaArgs& a,
                                                  int64_t row, int lane, bool live) {
  constexpr int kRopeLanes = layout::kRopeDim / 8;
  constexpr int kTileLanes = layout::kV32TileSize / kN;
  const int64_t input_row = mla_input_row(row, live);
  const uint16_t* nope = a.nope + (input_row * a.nope_row_stride + kN * lane);
  const uint16_t* rope_src = a.rope + (input_row * a.rope_row_stride + 8 * lane);
  GuardSources<SlotT> sources(guard, a.slots, row);
  begin_row<kPdl>(guard, sources, nope, rope_src);
  auto x = Bf16Vals<kN>::template load<kPdl>(nope);
  const uint4 rope = lane < kRopeLanes
                         ? load_global<kPdl>(reinterpret_cast<const uint4*>(rope_src))
                         : uint4{};
  const auto [amax, pos, stored] =
      guard_mla_row<kTileLanes, kPdl>(guard, a, sources, row, lane, live, x);
  if (!stored) return;

  uint8_t* record =
      a.cache.data + layout::v32_record_offset(pos.local_page, pos.in_page, a.cache.page_stride);
  x.decode();
  float scale;
  Fp8Bytes<kN> q;
  if constexpr (kRule == ScaleRule::kPow2) {
    const uint8_t e8 =
        pow2_scale_byte(amax, [](float a) { return detail::v32_pow2_scale_base(a); },
                        [](float a) { return detail::v32_pow2_scale_byte(a); });
    scale = detail::ue8m0_to_float(e8);
    q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
  } else {
    scale = detail::v32_amax_scale(amax);
    q = x.template to_e4m3_divided<ScaleSource::kTileAmax>(scale);
  }
  *reinterpret_cast<Fp8Bytes<kN>*>(record + kN * lane) = q;
  if (lane % kTileLanes == 0)
    reinterpret_cast<float*>(record + layout::kV32ScalesOffset)[lane / kTileLanes] = scale;
  if (lane < kRopeLanes) store_vec(record + layout::kV32RopeOffset + 16 * lane, rope);
}

// One MLA row of the kernel's layout; kRule is V3.2's (the other layouts' rule is fixed: kPow2,
// unread, so that they have one instantiation).
template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl>
__device__ __forceinline__ void store_mla_row(const GuardArgs& guard, const MlaArgs& kv,
                                              int64_t row, int lane, bool live) {
  if constexpr (kLayout == MlaLayout::kV4) {
    store_mla_v4_row<SlotT, kN, kPdl>(guard, kv, row, lane, live);
  } else if constexpr (kLayout == MlaLayout::kV32) {
    store_mla_v32_row<SlotT, kN, kPdl, kRule>(guard, kv, row, lane, live);
  } else {
    store_mla_v41_row<kLayout, SlotT, kN, kPdl>(guard, kv, row, lane, live);
  }
}

// ---- fused_store_cache without an index-K: blockDim = (32, rows per block * warps per row).
// The fused kernel below with no index warps would do the same, but a row of either kind ran
// 0.06-0.10x (of the lean naive node) slower at n <= 512 in that kernel than in a kernel of its
// own (probe_small_n; same row code): its rows_per_block parameter (since moved, see there) and
// the other kind of row's code, even never executed, explain part of it; not its code layout,
// its 40 registers or its per-warp role branch (NOTES.md, item 20).
template <MlaLayout kLayout, ScaleRule kRule, typename SlotT, int kN, bool kPdl>
__global__ void __launch_bounds__(kMaxBlockThreads, 1536 / kMaxBlockThreads)
mla_store_kernel(const GuardArgs guard, const MlaArgs kv) {
  constexpr int kWarpsPerRow = kMlaRowLanes<kN> / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.y / kWarpsPerRow) +
                      threadIdx.y / kWarpsPerRow;
  const int lane = static_cast<int>(threadIdx.y % kWarpsPerRow) * 32 + static_cast<int>(threadIdx.x);
  store_mla_row<kLayout, kRule, SlotT, kN, kPdl>(guard, kv, row, lane, row < guard.num_tokens);
}

// ---- fused_store_cache: blockDim = (32, rows_per_block * warps per row + index warps). The
// first rows_per_block rows' KV records take kMlaRowLanes<kN> / 32 warps each; the warps after
// them store the index-K (fp8 or fp4: kIndex) of the same rows (2^lanes_log2 lanes per row).
// fused_store_cache launches it only with an index-K (mla_store_kernel otherwise).
// guard.rows_per_block: every warp reads it first (its role and row depend on it); in the
// parameters' last 64-byte line it cost 0.03-0.07x at n <= 512 (probe_small_n), so it sits in
// GuardArgs, in the first line, and the KV warps read the lines 0x200 and 0x240 only.
// kIndexDim: the index-K row's D compiled in (0: the run-time head_dim), its rows then pinned
// without PDL too, as in the index-K kernels.
// kKvRule: V3.2's scale rule, compiled in as in mla_store_kernel (kPow2 for the other layouts).
template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN,
          bool kPdl, int kIndexDim = 0>
__global__ void __launch_bounds__(kMaxBlockThreads, 1536 / kMaxBlockThreads)
fused_store_kernel(const GuardArgs guard, const MlaArgs kv, const IndexKArgs index) {
  constexpr int kWarpsPerRow = kMlaRowLanes<kN> / 32;
  const int32_t rows_per_block = guard.rows_per_block;
  const int warp = threadIdx.y;
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  if (warp < rows_per_block * kWarpsPerRow) {
    const int64_t row = first_row + warp / kWarpsPerRow;
    const int lane = (warp % kWarpsPerRow) * 32 + static_cast<int>(threadIdx.x);
    store_mla_row<kLayout, kKvRule, SlotT, kN, kPdl>(guard, kv, row, lane, row < guard.num_tokens);
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
    if constexpr (kIndex == IndexKFormat::kFp8) {
      store_index_k_fp8_row_any_rule<SlotT, kN, kPdl, kPinned, kIndexDim>(guard, index, row, lane,
                                                                          live, false);
    } else {
      store_index_k_fp4_row<SlotT, kN, kPdl, kPinned, kIndexDim>(guard, index, row, lane, live,
                                                                 false);
    }
  }
}

}  // namespace cachestore::kernels
