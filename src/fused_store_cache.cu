// fused_store_cache: validation, dispatch, launch.
#include "cachestore/layout.h"
#include "detail/validate.h"
#include "kernels/store_kernels.cuh"
#include "launch.cuh"

namespace cachestore {
namespace {

using detail::fail;

template <MlaLayout kLayout, ScaleRule kKvRule, IndexKFormat kIndex, typename SlotT, int kN>
Status launch_fused(const FusedStoreParams& p, const detail::ArchInfo& arch,
                    const kernels::MlaArgs& kv, const kernels::IndexKArgs& index,
                    cudaStream_t stream) {
  // A row's KV record takes 512 / kN lanes: halve the rows per block at 8 values per lane so
  // that the block stays within kMaxBlockThreads.
  constexpr int32_t kWarpsPerRow = kernels::kMlaRowLanes<kN> / 32;
  const bool pdl = detail::use_pdl(p.launch, arch);
  const detail::MlaShape shape =
      detail::mla_shape(p.batch.num_tokens, kWarpsPerRow, pdl, p.index_k != nullptr, arch);
  const int32_t rows = shape.rows_per_block;
  const int32_t index_warps =
      p.index_k == nullptr ? 0 : (rows * (1 << index.lanes_log2) + 31) / 32;
  dim3 grid;
  CACHESTORE_RETURN_IF_ERROR(detail::grid_for_rows(p.batch.num_tokens, rows, &grid));
  const dim3 block(32, rows * kWarpsPerRow + index_warps);
  kernels::GuardArgs guard = detail::guard_args(p.batch, pdl, grid, arch, shape.blocks_per_sm);
  guard.rows_per_block = rows;
  return detail::with_pdl(pdl, [&](auto pdl_constant) {
    constexpr bool kPdl = decltype(pdl_constant)::value;
    if (p.index_k == nullptr)
      return detail::launch_store(kernels::mla_store_kernel<kLayout, kKvRule, SlotT, kN, kPdl>,
                                  grid, block, stream, pdl_constant, guard, kv);
    // The index rows' D as in store_index_k_fp8 / _fp4.
    return detail::with_index_k_dim<kN>(index.head_dim, [&](auto dim) {
      return detail::launch_store(
          kernels::fused_store_kernel<kLayout, kKvRule, kIndex, SlotT, kN, kPdl,
                                      decltype(dim)::value>,
          grid, block, stream, pdl_constant, guard, kv, index);
    });
  });
}

// The instantiation for the run-time layout, V3.2's scale rule, index-K format and slot type.
template <int kN>
Status dispatch_fused(const FusedStoreParams& p, const detail::ArchInfo& arch,
                      const kernels::MlaArgs& kv, const kernels::IndexKArgs& index,
                      cudaStream_t stream) {
  const auto with_layout = [&](auto layout_constant) {
    constexpr MlaLayout kLayout = decltype(layout_constant)::value;
    const bool fp4 = p.index_k != nullptr && p.index_format == IndexKFormat::kFp4;
    const bool i32 = p.kv_slots.type == SlotType::kInt32;
    return detail::with_scale_rule(
        p.kv_cache.scale_rule, kLayout == MlaLayout::kV32, [&](auto kv_rule) {
          constexpr ScaleRule kKvRule = decltype(kv_rule)::value;
          constexpr auto kFp4 = IndexKFormat::kFp4, kFp8 = IndexKFormat::kFp8;
          if (fp4)
            return i32 ? launch_fused<kLayout, kKvRule, kFp4, int32_t, kN>(p, arch, kv, index, stream)
                       : launch_fused<kLayout, kKvRule, kFp4, int64_t, kN>(p, arch, kv, index, stream);
          return i32 ? launch_fused<kLayout, kKvRule, kFp8, int32_t, kN>(p, arch, kv, index, stream)
                     : launch_fused<kLayout, kKvRule, kFp8, int64_t, kN>(p, arch, kv, index, stream);
        });
  };
  switch (p.kv_cache.layout) {
    case MlaLayout::kV4: return with_layout(std::integral_constant<MlaLayout, MlaLayout::kV4>{});
    case MlaLayout::kV32: return with_layout(std::integral_constant<MlaLayout, MlaLayout::kV32>{});
    case MlaLayout::kV41: return with_layout(std::integral_constant<MlaLayout, MlaLayout::kV41>{});
    case MlaLayout::kV41Fp4:
      return with_layout(std::integral_constant<MlaLayout, MlaLayout::kV41Fp4>{});
  }
  return fail(Status::kErrorInvalidArgument, "kv_cache.layout: not an MlaLayout");
}

}  // namespace

Status fused_store_cache(const FusedStoreParams& p, cudaStream_t stream) {
  CACHESTORE_RETURN_IF_ERROR(detail::check_batch(p.batch));
  CACHESTORE_RETURN_IF_ERROR(detail::check_slots(p.kv_slots, p.batch.num_tokens, "kv_slots"));
  CACHESTORE_RETURN_IF_ERROR(detail::check_mla_cache(p.kv_cache, "kv_cache"));
  CACHESTORE_RETURN_IF_ERROR(detail::check_owner(
      p.kv_slots, p.kv_cache.num_pages * p.kv_cache.page_size, "kv_slots"));
  const int64_t nope_dim =
      p.kv_cache.layout == MlaLayout::kV32 ? layout::kV32NopeDim : layout::kV4NopeDim;
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.nope, p.nope_row_stride,
                                                     p.batch.num_tokens, nope_dim, "nope",
                                                     "nope_row_stride"));
  CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.rope, p.rope_row_stride,
                                                     p.batch.num_tokens, layout::kRopeDim, "rope",
                                                     "rope_row_stride"));
  int32_t nope_row_stride = 0, rope_row_stride = 0;
  CACHESTORE_RETURN_IF_ERROR(detail::int32_row_stride(p.nope_row_stride, p.batch.num_tokens,
                                                      "nope_row_stride", &nope_row_stride));
  CACHESTORE_RETURN_IF_ERROR(detail::int32_row_stride(p.rope_row_stride, p.batch.num_tokens,
                                                      "rope_row_stride", &rope_row_stride));
  if (p.index_k != nullptr) {
    CACHESTORE_RETURN_IF_ERROR(detail::check_slots(p.index_slots, p.batch.num_tokens, "index_slots"));
    if (p.index_slots.type != p.kv_slots.type)
      return fail(Status::kErrorNotSupported,
                  "index_slots.type must equal kv_slots.type (one kernel reads both)");
    int64_t index_capacity = 0;
    int32_t index_head_dim = 0;
    if (p.index_format == IndexKFormat::kFp8) {
      CACHESTORE_RETURN_IF_ERROR(detail::check_index_k_fp8_cache(p.index_cache, "index_cache"));
      index_capacity = p.index_cache.num_pages * p.index_cache.page_size;
      index_head_dim = p.index_cache.head_dim;
    } else if (p.index_format == IndexKFormat::kFp4) {
      CACHESTORE_RETURN_IF_ERROR(
          detail::check_index_k_fp4_cache(p.index_fp4_cache, "index_fp4_cache"));
      index_capacity = p.index_fp4_cache.num_pages * p.index_fp4_cache.page_size;
      index_head_dim = p.index_fp4_cache.head_dim;
    } else {
      return fail(Status::kErrorInvalidArgument, "index_format = %d: not an IndexKFormat",
                  static_cast<int>(p.index_format));
    }
    CACHESTORE_RETURN_IF_ERROR(detail::check_owner(p.index_slots, index_capacity, "index_slots"));
    CACHESTORE_RETURN_IF_ERROR(detail::check_bf16_rows(p.index_k, p.index_k_row_stride,
                                                       p.batch.num_tokens, index_head_dim,
                                                       "index_k", "index_k_row_stride"));
  }
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (p.batch.num_tokens == 0) return detail::succeed();

  const MlaCache& c = p.kv_cache;
  const kernels::MlaArgs kv{detail::slot_args(p.kv_slots, c.num_pages * c.page_size),
                            {static_cast<uint8_t*>(c.data), c.page_stride_bytes,
                             detail::log2_exact(c.page_size), c.scale_rule},
                            static_cast<const uint16_t*>(p.nope),
                            static_cast<const uint16_t*>(p.rope),
                            nope_row_stride,
                            rope_row_stride};
  return detail::with_values_per_lane<false>(p.batch.num_tokens, [&](auto values) {
    constexpr int kN = decltype(values)::value;
    kernels::IndexKArgs index{};
    if (p.index_k != nullptr) {
      index = p.index_format == IndexKFormat::kFp4
                  ? detail::index_k_args(p.index_slots, p.index_k, p.index_k_row_stride,
                                         p.index_fp4_cache, kN)
                  : detail::index_k_args(p.index_slots, p.index_k, p.index_k_row_stride,
                                         p.index_cache, kN);
    }
    return dispatch_fused<kN>(p, arch, kv, index, stream);
  });
}

}  // namespace cachestore
