// Every store against its host reference, whole caches compared byte for byte after the cache
// was poisoned: the layout x rule x page size x slot type x stride sweep, every guard rule,
// the diagnostics, bad arguments writing nothing.
#include "store_cases.cuh"

namespace cachestore::test {
namespace {

class StoreTest : public GpuTest {
 protected:
  // One step with `n` real rows (nullopt: the count pointer is null) and faulty slots mixed in.
  ::testing::AssertionResult run_step(StoreCase& c, std::optional<int32_t> n, bool faults,
                                      LaunchOptions launch = {}) {
    const int64_t b = c.shape().num_tokens;
    const int64_t real = n ? std::clamp<int64_t>(*n, 0, b) : b;
    c.randomize_inputs(rng_, real);
    if (n) c.set_count(*n);
    c.set_slots(step_slots(rng_, b, real, c.capacity(), c.shape().reserved_slot, faults));
    c.set_index_slots(step_slots(rng_, b, real, c.capacity(), c.shape().reserved_slot, faults));
    c.upload_inputs();
    return store_matches_reference(c, launch);
  }

  // Three cumulative steps with random n and faults: later steps must not disturb earlier rows.
  void run_random_steps(StoreCase& c) {
    std::uniform_int_distribution<int32_t> n(0, static_cast<int32_t>(c.shape().num_tokens));
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(run_step(c, n(rng_), true)) << "step " << step;
  }
};

// ---- the quantized layouts: layout x rule x P x slot type x contiguous/strided -----------
using SweepParam = std::tuple<StoreKind, int32_t, SlotType, bool>;
class QuantizedSweep : public StoreTest, public ::testing::WithParamInterface<SweepParam> {};

TEST_P(QuantizedSweep, WholeCacheMatchesReference) {
  const auto [kind, page_size, slot_type, strided] = GetParam();
  CaseShape shape;
  shape.num_tokens = 96;
  shape.page_size = page_size;
  shape.slot_type = slot_type;
  shape.strided = strided;
  shape.reserved_slot = 0;
  StoreCase c(kind, shape);
  run_random_steps(c);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, QuantizedSweep,
    ::testing::Combine(::testing::Values(StoreKind::kIndexKFp8Amax, StoreKind::kIndexKFp8Pow2,
                                         StoreKind::kV4, StoreKind::kV32Pow2, StoreKind::kV32Amax,
                                         StoreKind::kFusedV4Index, StoreKind::kFusedV32Index,
                                         StoreKind::kIndexKFp4Even, StoreKind::kIndexKFp4TowardZero,
                                         StoreKind::kV41, StoreKind::kV41Fp4,
                                         StoreKind::kFusedV41IndexFp4,
                                         StoreKind::kFusedV41Fp4IndexFp8),
                       ::testing::Values(1, 2, 64, 256),
                       ::testing::Values(SlotType::kInt32, SlotType::kInt64,
                                         SlotType::kPageTable),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::string(store_kind_name(std::get<0>(info.param))) + "_P" +
             std::to_string(std::get<1>(info.param)) + "_" +
             slot_type_name(std::get<2>(info.param)) +
             (std::get<3>(info.param) ? "_strided" : "_contiguous");
    });

// ---- bf16 index-K: head dims x slot type x stride ----------------------------------------
using Bf16Param = std::tuple<int32_t, SlotType, bool>;
class IndexKBf16Sweep : public StoreTest, public ::testing::WithParamInterface<Bf16Param> {};

TEST_P(IndexKBf16Sweep, WholeCacheMatchesReference) {
  const auto [head_dim, slot_type, strided] = GetParam();
  CaseShape shape;
  shape.num_tokens = 80;
  shape.head_dim = head_dim;
  shape.slot_type = slot_type;
  shape.strided = strided;
  shape.reserved_slot = 3;
  StoreCase c(StoreKind::kIndexKBf16, shape);
  run_random_steps(c);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, IndexKBf16Sweep,
                         ::testing::Combine(::testing::Values(8, 64, 128, 256, 576),
                                            ::testing::Values(SlotType::kInt32, SlotType::kInt64),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return "D" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == SlotType::kInt32 ? "_i32" : "_i64") +
                                  (std::get<2>(info.param) ? "_strided" : "_contiguous");
                         });

// ---- fp8 index-K head dims (one to four 128-value blocks), standalone and fused ----------
using IndexDimParam = std::tuple<StoreKind, int32_t>;
class IndexKFp8HeadDims : public StoreTest, public ::testing::WithParamInterface<IndexDimParam> {};

TEST_P(IndexKFp8HeadDims, WholeCacheMatchesReference) {
  CaseShape shape;
  shape.num_tokens = 70;
  shape.head_dim = std::get<1>(GetParam());
  shape.page_size = 16;
  StoreCase c(std::get<0>(GetParam()), shape);
  ASSERT_TRUE(run_step(c, 61, true));
}

INSTANTIATE_TEST_SUITE_P(Dims, IndexKFp8HeadDims,
                         ::testing::Combine(::testing::Values(StoreKind::kIndexKFp8Amax,
                                                              StoreKind::kIndexKFp8Pow2,
                                                              StoreKind::kFusedV4Index,
                                                              StoreKind::kFusedV32Index),
                                            ::testing::Values(128, 256, 384, 512)),
                         [](const auto& info) {
                           return std::string(store_kind_name(std::get<0>(info.param))) + "_D" +
                                  std::to_string(std::get<1>(info.param));
                         });

// fp4 index-K head dims: one to sixteen 32-value groups (96 and 160 pad the row's lane group).
INSTANTIATE_TEST_SUITE_P(Fp4Dims, IndexKFp8HeadDims,
                         ::testing::Combine(::testing::Values(StoreKind::kIndexKFp4Even,
                                                              StoreKind::kIndexKFp4TowardZero,
                                                              StoreKind::kFusedV41IndexFp4),
                                            ::testing::Values(32, 96, 128, 160, 256, 512)),
                         [](const auto& info) {
                           return std::string(store_kind_name(std::get<0>(info.param))) + "_D" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- the guard, rule by rule, on every entry point ----------------------------------------
class GuardTest : public StoreTest, public ::testing::WithParamInterface<StoreKind> {};

const StoreKind kAllKinds[] = {StoreKind::kIndexKBf16,    StoreKind::kIndexKFp8Amax,
                               StoreKind::kIndexKFp8Pow2, StoreKind::kV4,
                               StoreKind::kV32Pow2,       StoreKind::kV32Amax,
                               StoreKind::kFusedV4Index,  StoreKind::kFusedV32Index,
                               StoreKind::kIndexKFp4Even, StoreKind::kIndexKFp4TowardZero,
                               StoreKind::kV41,           StoreKind::kV41Fp4,
                               StoreKind::kFusedV41IndexFp4, StoreKind::kFusedV41Fp4IndexFp8};

INSTANTIATE_TEST_SUITE_P(AllStores, GuardTest, ::testing::ValuesIn(kAllKinds),
                         [](const auto& info) { return store_kind_name(info.param); });

TEST_P(GuardTest, TokenCountEdgeCases) {
  CaseShape shape;
  shape.num_tokens = 40;
  shape.page_size = 8;
  // n = 0, 1, num_tokens, beyond num_tokens, negative; each on a fresh poisoned cache.
  for (int32_t n : {0, 1, 39, 40, 41, 1 << 30, -1, -(1 << 30)}) {
    StoreCase c(GetParam(), shape);
    ASSERT_TRUE(run_step(c, n, false)) << "n = " << n;
    const Diagnostics d = c.device_diagnostics();
    EXPECT_EQ(d.negative_token_counts, n < 0 ? 1u : 0u) << "n = " << n;
    EXPECT_EQ(d.out_of_range_slots, 0u);
  }
  // nullptr count: every row is real.
  shape.count_on_device = false;
  StoreCase c(GetParam(), shape);
  ASSERT_TRUE(run_step(c, std::nullopt, false));
}

// With PDL a kernel computes the count's address before its wait and, without a count, reads
// the first slot's word in its place and ignores it (GuardSources): with and without a count,
// faulty slots mixed in, every store launched with PDL equals the reference.
TEST_P(GuardTest, PdlWithAndWithoutCount) {
  CaseShape shape;
  shape.num_tokens = 40;
  shape.page_size = 8;
  for (int32_t n : {0, 17, 40, -1}) {
    StoreCase c(GetParam(), shape);
    ASSERT_TRUE(run_step(c, n, true, LaunchOptions{true})) << "n = " << n;
    EXPECT_EQ(c.device_diagnostics().negative_token_counts, n < 0 ? 1u : 0u) << "n = " << n;
  }
  shape.count_on_device = false;
  StoreCase c(GetParam(), shape);
  ASSERT_TRUE(run_step(c, std::nullopt, true, LaunchOptions{true}));
  EXPECT_EQ(c.device_diagnostics().negative_token_counts, 0u);
}

TEST_P(GuardTest, EachSlotRuleAlone) {
  CaseShape shape;
  shape.num_tokens = 32;
  shape.page_size = 4;
  shape.reserved_slot = 5;
  StoreCase c(GetParam(), shape);
  const int64_t cap = c.capacity();
  const int32_t n = 24;
  c.randomize_inputs(rng_, n);
  c.set_count(n);
  std::vector<int64_t> slots = distinct_slots(rng_, shape.num_tokens, cap, shape.reserved_slot);
  slots[1] = -1;              // rule 2: negative = padding
  slots[2] = -7;
  slots[3] = 5;               // rule 3: the reserved slot
  slots[4] = cap;             // rule 4: past the capacity (counted)
  slots[5] = cap + 12345;
  slots[6] = shape.slot_type == SlotType::kInt64 ? int64_t{1} << 40 : INT32_MAX;  // far past
  slots[30] = cap + 1;        // past the capacity but beyond n: padding, not counted
  c.set_slots(slots);
  c.set_index_slots(slots);
  c.upload_inputs();
  ASSERT_TRUE(store_matches_reference(c));
  const Diagnostics d = c.device_diagnostics();
  const unsigned long long per_cache = 3;
  EXPECT_EQ(d.out_of_range_slots, has_fused_index(GetParam()) ? 2 * per_cache : per_cache);
  EXPECT_EQ(d.negative_token_counts, 0u);
}

class FusedGuardTest : public StoreTest, public ::testing::WithParamInterface<StoreKind> {};

INSTANTIATE_TEST_SUITE_P(FusedStores, FusedGuardTest,
                         ::testing::Values(StoreKind::kFusedV4Index, StoreKind::kFusedV32Index,
                                           StoreKind::kFusedV41IndexFp4,
                                           StoreKind::kFusedV41Fp4IndexFp8),
                         [](const auto& info) { return store_kind_name(info.param); });

TEST_P(FusedGuardTest, IndexSlotMinusOneStoresKvOnly) {
  CaseShape shape;
  shape.num_tokens = 16;
  shape.page_size = 4;
  StoreCase c(GetParam(), shape);
  c.randomize_inputs(rng_, 16);
  c.set_count(16);
  const std::vector<int64_t> kv = distinct_slots(rng_, 16, c.capacity(), -1);
  std::vector<int64_t> index = distinct_slots(rng_, 16, c.capacity(), -1);
  index[7] = -1;  // a real row whose index-K slot is padding: KV stored, index-K not
  c.set_slots(kv);
  c.set_index_slots(index);
  c.upload_inputs();
  const std::vector<uint8_t> index_before = c.index_cache()->download();
  STORE_ASSERT(c.run_device(nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  c.run_reference();
  ASSERT_TRUE(c.outputs_match());
  EXPECT_NE(c.cache().download(), std::vector<uint8_t>(c.cache().host.size(), kPoison));
  EXPECT_NE(c.index_cache()->download(), index_before);
}

TEST_P(FusedGuardTest, SharedSlotArray) {
  CaseShape shape;
  shape.num_tokens = 48;
  shape.page_size = 16;
  shape.shared_slots = true;
  shape.reserved_slot = 0;
  StoreCase c(GetParam(), shape);
  ASSERT_TRUE(run_step(c, 40, true));
}

// ---- the page-table slot source on every paged store ---------------------------------------
class PageTableTest : public StoreTest, public ::testing::WithParamInterface<StoreKind> {};

INSTANTIATE_TEST_SUITE_P(PagedStores, PageTableTest,
                         ::testing::ValuesIn(std::begin(kAllKinds) + 1, std::end(kAllKinds)),
                         [](const auto& info) { return store_kind_name(info.param); });

// Each way a lookup can fail, alone on one real row (PageTableSource::set_slots: a batch index
// of the batch size, a negative position, a position past the request's pages, a negative page
// id, a batch index of -1), and a page past the cache: each skipped and counted; the reserved
// slot and padded rows skipped and not counted.
TEST_P(PageTableTest, EachLookupFaultAloneIsSkippedAndCounted) {
  CaseShape shape;
  shape.num_tokens = 32;
  shape.page_size = 4;
  shape.reserved_slot = 5;
  shape.slot_type = SlotType::kPageTable;
  StoreCase c(GetParam(), shape);
  const int32_t n = 24;
  c.randomize_inputs(rng_, n);
  c.set_count(n);
  std::vector<int64_t> slots = distinct_slots(rng_, shape.num_tokens, c.capacity(), 5);
  for (int i = 1; i <= 5; ++i) slots[i] = -1;  // the five lookup faults
  slots[6] = c.capacity() + 3;                  // a page id past the cache
  slots[7] = 5;                                 // the reserved slot
  slots[30] = -1;                               // padded rows: a fault, and a live slot
  slots[31] = slots[0];
  c.set_slots(slots);
  c.set_index_slots(slots);
  c.upload_inputs();
  ASSERT_TRUE(store_matches_reference(c));
  const Diagnostics d = c.device_diagnostics();
  EXPECT_EQ(d.out_of_range_slots, has_fused_index(GetParam()) ? 12u : 6u);
  EXPECT_EQ(d.negative_token_counts, 0u);
}

// The count's edges with and without PDL (with PDL, and without a count, the kernel reads the
// first batch index's word in the count's place).
TEST_P(PageTableTest, CountEdgesWithAndWithoutPdl) {
  CaseShape shape;
  shape.num_tokens = 40;
  shape.page_size = 8;
  shape.slot_type = SlotType::kPageTable;
  for (bool pdl : {false, true}) {
    for (int32_t n : {0, 17, 40, 41, -1}) {
      StoreCase c(GetParam(), shape);
      ASSERT_TRUE(run_step(c, n, true, LaunchOptions{pdl})) << "n = " << n << ", PDL " << pdl;
      EXPECT_EQ(c.device_diagnostics().negative_token_counts, n < 0 ? 1u : 0u) << "n = " << n;
    }
    CaseShape uncounted = shape;
    uncounted.count_on_device = false;
    StoreCase c(GetParam(), uncounted);
    ASSERT_TRUE(run_step(c, std::nullopt, true, LaunchOptions{pdl})) << "PDL " << pdl;
  }
}

TEST_P(GuardTest, ZeroTokensWritesNothing) {
  CaseShape shape;
  shape.num_tokens = 0;
  StoreCase c(GetParam(), shape);
  ASSERT_TRUE(run_step(c, 0, false));
}

// ---- bad arguments: an error status, and not one byte written -----------------------------
TEST_F(StoreTest, InvalidArgumentsWriteNothing) {
  CaseShape shape;
  shape.num_tokens = 32;
  StoreCase c(StoreKind::kIndexKBf16, shape);
  c.randomize_inputs(rng_, 32);
  c.set_count(32);
  c.set_slots(distinct_slots(rng_, 32, c.capacity(), -1));
  c.upload_inputs();
  const std::vector<uint8_t> before = c.cache().download();

  IndexKBf16Params p;
  p.batch.num_tokens = 32;
  thrust::device_vector<int64_t> slots(32, 1);
  thrust::device_vector<uint16_t> k(32 * 128 + 8, 0x3f80);
  p.slots.data = thrust::raw_pointer_cast(slots.data());
  p.k = thrust::raw_pointer_cast(k.data()) + 1;  // 2-byte offset: not 16-byte aligned
  p.k_row_stride = 128;
  p.cache = c.cache().ptr(Side::kDevice);
  p.cache_row_stride = 128;
  p.num_slots = c.capacity();
  EXPECT_EQ(store_index_k_bf16(p, nullptr), Status::kErrorMisalignedOperand);
  EXPECT_NE(std::string(last_error_message()).find("k"), std::string::npos);
  p.k = thrust::raw_pointer_cast(k.data());
  p.k_row_stride = 100;  // below the row width
  EXPECT_EQ(store_index_k_bf16(p, nullptr), Status::kErrorInvalidArgument);
  p.k_row_stride = 128;
  p.head_dim = 12;
  EXPECT_EQ(store_index_k_bf16(p, nullptr), Status::kErrorNotSupported);
  CUDA_ASSERT(cudaDeviceSynchronize());
  EXPECT_TRUE(bytes_equal(before, c.cache().download(), "cache after refused calls"));
}

// MlaArgs keeps the nope / rope row strides in 32 bits; a larger stride is refused with more than
// one row (host_api_test) and, with one row, where it is never multiplied, stored as usual.
TEST_F(StoreTest, OneRowAcceptsAnyMlaRowStride) {
  for (const StoreKind kind : {StoreKind::kV4, StoreKind::kV32Amax, StoreKind::kFusedV4Index}) {
    CaseShape shape;
    shape.num_tokens = 1;
    shape.mla_row_stride = (int64_t{1} << 33) + 8;
    StoreCase c(kind, shape);
    ASSERT_TRUE(run_step(c, 1, false)) << store_kind_name(kind);
  }
}

}  // namespace
}  // namespace cachestore::test

namespace cachestore::test {
namespace {

// The kernels' values per lane follow the batch (launch.cuh: values_per_lane): up to 1024 rows
// 8, above 16; the fp8 index-K kernel takes 4 up to 512 rows (the other tests here use small
// batches). The same whole-cache comparison on the wider paths, every quantized layout: 1536 rows
// (16), 800 rows (8, which is the fp8 index-K kernel's only test of it) and 320 rows (more rows a
// block than the small batches: the fp8 index-K kernel at 4 values, the others at 8). The fp8
// index-K kernel has D = 128 compiled in up to 1024 rows: the small batches and 320 rows test it
// at 4 values, 800 rows at 8; other D at 4 values: IndexKFp8HeadDims.
class LargeBatch : public StoreTest, public ::testing::WithParamInterface<StoreKind> {
 protected:
  // wide_index: the fp8 pow2 and fp4 round-to-even index-K rows at D = 384 (the others at 128).
  void run_batch(int64_t num_tokens, int32_t min_n, bool wide_index = true,
                 LaunchOptions launch = LaunchOptions{}) {
    CaseShape shape;
    shape.num_tokens = num_tokens;
    shape.page_size = 64;
    shape.head_dim = wide_index && (GetParam() == StoreKind::kIndexKFp8Pow2 ||
                                    GetParam() == StoreKind::kIndexKFp4Even)
                         ? 384
                         : 128;
    shape.reserved_slot = 0;
    StoreCase c(GetParam(), shape);
    std::uniform_int_distribution<int32_t> n(min_n, static_cast<int32_t>(num_tokens));
    ASSERT_TRUE(run_step(c, n(rng_), true, launch));
  }
};

TEST_P(LargeBatch, WideLanesMatchReference) { run_batch(1536, 1200); }

// At D = 128 for both fp8 rules: the fp8 index-K kernel with D compiled in, at 8 values a lane.
TEST_P(LargeBatch, EightValueLanesMatchReference) { run_batch(800, 600, false); }

TEST_P(LargeBatch, MidBatchMatchesReference) { run_batch(320, 200); }

// With PDL at 512 rows: the fused kernel's 2-row blocks, two an SM, triggering early
// (fused_store_cache.cu), and the other stores' one-block-an-SM grids.
TEST_P(LargeBatch, MidBatchWithPdlMatchesReference) {
  run_batch(512, 300, true, LaunchOptions{true});
}

INSTANTIATE_TEST_SUITE_P(Layouts, LargeBatch,
                         ::testing::Values(StoreKind::kIndexKFp8Amax, StoreKind::kIndexKFp8Pow2,
                                           StoreKind::kV4, StoreKind::kV32Pow2,
                                           StoreKind::kV32Amax, StoreKind::kFusedV4Index,
                                           StoreKind::kFusedV32Index, StoreKind::kIndexKFp4Even,
                                           StoreKind::kIndexKFp4TowardZero, StoreKind::kV41,
                                           StoreKind::kV41Fp4, StoreKind::kFusedV41IndexFp4,
                                           StoreKind::kFusedV41Fp4IndexFp8),
                         [](const auto& info) { return store_kind_name(info.param); });

}  // namespace
}  // namespace cachestore::test
