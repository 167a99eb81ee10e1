// probe_small_n: decode-size stores timed alone, one 32-node CUDA graph per variant in a fresh
// process (median of 20 replays after 5 warm-ups, per node). The investigation harness behind
// NOTES.md: it separates what a kernel costs from what bench_store's long run adds, and compares
// the library's bf16 store with minimal variants (empty kernel, naive 1-D and 2-D, a minimal
// guard, cudaLaunchKernelEx vs <<<>>>).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"
#include "kernels/store_kernels.cuh"
#include "cuda_check.h"
#include "naive_scatter.cuh"

namespace {

using namespace cachestore;

__global__ void empty_kernel() {}

__global__ void naive_2d(const uint4* k, const int64_t* slots, uint4* cache, int64_t rows) {
  const int64_t row = blockIdx.x * int64_t{blockDim.y} + threadIdx.y;
  if (row < rows) cache[slots[row] * 16 + threadIdx.x] = k[row * 16 + threadIdx.x];
}

// The least a guarded store can do: count, slot and row loaded together, one compare.
__global__ void guarded_minimal(const uint4* k, const int64_t* slots, uint4* cache, int64_t rows,
                                const int32_t* n, int64_t capacity) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * 16) return;
  const int64_t row = i / 16;
  const uint4 v = k[i];
  const int64_t slot = slots[row];
  if (row < *n && static_cast<uint64_t>(slot) < static_cast<uint64_t>(capacity))
    cache[slot * 16 + i % 16] = v;
}

