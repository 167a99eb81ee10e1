// The one launch path of every entry point: arch policy, optional PDL, launch-error check.
#pragma once

#include <algorithm>
#include <type_traits>
#include <utility>

#include "arch.h"
#include "kernels/args.h"
#include "detail/status.h"
#include "detail/validate.h"

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

// Quantizing kernels' values per lane: 8 up to kSmallBatchRows rows (decode sizes: the chain
// after the loads is the latency, and a lane's share of it shrinks with its values), 16 above
// (large batches: fewer lanes for the same bytes). The fp8 index-K kernel takes 4 up to
// kTinyBatchRows (one warp per 128-value block at D = 128: its amax is one reduction; at 512
// rows 0.02x faster than 8, NOTES.md, item 24); the MLA rows measured slower at 4 (four warps a
// row) than at 8 (NOTES.md, item 18).
inline constexpr int64_t kTinyBatchRows = 512;
inline constexpr int64_t kSmallBatchRows = 1024;
inline int32_t values_per_lane(int64_t num_tokens, bool four) {
  return four && num_tokens <= kTinyBatchRows ? 4 : num_tokens <= kSmallBatchRows ? 8 : 16;
}

// The index-K rows' D as a kernel constant: f(integral_constant<int, 128>) for the DeepSeek
// indexer's D = 128 at decode sizes (kN < 16), f(integral_constant<int, 0>) otherwise (D read at
// run time). At decode sizes the run-time D kept the rows' pinned addressing from paying: both
// together are worth 0.04-0.08x of a lean scatter node (NOTES.md, item 24).
inline constexpr int32_t kCompiledIndexDim = 128;
template <int kN, typename F>
auto with_index_k_dim(int32_t head_dim, F&& f) {
  if constexpr (kN < 16) {
    if (head_dim == kCompiledIndexDim) return f(std::integral_constant<int, kCompiledIndexDim>{});
  }
  return f(std::integral_constant<int, 0>{});
}

