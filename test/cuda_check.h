// For the programs outside GoogleTest (demo, bench_store): a failed CUDA call
// prints where and why, and ends the program; a plain device allocation that cannot fail quietly.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CACHESTORE_CHECK_CUDA(expr)                                                        \
  do {                                                                                     \
    const cudaError_t check_cuda_err_ = (expr);                                            \
    if (check_cuda_err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr,                    \
                   cudaGetErrorString(check_cuda_err_));                                   \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace cachestore::test {

template <typename T>
T* device_alloc(size_t count) {
  T* p = nullptr;
  CACHESTORE_CHECK_CUDA(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

}  // namespace cachestore::test
