// The launch mechanism every store shares: the PDL attribute, the launch-error check, the grid,
// the kernel arguments of the guard and the slots, and the maps from run-time choices to kernel
// instantiations. Shapes and thresholds come from tuning.h.
#pragma once

#include <type_traits>
#include <utility>

#include "arch.h"
#include "check.h"
#include "detail/status.h"
#include "kernels/args.h"
#include "tuning.h"

namespace cachestore::detail {

// The launch configuration of a store: with PDL, as a programmatic dependent of the previous
// work in the stream. `attribute` holds the PDL attribute and must outlive the launch.
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, cudaStream_t stream, bool pdl,
                                        cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  if (pdl) {
    *attribute = cudaLaunchAttribute{};
    attribute->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute->val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return config;
}

// A store kernel instantiated for kPdl (its PDL prologue), launched with the matching attribute:
// the one constant decides both, so the launch and the kernel cannot disagree.
template <bool kPdl, typename... KernelArgs, typename... Args>
Status launch_store(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t stream,
                    std::bool_constant<kPdl>, Args&&... args) {
  cudaLaunchAttribute attribute{};
  const cudaLaunchConfig_t config = launch_config(grid, block, stream, kPdl, &attribute);
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the non-sticky launch error
    return fail(Status::kErrorCudaRuntime, "kernel launch failed: %s", cudaGetErrorString(err));
  }
  return succeed();
}

// Grid blocks for `rows` rows, `rows_per_block` a block; kErrorNotSupported past the grid limit.
inline Status grid_for_rows(int64_t rows, int64_t rows_per_block, dim3* grid) {
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (blocks > 0x7fffffff)
    return fail(Status::kErrorNotSupported, "batch.num_tokens = %lld needs more than 2^31-1 blocks",
                static_cast<long long>(rows));
  *grid = dim3(static_cast<unsigned>(blocks));
  return Status::kSuccess;
}

// f(std::integral_constant<int, kN>{}) for the kN = tuning::values_per_lane kernels; kFour: the
// kernel has a 4-value form.
template <bool kFour, typename F>
Status with_values_per_lane(const ArchInfo& arch, int64_t num_tokens, F&& f) {
  switch (tuning::values_per_lane(arch.policy, num_tokens, kFour)) {
    case 4:
      if constexpr (kFour) return f(std::integral_constant<int, 4>{});
      break;
    case 8:
      return f(std::integral_constant<int, 8>{});
    default:
      break;
  }
  return f(std::integral_constant<int, 16>{});
}

// The index-K rows' D as a kernel constant: f(integral_constant<int, kCompiledIndexDim>) at
// decode sizes (kN < 16), where the run-time D would keep the row's pinned addressing from
// paying, f(integral_constant<int, 0>) otherwise (D read at run time).
template <int kN, typename F>
auto with_index_k_dim(int32_t head_dim, F&& f) {
  if constexpr (kN < 16) {
    if (head_dim == tuning::kCompiledIndexDim)
      return f(std::integral_constant<int, tuning::kCompiledIndexDim>{});
  }
  return f(std::integral_constant<int, 0>{});
}

// f(std::integral_constant<ScaleRule, rule>{}) where the store reads `rule` (kVaries: the fp8
// index-K, MLA V3.2), else f(kPow2): the scale rule is the kernels' template parameter, and a
// layout whose rule is fixed has one instantiation (kVaries is compile-time for that).
template <bool kVaries, typename F>
auto with_scale_rule(ScaleRule rule, F&& f) {
  if constexpr (kVaries) {
    if (rule == ScaleRule::kAmax) return f(std::integral_constant<ScaleRule, ScaleRule::kAmax>{});
  }
  return f(std::integral_constant<ScaleRule, ScaleRule::kPow2>{});
}

// f(std::bool_constant<kPdl>{}): every store kernel is instantiated with its PDL prologue
// (kPdl, launched as a programmatic dependent) and without any.
template <typename F>
Status with_pdl(bool pdl, F&& f) {
  return pdl ? f(std::true_type{}) : f(std::false_type{});
}

// f(SlotT{}) for a slot mapping's type (the flat bf16 index-K store: no page table).
template <typename F>
auto with_mapping_type(SlotType type, F&& f) {
  return type == SlotType::kInt32 ? f(int32_t{}) : f(int64_t{});
}

