// Whether this machine can run the demo and bench_store: the device's name, or why there is
// none. Built before them (README's first command), so that a machine without a GPU learns it
// in seconds rather than after every kernel image is compiled.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "gpu_presence.h"

int main() {
  const cachestore::test::GpuAbsence absence = cachestore::test::gpu_absence();
  if (absence.absent()) {
    std::fprintf(stderr, "gpu_probe: %s; the demo and bench_store need a GPU.\n",
                 absence.reason.c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "gpu_probe: cudaGetDeviceProperties failed\n");
    return 1;
  }
  std::printf("gpu_probe: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  return 0;
}
