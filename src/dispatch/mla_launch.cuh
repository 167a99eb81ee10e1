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

// The rotation of a rotating store (rotates(p.rotary)): the rows' RoPE parts (64 bf16) and
// Q's, 8 values a unit, a NeoX unit being a pair of vectors 32 values apart; a Q thread takes one
// unit of one head.
inline kernels::MlaRopeArgs mla_rope_args(const FusedStoreParams& p) {
  const RotaryEmbedding& r = p.rotary;
  constexpr int32_t kW = 8;
  constexpr int32_t kHalf = layout::kRopeDim / 2;
  const bool neox = r.style == RopeStyle::kNeox;
  const int32_t pair_units = neox ? kHalf / kW : 0;
  const int32_t units_per_head = layout::kRopeDim / kW - pair_units;
  // One head: key_out's head stride is unread.
  const kernels::RopeArgs rope =
      rope_args(r, pair_units, neox ? pair_units : layout::kRopeDim / kW, 0);
  const uint32_t per_row = static_cast<uint32_t>(r.num_query_heads * units_per_head);
  return {rope, kernels::FastDivmod::make(per_row == 0 ? 1 : per_row),
          kernels::FastDivmod::make(static_cast<uint32_t>(units_per_head))};
}

// Whether a rotation is SGLang's freqs_cis form, which the V4.1 layouts' rotating rows without
// Q run in a kernel of that form alone (tuning's mla.freqs_cis_kernel): GPT-J pairs, the fp32
// rounding, a row's own fp32 row of (cos, sin) pairs.
inline bool freqs_cis_form(const RotaryEmbedding& r) {
  return r.style == RopeStyle::kGptj && r.rounding == RopeRounding::kFp32 &&
         r.cos_sin_type == KvDataType::kFp32 && r.cos_sin_rows == RopeCosSinRows::kByRow &&
         r.cos_sin_layout == RopeCosSinLayout::kInterleaved && r.num_query_heads == 0;
}
template <MlaLayout kLayout>
inline constexpr bool kFreqsCisLayout = kLayout == MlaLayout::kV41 || kLayout == MlaLayout::kV41Fp4;

template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN,
          bool kRope>
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
  kernels::MlaRopeArgs rope{};
  if constexpr (kRope) {
    rope = mla_rope_args(p);
    // Q's threads of a block's rows over blocks of the same shape after the row blocks.
    const int64_t q_threads = static_cast<int64_t>(rows) * p.rotary.num_query_heads *
                              static_cast<int64_t>(rope.q_units_per_head.divisor);
    const int64_t threads = static_cast<int64_t>(block.x) * block.y;
    grid.y = static_cast<uint32_t>(1 + (q_threads + threads - 1) / threads);
  }
  kernels::GuardArgs guard = guard_args(p.batch, pdl, grid, arch, shape.blocks_per_sm);
  guard.rows_per_block = rows;
  // A rotating row of 16 values a lane runs without the fused index-K only (with_values).
  constexpr bool kIndexAtThisWidth = !(kRope && kN == 16);
  return with_pdl(pdl, [&](auto pdl_constant) {
    constexpr bool kPdl = decltype(pdl_constant)::value;
    if (p.index_k == nullptr) {
      if constexpr (kRope && kFreqsCisLayout<kLayout>) {
        if (arch.policy.mla.freqs_cis_kernel != 0 && freqs_cis_form(p.rotary))
          return launch_store(
              kernels::mla_freqs_cis_store_kernel<kLayout, kKvRule, SlotT, kN, kPdl>, grid,
              block, stream, pdl_constant, guard, kv,
              kernels::FreqsCisArgs{rope.rope.cos_sin, rope.rope.cos_sin_stride, rope.rope.k_out,
                                    rope.rope.k_out_token_stride},
              kv_table);
      }
      if constexpr (kRope)
        return launch_store(kernels::mla_rope_store_kernel<kLayout, kKvRule, SlotT, kN, kPdl>,
                            grid, block, stream, pdl_constant, guard, kv, rope, kv_table);
      else
        return launch_store(kernels::mla_store_kernel<kLayout, kKvRule, SlotT, kN, kPdl>, grid,
                            block, stream, pdl_constant, guard, kv, kv_table);
    }
    // The index rows' D as in store_index_k_fp8 / _fp4; read at run time with RoPE (half the
    // rotating kernels to compile).
    const auto with_dim = [&](auto&& f) {
      if constexpr (kRope)
        return f(std::integral_constant<int, 0>{});
      else
        return with_index_k_dim<kN>(index.head_dim, f);
    };
    return with_dim([&](auto dim) {
      [[maybe_unused]] constexpr int kDim = decltype(dim)::value;
      const kernels::PageTableArgs index_table = page_table_args(p.index_slots, index_page_size(p));
      if constexpr (kRope && !kIndexAtThisWidth)
        return Status::kErrorNotSupported;  // never taken: with_values gives 8 values a lane
      else if constexpr (kRope)
        return launch_store(kernels::fused_rope_store_kernel<kLayout, kKvRule, kIndex, SlotT,
                                                             kN, kPdl, kDim>,
                            grid, block, stream, pdl_constant, guard, kv, index, rope, kv_table,
                            index_table);
      else
        return launch_store(kernels::fused_store_kernel<kLayout, kKvRule, kIndex, SlotT, kN,
                                                        kPdl, kDim>,
                            grid, block, stream, pdl_constant, guard, kv, index, kv_table,
                            index_table);
    });
  });
}