// f(SlotT{}) for the slot source of a paged store: the mapping's type, or
// kernels::PageTableSlots for a page table.
template <typename F>
auto with_slot_type(SlotType type, F&& f) {
  if (type == SlotType::kPageTable) return f(kernels::PageTableSlots{});
  return with_mapping_type(type, f);
}

// With PDL, a grid of at most one block per SM (blocks_per_sm: a launcher whose blocks are small
// enough that that many are resident on an SM together) fits in one wave: its threads trigger
// before their wait (kernels::begin_store). Larger grids release their dependents by exiting.
inline kernels::GuardArgs guard_args(const Batch& batch, bool pdl, const dim3& grid,
                                     const ArchInfo& arch, int32_t blocks_per_sm = 1) {
  return {batch.num_tokens, batch.num_tokens_non_padded, batch.diagnostics,
          pdl && static_cast<int64_t>(grid.x) * grid.y * grid.z <=
                     static_cast<int64_t>(arch.sm_count) * blocks_per_sm};
}

// Whether a store launches with PDL: asked for, and the running image executes griddepcontrol.
inline bool use_pdl(const LaunchOptions& launch, const ArchInfo& arch) {
  return launch.enable_pdl && arch.pdl;
}

// A paged cache's slots: the capacity of all owners together and the owner's page filter
// (check_owner has validated both fields and the product).
inline kernels::SlotArgs slot_args(const SlotMapping& slots, int64_t local_capacity) {
  return {slots.data, slots.reserved_slot, local_capacity * slots.owner_size,
          log2_exact(slots.owner_size), slots.owner_rank};
}

// The page table of a paged cache of `page_size` slots a page (zeros, unread, for a slot
// mapping).
inline kernels::PageTableArgs page_table_args(const SlotMapping& slots, int32_t page_size) {
  if (slots.type != SlotType::kPageTable) return {};
  const PageTable& t = slots.page_table;
  return {t.positions, t.indptr, t.indices, t.batch_size,
          kernels::FastDivmod::make(static_cast<uint32_t>(page_size))};
}

// The flat bf16 index-K cache has no pages: sharding does not apply.
inline kernels::SlotArgs flat_slot_args(const SlotMapping& slots, int64_t capacity) {
  return {slots.data, slots.reserved_slot, capacity, 0, 0};
}

// A rotation's kernel arguments (RotaryEmbedding): `pair_units` units of two vectors (NeoX's
// partners, or two adjacent GPT-J vectors where `adjacent_pairs`; else 0), `rotated_units`
// units that rotate, Q's units from `q_begin` of a row.
inline kernels::RopeArgs rope_args(const RotaryEmbedding& r, int32_t pair_units,
                                   int32_t rotated_units, int32_t q_begin,
                                   bool adjacent_pairs = false) {
  auto* query = static_cast<uint8_t*>(r.query);
  const bool q_in_place = r.query_out == nullptr;
  return {r.positions,
          static_cast<const uint8_t*>(r.cos_sin_cache),
          (r.cos_sin_stride == 0 ? r.rotary_dim : r.cos_sin_stride) * kv_input_bytes(r.cos_sin_type),
          r.max_position,
          static_cast<uint8_t*>(r.key_out),
          r.key_out_token_stride,
          r.rotary_dim / 2,
          pair_units,
          rotated_units,
          static_cast<uint8_t>(r.positions_type == SlotType::kInt64),
          static_cast<uint8_t>(r.cos_sin_type),
          static_cast<uint8_t>(r.rounding == RopeRounding::kInputType),
          static_cast<uint8_t>(
              (r.cos_sin_rows == RopeCosSinRows::kByRow ? kernels::kCosSinByRow : 0) |
              (r.cos_sin_layout == RopeCosSinLayout::kInterleaved ? kernels::kCosSinInterleaved
                                                                   : 0)),
          r.key_out_head_stride,
          q_begin,
          adjacent_pairs ? 1 : 0,
          query,
          r.query_token_stride,
          r.query_head_stride,
          q_in_place ? query : static_cast<uint8_t*>(r.query_out),
          q_in_place ? r.query_token_stride : r.query_out_token_stride,
          q_in_place ? r.query_head_stride : r.query_out_head_stride};
}

}  // namespace cachestore::detail
