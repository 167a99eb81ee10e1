// store_paged_kv's launcher for one cache type: the kernel arguments, the block shape from the
// policy, the input type (fp8 caches decode it; auto copies bits), the slot type and PDL.
#pragma once

#include "check.h"
#include "dispatch/launchers.h"
#include "kernels/paged_kv.cuh"
#include "launch.cuh"
#include "tuning.h"

namespace cachestore::detail {

inline kernels::KvSideArgs kv_side_args(const KvInput& in, const KvCacheView& c) {
  return {static_cast<const uint16_t*>(in.data),
          in.token_stride,
          in.head_stride,
          static_cast<uint8_t*>(c.data),
          {c.page_stride, c.entry_stride, c.head_stride},
          c.scale,
          c.scale_stride,
          kernels::FastDivmod::make(static_cast<uint32_t>(in.head_dim / 8))};
}

template <KvCacheType kCache>
Status launch_paged_kv(const PagedKvParams& p, const ArchInfo& arch, cudaStream_t stream) {
  const bool has_v = p.v.data != nullptr;
  const int32_t k_vecs = p.num_heads * (p.k.head_dim / 8);
  const int32_t vecs = k_vecs + (has_v ? p.num_heads * (p.v.head_dim / 8) : 0);
  const bool pow2_page = (p.page_size & (p.page_size - 1)) == 0;
  const kernels::PagedKvArgs args{
      slot_args(p.slots, p.num_pages * p.page_size),
      kv_side_args(p.k, p.k_cache),
      has_v ? kv_side_args(p.v, p.v_cache) : kernels::KvSideArgs{},
      k_vecs,
      vecs,
      pow2_page ? log2_exact(p.page_size) : -1,
      kernels::FastDivmod::make(static_cast<uint32_t>(p.page_size))};

  const tuning::PagedKvShape shape =
      tuning::paged_kv_shape(arch.policy, p.batch.num_tokens, vecs, arch.sm_count);
  const int32_t bx = shape.vectors_per_block_row;
  dim3 grid;
  CACHESTORE_RETURN_IF_ERROR(grid_for_rows(p.batch.num_tokens, shape.rows_per_block, &grid));
  grid.y = static_cast<unsigned>((vecs + bx - 1) / bx);
  const dim3 block(bx, shape.rows_per_block);

  const bool pdl = use_pdl(p.launch, arch);
  const kernels::GuardArgs guard = guard_args(p.batch, pdl, grid, arch);
  const auto launch_for_input = [&](auto input) {
    constexpr KvDataType kIn = decltype(input)::value;
    return with_pdl(pdl, [&](auto pdl_constant) {
      constexpr bool kPdl = decltype(pdl_constant)::value;
      return with_slot_type(p.slots.type, [&](auto slot) {
        return launch_store(kernels::paged_kv_kernel<decltype(slot), kCache, kIn, kPdl>, grid,
                            block, stream, pdl_constant, guard, args);
      });
    });
  };
  // An auto cache copies bits: the input type does not matter.
  if constexpr (kCache != KvCacheType::kAuto) {
    if (p.input_type == KvDataType::kFp16)
      return launch_for_input(std::integral_constant<KvDataType, KvDataType::kFp16>{});
  }
  return launch_for_input(std::integral_constant<KvDataType, KvDataType::kBf16>{});
}

}  // namespace cachestore::detail
