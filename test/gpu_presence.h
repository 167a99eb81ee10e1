// Whether a CUDA device can run here, and if not, why in words that name the cause: the GPU
// tests, the demo and bench_store skip or stop with this reason.
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

namespace cachestore::test {

struct GpuAbsence {
  std::string code;    // an identifier: no_NVIDIA_driver, no_CUDA_device, ...
  std::string reason;  // the same in words
  bool absent() const { return !code.empty(); }
};

// The cause behind a failed or empty cudaGetDeviceCount (`err` is what it returned).
inline GpuAbsence gpu_absence_of(cudaError_t err) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr)
    return {"no_NVIDIA_driver", "no NVIDIA driver here (libcuda.so.1 is not installed)"};
  dlclose(driver);
  if (err == cudaErrorInsufficientDriver) {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    const std::string version =
        std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
    return {"NVIDIA_driver_older_than_CUDA_" + std::to_string(runtime / 1000) + "_" +
                std::to_string(runtime % 1000 / 10),
            "the NVIDIA driver is older than the CUDA " + version + " runtime this was built with"};
  }
  if (err == cudaSuccess || err == cudaErrorNoDevice)
    return {"no_CUDA_device", "no CUDA device here"};
  return {std::string("no_usable_CUDA_device_") + cudaGetErrorName(err),
          std::string("no usable CUDA device here (") + cudaGetErrorString(err) + ")"};
}

// Empty when a device is there (the CUDA error of the probe is cleared either way).
inline GpuAbsence gpu_absence() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return {};
  cudaGetLastError();
  return gpu_absence_of(err);
}

}  // namespace cachestore::test