template <typename Launch>
double per_node_us(Launch launch, cudaStream_t stream) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CACHESTORE_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 32; ++i) launch();
  CACHESTORE_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CACHESTORE_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  CACHESTORE_CHECK_CUDA(cudaEventCreate(&start));
  CACHESTORE_CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int r = 0; r < 25; ++r) {
    CACHESTORE_CHECK_CUDA(cudaEventRecord(start, stream));
    CACHESTORE_CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CACHESTORE_CHECK_CUDA(cudaEventRecord(stop, stream));
    CACHESTORE_CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CACHESTORE_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 5) us.push_back(ms * 1e3 / 32);
  }
  CACHESTORE_CHECK_CUDA(cudaEventDestroy(start));
  CACHESTORE_CHECK_CUDA(cudaEventDestroy(stop));
  CACHESTORE_CHECK_CUDA(cudaGraphExecDestroy(exec));
  CACHESTORE_CHECK_CUDA(cudaGraphDestroy(graph));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "probe_small_n: no CUDA device; it needs a GPU\n");
    return 1;
  }
  const int32_t page = 64;
  const int64_t pages = 4096, capacity = pages * page;
  auto* in = test::device_alloc<uint16_t>(512 * 1024);
  auto* slots = test::device_alloc<int64_t>(512);
  auto* n = test::device_alloc<int32_t>(1);
  auto* bf16_cache = test::device_alloc<uint16_t>(capacity * 128);
  auto* fp8_cache = test::device_alloc<uint8_t>(pages * layout::index_k_fp8_min_page_stride(page, 128));
  auto* v4_cache = test::device_alloc<uint8_t>(pages * layout::v4_min_page_stride(page));
  auto* v32_cache = test::device_alloc<uint8_t>(pages * layout::v32_min_page_stride(page));
  CACHESTORE_CHECK_CUDA(cudaMemset(in, 0x3c, 512 * 1024 * 2));
  std::vector<int64_t> host_slots(512);
  for (int i = 0; i < 512; ++i) host_slots[i] = (i * 7919 + 13) % capacity;
  CACHESTORE_CHECK_CUDA(cudaMemcpy(slots, host_slots.data(), 512 * 8, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CACHESTORE_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const auto* k4 = reinterpret_cast<const uint4*>(in);
  auto* c4 = reinterpret_cast<uint4*>(bf16_cache);

  for (int64_t rows : {1, 32, 512}) {
    const int32_t n_host = static_cast<int32_t>(rows);
    CACHESTORE_CHECK_CUDA(cudaMemcpy(n, &n_host, 4, cudaMemcpyHostToDevice));
    const unsigned blocks = static_cast<unsigned>((rows * 16 + 255) / 256);
    IndexKBf16Params bf16;
    bf16.batch = {rows, n, nullptr};
    bf16.slots = {slots, SlotType::kInt64};
    bf16.k = in;
    bf16.k_row_stride = 128;
    bf16.cache = bf16_cache;
    bf16.cache_row_stride = 128;
    bf16.num_slots = capacity;
    const kernels::GuardArgs guard{rows, n, nullptr, false, false};
    const kernels::IndexKBf16Args args{{slots, -1, capacity, 0, 0}, in, 128, bf16_cache, 128, 16};
    std::printf("n = %lld (bf16, us per node)\n", static_cast<long long>(rows));
    std::printf("  empty kernel              %.3f\n", per_node_us([&] { empty_kernel<<<blocks, 256, 0, s>>>(); }, s));
    std::printf("  naive 1-D                 %.3f\n", per_node_us([&] { test::naive_scatter(in, slots, bf16_cache, rows, 128, capacity, s); }, s));
    std::printf("  naive 2-D (16, 16)        %.3f\n", per_node_us([&] { naive_2d<<<static_cast<unsigned>((rows + 15) / 16), dim3(16, 16), 0, s>>>(k4, slots, c4, rows); }, s));
    std::printf("  guarded minimal           %.3f\n", per_node_us([&] { guarded_minimal<<<blocks, 256, 0, s>>>(k4, slots, c4, rows, n, capacity); }, s));
    std::printf("  library kernel, <<<>>>    %.3f\n", per_node_us([&] { kernels::index_k_bf16_kernel<int64_t><<<static_cast<unsigned>((rows + 15) / 16), dim3(16, 16), 0, s>>>(guard, args); }, s));
    std::printf("  store_index_k_bf16        %.3f\n", per_node_us([&] { store_index_k_bf16(bf16, s); }, s));
    bf16.launch.enable_pdl = true;
    std::printf("  store_index_k_bf16, PDL   %.3f\n", per_node_us([&] { store_index_k_bf16(bf16, s); }, s));

    for (bool pdl : {false, true}) {
      IndexKFp8Params fp8;
      fp8.batch = {rows, n, nullptr};
      fp8.slots = {slots, SlotType::kInt64};
      fp8.k = in;
      fp8.k_row_stride = 128;
      fp8.cache = {fp8_cache, pages, page, layout::index_k_fp8_min_page_stride(page, 128), 128, ScaleRule::kAmax};
      fp8.launch.enable_pdl = pdl;
      FusedStoreParams v32;
      v32.batch = fp8.batch;
      v32.kv_slots = fp8.slots;
      v32.nope = in;
      v32.nope_row_stride = 576;
      v32.rope = in + 512;
      v32.rope_row_stride = 576;
      v32.kv_cache = {MlaLayout::kV32, v32_cache, pages, page, layout::v32_min_page_stride(page), ScaleRule::kPow2};
      v32.launch.enable_pdl = pdl;
      FusedStoreParams v4 = v32;
      v4.nope_row_stride = 512;
      v4.rope = in + 448;
      v4.rope_row_stride = 512;
      v4.kv_cache = {MlaLayout::kV4, v4_cache, pages, page, layout::v4_min_page_stride(page), ScaleRule::kPow2};
      FusedStoreParams v4_index = v4;
      v4_index.index_k = in + 512 * 512;
      v4_index.index_k_row_stride = 128;
      v4_index.index_slots = fp8.slots;
      v4_index.index_cache = fp8.cache;
      IndexKFp8Params pow2 = fp8;
      pow2.cache.scale_rule = ScaleRule::kPow2;
      std::printf("  PDL %-3s fp8 amax %.3f  pow2 %.3f  V4 %.3f  V3.2 %.3f  V4+index %.3f\n", pdl ? "on" : "off",
                  per_node_us([&] { store_index_k_fp8(fp8, s); }, s),
                  per_node_us([&] { store_index_k_fp8(pow2, s); }, s),
                  per_node_us([&] { fused_store_cache(v4, s); }, s),
                  per_node_us([&] { fused_store_cache(v32, s); }, s),
                  per_node_us([&] { fused_store_cache(v4_index, s); }, s));
    }
  }
  CACHESTORE_CHECK_CUDA(cudaGetLastError());
  return 0;
}
