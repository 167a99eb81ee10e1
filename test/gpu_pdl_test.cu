// Programmatic dependent launch: in one CUDA graph, a producer kernel writes fresh K rows,
// slots and the count and lets its dependents launch at once; the store launches with PDL and
// must wait for it; a consumer launched with PDL waits for the store and checksums the caches.
// 1000 replays with changing data give exactly the checksums and caches of the same graph
// without PDL, and the host reference's caches. Also: runtime dispatch picks the right path.
#include <cub/block/block_reduce.cuh>

#include <set>

#include "store_cases.cuh"

namespace cachestore::test {
namespace {

constexpr int64_t kRows = 32;

__host__ __device__ inline uint32_t mix(uint32_t a, uint32_t b) {
  uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca77u;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  return h;
}

// What the producer writes at replay `step`; the host recomputes it for the reference.
__host__ __device__ inline int32_t step_count(uint32_t step) {
  return static_cast<int32_t>(mix(step, 1) % (kRows + 1));
}
// Distinct slots for the real rows (7919 is prime to the capacity), -1 or a colliding slot for
// the padding rows. `seed` differs between the KV and the index-K slot mappings.
__host__ __device__ inline int64_t step_slot(uint32_t step, uint32_t seed, int64_t row,
                                             int64_t capacity) {
  if (row < step_count(step)) return (mix(step ^ seed, 2) % capacity + row * 7919) % capacity;
  return mix(step, 3 + static_cast<uint32_t>(row)) % 3 == 0 ? -1 : mix(step, 99) % capacity;
}
__host__ __device__ inline uint16_t step_value(uint32_t step, int64_t row, int64_t col) {
  if (row >= step_count(step)) return 0x7fc1;  // NaN garbage in the padding rows
  const uint32_t h = mix(step * 4096u + static_cast<uint32_t>(row), static_cast<uint32_t>(col));
  return static_cast<uint16_t>(((h & 1u) << 15) | ((119u + (h >> 1) % 16u) << 7) | ((h >> 8) & 0x7fu));
}

struct ProducerArgs {
  uint16_t* inputs[3];
  int64_t strides[3];
  int32_t num_inputs;
  int64_t* slots;
  int64_t* index_slots;  // may be null
  int32_t* count;
  const uint32_t* step;
  int64_t capacity;
};

__global__ void producer_kernel(ProducerArgs a) {
  cudaTriggerProgrammaticLaunchCompletion();  // dependents may launch now and must wait
  const uint32_t step = *a.step;
  const int64_t tid = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (int t = 0; t < a.num_inputs; ++t)
    for (int64_t i = tid; i < kRows * a.strides[t]; i += gridDim.x * int64_t{blockDim.x})
      a.inputs[t][i] = step_value(step, i / a.strides[t], i % a.strides[t]);
  if (tid < kRows) {
    a.slots[tid] = step_slot(step, 0, tid, a.capacity);
    if (a.index_slots != nullptr) a.index_slots[tid] = step_slot(step, 0x5555u, tid, a.capacity);
  }
  if (tid == 0) *a.count = step_count(step);
}

struct ConsumerArgs {
  const uint8_t* caches[2];
  int64_t sizes[2];
  unsigned long long* checksums;  // [replays]
  uint32_t* step;
};

__global__ void consumer_kernel(ConsumerArgs a) {
  cudaGridDependencySynchronize();
  using Reduce = cub::BlockReduce<unsigned long long, 256>;
  __shared__ typename Reduce::TempStorage storage;
  unsigned long long sum = 0;
  for (int c = 0; c < 2; ++c)
    for (int64_t i = threadIdx.x; i < a.sizes[c]; i += blockDim.x)
      sum += (a.caches[c][i] + 1ull) * static_cast<unsigned long long>(i % 65521 + 1 + c);
  sum = Reduce(storage).Sum(sum);
  if (threadIdx.x == 0) {
    a.checksums[*a.step] = sum;
    *a.step += 1;
  }
}

cudaError_t launch(void (*kernel)(ProducerArgs), ProducerArgs args, cudaStream_t s) {
  kernel<<<8, 256, 0, s>>>(args);
  return cudaGetLastError();
}
cudaError_t launch_consumer(ConsumerArgs args, bool pdl, cudaStream_t s) {
  cudaLaunchConfig_t config{};
  config.gridDim = 1;
  config.blockDim = 256;
  config.stream = s;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, consumer_kernel, args);
}

class PdlChain : public GpuTest, public ::testing::WithParamInterface<StoreKind> {
 protected:
  struct Run {
    std::vector<unsigned long long> checksums;
    std::vector<uint8_t> cache, index_cache;
  };

