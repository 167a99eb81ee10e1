// move_pages: check(), pinned host memory resolved to the pointer the device uses, then the
// launcher. An empty batch launches nothing.
#include "arch.h"
#include "cachestore/move.h"
#include "detail/status.h"
#include "dispatch/launchers.h"

namespace cachestore {
namespace {

// A side's base as the device addresses it: device memory as it is, pinned or registered host
// memory by its device pointer (the same address under unified addressing); pageable host
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

Status move_pages(const MovePagesParams& params, cudaStream_t stream) {
  CACHESTORE_RETURN_IF_ERROR(check(params));
  detail::ArchInfo arch{};
  CACHESTORE_RETURN_IF_ERROR(detail::current_arch(&arch));
  if (params.num_entries == 0) return detail::succeed();
  MovePagesParams p = params;
  CACHESTORE_RETURN_IF_ERROR(device_base(&p.src, "src"));
  CACHESTORE_RETURN_IF_ERROR(device_base(&p.dst, "dst"));
  CACHESTORE_RETURN_IF_ERROR(detail::launch_move_pages(p, arch, stream));
  return detail::succeed();
}

}  // namespace cachestore
