// The production bug, reproduced: a store captured in a CUDA graph at B = 32 rows and replayed
// for every n in 0..32, the padding rows' slots holding 0, the previous replay's (stale) slots
// or -1, their inputs NaN garbage. After every replay the whole cache equals the reference.
// The naive unguarded scatter, replayed the same way, must be seen corrupting its cache.
#include "naive_scatter.cuh"
#include "store_cases.cuh"

namespace cachestore::test {
namespace {

constexpr int64_t kCapturedRows = 32;

using ReplayParam = std::tuple<StoreKind, SlotType>;
class PaddedReplay : public GpuTest, public ::testing::WithParamInterface<ReplayParam> {};

std::string replay_name(const ::testing::TestParamInfo<ReplayParam>& info) {
  return std::string(store_kind_name(std::get<0>(info.param))) + "_" +
         slot_type_name(std::get<1>(info.param));
}
INSTANTIATE_TEST_SUITE_P(AllStores, PaddedReplay,
                         ::testing::Combine(
                             ::testing::Values(StoreKind::kIndexKBf16, StoreKind::kIndexKFp8Amax,
                                               StoreKind::kIndexKFp8Pow2, StoreKind::kV4,
                                               StoreKind::kV32Pow2, StoreKind::kV32Amax,
                                               StoreKind::kFusedV4Index, StoreKind::kFusedV32Index,
                                               StoreKind::kIndexKFp4Even,
                                               StoreKind::kIndexKFp4TowardZero, StoreKind::kV41,
                                               StoreKind::kV41Fp4, StoreKind::kFusedV41IndexFp4,
                                               StoreKind::kFusedV41Fp4IndexFp8),
                             ::testing::Values(SlotType::kInt64)),
                         replay_name);
// The page-table source: padded rows whose batch index and position still name a live page.
INSTANTIATE_TEST_SUITE_P(PageTable, PaddedReplay,
                         ::testing::Combine(::testing::Values(StoreKind::kIndexKFp8Amax,
                                                              StoreKind::kIndexKFp4Even,
                                                              StoreKind::kV4, StoreKind::kV41,
                                                              StoreKind::kFusedV4Index,
                                                              StoreKind::kFusedV41IndexFp4),
                                            ::testing::Values(SlotType::kPageTable)),
                         replay_name);

TEST_P(PaddedReplay, GraphReplayNeverWritesPaddingRows) {
  const auto [kind, slot_type] = GetParam();
  CaseShape shape;
  shape.num_tokens = kCapturedRows;
  shape.page_size = 16;
  shape.slot_type = slot_type;
  StoreCase c(kind, shape);
  const int64_t capacity = c.capacity();
  std::vector<int64_t> previous = distinct_slots(rng_, kCapturedRows, capacity, -1);
  c.set_step(rng_, kCapturedRows, previous);
  c.upload_inputs();

  // Capture once, as an engine does at its largest decode batch.
  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_TRUE(capture_store(c, stream, &graph, &exec));

  // The control: the naive scatter, same inputs and slots, its own cache.
  const bool control = kind == StoreKind::kIndexKBf16;
  thrust::device_vector<uint8_t> naive_cache;
  cudaGraphExec_t naive_exec = nullptr;
  thrust::device_vector<int64_t> naive_slots(kCapturedRows);
  thrust::device_vector<uint16_t> naive_k(kCapturedRows * shape.head_dim);
  if (control) {
    naive_cache.assign(c.cache().host.size(), kPoison);
    cudaGraph_t naive_graph;
    ASSERT_TRUE(capture_graph(
        stream,
        [&](cudaStream_t s) {
          return cuda_result(naive_scatter(thrust::raw_pointer_cast(naive_k.data()),
                                           thrust::raw_pointer_cast(naive_slots.data()),
                                           thrust::raw_pointer_cast(naive_cache.data()),
                                           kCapturedRows, shape.head_dim, capacity, s));
        },
        &naive_graph, &naive_exec));
    CUDA_ASSERT(cudaGraphDestroy(naive_graph));
  }

  int corrupted_replays = 0;
  for_each_padded_replay(kCapturedRows, [&](Padding padding, int64_t n) {
    const std::vector<int64_t> slots =
        padded_replay_slots(rng_, kCapturedRows, n, capacity, padding, previous);
    c.set_step(rng_, n, slots);
    ASSERT_TRUE(replay_matches_reference(c, exec, stream));
    previous = slots;

    if (control) {
      // Unguarded: the padded rows are written too. Compare with the guarded result.
      thrust::copy(slots.begin(), slots.end(), naive_slots.begin());
      const auto* k = reinterpret_cast<const uint16_t*>(c.k_host());
      thrust::copy(k, k + kCapturedRows * shape.head_dim, naive_k.begin());
      CUDA_ASSERT(cudaGraphLaunch(naive_exec, stream));
      CUDA_ASSERT(cudaStreamSynchronize(stream));
      if (naive_differs_then_resync(naive_cache, c.cache().host)) ++corrupted_replays;
    }
  });
  if (HasFatalFailure()) return;
  if (control) {
    EXPECT_GT(corrupted_replays, 0) << "the control never corrupted: the test cannot see the bug";
    RecordProperty("naive_corrupted_replays", corrupted_replays);
    std::printf("naive unguarded scatter corrupted the cache in %d of %lld replays; guarded 0\n",
                corrupted_replays, static_cast<long long>(3 * (kCapturedRows + 1)));
  }
  if (naive_exec != nullptr) CUDA_ASSERT(cudaGraphExecDestroy(naive_exec));
  CUDA_ASSERT(cudaGraphExecDestroy(exec));
  CUDA_ASSERT(cudaGraphDestroy(graph));
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace cachestore::test
