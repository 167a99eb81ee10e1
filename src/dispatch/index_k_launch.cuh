// The index-K launches (bf16, fp8, fp4) and the kernel arguments of an index-K cache, which the
// fused kernel's index rows read too.
#pragma once

#include <type_traits>

#include "check.h"
#include "kernels/args.h"
#include "launch.cuh"
#include "tuning.h"

namespace cachestore::detail {

// The index-K kernels: one row on `lanes` lanes (blockDim.x), rows per block from the policy and
// n, the instantiation `kernel_for(SlotT{}, std::bool_constant<kPdl>{})` for the slot source and
// the PDL choice. A paged store passes its page table (`table`, its kernels' last parameter);
// the flat bf16 store none (its slots are a mapping).
template <typename Args, typename KernelFor, typename... Table>
Status launch_index_k(KernelFor kernel_for, const Batch& batch, SlotType slot_type,
                      const LaunchOptions& launch, const ArchInfo& arch, int32_t lanes,
                      const Args& args, cudaStream_t stream, const Table&... table) {
  const int32_t rows =
      tuning::index_k_rows_per_block(arch.policy, batch.num_tokens, lanes, arch.sm_count);
  dim3 grid;
  CACHESTORE_RETURN_IF_ERROR(grid_for_rows(batch.num_tokens, rows, &grid));
  const bool pdl = use_pdl(launch, arch);
  const kernels::GuardArgs guard = guard_args(batch, pdl, grid, arch);
  return with_pdl(pdl, [&](auto pdl_constant) {
    const auto for_slot = [&](auto slot) { return kernel_for(slot, pdl_constant); };
    if constexpr (sizeof...(Table) == 0) {
      return launch_store(with_mapping_type(slot_type, for_slot), grid, dim3(lanes, rows), stream,
                          pdl_constant, guard, args);
    } else {
      return launch_store(with_slot_type(slot_type, for_slot), grid, dim3(lanes, rows), stream,
                          pdl_constant, guard, args, table...);
    }
  });
}

// The kernel arguments of an fp8 (132-byte, IndexKFp8Cache) or fp4 (68-byte, IndexKFp4Cache)
// index-K cache.
template <typename Cache>
kernels::IndexKArgs index_k_args(const SlotMapping& slots, const void* k, int64_t k_row_stride,
                                 const Cache& cache, int32_t values_per_lane) {
  // head_dim is checked (<= 512), so the 16-bit fields hold it and its lanes' log2.
  kernels::IndexKArgs args{
      slot_args(slots, cache.num_pages * cache.page_size),
      static_cast<const uint16_t*>(k),
      k_row_stride,
      {static_cast<uint8_t*>(cache.data), cache.page_stride_bytes, log2_exact(cache.page_size),
       ScaleRule::kAmax},
      static_cast<int16_t>(cache.head_dim),
      static_cast<int16_t>(kernels::index_k_lanes_log2(cache.head_dim, values_per_lane)),
      static_cast<uint8_t>(Fp4Ties::kToEven)};
  if constexpr (std::is_same_v<Cache, IndexKFp8Cache>) {
    args.cache.rule = cache.scale_rule;
  } else {
    args.ties_byte = static_cast<uint8_t>(cache.ties);
  }
  return args;
}

// The paged index-K stores (fp8 and fp4): the kernel `kernel_for(SlotT{},
// integral_constant<kN>, bool_constant<kPdl>, integral_constant<kDim>)` for kN from the policy and
// kDim from with_index_k_dim; kFour: whether the format has a 4-value form (fp8; the fp4
// kernel's e2m1 bytes come 4 or 8 a lane).
template <bool kFour, typename Params, typename KernelFor>
Status launch_paged_index_k(const Params& p, const ArchInfo& arch, KernelFor kernel_for,
                            cudaStream_t stream) {
  return with_values_per_lane<kFour>(arch, p.batch.num_tokens, [&](auto values) {
    const kernels::IndexKArgs args =
        index_k_args(p.slots, p.k, p.k_row_stride, p.cache, decltype(values)::value);
    return launch_index_k(
        [&](auto slot, auto pdl) {
          return with_index_k_dim<decltype(values)::value>(
              p.cache.head_dim, [&](auto dim) { return kernel_for(slot, values, pdl, dim); });
        },
        p.batch, p.slots.type, p.launch, arch, 1 << args.lanes_log2, args, stream,
        page_table_args(p.slots, p.cache.page_size));
  });
}

}  // namespace cachestore::detail
