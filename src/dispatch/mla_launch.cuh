// fused_store_cache's launcher for one MLA layout: the kernel arguments, the values a lane and
// the block shape from the policy, the layout's scale rule, the fused index-K's format, the slot
// type and PDL, each a kernel instantiation. Included by the layout's instantiation file with
// the layout's kernel header.
#pragma once

#include "check.h"
#include "dispatch/index_k_launch.cuh"
#include "dispatch/launchers.h"
#include "kernels/index_k_fp4.cuh"
#include "kernels/index_k_fp8.cuh"
#include "kernels/mla_kernels.cuh"
#include "launch.cuh"
#include "tuning.h"

namespace cachestore::detail {

// The fused index-K cache's page size (its format's cache).
inline int32_t index_page_size(const FusedStoreParams& p) {
  return p.index_format == IndexKFormat::kFp4 ? p.index_fp4_cache.page_size
                                              : p.index_cache.page_size;
}

template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN>
Status launch_fused(const FusedStoreParams& p, const ArchInfo& arch, const kernels::MlaArgs& kv,
                    const kernels::IndexKArgs& index, cudaStream_t stream) {
  const kernels::PageTableArgs kv_table = page_table_args(p.kv_slots, p.kv_cache.page_size);
  // A row's KV record takes 512 / kN lanes: the rows per block halve at 8 values a lane, so that
  // the block stays within the launch bounds.
  constexpr int32_t kWarpsPerRow = kernels::kMlaRowLanes<kN> / 32;
  const bool pdl = use_pdl(p.launch, arch);
  const tuning::MlaShape shape = tuning::mla_shape(arch.policy, p.batch.num_tokens, kWarpsPerRow,
                                                   pdl, p.index_k != nullptr, arch.sm_count);
  const int32_t rows = shape.rows_per_block;
  const int32_t index_warps =
      p.index_k == nullptr ? 0 : (rows * (1 << index.lanes_log2) + 31) / 32;
  dim3 grid;
  CACHESTORE_RETURN_IF_ERROR(grid_for_rows(p.batch.num_tokens, rows, &grid));
  const dim3 block(32, rows * kWarpsPerRow + index_warps);
  kernels::GuardArgs guard = guard_args(p.batch, pdl, grid, arch, shape.blocks_per_sm);
  guard.rows_per_block = rows;
  return with_pdl(pdl, [&](auto pdl_constant) {
    constexpr bool kPdl = decltype(pdl_constant)::value;
    if (p.index_k == nullptr)
      return launch_store(kernels::mla_store_kernel<kLayout, kKvRule, SlotT, kN, kPdl>, grid,
                          block, stream, pdl_constant, guard, kv, kv_table);
    // The index rows' D as in store_index_k_fp8 / _fp4.
    return with_index_k_dim<kN>(index.head_dim, [&](auto dim) {
      return launch_store(kernels::fused_store_kernel<kLayout, kKvRule, kIndex, SlotT, kN, kPdl,
                                                      decltype(dim)::value>,
                          grid, block, stream, pdl_constant, guard, kv, index, kv_table,
                          page_table_args(p.index_slots, index_page_size(p)));
    });
  });
}

template <MlaLayout kLayout>
Status launch_mla(const FusedStoreParams& p, const ArchInfo& arch, cudaStream_t stream) {
  const MlaCache& c = p.kv_cache;
  const kernels::MlaArgs kv{slot_args(p.kv_slots, c.num_pages * c.page_size),
                            {static_cast<uint8_t*>(c.data), c.page_stride_bytes,
                             log2_exact(c.page_size), c.scale_rule},
                            static_cast<const uint16_t*>(p.nope),
                            static_cast<const uint16_t*>(p.rope),
                            int32_row_stride(p.nope_row_stride, p.batch.num_tokens),
                            int32_row_stride(p.rope_row_stride, p.batch.num_tokens)};
  constexpr bool kRuleVaries =
      layout::mla_layout(kLayout).scale_rule == layout::RuleUse::kSelectable;
  return with_values_per_lane<false>(arch, p.batch.num_tokens, [&](auto values) {
    constexpr int kN = decltype(values)::value;
    kernels::IndexKArgs index{};
    const bool fp4 = p.index_k != nullptr && p.index_format == IndexKFormat::kFp4;
    if (p.index_k != nullptr) {
      index = fp4 ? index_k_args(p.index_slots, p.index_k, p.index_k_row_stride,
                                 p.index_fp4_cache, kN)
                  : index_k_args(p.index_slots, p.index_k, p.index_k_row_stride, p.index_cache,
                                 kN);
    }
    return with_scale_rule(c.scale_rule, kRuleVaries, [&](auto kv_rule) {
      constexpr ScaleRule kKvRule = decltype(kv_rule)::value;
      return with_slot_type(p.kv_slots.type, [&](auto slot) {
        using SlotT = decltype(slot);
        return fp4 ? launch_fused<kLayout, kKvRule, IndexKFormat::kFp4, SlotT, kN>(p, arch, kv,
                                                                                  index, stream)
                   : launch_fused<kLayout, kKvRule, IndexKFormat::kFp8, SlotT, kN>(p, arch, kv,
                                                                                  index, stream);
      });
    });
  });
}

}  // namespace cachestore::detail
