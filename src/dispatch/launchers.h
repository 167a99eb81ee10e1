// The launchers of every store, one per layout or cache type, each defined in its own
// instantiation file (src/instantiations/) with the kernels it launches, and the maps from a
// run-time layout to its launcher. Called by the entry points (stores.cpp) after check().
#pragma once

#include <type_traits>
#include <utility>

#include "arch.h"
#include "cachestore/cachestore.h"
#include "cachestore/layout.h"
#include "cachestore/move.h"
#include "detail/status.h"

namespace cachestore::detail {

Status launch_index_k_bf16(const IndexKBf16Params& p, const ArchInfo& arch, cudaStream_t stream);
Status launch_index_k_fp8(const IndexKFp8Params& p, const ArchInfo& arch, cudaStream_t stream);
Status launch_index_k_fp4(const IndexKFp4Params& p, const ArchInfo& arch, cudaStream_t stream);

// fused_store_cache for one MLA layout (instantiations/mla_<layout>.cu).
template <MlaLayout kLayout>
Status launch_mla(const FusedStoreParams& p, const ArchInfo& arch, cudaStream_t stream);
// ... with RoPE fused (instantiations/mla_rope_<layout>.cu).
template <MlaLayout kLayout>
Status launch_mla_rope(const FusedStoreParams& p, const ArchInfo& arch, cudaStream_t stream);

// move_pages (instantiations/move_pages.cu).
Status launch_move_pages(const MovePagesParams& p, const ArchInfo& arch, cudaStream_t stream);

// store_paged_kv for one cache type (instantiations/paged_kv_<type>.cu).
template <KvCacheType kCache>
Status launch_paged_kv(const PagedKvParams& p, const ArchInfo& arch, cudaStream_t stream);
// ... with RoPE fused (instantiations/paged_kv_rope_<type>.cu).
template <KvCacheType kCache>
Status launch_paged_kv_rope(const PagedKvParams& p, const ArchInfo& arch, cudaStream_t stream);

// f(std::integral_constant<Enum, value>{}) for the run-time `value`, one of the kCount entries of
// its layout table (the caller has checked it).
template <typename Enum, int32_t kCount, typename F, int32_t... kIndex>
Status with_table_entry(Enum value, F&& f, std::integer_sequence<int32_t, kIndex...>) {
  Status status = fail(Status::kErrorInvalidArgument, "not an entry of the layout table");
  ((static_cast<int32_t>(value) == kIndex
        ? (status = f(std::integral_constant<Enum, static_cast<Enum>(kIndex)>{}), true)
        : false) ||
   ...);
  return status;
}
template <typename F>
Status with_mla_layout(MlaLayout layout, F&& f) {
  return with_table_entry<MlaLayout, layout::kNumMlaLayouts>(
      layout, f, std::make_integer_sequence<int32_t, layout::kNumMlaLayouts>{});
}
template <typename F>
Status with_kv_cache_type(KvCacheType type, F&& f) {
  return with_table_entry<KvCacheType, layout::kNumKvCacheTypes>(
      type, f, std::make_integer_sequence<int32_t, layout::kNumKvCacheTypes>{});
}

}  // namespace cachestore::detail
