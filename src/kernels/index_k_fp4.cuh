// store_index_k_fp4: the 68-byte indexer layout (layout::kIndexKFormats[kFp4]). One row on
// 2^lanes_log2 lanes, kN values per lane; 32 / kN lanes hold one 32-value group, lanes past
// D / kN only pad the row's lane group.
#pragma once

#include "cachestore/layout.h"
#include "kernels/index_k_row.cuh"
#include "tuning.h"

namespace cachestore::kernels {

// A row past the batch (`live` false) reads nothing but takes part in the group's shuffles.
// kDim: D compiled in (0: the run-time head_dim), as for the fp8 row.
template <typename SlotT, int kN, bool kPdl, bool kPinned = kPdl, int kDim = 0>
__device__ __forceinline__ void store_index_k_fp4_row(const GuardArgs& guard, const IndexKArgs& a,
                                                      const PageTableArgs& table,
                                                      int64_t row, int lane, bool live,
                                                      bool count_negative = true) {
  constexpr int kGroupLanes = layout::index_k_format(IndexKFormat::kFp4).group / kN;
  guarded_index_k_row<SlotT, kN, kGroupLanes, kPdl, kPinned, kDim>(
      guard, a, table, row, lane, live, count_negative,
      [&](Bf16Vals<kN>& x, float amax, const PagePosition& pos) {
    const uint8_t e8 = detail::index_k_fp4_scale_byte(amax);
    const float inv = detail::ue8m0_reciprocal(e8);  // x / 2^(e8 - 127), exact
    Fp4Bytes<kN> q =
        x.to_e2m1(detail::ue8m0_to_float(e8), a.ties(), [inv](float v) { return v * inv; }, inv);
    if constexpr (kN == 8) {
      q = e2m1_drop_zero_signs(q);
    } else {
      q = make_uint2(e2m1_drop_zero_signs(q.x), e2m1_drop_zero_signs(q.y));
    }
    const int head_dim = index_k_dim<kDim>(a);
    store_bytes(a.cache.data +
                    layout::data_offset(layout::index_k_rows<IndexKFormat::kFp4>(head_dim),
                                        pos.local_page, pos.in_page, a.cache.page_stride) +
                    kN / 2 * lane,
                q, a.cache.page_stride % sizeof(q) == 0);
    if (lane % kGroupLanes == 0) {
      a.cache.data[layout::scale_offset(layout::index_k_rows<IndexKFormat::kFp4>(head_dim),
                                        pos.local_page, pos.in_page,
                                        int64_t{1} << a.cache.page_shift, a.cache.page_stride) +
                   lane / kGroupLanes] = e8;
    }
  });
}

template <>
struct IndexKRow<IndexKFormat::kFp4> {
  template <typename SlotT, int kN, bool kPdl, bool kPinned, int kDim>
  __device__ __forceinline__ static void store(const GuardArgs& guard, const IndexKArgs& a,
                                               const PageTableArgs& table,
                                               int64_t row, int lane, bool live,
                                               bool count_negative) {
    store_index_k_fp4_row<SlotT, kN, kPdl, kPinned, kDim>(guard, a, table, row, lane, live,
                                                          count_negative);
  }
};

// blockDim = (2^lanes_log2, rows per block): a multiple of 32 threads, so every warp is whole.
// The row pins its addresses without PDL too (kPinned), which measured faster for this row on
// Hopper.
template <typename SlotT, int kN, bool kPdl, int kDim = 0>
__global__ void __launch_bounds__(tuning::kMaxBlockThreads,
                                  tuning::kIndexKThreadsPerSm / tuning::kMaxBlockThreads)
index_k_fp4_kernel(const GuardArgs guard, const IndexKArgs a, const PageTableArgs table) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  store_index_k_fp4_row<SlotT, kN, kPdl, true, kDim>(guard, a, table, row, threadIdx.x,
                                                     row < guard.num_tokens);
}

}  // namespace cachestore::kernels
