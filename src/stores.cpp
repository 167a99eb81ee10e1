// The entry points: check() (check.cpp), the device's facts (arch.cu), then the launcher of the
// layout (dispatch/launchers.h). An empty batch launches nothing. move_pages resolves pinned
// host memory to its device address before it launches.
#include "arch.h"
#include "cachestore/cachestore.h"
#include "cachestore/move.h"
#include "detail/status.h"
#include "dispatch/launchers.h"

namespace cachestore {
namespace {

template <typename Params>
int64_t rows_of(const Params& p) {
  return p.batch.num_tokens;
}
int64_t rows_of(const MovePagesParams& p) { return p.num_entries; }

template <typename Params, typename Launch>
Status run_store(const Params& p, Launch&& launch) {
  CACHESTORE_RETURN_IF_ERROR(check(p));
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (rows_of(p) == 0) return detail::succeed();
  return launch(arch);
}

// A move side's base as the device addresses it: device memory as it is, pinned or registered
// host memory by its device pointer (the same address under unified addressing); pageable host
// memory is refused, since the kernel cannot reach it. plane_bases are the caller's.
Status device_base(PageSide* side, const char* name) {
  if (side->plane_bases != nullptr) return Status::kSuccess;
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, side->data);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return detail::fail(Status::kErrorCudaRuntime, "%s.data: cudaPointerGetAttributes: %s", name,
                        cudaGetErrorString(err));
  }
  if (attributes.type == cudaMemoryTypeUnregistered)
    return detail::fail(Status::kErrorInvalidArgument,
                        "%s.data is pageable host memory, which the device cannot reach: pin it "
                        "(cudaHostAlloc, cudaHostRegister, torch's pin_memory())", name);
  if (attributes.type == cudaMemoryTypeHost) {
    if (attributes.devicePointer == nullptr)
      return detail::fail(Status::kErrorInvalidArgument,
                          "%s.data is pinned host memory not mapped into the device's address "
                          "space (register it with cudaHostRegisterMapped)", name);
    side->data = attributes.devicePointer;
  }
  return Status::kSuccess;
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

Status move_pages(const MovePagesParams& params, cudaStream_t stream) {
  return run_store(params, [&](const detail::ArchInfo& arch) {
    MovePagesParams p = params;
    CACHESTORE_RETURN_IF_ERROR(device_base(&p.src, "src"));
    CACHESTORE_RETURN_IF_ERROR(device_base(&p.dst, "dst"));
    return detail::launch_move_pages(p, arch, stream);
  });
}

Status store_paged_kv(const PagedKvParams& p, cudaStream_t stream) {
  return run_store(p, [&](const detail::ArchInfo& arch) {
    return detail::with_kv_cache_type(p.cache_type, [&](auto type) {
      constexpr KvCacheType kCache = decltype(type)::value;
      if constexpr (layout::kv_cache_type(kCache).rope) {  // else check() refused the rotation
        if (rotates(p.rope)) return detail::launch_paged_kv_rope<kCache>(p, arch, stream);
      }
      return detail::launch_paged_kv<kCache>(p, arch, stream);
    });
  });
}

}  // namespace cachestore
