// bench_store's harness and main: the pool, the sampler, each row's counters, the registration
// of every family's rows (harness.cuh says what the rows measure).
#include "harness.cuh"

#include <benchmark/benchmark.h>
#include <thrust/random.h>
#include <thrust/sequence.h>
#include <thrust/shuffle.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "cuda_check.h"
#include "gpu_presence.h"

namespace cachestore::bench {
namespace {

constexpr int kNodesPerGraph = 32;
constexpr int kStreamLaunches = 100;

const auto g_process_start = std::chrono::steady_clock::now();
Pool* g_pool = nullptr;

std::vector<StoreOp>& registry() {
  static std::vector<StoreOp> ops;
  return ops;
}
std::vector<void (*)()>& allocators() {
  static std::vector<void (*)()> fns;
  return fns;
}

__global__ void fill_random_bf16(uint16_t* out, int64_t count, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    out[i] = static_cast<uint16_t>(((h & 1u) << 15) | ((119u + (h >> 1) % 16u) << 7) | ((h >> 8) & 0x7fu));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void init_pool() {
  g_pool = new Pool;
  Pool& p = *g_pool;
  int device = 0, l2 = 0;
  CACHESTORE_CHECK_CUDA(cudaGetDevice(&device));
  CACHESTORE_CHECK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  p.l2_bytes = l2;
  // 3.25 GiB of bf16: one input set of the widest rows ([Q | K | V], 6144 wide) at n = 262144.
  p.input.resize(size_t{1664} << 20);
  fill_random_bf16<<<4096, 256>>>(thrust::raw_pointer_cast(p.input.data()),
                                  static_cast<int64_t>(p.input.size()), 2026u);
  CACHESTORE_CHECK_CUDA(cudaGetLastError());
  p.slots.resize(size_t{4} << 20);
  p.table_batch.resize(p.slots.size());
  p.table_positions.resize(p.slots.size());
  p.table_indptr.resize(p.slots.size() + 1);
  p.table_indices.resize(p.slots.size());
  // Caches of >= 4x the L2 (and >= 4x the largest n in slots), poisoned once: the shared ones,
  // then each family's.
  poisoned_cache(p.bf16_cache, p.bf16_slots * 256);
  poisoned_cache(p.fp8_cache, p.index_pages * layout::min_page_stride(IndexKFormat::kFp8, kPage, 128));
  poisoned_cache(p.fp4_cache, p.index_pages * layout::min_page_stride(IndexKFormat::kFp4, kPage, 128));
  for (void (*allocate)() : allocators()) allocate();
  p.copy_dst.resize(size_t{600} << 20);
  p.count.assign(1, 0);

  // The ceiling of this run: a large device-to-device copy, bytes read + written.
  const size_t bytes = size_t{512} << 20;
  cudaEvent_t start, stop;
  CACHESTORE_CHECK_CUDA(cudaEventCreate(&start));
  CACHESTORE_CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int i = 0; i < 12; ++i) {
    CACHESTORE_CHECK_CUDA(cudaEventRecord(start));
    CACHESTORE_CHECK_CUDA(cudaMemcpyAsync(thrust::raw_pointer_cast(p.copy_dst.data()),
                                          thrust::raw_pointer_cast(p.input.data()), bytes,
                                          cudaMemcpyDeviceToDevice));
    CACHESTORE_CHECK_CUDA(cudaEventRecord(stop));
    CACHESTORE_CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CACHESTORE_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 2) samples.push_back(ms);
  }
  p.copy_gbps = 2.0 * bytes / (median(samples) * 1e-3) / 1e9;
  CACHESTORE_CHECK_CUDA(cudaEventDestroy(start));
  CACHESTORE_CHECK_CUDA(cudaEventDestroy(stop));
}

// Slots for `sets` input sets of n rows each: decode = distinct random slots of the cache;
// prefill = whole pages in random order, consecutive slots within a page.
void make_slots(Slots pattern, int64_t n, int sets, int64_t capacity, uint32_t seed) {
  thrust::device_vector<int64_t> order(capacity / (pattern == Slots::kPrefill ? kPage : 1));
  thrust::sequence(order.begin(), order.end());
  thrust::default_random_engine rng(seed);
  thrust::shuffle(order.begin(), order.end(), rng);
  int64_t* out = thrust::raw_pointer_cast(g_pool->slots.data());
  int32_t* batch = thrust::raw_pointer_cast(g_pool->table_batch.data());
  int32_t* positions = thrust::raw_pointer_cast(g_pool->table_positions.data());
  int32_t* indptr = thrust::raw_pointer_cast(g_pool->table_indptr.data());
  int32_t* indices = thrust::raw_pointer_cast(g_pool->table_indices.data());
  const int64_t* src = thrust::raw_pointer_cast(order.data());
  const int64_t total = n * sets, count = static_cast<int64_t>(order.size());
  const bool prefill = pattern == Slots::kPrefill;
  thrust::for_each(thrust::counting_iterator<int64_t>(0), thrust::counting_iterator<int64_t>(total),
                   [=] __device__(int64_t i) {
                     const int64_t set = i / n, row = i % n;
                     // each set starts its own run of pages/slots so sets do not overlap
                     const int64_t slot = prefill ? src[(set * ((n + kPage - 1) / kPage) + row / kPage) % count] * kPage + row % kPage
                                                  : src[i % count];
                     out[i] = slot;
                     batch[i] = static_cast<int32_t>(i);
                     positions[i] = static_cast<int32_t>(slot % kTablePage);
                     indptr[i] = static_cast<int32_t>(i);
                     indices[i] = static_cast<int32_t>(slot / kTablePage);
                     if (i == total - 1) indptr[total] = static_cast<int32_t>(total);
                   });
  CACHESTORE_CHECK_CUDA(cudaGetLastError());
}

struct Row {
  const StoreOp* op;
  Mode mode;
  bool pdl;
  Slots slots;
  int64_t n;
  const StoreOp* subject = nullptr;  // a baseline's store row
};

// Issues one store (or baseline) on input set `set`.
Status issue(const Row& r, int set, int64_t set_elems, cudaStream_t stream) {
  Pool& p = *g_pool;
  Node node;
  node.n = r.n;
  node.in = thrust::raw_pointer_cast(p.input.data()) + set * set_elems;
  node.input_width = r.op->input_width;
  node.index_in = node.in + r.n * r.op->input_width;
  node.slots = thrust::raw_pointer_cast(p.slots.data()) + set * r.n;
  node.batch = {r.n, thrust::raw_pointer_cast(p.count.data()), nullptr};
  node.slot_map = {node.slots, SlotType::kInt64};
  node.table_map = {thrust::raw_pointer_cast(p.table_batch.data()) + set * r.n,
                    SlotType::kPageTable};
  node.table_map.page_table = {thrust::raw_pointer_cast(p.table_positions.data()) + set * r.n,
                               thrust::raw_pointer_cast(p.table_indptr.data()),
                               thrust::raw_pointer_cast(p.table_indices.data()),
                               static_cast<int32_t>(p.table_indptr.size() - 1)};
  node.launch = {r.pdl};
  node.subject = r.subject != nullptr ? r.subject : r.op;
  node.stream = stream;
  return r.op->issue(node);
}

std::string g_refusal;  // the last refuse() message, read once by the sampler that hit it

std::string refusal_or_last_error() {
  std::string message = g_refusal.empty() ? last_error_message() : g_refusal;
  g_refusal.clear();
  return message;
}

// Times one row's store (or baseline) in its mode: each sample() is one graph replay of 32
// nodes, or 100 stream launches, in microseconds per store.
class Sampler {
 public:
  Sampler(const Row& r, int sets, int64_t set_elems) : row_(r), sets_(sets), set_elems_(set_elems) {
    CACHESTORE_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CACHESTORE_CHECK_CUDA(cudaEventCreate(&start_));
    CACHESTORE_CHECK_CUDA(cudaEventCreate(&stop_));
    if (r.mode == Mode::kGraph) {
      cudaGraph_t graph;
      CACHESTORE_CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      for (int node = 0; node < kNodesPerGraph && ok_; ++node) issue_node(node);
      CACHESTORE_CHECK_CUDA(cudaStreamEndCapture(stream_, &graph));
      if (ok_) CACHESTORE_CHECK_CUDA(cudaGraphInstantiate(&exec_, graph, 0));
      CACHESTORE_CHECK_CUDA(cudaGraphDestroy(graph));
    }
  }
  ~Sampler() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  double sample() {
    CACHESTORE_CHECK_CUDA(cudaEventRecord(start_, stream_));
    if (row_.mode == Mode::kGraph) {
      CACHESTORE_CHECK_CUDA(cudaGraphLaunch(exec_, stream_));
    } else {
      for (int i = 0; i < kStreamLaunches && ok_; ++i) issue_node(i);
    }
    CACHESTORE_CHECK_CUDA(cudaEventRecord(stop_, stream_));
    CACHESTORE_CHECK_CUDA(cudaEventSynchronize(stop_));
    CACHESTORE_CHECK_CUDA(cudaGetLastError());
    float ms = 0;
    CACHESTORE_CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e3 / (row_.mode == Mode::kGraph ? kNodesPerGraph : kStreamLaunches);
  }

