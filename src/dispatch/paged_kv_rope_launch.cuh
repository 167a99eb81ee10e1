// store_paged_kv's launcher with RoPE fused, for one cache type: the 16-byte kernel's arguments
// (check() has required its layouts), K's vectors regrouped into rotation units, Q's units after
// V's vectors, and the rotation's operands.
#pragma once

#include "dispatch/paged_kv_launch.cuh"
#include "kernels/paged_kv_rope.cuh"

namespace cachestore::detail {

template <KvCacheType kCache>
Status launch_paged_kv_rope(const PagedKvParams& p, const ArchInfo& arch, cudaStream_t stream) {
  constexpr int32_t kW = layout::kv_cache_type(kCache).values_per_thread;
  const RotaryEmbedding& r = p.rope;
  const int32_t d = p.k.head_dim;
  const bool neox = r.style == RopeStyle::kNeox;
  // GPT-J's pairs lie inside a vector; two adjacent vectors a unit keep 32 bytes a thread in
  // flight, as NeoX's pairs do, behind the position and cos/sin loads. The packed kernels
  // (kInputType rounding of 16-bit inputs) have that form; the fp32 rounding's kernels keep
  // one vector a GPT-J unit and NeoX's registers.
  const bool packed = p.input_type != KvDataType::kFp32 && r.rounding == RopeRounding::kInputType;
  const int64_t gptj_pair_rows = arch.policy.paged_kv.gptj_pair_rows;
  const bool adjacent = !neox && packed && r.rotary_dim % (2 * kW) == 0 && gptj_pair_rows > 0 &&
                        p.batch.num_tokens >= gptj_pair_rows;
  const int32_t pair_units = neox || adjacent ? r.rotary_dim / (2 * kW) : 0;
  const int32_t units_per_head = d / kW - pair_units;  // a pair is one unit of two vectors
  kernels::PagedKvArgs args = paged_kv_args(p, kW);
  const int32_t v_vecs = args.vecs_per_token - args.k_vecs;
  args.k.vecs_per_head = kernels::FastDivmod::make(static_cast<uint32_t>(units_per_head));
  args.k_vecs = p.num_heads * units_per_head;
  const int32_t q_begin = args.k_vecs + v_vecs;
  args.vecs_per_token = q_begin + r.num_query_heads * units_per_head;

  const kernels::RopeArgs rope =
      rope_args(r, pair_units, pair_units > 0 ? pair_units : r.rotary_dim / kW, q_begin,
                adjacent);

  dim3 grid, block;
  CACHESTORE_RETURN_IF_ERROR(paged_kv_grid(p, arch, args.vecs_per_token, &grid, &block));
  const bool pdl = use_pdl(p.launch, arch);
  const kernels::GuardArgs guard = guard_args(p.batch, pdl, grid, arch);
  const kernels::PageTableArgs table = page_table_args(p.slots, p.page_size);
  const kernels::BlockScaleArgs block_scales =
      kCache == KvCacheType::kNvfp4 ? block_scale_args(p) : kernels::BlockScaleArgs{};
  return with_paged_kv_kernel<true>(
      p, pdl, [&](auto input, auto pdl_constant, auto slot) {
        constexpr KvDataType kIn = decltype(input)::value;
        constexpr bool kPdl = decltype(pdl_constant)::value;
        using SlotT = decltype(slot);
        if constexpr (kIn != KvDataType::kFp32) {
          if (packed)
            return launch_store(kernels::paged_kv_rope_kernel<SlotT, kCache, kIn, kPdl, true>,
                                grid, block, stream, pdl_constant, guard, args, table,
                                block_scales, rope);
        }
        return launch_store(kernels::paged_kv_rope_kernel<SlotT, kCache, kIn, kPdl, false>, grid,
                            block, stream, pdl_constant, guard, args, table, block_scales, rope);
      });
}

}  // namespace cachestore::detail
