// The production bug in 60 lines of output: a decode step captured as a CUDA graph at B = 32
// rows, replayed with fewer real tokens. The padding rows keep the previous step's slots (live
// tokens' keys) and garbage inputs. A naive unguarded scatter overwrites those live keys;
// cachestore::store_index_k_bf16 writes only the real rows.
#include <cachestore/cachestore.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_check.h"
#include "gpu_presence.h"
#include "naive_scatter.cuh"

namespace {

constexpr int64_t kBatch = 32, kDim = 128, kSlots = 4096;

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "padded_replay_demo: %s; it needs a GPU.\n",
                 cachestore::test::gpu_absence_of(found).reason.c_str());
    return 2;
  }
  cudaDeviceProp prop;
  CACHESTORE_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

  auto* k = cachestore::test::device_alloc<uint16_t>(kBatch * kDim);
  auto* slots = cachestore::test::device_alloc<int64_t>(kBatch);
  auto* n = cachestore::test::device_alloc<int32_t>(1);
  uint16_t* caches[2] = {cachestore::test::device_alloc<uint16_t>(kSlots * kDim), cachestore::test::device_alloc<uint16_t>(kSlots * kDim)};
  for (uint16_t* c : caches) CACHESTORE_CHECK_CUDA(cudaMemset(c, 0, kSlots * kDim * 2));

  // Two graphs captured at B = 32: the naive scatter (cache 0) and the guarded store (cache 1).
  cudaStream_t stream;
  CACHESTORE_CHECK_CUDA(cudaStreamCreate(&stream));
  cudaGraphExec_t exec[2];
  for (int g = 0; g < 2; ++g) {
    cudaGraph_t graph;
    CACHESTORE_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    if (g == 0) {
      CACHESTORE_CHECK_CUDA(cachestore::test::naive_scatter(k, slots, caches[0], kBatch, kDim, kSlots, stream));
    } else {
      cachestore::IndexKBf16Params p;
      p.batch = {kBatch, n, nullptr};
      p.slots = {slots, cachestore::SlotType::kInt64};
      p.k = k;
      p.k_row_stride = kDim;
      p.cache = caches[1];
      p.cache_row_stride = kDim;
      p.num_slots = kSlots;
      p.head_dim = kDim;
      const cachestore::Status s = cachestore::store_index_k_bf16(p, stream);
      if (s != cachestore::Status::kSuccess) {
        std::fprintf(stderr, "store_index_k_bf16: %s\n", cachestore::last_error_message());
        return 1;
      }
    }
    CACHESTORE_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CACHESTORE_CHECK_CUDA(cudaGraphInstantiate(&exec[g], graph, 0));
    CACHESTORE_CHECK_CUDA(cudaGraphDestroy(graph));
  }

  // Expected cache: what the real tokens wrote. Each step n real tokens get fresh slots; the
  // padding rows keep the previous step's slots and hold NaN garbage.
  std::mt19937_64 rng(2026);
  std::vector<int64_t> free_slots(kSlots);
  for (int64_t s = 0; s < kSlots; ++s) free_slots[s] = s;
  std::shuffle(free_slots.begin(), free_slots.end(), rng);
  std::vector<uint16_t> expected(kSlots * kDim, 0);
  std::vector<int64_t> step_slots(kBatch, 0);
  size_t next = 0;
  const int32_t steps[] = {32, 20, 7, 32, 1, 16};
  int corrupted[2] = {0, 0};
  for (int32_t real : steps) {
    std::vector<uint16_t> rows(kBatch * kDim);
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t c = 0; c < kDim; ++c)
        rows[r * kDim + c] = r < real ? static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff)) : 0x7fc1;
    for (int64_t r = 0; r < real; ++r) step_slots[r] = free_slots[next++];
    for (int64_t r = 0; r < real; ++r)
      std::memcpy(&expected[step_slots[r] * kDim], &rows[r * kDim], kDim * 2);
    CACHESTORE_CHECK_CUDA(cudaMemcpy(k, rows.data(), rows.size() * 2, cudaMemcpyHostToDevice));
    CACHESTORE_CHECK_CUDA(cudaMemcpy(slots, step_slots.data(), kBatch * 8, cudaMemcpyHostToDevice));
    CACHESTORE_CHECK_CUDA(cudaMemcpy(n, &real, 4, cudaMemcpyHostToDevice));
    for (int g = 0; g < 2; ++g) CACHESTORE_CHECK_CUDA(cudaGraphLaunch(exec[g], stream));
    CACHESTORE_CHECK_CUDA(cudaStreamSynchronize(stream));
    std::printf("replay with %2d real tokens of %lld:", real, static_cast<long long>(kBatch));
    for (int g = 0; g < 2; ++g) {
      std::vector<uint16_t> cache(kSlots * kDim);
      CACHESTORE_CHECK_CUDA(cudaMemcpy(cache.data(), caches[g], cache.size() * 2, cudaMemcpyDeviceToHost));
      int bad = 0;
      for (int64_t s = 0; s < kSlots; ++s)
        bad += std::memcmp(&cache[s * kDim], &expected[s * kDim], kDim * 2) != 0;
      corrupted[g] = bad;
      std::printf("  %s: %4d corrupted slots", g == 0 ? "naive scatter" : "cachestore", bad);
    }
    std::printf("\n");
  }
  std::printf("\nnaive unguarded scatter: %d live slots hold garbage; cachestore guarded store: %d\n",
              corrupted[0], corrupted[1]);
  const bool shown = corrupted[0] > 0 && corrupted[1] == 0;
  std::printf("%s\n", shown ? "RESULT: the naive scatter corrupts under padded replay; the guarded store does not"
                            : "RESULT: unexpected: see the counts above");
  return shown ? 0 : 1;
}
