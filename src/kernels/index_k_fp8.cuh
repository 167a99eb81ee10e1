// store_index_k_fp8: the 132-byte indexer layout (layout::kIndexKFormats[kFp8]). One row on
// 2^lanes_log2 lanes, kN values per lane; 128 / kN lanes hold one 128-value block, lanes past
// D / kN (D = 384) only pad the group.
#pragma once

#include "cachestore/layout.h"
#include "kernels/core/ue8m0.cuh"
#include "kernels/index_k_row.cuh"
#include "tuning.h"

namespace cachestore::kernels {

// A row past the batch (`live` false: the last block's, or the fused kernel's spare index lanes)
// reads nothing but still takes part in the group's shuffles, which need the whole warp.
template <typename SlotT, int kN, ScaleRule kRule, bool kPdl, bool kPinned = kPdl, int kDim = 0>
__device__ __forceinline__ void store_index_k_fp8_row(const GuardArgs& guard,
                                                      const IndexKArgs& a,
                                                      const PageTableArgs& table, int64_t row,
                                                      int lane, bool live,
                                                      bool count_negative = true) {
  constexpr int kBlockLanes = layout::index_k_format(IndexKFormat::kFp8).group / kN;
  guarded_index_k_row<SlotT, kN, kBlockLanes, kPdl, kPinned, kDim>(
      guard, a, table, row, lane, live, count_negative,
      [&](Bf16Vals<kN>& x, float amax, const PagePosition& pos) {
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
        a.cache.data + layout::data_offset(layout::index_k_rows<IndexKFormat::kFp8>(head_dim),
                                           pos.local_page, pos.in_page, a.cache.page_stride);
    float* const scales = reinterpret_cast<float*>(
        a.cache.data + layout::scale_offset(layout::index_k_rows<IndexKFormat::kFp8>(head_dim),
                                            pos.local_page, pos.in_page,
                                            int64_t{1} << a.cache.page_shift,
                                            a.cache.page_stride));
    store_bytes(data + kN * lane, q, a.cache.page_stride % sizeof(q) == 0);
    // At decode sizes (kN <= 8) every lane of a block writes the block's scale: the same value at
    // the same address, one transaction a warp, and no EXIT between the data and the scale store.
    // Large batches (kN = 16) write it from one lane a block.
    if (kN <= 8 || lane % kBlockLanes == 0) scales[lane / kBlockLanes] = scale;
  });
}

template <>
struct IndexKRow<IndexKFormat::kFp8> {
  // The row for the cache's run-time rule (the fused kernel's index rows: a uniform branch
  // before the loads, which is off the chain between the loads and the stores).
  template <typename SlotT, int kN, bool kPdl, bool kPinned, int kDim>
  __device__ __forceinline__ static void store(const GuardArgs& guard, const IndexKArgs& a,
                                               const PageTableArgs& table,
                                               int64_t row, int lane, bool live,
                                               bool count_negative) {
    if (a.cache.rule == ScaleRule::kPow2) {
      store_index_k_fp8_row<SlotT, kN, ScaleRule::kPow2, kPdl, kPinned, kDim>(
          guard, a, table, row, lane, live, count_negative);
    } else {
      store_index_k_fp8_row<SlotT, kN, ScaleRule::kAmax, kPdl, kPinned, kDim>(
          guard, a, table, row, lane, live, count_negative);
    }
  }
};

// blockDim = (2^lanes_log2, rows per block): a multiple of 32 threads, so every warp is whole.
template <typename SlotT, int kN, ScaleRule kRule, bool kPdl, bool kPinned = kPdl, int kDim = 0>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kIndexKThreadsPerSm / tuning::kMaxBlockThreads)
index_k_fp8_kernel(const GuardArgs guard, const IndexKArgs a, const PageTableArgs table) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  store_index_k_fp8_row<SlotT, kN, kRule, kPdl, kPinned, kDim>(guard, a, table, row, threadIdx.x,
                                                               row < guard.num_tokens);
}

}  // namespace cachestore::kernels