 private:
  void issue_node(int node) {
    if (issue(row_, node % sets_, set_elems_, stream_) != Status::kSuccess) {
      ok_ = false;
      error_ = refusal_or_last_error();
    }
  }

  Row row_;
  int sets_;
  int64_t set_elems_;
  bool ok_ = true;
  std::string error_;
  cudaStream_t stream_{};
  cudaEvent_t start_{}, stop_{};
  cudaGraphExec_t exec_ = nullptr;
};

const StoreOp& op_named(const char* name) {
  for (const StoreOp& op : registry())
    if (std::string(op.name) == name) return op;
  std::fprintf(stderr, "bench_store: no op named %s\n", name);
  std::abort();
}

void run_row(benchmark::State& state, Row r) {
  Pool& p = *g_pool;
  const int64_t set_elems = r.n * (r.op->input_width + (r.op->index_input ? 128 : 0));
  const int64_t set_bytes = 2 * set_elems;
  // Rotate inputs (and their slots) for n >= 16384 so that >= 4x the L2 is read per round.
  int sets = 1;
  if (r.n >= 16384)
    sets = static_cast<int>(std::clamp<int64_t>((4 * p.l2_bytes + set_bytes - 1) / set_bytes, 1,
                                                kNodesPerGraph));
  if (sets * set_elems > static_cast<int64_t>(p.input.size()) ||
      sets * r.n > static_cast<int64_t>(p.slots.size())) {
    state.SkipWithError("pool too small");
    return;
  }
  make_slots(r.slots, r.n, sets, r.op->capacity(), static_cast<uint32_t>(r.n * 31 + sets));
  const int32_t n32 = static_cast<int32_t>(r.n);
  CACHESTORE_CHECK_CUDA(cudaMemcpy(thrust::raw_pointer_cast(p.count.data()), &n32, 4, cudaMemcpyHostToDevice));

  // The store and its baseline, sampled alternately in this row: same inputs, slots, caches
  // and clocks, so the ratio is a same-run, same-moment ratio.
  // x_naive's node too, in the same rotation (the baseline itself when that is the node).
  Sampler store(r, sets, set_elems);
  std::unique_ptr<Sampler> baseline, naive;
  if (r.op->baseline != nullptr)
    baseline = std::make_unique<Sampler>(
        Row{&op_named(r.op->baseline), r.mode, false, r.slots, r.n, r.op}, sets, set_elems);
  const bool naive_is_baseline =
      r.op->naive != nullptr && r.op->baseline != nullptr &&
      std::string(r.op->naive) == r.op->baseline;
  if (r.op->naive != nullptr && !naive_is_baseline)
    naive = std::make_unique<Sampler>(
        Row{&op_named(r.op->naive), r.mode, false, r.slots, r.n, r.op}, sets, set_elems);
  for (const Sampler* s : {&store, baseline.get(), naive.get()}) {
    if (s != nullptr && !s->ok()) {
      state.SkipWithError(s->error().c_str());
      return;
    }
  }
  // Warm-up: at least 10 samples and 25 ms of back-to-back work, so that the clocks are back
  // up after the host-side setup (a few small replays are too short for that).
  std::vector<double> store_us, baseline_us, naive_us;
  const auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(25);
  for (int i = 0; i < 10 || std::chrono::steady_clock::now() < warm_until; ++i) {
    store.sample();
    if (baseline) baseline->sample();
    if (naive) naive->sample();
  }
  for (int i = 0; i < 15; ++i) {
    store_us.push_back(store.sample());
    if (baseline) baseline_us.push_back(baseline->sample());
    if (naive) naive_us.push_back(naive->sample());
  }

  const double us = median(store_us);
  for (auto _ : state) state.SetIterationTime(us * 1e-6);
  const double gbps = static_cast<double>(r.op->bytes_per_row) * r.n / (us * 1e-6) / 1e9;
  state.counters["us"] = us;
  state.counters["us_min"] = *std::min_element(store_us.begin(), store_us.end());
  state.counters["GBps"] = gbps;
  state.counters["pct_copy"] = 100.0 * gbps / p.copy_gbps;
  state.counters["input_sets"] = sets;
  // When the row ran (seconds after the process started; the JSON's context has the start
  // date): gpu-check logs the clocks and temperature beside it.
  state.counters["t_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                        g_process_start).count();
  if (baseline) {
    state.counters["baseline_us"] = median(baseline_us);
    state.counters["x_baseline"] = us / median(baseline_us);
  }
  if (r.op->naive != nullptr) {
    const double naive_median = naive ? median(naive_us) : median(baseline_us);
    state.counters["naive_us"] = naive_median;
    state.counters["x_naive"] = us / naive_median;
  }
}

void register_rows() {
  std::vector<StoreOp>& ops = registry();
  std::stable_sort(ops.begin(), ops.end(),
                   [](const StoreOp& a, const StoreOp& b) { return a.order < b.order; });
  const int64_t sizes[] = {1, 8, 32, 128, 512, 4096, 16384, 65536, 262144};
  // Every graph row before any stream row: once a stream row has launched its 100 kernels
  // eagerly, the non-PDL graph nodes of the process read slower at small n (PDL edges do
  // not), so the graph rows all run in the state of a process that has only replayed graphs.
  for (Mode mode : {Mode::kGraph, Mode::kStream})
    for (const StoreOp& op : ops)
      for (bool pdl : {false, true})
        for (Slots slots : {Slots::kDecode, Slots::kPrefill})
          for (int64_t n : sizes) {
            if (pdl && !op.pdl_capable) continue;
            if (op.max_rows > 0 && n > op.max_rows) continue;
            if (slots == Slots::kPrefill && n < 4096) continue;
            const std::string name = std::string("store=") + op.name +
                                     "/mode=" + (mode == Mode::kGraph ? "graph" : "stream") +
                                     "/pdl=" + (pdl ? "on" : "off") +
                                     "/slots=" + (slots == Slots::kDecode ? "decode" : "prefill") +
                                     "/n=" + std::to_string(n);
            const Row row{&op, mode, pdl, slots, n};
            benchmark::RegisterBenchmark(name.c_str(),
                                         [row](benchmark::State& state) { run_row(state, row); })
                ->UseManualTime()
                ->Iterations(1)
                ->Unit(benchmark::kMicrosecond);
          }
}

}  // namespace

Pool& pool() { return *g_pool; }

Family::Family(std::vector<StoreOp> ops, void (*allocate)()) {
  registry().insert(registry().end(), ops.begin(), ops.end());
  if (allocate != nullptr) allocators().push_back(allocate);
}

uint8_t* poisoned_cache(thrust::device_vector<uint8_t>& buffer, size_t bytes) {
  buffer.assign(bytes, 0xab);
  return thrust::raw_pointer_cast(buffer.data());
}

Status refuse(const char* why) {
  g_refusal = why;
  return Status::kErrorNotSupported;
}

Status cuda_status(cudaError_t err) {
  return err == cudaSuccess ? Status::kSuccess : Status::kErrorCudaRuntime;
}

}  // namespace cachestore::bench