// fused_store_cache for one layout; kRope: with the rotation of p.rotary.
template <MlaLayout kLayout, bool kRope>
Status launch_mla_store(const FusedStoreParams& p, const ArchInfo& arch, cudaStream_t stream) {
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
  // A rotating row with the fused index-K holds 8 values a lane: at 16 its rotation does not fit
  // that kernel's registers (local memory). Without it, the store's values a lane.
  const auto with_values = [&](auto&& f) {
    if (kRope && p.index_k != nullptr) return f(std::integral_constant<int, 8>{});
    return with_values_per_lane<false>(arch, p.batch.num_tokens, f);
  };
  return with_values([&](auto values) {
    constexpr int kN = decltype(values)::value;
    kernels::IndexKArgs index{};
    const bool fp4 = p.index_k != nullptr && p.index_format == IndexKFormat::kFp4;
    if (p.index_k != nullptr) {
      index = fp4 ? index_k_args(p.index_slots, p.index_k, p.index_k_row_stride,
                                 p.index_fp4_cache, kN)
                  : index_k_args(p.index_slots, p.index_k, p.index_k_row_stride, p.index_cache,
                                 kN);
    }
    return with_scale_rule<kRuleVaries>(c.scale_rule, [&](auto kv_rule) {
      constexpr ScaleRule kKvRule = decltype(kv_rule)::value;
      return with_slot_type(p.kv_slots.type, [&](auto slot) {
        using SlotT = decltype(slot);
        return fp4 ? launch_fused<kLayout, kKvRule, IndexKFormat::kFp4, SlotT, kN, kRope>(
                         p, arch, kv, index, stream)
                   : launch_fused<kLayout, kKvRule, IndexKFormat::kFp8, SlotT, kN, kRope>(
                         p, arch, kv, index, stream);
      });
    });
  });
}

template <MlaLayout kLayout>
Status launch_mla(const FusedStoreParams& p, const ArchInfo& arch, cudaStream_t stream) {
  return launch_mla_store<kLayout, false>(p, arch, stream);
}
template <MlaLayout kLayout>
Status launch_mla_rope(const FusedStoreParams& p, const ArchInfo& arch, cudaStream_t stream) {
  return launch_mla_store<kLayout, true>(p, arch, stream);
}

}  // namespace cachestore::detail
