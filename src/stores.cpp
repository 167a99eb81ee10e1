// The entry points: check() (check.cpp), the device's facts (arch.cu), then the launcher of the
// layout (dispatch/launchers.h). An empty batch launches nothing.
#include "arch.h"
#include "cachestore/cachestore.h"
#include "detail/status.h"
#include "dispatch/launchers.h"

namespace cachestore {
namespace {

template <typename Params, typename Launch>
Status run_store(const Params& p, Launch&& launch) {
  CACHESTORE_RETURN_IF_ERROR(check(p));
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (p.batch.num_tokens == 0) return detail::succeed();
  return launch(arch);
}

}  // namespace

Status store_index_k_bf16(const IndexKBf16Params& p, cudaStream_t stream) {
  return run_store(p, [&](const detail::ArchInfo& arch) {
    return detail::launch_index_k_bf16(p, arch, stream);
  });
}

Status store_index_k_fp8(const IndexKFp8Params& p, cudaStream_t stream) {
  return run_store(p, [&](const detail::ArchInfo& arch) {
    return detail::launch_index_k_fp8(p, arch, stream);
  });
}

Status store_index_k_fp4(const IndexKFp4Params& p, cudaStream_t stream) {
  return run_store(p, [&](const detail::ArchInfo& arch) {
    return detail::launch_index_k_fp4(p, arch, stream);
  });
}

Status fused_store_cache(const FusedStoreParams& p, cudaStream_t stream) {
  return run_store(p, [&](const detail::ArchInfo& arch) {
    return detail::with_mla_layout(p.kv_cache.layout, [&](auto layout) {
      if (rotates(p.rotary))
        return detail::launch_mla_rope<decltype(layout)::value>(p, arch, stream);
      return detail::launch_mla<decltype(layout)::value>(p, arch, stream);
    });
  });
}

Status store_paged_kv(const PagedKvParams& p, cudaStream_t stream) {
  return run_store(p, [&](const detail::ArchInfo& arch) {
    return detail::with_kv_cache_type(p.cache_type, [&](auto type) {
      if (rotates(p.rope))
        return detail::launch_paged_kv_rope<decltype(type)::value>(p, arch, stream);
      return detail::launch_paged_kv<decltype(type)::value>(p, arch, stream);
    });
  });
}

}  // namespace cachestore