int main(int argc, char** argv) {
  using namespace cachestore;
  bool list_only = false;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--benchmark_list_tests", 0) == 0) list_only = true;
  bench::register_rows();
  benchmark::Initialize(&argc, argv);
  if (!list_only) {
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "bench_store: %s; it needs a GPU (--benchmark_list_tests works anywhere)\n",
                   test::gpu_absence_of(err).reason.c_str());
      return 1;
    }
    cudaDeviceProp prop;
    CACHESTORE_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    CACHESTORE_CHECK_CUDA(cudaDriverGetVersion(&driver));
    CACHESTORE_CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
    DeviceInfo info;
    if (query_device(0, &info) != Status::kSuccess) {
      std::fprintf(stderr, "bench_store: %s\n", last_error_message());
      return 1;
    }
    bench::init_pool();
    benchmark::AddCustomContext("gpu", prop.name);
    benchmark::AddCustomContext("compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
    benchmark::AddCustomContext("driver", std::to_string(driver));
    benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
    benchmark::AddCustomContext("build_arches", CACHESTORE_BUILD_ARCHES);
    benchmark::AddCustomContext("kernel_variant", kernel_path_string(info.path));
    benchmark::AddCustomContext("l2_bytes", std::to_string(bench::pool().l2_bytes));
    benchmark::AddCustomContext("copy_GBps", std::to_string(bench::pool().copy_gbps));
    benchmark::AddCustomContext("timing", "graph: 32-node CUDA graph replays / 32, median of 15; stream: 100 launches, median of 15; CUDA events");
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