// f(std::integral_constant<int, kN>{}) for the kN = values_per_lane(num_tokens, kFour) kernels.
template <bool kFour, typename F>
Status with_values_per_lane(int64_t num_tokens, F&& f) {
  switch (values_per_lane(num_tokens, kFour)) {
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

// The index-K kernels' rows a block for `lanes` lanes a row: spread a small batch over
// sm_count / index_k_spread_sms SMs in blocks of at least min_block_threads, fill blocks of
// block_threads at large n.
inline int32_t index_k_rows_per_block(int64_t num_tokens, int32_t lanes, const ArchInfo& arch) {
  return rows_per_block(num_tokens, std::max(1, arch.policy.min_block_threads / lanes),
                        std::max(1, arch.policy.block_threads / lanes),
                        std::max(1, arch.sm_count / arch.policy.index_k_spread_sms));
}

// The MLA kernels' rows a block (KV rows of warps_per_row warps each) and how many of its blocks
// an SM holds at once for the early trigger (guard_args): up to two blocks an SM of
// mla_two_per_sm_rows rows, such blocks without PDL for every MLA store (n = 512: V4 and V3.2
// alone 0.02-0.03x, the fused V4 + index-K 0.03-0.04x of the lean node faster than at 4 rows;
// NOTES.md, item 25) and with PDL for the fused kernel, which then triggers early at up to two
// blocks an SM (two such blocks are resident together under its launch bounds of 3 x 512
// threads; n = 512, 1.05-1.07x against 1.10x at 4 rows, item 24). With PDL, up to one block an
// SM, the fused kernel takes one row a block (policy fused_pdl_one_row: 0.01-0.05x faster than
// 2 rows at n <= 128, both layouts; at 512 rows 2 stay ahead for V4; item 26). With PDL the MLA
// kernel alone keeps one block an SM with the trigger: 0.91 against 0.94x at 2 rows (item 23).
struct MlaShape {
  int32_t rows_per_block;
  int32_t blocks_per_sm;
};
inline MlaShape mla_shape(int64_t num_tokens, int32_t warps_per_row, bool pdl, bool fused,
                          const ArchInfo& arch) {
  if (fused && pdl && arch.policy.fused_pdl_one_row && num_tokens <= arch.sm_count) return {1, 1};
  const int32_t small_rows = arch.policy.mla_two_per_sm_rows;
  if (small_rows > 0 && (fused || !pdl) &&
      num_tokens <= int64_t{2} * small_rows * arch.sm_count)
    return {small_rows, 2};
  return {rows_per_block(num_tokens, arch.policy.mla_min_rows,
                         arch.policy.mla_rows_per_block / warps_per_row, arch.sm_count),
          1};
}

// With PDL, a grid of at most one block per SM (blocks_per_sm: a launcher whose blocks are small
// enough that that many are resident on an SM together) fits in one wave: its threads trigger
// before their wait (see begin_store). Larger grids release their dependents by exiting.
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

// f(std::integral_constant<ScaleRule, rule>{}) where the store reads `rule` (`varies`: the fp8
// index-K, MLA V3.2), else f(kPow2): the scale rule is the kernels' template parameter (V3.2's
// run-time branch on it sat on the chain after the loads: NOTES.md, item 26), and a layout whose
// rule is fixed has one instantiation.
template <typename F>
auto with_scale_rule(ScaleRule rule, bool varies, F&& f) {
  if (varies && rule == ScaleRule::kAmax)
    return f(std::integral_constant<ScaleRule, ScaleRule::kAmax>{});
  return f(std::integral_constant<ScaleRule, ScaleRule::kPow2>{});
}

// f(std::bool_constant<kPdl>{}): every store kernel is instantiated with its PDL prologue
// (kPdl, launched as a programmatic dependent) and without any (begin_store).
template <typename F>
Status with_pdl(bool pdl, F&& f) {
  return pdl ? f(std::true_type{}) : f(std::false_type{});
}

// A paged cache's slots: the capacity of all owners together and the owner's page filter
// (check_owner has validated both fields and the product).
inline kernels::SlotArgs slot_args(const SlotMapping& slots, int64_t local_capacity) {
  return {slots.data, slots.reserved_slot, local_capacity * slots.owner_size,
          log2_exact(slots.owner_size), slots.owner_rank};
}

// The flat bf16 index-K cache has no pages: sharding does not apply.
inline kernels::SlotArgs flat_slot_args(const SlotMapping& slots, int64_t capacity) {
  return {slots.data, slots.reserved_slot, capacity, 0, 0};
}

// The index-K kernels: one row on `lanes` lanes (blockDim.x), rows per block from the policy and
// n, the instantiation `kernel_for(SlotT{}, std::bool_constant<kPdl>{})` for the slot type and
// the PDL choice.
template <typename Args, typename KernelFor>
Status launch_index_k(KernelFor kernel_for, const Batch& batch, SlotType slot_type,
                      const LaunchOptions& launch, const ArchInfo& arch, int32_t lanes,
                      const Args& args, cudaStream_t stream) {
  const int32_t rows = index_k_rows_per_block(batch.num_tokens, lanes, arch);
  dim3 grid;
  CACHESTORE_RETURN_IF_ERROR(grid_for_rows(batch.num_tokens, rows, &grid));
  const bool pdl = use_pdl(launch, arch);
  const kernels::GuardArgs guard = guard_args(batch, pdl, grid, arch);
  return with_pdl(pdl, [&](auto pdl_constant) {
    return launch_store(slot_type == SlotType::kInt32 ? kernel_for(int32_t{}, pdl_constant)
                                                      : kernel_for(int64_t{}, pdl_constant),
                        grid, dim3(lanes, rows), stream, pdl_constant, guard, args);
  });
}

// The kernel arguments of an fp8 (132-byte, IndexKFp8Cache) or fp4 (68-byte, IndexKFp4Cache)
// index-K cache.
template <typename Cache>
kernels::IndexKArgs index_k_args(const SlotMapping& slots, const void* k, int64_t k_row_stride,
                                 const Cache& cache, int32_t values_per_lane) {
  // head_dim is validated (<= 512), so the 16-bit fields hold it and its lanes' log2.
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

}  // namespace cachestore::detail
