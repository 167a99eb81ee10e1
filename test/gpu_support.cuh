// GPU test support: the skip-or-fail fixture, host/device mirrored buffers, the scenario
// runner that poisons, stores, runs the host reference and compares every byte.
#pragma once

#include <thrust/device_vector.h>

#include <cstdlib>
#include <deque>
#include <string>

#include "gpu_presence.h"
#include "test_support.h"

#define CUDA_ASSERT(expr)                                                            \
  do {                                                                               \
    const cudaError_t cuda_assert_err_ = (expr);                                     \
    ASSERT_EQ(cuda_assert_err_, cudaSuccess) << #expr << ": "                        \
                                             << cudaGetErrorString(cuda_assert_err_); \
  } while (0)

#define STORE_ASSERT(expr)                                                                \
  do {                                                                                    \
    const ::cachestore::Status store_assert_status_ = (expr);                             \
    ASSERT_EQ(store_assert_status_, ::cachestore::Status::kSuccess)                       \
        << #expr << ": " << ::cachestore::status_string(store_assert_status_) << ": "     \
        << ::cachestore::last_error_message();                                            \
  } while (0)

namespace cachestore::test {

inline bool require_gpu() {
  const char* v = std::getenv("CACHESTORE_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// GPU tests skip with a message when no device exists (gpu_main.cpp then runs none of them);
// CACHESTORE_REQUIRE_GPU=1 makes that a failure. Each test also gets a fresh seed, printed with
// any failure.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuAbsence gpu = gpu_absence();
    if (gpu.absent()) {
      if (require_gpu()) FAIL() << "CACHESTORE_REQUIRE_GPU=1 but " << gpu.reason;
      GTEST_SKIP() << gpu.reason << ": GPU test skipped; set CACHESTORE_REQUIRE_GPU=1 to fail "
                   << "instead";
    }
    seed_ = test_seed();
    rng_.seed(seed_);
    RecordProperty("seed", std::to_string(seed_));
    trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__,
                                                      "CACHESTORE_TEST_SEED=" + std::to_string(seed_));
  }
  void TearDown() override { trace_.reset(); }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

enum class Side { kHost, kDevice };

// One buffer on both sides: the host copy feeds the reference, the device copy the kernel.
// Each device buffer is its own cudaMalloc (no pool), so an overrun is memcheck-visible.
struct Mirror {
  std::vector<uint8_t> host;
  thrust::device_vector<uint8_t> device;

