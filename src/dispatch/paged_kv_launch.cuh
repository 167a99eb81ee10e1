// store_paged_kv's launcher for one cache type: the kernel (16-byte or general, by the
// alignment and the head-dim layout), its arguments, the block shape from the policy, the input
// type (fp8 caches decode it; auto copies bits of its width), the slot type and PDL.
#pragma once

#include "check.h"
#include "dispatch/launchers.h"
#include "kernels/paged_kv.cuh"
#include "launch.cuh"
#include "tuning.h"

namespace cachestore::detail {

inline kernels::KvSideArgs kv_side_args(const KvInput& in, const KvCacheView& c, int32_t width) {
  return {static_cast<const uint16_t*>(in.data),
          in.token_stride,
          in.head_stride,
          static_cast<uint8_t*>(c.data),
          {c.page_stride, c.entry_stride, c.head_stride},
          c.scale,
          c.scale_stride,
          kernels::FastDivmod::make(static_cast<uint32_t>(in.head_dim / width))};
}

inline kernels::KvDimArgs kv_dim_args(const KvCacheView& c) {
  return {c.chunk == 0 ? -1 : log2_exact(c.chunk), 0, c.chunk_stride, c.dim_stride};
}

// Whether `bytes`-byte vectors at every (row, head, vector of `width` values) of one side are
// aligned: the base and every stride that moves a vector, in bytes.
inline bool kv_input_aligned(const KvInput& in, int64_t elem_bytes, int64_t bytes) {
  return aligned_to(in.data, bytes) && in.token_stride * elem_bytes % bytes == 0 &&
         in.head_stride * elem_bytes % bytes == 0;
}
inline bool kv_cache_aligned(const KvCacheView& c, int64_t elem_bytes, int64_t bytes) {
  return aligned_to(c.data, bytes) && c.page_stride * elem_bytes % bytes == 0 &&
         c.entry_stride * elem_bytes % bytes == 0 && c.head_stride * elem_bytes % bytes == 0 &&
         c.chunk_stride * elem_bytes % bytes == 0;
}

// The widest vector of `width` values (8, 4, 2, 1) one side allows in the general kernel:
// whole vectors in its head dim, aligned loads, and (d contiguous) aligned stores inside a
// chunk; a strided d is written value by value.
inline bool kv_side_takes(const KvInput& in, const KvCacheView& c, int64_t in_bytes,
                          int64_t cache_bytes, int32_t width) {
  if (in.head_dim % width != 0) return false;
  if (!kv_input_aligned(in, in_bytes, std::min<int64_t>(width * in_bytes, 16))) return false;
  if (c.dim_stride != 1) return true;
  if (c.chunk != 0 && c.chunk < width) return false;
  return kv_cache_aligned(c, cache_bytes, std::min<int64_t>(width * cache_bytes, 16));
}

// The nvfp4 kernel's block-scale views (bytes).
inline kernels::BlockScaleArgs block_scale_args(const PagedKvParams& p) {
  const auto side = [](const KvCacheView& c) {
    return kernels::BlockScaleSide{
        static_cast<uint8_t*>(c.block_scales),
        {c.block_scale_page_stride, c.block_scale_entry_stride, c.block_scale_head_stride}};
  };
  return {side(p.k_cache), p.v.data != nullptr ? side(p.v_cache) : kernels::BlockScaleSide{}};
}

// The kernel arguments of a launch at `width` values a thread (the rotating kernel then turns
// K's vectors into its units).
inline kernels::PagedKvArgs paged_kv_args(const PagedKvParams& p, int32_t width) {
  const bool has_v = p.v.data != nullptr;
  const int32_t k_vecs = p.num_heads * (p.k.head_dim / width);
  const int32_t vecs = k_vecs + (has_v ? p.num_heads * (p.v.head_dim / width) : 0);
  const bool pow2_page = (p.page_size & (p.page_size - 1)) == 0;
  return {slot_args(p.slots, p.num_pages * p.page_size),
          kv_side_args(p.k, p.k_cache, width),
          has_v ? kv_side_args(p.v, p.v_cache, width) : kernels::KvSideArgs{},
          k_vecs,
          vecs,
          pow2_page ? log2_exact(p.page_size) : -1,
          kernels::FastDivmod::make(static_cast<uint32_t>(p.page_size)),
          kv_dim_args(p.k_cache),
          has_v ? kv_dim_args(p.v_cache) : kernels::KvDimArgs{-1, 0, 0, 1},
          width,
          0};
}

// The grid and block of `vecs` threads a row, from the policy (`packed`: tuning::paged_kv_shape).
inline Status paged_kv_grid(const PagedKvParams& p, const ArchInfo& arch, int32_t vecs,
                            dim3* grid, dim3* block, bool packed = false) {
  const tuning::PagedKvShape shape =
      tuning::paged_kv_shape(arch.policy, p.batch.num_tokens, vecs, arch.sm_count, packed);
  const int32_t bx = shape.vectors_per_block_row;
  CACHESTORE_RETURN_IF_ERROR(grid_for_rows(p.batch.num_tokens, shape.rows_per_block, grid));
  grid->y = static_cast<unsigned>((vecs + bx - 1) / bx);
  *block = dim3(bx, shape.rows_per_block);
  return Status::kSuccess;
}

// f(integral_constant<KvDataType, kIn>, pdl constant, SlotT{}) for the launch's input type, PDL
// and slot type. kDecodes: the kernel computes on the values (fp8 and nvfp4 caches, RoPE);
// otherwise it copies bits of their width, so any 16-bit type runs as bf16.
template <bool kDecodes, typename F>
Status with_paged_kv_kernel(const PagedKvParams& p, bool pdl, F&& f) {
  const auto for_input = [&](auto input) {
    return with_pdl(pdl, [&](auto pdl_constant) {
      return with_slot_type(p.slots.type,
                            [&](auto slot) { return f(input, pdl_constant, slot); });
    });
  };
  using Input = KvDataType;
  if (p.input_type == Input::kFp32)
    return for_input(std::integral_constant<Input, Input::kFp32>{});
  if constexpr (kDecodes) {
    if (p.input_type == Input::kFp16)
      return for_input(std::integral_constant<Input, Input::kFp16>{});
  }
  return for_input(std::integral_constant<Input, Input::kBf16>{});
}

template <KvCacheType kCache>
Status launch_paged_kv(const PagedKvParams& p, const ArchInfo& arch, cudaStream_t stream) {
  const bool has_v = p.v.data != nullptr;
  const int64_t in_bytes = kv_input_bytes(p.input_type), cache_bytes = kv_cache_bytes(p);
  // The 16-byte kernel: what the general one would run with 8 values a thread, on a cache
  // whose head dim is contiguous.
  const auto fast_side = [&](const KvInput& in, const KvCacheView& c) {
    return c.chunk == 0 && c.dim_stride == 1 && kv_side_takes(in, c, in_bytes, cache_bytes, 8);
  };
  // nvfp4: one 16-value block a thread, on the aligned, contiguous entries check() requires;
  // fp8_e4m3_per_token_head likewise, one vector a thread (a head's vectors one shuffle group).
  constexpr bool kNvfp4 = kCache == KvCacheType::kNvfp4;
  constexpr bool kTokenHead = layout::kv_cache_type(kCache).token_head_scales;
  const bool fast = kNvfp4 || kTokenHead ||
                    (fast_side(p.k, p.k_cache) && (!has_v || fast_side(p.v, p.v_cache)));
  int32_t width = layout::kv_cache_type(kCache).values_per_thread;
  if (!fast) {
    while (width > 1 && !(kv_side_takes(p.k, p.k_cache, in_bytes, cache_bytes, width) &&
                          (!has_v || kv_side_takes(p.v, p.v_cache, in_bytes, cache_bytes, width))))
      width /= 2;
  }
  const kernels::PagedKvArgs args = paged_kv_args(p, width);
  // The 16-byte and nvfp4 kernels take four vectors (blocks) a thread (j, j + vecs / 4, ...)
  // on large batches.
  const int32_t vectors =
      fast && !kTokenHead ? tuning::paged_kv_vectors_per_thread(arch.policy, p.batch.num_tokens,
                                                                args.vecs_per_token)
                          : 1;
  dim3 grid, block;
  CACHESTORE_RETURN_IF_ERROR(paged_kv_grid(p, arch, args.vecs_per_token / vectors, &grid, &block,
                                           vectors == tuning::kPagedKvWideVectors));
  const bool pdl = use_pdl(p.launch, arch);
  const kernels::GuardArgs guard = guard_args(p.batch, pdl, grid, arch);
  const kernels::PageTableArgs table = page_table_args(p.slots, p.page_size);
  constexpr bool kDecodes = kCache != KvCacheType::kAuto;
  return with_paged_kv_kernel<kDecodes>(p, pdl, [&](auto input, auto pdl_constant, auto slot) {
    constexpr KvDataType kIn = decltype(input)::value;
    constexpr bool kPdl = decltype(pdl_constant)::value;
    using SlotT = decltype(slot);
    if constexpr (kTokenHead) {
      return launch_store(kernels::paged_kv_token_head_kernel<SlotT, kIn, kPdl>, grid, block,
                          stream, pdl_constant, guard, args, table, block_scale_args(p));
    } else if constexpr (kNvfp4) {
      if (vectors == tuning::kPagedKvWideVectors)
        return launch_store(
            kernels::paged_kv_nvfp4_kernel<SlotT, kIn, kPdl, tuning::kPagedKvWideVectors>, grid,
            block, stream, pdl_constant, guard, args, table, block_scale_args(p));
      return launch_store(kernels::paged_kv_nvfp4_kernel<SlotT, kIn, kPdl, 1>, grid, block,
                          stream, pdl_constant, guard, args, table, block_scale_args(p));
    } else {
      if (vectors == tuning::kPagedKvWideVectors)
        return launch_store(
            kernels::paged_kv_kernel<SlotT, kCache, kIn, kPdl, tuning::kPagedKvWideVectors>, grid,
            block, stream, pdl_constant, guard, args, table);
      if (fast)
        return launch_store(kernels::paged_kv_kernel<SlotT, kCache, kIn, kPdl, 1>, grid, block,
                            stream, pdl_constant, guard, args, table);
      return launch_store(kernels::paged_kv_general_kernel<SlotT, kCache, kIn, kPdl>, grid,
                          block, stream, pdl_constant, guard, args, table);
    }
  });
}

}  // namespace cachestore::detail
