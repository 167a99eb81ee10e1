#include "arch.h"

#include <cstdlib>
#include <mutex>

#include "detail/status.h"

namespace cachestore {
namespace detail {
namespace {

// Compiled into every image of the library like the store kernels: its attributes say which
// image the driver loads for them.
__global__ void image_probe_kernel() {}

constexpr int kMaxDevices = 64;

Status probe(int device, ArchInfo* out) {
  int major = 0, minor = 0, sms = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return fail(Status::kErrorCudaRuntime, "cannot read the compute capability of device %d",
                device);
  }
  cudaFuncAttributes attributes{};
  const cudaError_t err = cudaFuncGetAttributes(&attributes, image_probe_kernel);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(Status::kErrorArchMismatch,
                "no kernel image of cachestore runs on device %d (compute capability %d.%d): %s; "
                "rebuild with CMAKE_CUDA_ARCHITECTURES including it",
                device, major, minor, cudaGetErrorString(err));
  }
  out->device.compute_capability = major * 10 + minor;
  out->sm_count = sms;
  out->device.binary_version = attributes.binaryVersion;
  out->device.ptx_version = attributes.ptxVersion;
  // Newest first: the policy of the image that runs.
  if (attributes.ptxVersion >= 100 && attributes.binaryVersion >= 100) {
    out->device.path = KernelPath::kBlackwell;
    out->policy = tuning::kBlackwellPolicy;
  } else if (attributes.ptxVersion >= 90) {
    out->device.path = KernelPath::kHopper;
    out->policy = tuning::kHopperPolicy;
  } else {
    out->device.path = KernelPath::kPortable;
    out->policy = tuning::kPortablePolicy;
  }
  // griddepcontrol is compiled in only for images built for compute_90 and newer.
  out->pdl = attributes.ptxVersion >= 90;
  if (const char* spec = std::getenv("CACHESTORE_TUNING")) {
    char error[160];
    if (!tuning::apply_overrides(spec, &out->policy, error, sizeof error))
      return fail(Status::kErrorInvalidArgument, "CACHESTORE_TUNING: %s", error);
  }
  return Status::kSuccess;
}

}  // namespace

Status current_arch(ArchInfo* out) {
  static std::mutex mutex;
  static ArchInfo cache[kMaxDevices];
  static bool cached[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    const cudaError_t err = cudaGetLastError();
    return fail(Status::kErrorCudaRuntime, "no current CUDA device: %s", cudaGetErrorString(err));
  }
  if (device < 0 || device >= kMaxDevices)
    return fail(Status::kErrorNotSupported, "device %d: at most %d devices", device, kMaxDevices);
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached[device]) {
    CACHESTORE_RETURN_IF_ERROR(probe(device, &cache[device]));
    cached[device] = true;
  }
  *out = cache[device];
  return Status::kSuccess;
}

}  // namespace detail

Status query_device(int device, DeviceInfo* info) {
  if (info == nullptr) return detail::fail(Status::kErrorInvalidArgument, "info is null");
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    const cudaError_t err = cudaGetLastError();
    return detail::fail(Status::kErrorCudaRuntime, "device %d: %s", device,
                        cudaGetErrorString(err));
  }
  detail::ArchInfo arch{};
  const Status status = detail::current_arch(&arch);
  cudaSetDevice(previous);
  if (status != Status::kSuccess) return status;
  *info = arch.device;
  return detail::succeed();
}

const char* kernel_path_string(KernelPath path) {
  switch (path) {
    case KernelPath::kPortable: return "portable (sm_80 PTX)";
    case KernelPath::kHopper: return "hopper (sm_90: PDL, software UE8M0)";
    case KernelPath::kBlackwell: return "blackwell (sm_100a: PDL, native cvt.rp.satfinite.ue8m0x2)";
  }
  return "unknown";
}

}  // namespace cachestore