  // Builds the producer -> store -> consumer graph and replays it `replays` times.
  void run_chain(bool pdl, int replays, Run* out) {
    CaseShape shape;
    shape.num_tokens = kRows;
    shape.page_size = 16;
    StoreCase c(GetParam(), shape);
    thrust::device_vector<uint32_t> step(1, 0);
    thrust::device_vector<unsigned long long> checksums(replays, 0);
    ProducerArgs pa{};
    for (auto [m, stride] : c.bf16_inputs()) {
      pa.inputs[pa.num_inputs] = static_cast<uint16_t*>(m->ptr(Side::kDevice));
      pa.strides[pa.num_inputs++] = stride;
    }
    pa.slots = static_cast<int64_t*>(c.slots_mirror()->ptr(Side::kDevice));
    pa.index_slots = c.index_slots_mirror() == nullptr
                         ? nullptr
                         : static_cast<int64_t*>(c.index_slots_mirror()->ptr(Side::kDevice));
    pa.count = static_cast<int32_t*>(c.count_mirror()->ptr(Side::kDevice));
    pa.step = thrust::raw_pointer_cast(step.data());
    pa.capacity = c.capacity();
    ConsumerArgs ca{};
    ca.caches[0] = static_cast<const uint8_t*>(c.cache().ptr(Side::kDevice));
    ca.sizes[0] = static_cast<int64_t>(c.cache().host.size());
    if (c.index_cache() != nullptr) {
      ca.caches[1] = static_cast<const uint8_t*>(c.index_cache()->ptr(Side::kDevice));
      ca.sizes[1] = static_cast<int64_t>(c.index_cache()->host.size());
    }
    ca.checksums = thrust::raw_pointer_cast(checksums.data());
    ca.step = thrust::raw_pointer_cast(step.data());

    cudaStream_t stream;
    CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const cudaError_t produced = launch(producer_kernel, pa, stream);
    const Status stored = c.run_device(stream, LaunchOptions{pdl});
    const cudaError_t consumed = launch_consumer(ca, pdl, stream);
    CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
    CUDA_ASSERT(produced);
    ASSERT_EQ(stored, Status::kSuccess) << last_error_message();
    CUDA_ASSERT(consumed);
    cudaGraphExec_t exec;
    CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < replays; ++r) CUDA_ASSERT(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    out->checksums.resize(replays);
    thrust::copy(checksums.begin(), checksums.end(), out->checksums.begin());
    out->cache = c.cache().download();
    if (c.index_cache() != nullptr) out->index_cache = c.index_cache()->download();

    // The host reference of all replays, from the same generator.
    for (int r = 0; r < replays; ++r) {
      const uint32_t s = static_cast<uint32_t>(r);
      for (auto [m, stride] : c.bf16_inputs()) {
        std::vector<uint16_t> v(kRows * stride);
        for (int64_t i = 0; i < kRows * stride; ++i) v[i] = step_value(s, i / stride, i % stride);
        m->host = as_bytes(v);
      }
      std::vector<int64_t> slots(kRows), index_slots(kRows);
      for (int64_t i = 0; i < kRows; ++i) {
        slots[i] = step_slot(s, 0, i, c.capacity());
        index_slots[i] = step_slot(s, 0x5555u, i, c.capacity());
      }
      c.set_slots(slots);
      c.set_index_slots(index_slots);
      c.set_count(step_count(s));
      c.run_reference();
    }
    EXPECT_TRUE(c.outputs_match()) << (pdl ? "PDL on" : "PDL off") << " vs the host reference";
    CUDA_ASSERT(cudaGraphExecDestroy(exec));
    CUDA_ASSERT(cudaGraphDestroy(graph));
    CUDA_ASSERT(cudaStreamDestroy(stream));
  }
};

INSTANTIATE_TEST_SUITE_P(AllStores, PdlChain,
                         ::testing::Values(StoreKind::kIndexKBf16, StoreKind::kIndexKFp8Amax,
                                           StoreKind::kV4, StoreKind::kV32Pow2,
                                           StoreKind::kFusedV4Index, StoreKind::kFusedV32Index,
                                           StoreKind::kIndexKFp4Even, StoreKind::kV41,
                                           StoreKind::kV41Fp4, StoreKind::kFusedV41IndexFp4),
                         [](const auto& info) { return store_kind_name(info.param); });

TEST_P(PdlChain, ReplaysMatchWithoutPdl) {
  const int replays = sanitizer_run() ? 60 : 1000;
  Run with_pdl, without_pdl;
  ASSERT_NO_FATAL_FAILURE(run_chain(true, replays, &with_pdl));
  ASSERT_NO_FATAL_FAILURE(run_chain(false, replays, &without_pdl));
  EXPECT_EQ(with_pdl.checksums, without_pdl.checksums);
  EXPECT_TRUE(bytes_equal(without_pdl.cache, with_pdl.cache, "cache, PDL on vs off"));
  EXPECT_TRUE(bytes_equal(without_pdl.index_cache, with_pdl.index_cache, "index cache"));
  std::set<unsigned long long> distinct(with_pdl.checksums.begin(), with_pdl.checksums.end());
  EXPECT_GT(distinct.size(), static_cast<size_t>(replays / 2)) << "the data did not change";
}

TEST_F(GpuTest, DispatchFollowsTheRunningImage) {
  DeviceInfo info;
  STORE_ASSERT(query_device(0, &info));
  int major = 0;
  CUDA_ASSERT(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  std::printf("device 0: cc %d, image sm_%d (PTX %d): %s\n", info.compute_capability,
              info.binary_version, info.ptx_version, kernel_path_string(info.path));
  if (major == 9) {
    EXPECT_EQ(info.path, KernelPath::kHopper);
    EXPECT_EQ(info.binary_version, 90);
  } else if (major == 10) {
    EXPECT_EQ(info.path, KernelPath::kBlackwell);
  } else if (major == 8) {
    EXPECT_EQ(info.path, KernelPath::kPortable);
  }
  // A failing CUDA call on purpose: the sanitizers would count it as an API error.
  if (!sanitizer_run()) EXPECT_EQ(query_device(1 << 20, &info), Status::kErrorCudaRuntime);
  EXPECT_EQ(query_device(0, nullptr), Status::kErrorInvalidArgument);
}

}  // namespace
}  // namespace cachestore::test