  void* ptr(Side side) {
    return side == Side::kHost ? static_cast<void*>(host.data())
                               : static_cast<void*>(thrust::raw_pointer_cast(device.data()));
  }
  void upload() {
    if (device.size() != host.size()) device.resize(host.size());
    thrust::copy(host.begin(), host.end(), device.begin());
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(device.size());
    thrust::copy(device.begin(), device.end(), out.begin());
    return out;
  }
};

inline constexpr uint8_t kPoison = 0xAB;

// The buffers of one store call. Inputs are uploaded as they are; outputs start poisoned
// (caches) or zero (diagnostics) on both sides and are compared whole after the call. Device
// buffers keep their address across uploads, so a captured graph sees new contents.
class Scenario {
 public:
  Mirror& input(std::vector<uint8_t> bytes) {
    Mirror& m = buffers_.emplace_back();
    m.host = std::move(bytes);
    m.upload();
    inputs_.push_back(&m);
    return m;
  }
  Mirror& output(size_t bytes, uint8_t fill, std::string name) {
    Mirror& m = buffers_.emplace_back();
    m.host.assign(bytes, fill);
    m.upload();
    outputs_.push_back({&m, std::move(name)});
    return m;
  }
  void upload_inputs() {
    for (Mirror* m : inputs_) m->upload();
  }
  // Device result vs the host reference, every byte of every output.
  ::testing::AssertionResult outputs_match() const {
    for (const auto& [m, name] : outputs_) {
      auto r = bytes_equal(m->host, m->download(), name);
      if (!r) return r;
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::deque<Mirror> buffers_;
  std::vector<Mirror*> inputs_;
  std::vector<std::pair<Mirror*, std::string>> outputs_;
};

// A CUDA error or a store's status as a test result, with the message.
inline ::testing::AssertionResult cuda_result(cudaError_t err) {
  if (err != cudaSuccess) return ::testing::AssertionFailure() << cudaGetErrorString(err);
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult store_result(Status status) {
  if (status != Status::kSuccess)
    return ::testing::AssertionFailure() << status_string(status) << ": " << last_error_message();
  return ::testing::AssertionSuccess();
}

// A store case (StoreCase, KvCase) run once on the legacy stream, then its host reference, then
// every output byte compared.
template <typename Case>
::testing::AssertionResult store_matches_reference(Case& c, LaunchOptions launch = {}) {
  if (auto stored = store_result(c.run_device(nullptr, launch)); !stored) return stored;
  if (auto synced = cuda_result(cudaDeviceSynchronize()); !synced) return synced;
  c.run_reference();
  return c.outputs_match();
}

// `launch(stream)` (an AssertionResult) captured into a CUDA graph on `stream` and instantiated.
template <typename Launch>
::testing::AssertionResult capture_graph(cudaStream_t stream, Launch&& launch, cudaGraph_t* graph,
                                         cudaGraphExec_t* exec) {
  if (auto began = cuda_result(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      !began)
    return began;
  const ::testing::AssertionResult launched = launch(stream);
  if (auto ended = cuda_result(cudaStreamEndCapture(stream, graph)); !ended) return ended;
  if (!launched) return launched;
  return cuda_result(cudaGraphInstantiate(exec, *graph, 0));
}

// The case's store captured into a CUDA graph on `stream`, as an engine captures its decode step
// once at its largest batch, and instantiated.
template <typename Case>
::testing::AssertionResult capture_store(Case& c, cudaStream_t stream, cudaGraph_t* graph,
                                         cudaGraphExec_t* exec) {
  return capture_graph(
      stream, [&](cudaStream_t s) { return store_result(c.run_device(s)); }, graph, exec);
}

// One replay of a captured store: the case's inputs, count and slots uploaded, the graph
// replayed, every output byte compared with the host reference.
template <typename Case>
::testing::AssertionResult replay_matches_reference(Case& c, cudaGraphExec_t exec,
                                                    cudaStream_t stream) {
  c.upload_inputs();
  if (auto launched = cuda_result(cudaGraphLaunch(exec, stream)); !launched) return launched;
  if (auto synced = cuda_result(cudaStreamSynchronize(stream)); !synced) return synced;
  c.run_reference();
  return c.outputs_match();
}

// f(padding, n) for every padding of kPaddings and every n in [0, rows], under a trace naming
// both: the replays of a store captured at `rows` rows. Stops at the first fatal failure (the
// caller returns on HasFatalFailure()).
template <typename F>
void for_each_padded_replay(int64_t rows, F&& f) {
  for (Padding padding : kPaddings) {
    for (int64_t n = 0; n <= rows; ++n) {
      SCOPED_TRACE("padding " + std::to_string(static_cast<int>(padding)) + ", n = " +
                   std::to_string(n));
      f(padding, n);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The naive control of a replay test, after one replay: whether its cache differs from the
// guarded store's (`guarded`, checked against the reference); then it takes those bytes, so that
// each replay starts from the same cache.
inline bool naive_differs_then_resync(thrust::device_vector<uint8_t>& naive,
                                      const std::vector<uint8_t>& guarded) {
  std::vector<uint8_t> got(naive.size());
  thrust::copy(naive.begin(), naive.end(), got.begin());
  naive.assign(guarded.begin(), guarded.end());
  return got != guarded;
}

}  // namespace cachestore::test
