// store_paged_kv on the GPU: every layout of the contract, bf16, fp16 and fp32 inputs, any head
// dim and element-aligned strides (the general kernel), vLLM's paged-attention layout, the three cache
// types with per-tensor and per-head scales, head counts and dims, page sizes (powers of two and
// not), slot types, strided K/V sliced out of one tensor, the guard rules and diagnostics, padded
// CUDA-graph replay with the naive scatter as the control, scales changed between replays, page-
// owner sharding (the owners' union equals the unsharded store), vLLM's golden records, and the
// fp8 quotient against IEEE division for every bf16 and fp16 input.
#include "golden.h"
#include "naive_scatter.cuh"
#include "paged_kv_case.cuh"
#include "store_cases.cuh"

#include "kernels/core/fp8.cuh"
#include "kernels/paged_kv.cuh"
#include "reference/conversions.h"

namespace cachestore::test {
namespace {

class PagedKvTest : public GpuTest {
 protected:
  // One step with `n` real rows (nullopt: the count pointer is null).
  ::testing::AssertionResult run_step(KvCase& c, std::optional<int32_t> n, bool faults,
                                      LaunchOptions launch = {}) {
    const int64_t b = c.shape().num_tokens;
    const int32_t real = n ? *n : static_cast<int32_t>(b);
    c.randomize_inputs(rng_, real);
    c.randomize_scales(rng_);
    if (n) c.set_count(*n);
    c.set_slots(step_slots(rng_, b, real, c.global_capacity(), c.shape().reserved_slot, faults));
    c.upload_inputs();
    return store_matches_reference(c, launch);
  }
  void run_random_steps(KvCase& c) {
    std::uniform_int_distribution<int32_t> n(0, static_cast<int32_t>(c.shape().num_tokens));
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(run_step(c, n(rng_), true)) << "step " << step;
    ASSERT_TRUE(run_step(c, -3, false)) << "negative n";  // counted once, nothing stored
  }
};

// ---- layout x cache type x page size; the other dimensions vary with the index ------------
using SweepParam = std::tuple<KvLayout, KvCacheType, int32_t>;
class PagedKvSweep : public PagedKvTest, public ::testing::WithParamInterface<SweepParam> {};

TEST_P(PagedKvSweep, WholeCachesMatchReference) {
  const auto [layout, cache_type, page_size] = GetParam();
  // (H, Dk, Dv) combinations of the contract; stacked pages need Dk == Dv.
  const int32_t dims[5][3] = {{8, 128, 128}, {1, 64, 64}, {32, 256, 256}, {8, 192, 128}, {4, 128, 0}};
  const size_t index = static_cast<size_t>(layout) * 31 + static_cast<size_t>(cache_type) * 7 +
                       static_cast<size_t>(page_size);
  for (int variant = 0; variant < 2; ++variant) {
    const size_t v = index + variant;
    KvShape s;
    s.layout = layout;
    s.cache_type = cache_type;
    s.page_size = page_size;
    const int32_t* d = dims[v % 5];
    if (layout == KvLayout::kStacked && d[1] != d[2]) d = dims[0];
    s.heads = d[0];
    s.k_dim = d[1];
    s.v_dim = d[2];
    s.input_type = (v / 2) % 2 == 0 ? KvDataType::kBf16 : KvDataType::kFp16;
    const SlotType slot_types[3] = {SlotType::kInt64, SlotType::kInt32, SlotType::kPageTable};
    s.slot_type = slot_types[(v / 3) % 3];
    s.scale_stride = static_cast<int32_t>(v % 2);
    s.head_padded = (v / 5) % 2 == 1;
    s.reserved_slot = variant == 0 ? kNoReservedSlot : 0;
    s.num_tokens = page_size >= 64 ? 48 : 40;
    SCOPED_TRACE(std::string("H ") + std::to_string(s.heads) + " Dk " + std::to_string(s.k_dim) +
                 " Dv " + std::to_string(s.v_dim) + (s.input_type == KvDataType::kFp16 ? " fp16" : " bf16") +
                 " " + slot_type_name(s.slot_type) + " scale_stride " +
                 std::to_string(s.scale_stride) + (s.head_padded ? " head-padded" : ""));
    KvCase c(s);
    run_random_steps(c);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PagedKvSweep,
    ::testing::Combine(::testing::Values(KvLayout::kNhd, KvLayout::kHnd, KvLayout::kStacked,
                                         KvLayout::kMla576),
                       ::testing::Values(KvCacheType::kAuto, KvCacheType::kFp8E4m3,
                                         KvCacheType::kFp8E5m2),
                       ::testing::Values(1, 16, 64, 528, 6)),
    [](const auto& info) {
      return std::string(kv_layout_name(std::get<0>(info.param))) + "_" +
             kv_cache_type_name(std::get<1>(info.param)) + "_P" +
             std::to_string(std::get<2>(info.param));
    });

// ---- the general kernel: fp32 inputs, any head dim, misaligned bases and strides, vLLM's
// paged-attention layout (K chunked by 16 bytes, V d-major) -----------------------------------
using GeneralParam = std::tuple<KvLayout, KvCacheType, KvDataType>;
class PagedKvGeneral : public PagedKvTest, public ::testing::WithParamInterface<GeneralParam> {};

TEST_P(PagedKvGeneral, WholeCachesMatchReference) {
  const auto [layout, cache_type, input_type] = GetParam();
  // (H, Dk, Dv, head pad, input offset): the 16-byte kernel's shapes, the odd head dims of the
  // peers' tests, and bases / strides that allow only narrower vectors.
  struct Variant { int32_t h, dk, dv, pad, offset, page_size; };
  const bool paged_attention = layout == KvLayout::kPagedAttention;
  const std::vector<Variant> variants =
      paged_attention
          ? std::vector<Variant>{{8, 128, 128, 0, 0, 16}, {4, 64, 80, 0, 0, 6}, {2, 256, 256, 0, 0, 1},
                                 {8, 128, 128, 4, 1, 16}, {1, 96, 0, 0, 0, 32}}
          : std::vector<Variant>{{8, 128, 128, 0, 0, 16}, {4, 100, 100, 0, 0, 16}, {8, 98, 98, 2, 0, 6},
                                 {2, 7, 5, 1, 1, 16},     {1, 1, 1, 0, 3, 1},     {4, 36, 36, 0, 2, 64},
                                 {2, 128, 128, 0, 1, 16}, {3, 1024, 0, 0, 0, 16}};
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    KvShape s;
    s.layout = layout;
    s.cache_type = cache_type;
    s.input_type = input_type;
    s.heads = v.h;
    s.k_dim = v.dk;
    s.v_dim = v.dv;
    s.head_pad = v.pad;
    s.input_offset = v.offset;
    s.page_size = v.page_size;
    s.scale_stride = v.dk % 2;
    const SlotType slot_types[3] = {SlotType::kInt64, SlotType::kInt32, SlotType::kPageTable};
    s.slot_type = slot_types[(i + static_cast<size_t>(input_type)) % 3];
    s.num_tokens = 40;
    SCOPED_TRACE("H " + std::to_string(v.h) + " Dk " + std::to_string(v.dk) + " Dv " +
                 std::to_string(v.dv) + " pad " + std::to_string(v.pad) + " offset " +
                 std::to_string(v.offset) + " P " + std::to_string(v.page_size) + " " +
                 slot_type_name(s.slot_type));
    KvCase c(s);
    run_random_steps(c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::string general_name(const ::testing::TestParamInfo<GeneralParam>& info) {
  static const char* const kInputs[] = {"bf16", "fp16", "fp32"};
  return std::string(kv_layout_name(std::get<0>(info.param))) + "_" +
         kv_cache_type_name(std::get<1>(info.param)) + "_" +
         kInputs[static_cast<int>(std::get<2>(info.param))];
}
INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedKvGeneral,
    ::testing::Combine(::testing::Values(KvLayout::kNhd, KvLayout::kHnd, KvLayout::kPagedAttention),
                       ::testing::Values(KvCacheType::kAuto, KvCacheType::kFp8E4m3,
                                         KvCacheType::kFp8E5m2),
                       ::testing::Values(KvDataType::kBf16, KvDataType::kFp16, KvDataType::kFp32)),
    general_name);

// ---- nvfp4 caches: every layout form x input type x page size; H in {1, 8}, D in {16, 64, 128,
// 256}, every slot type, per-tensor and per-head global scales, strided inputs, PDL ----------
using Nvfp4Param = std::tuple<KvLayout, KvDataType, int32_t>;
class PagedKvNvfp4 : public PagedKvTest, public ::testing::WithParamInterface<Nvfp4Param> {};

TEST_P(PagedKvNvfp4, WholeCachesAndBlockScalesMatchReference) {
  const auto [layout, input_type, page_size] = GetParam();
  const int32_t dims[4][3] = {{8, 128, 128}, {1, 16, 16}, {8, 256, 64}, {1, 64, 0}};
  for (int variant = 0; variant < 4; ++variant) {
    KvShape s;
    s.layout = layout;
    s.cache_type = KvCacheType::kNvfp4;
    s.input_type = input_type;
    s.page_size = page_size;
    const int32_t* d = dims[variant];
    if (layout == KvLayout::kStacked && d[1] != d[2]) d = dims[variant % 2];
    s.heads = d[0];
    s.k_dim = d[1];
    s.v_dim = d[2];
    const SlotType slot_types[3] = {SlotType::kInt64, SlotType::kInt32, SlotType::kPageTable};
    s.slot_type = slot_types[(variant + page_size) % 3];
    s.scale_stride = variant % 2;
    s.head_padded = variant >= 2;
    s.input_offset = variant == 3 ? 8 : 0;  // 16 bytes of bf16 / fp16, 32 of fp32
    s.reserved_slot = variant == 1 ? 0 : kNoReservedSlot;
    s.num_tokens = page_size >= 64 ? 48 : 40;
    SCOPED_TRACE("H " + std::to_string(s.heads) + " Dk " + std::to_string(s.k_dim) + " Dv " +
                 std::to_string(s.v_dim) + " " + slot_type_name(s.slot_type) +
                 " scale_stride " + std::to_string(s.scale_stride) +
                 (s.head_padded ? " head-padded" : ""));
    KvCase c(s);
    run_random_steps(c);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(run_step(c, 17, true, LaunchOptions{true})) << "PDL";
  }
}

std::string nvfp4_name(const ::testing::TestParamInfo<Nvfp4Param>& info) {
  static const char* const kInputs[] = {"bf16", "fp16", "fp32"};
  return std::string(kv_layout_name(std::get<0>(info.param))) + "_" +
         kInputs[static_cast<int>(std::get<1>(info.param))] + "_P" +
         std::to_string(std::get<2>(info.param));
}
INSTANTIATE_TEST_SUITE_P(
    Layouts, PagedKvNvfp4,
    ::testing::Combine(::testing::Values(KvLayout::kNhd, KvLayout::kHnd, KvLayout::kStacked),
                       ::testing::Values(KvDataType::kBf16, KvDataType::kFp16, KvDataType::kFp32),
                       ::testing::Values(1, 16, 64)),
    nvfp4_name);

// ---- fp8_e4m3_per_token_head caches (vLLM's fp8_per_token_head): NHD / HND / stacked x input
// type x page size; D 8 .. 256 (a head's lanes 1 .. 32: every shuffle group width), H 1 .. 8,
// K only, every slot type, strided and offset inputs, PDL; the fp32 scale views compared whole
// like the caches ---------------------------------------------------------------------------
using TokenHeadParam = std::tuple<KvLayout, KvDataType, int32_t>;
class PagedKvTokenHead : public PagedKvTest,
                         public ::testing::WithParamInterface<TokenHeadParam> {};

TEST_P(PagedKvTokenHead, WholeCachesAndScalesMatchReference) {
  const auto [layout, input_type, page_size] = GetParam();
  const int32_t dims[5][3] = {{8, 128, 128}, {1, 8, 8}, {3, 256, 256}, {2, 32, 16}, {5, 64, 0}};
  for (int variant = 0; variant < 5; ++variant) {
    KvShape s;
    s.layout = layout;
    s.cache_type = KvCacheType::kFp8E4m3PerTokenHead;
    s.input_type = input_type;
    s.page_size = page_size;
    const int32_t* d = dims[variant];
    if (layout == KvLayout::kStacked && d[1] != d[2]) d = dims[variant % 3];
    s.heads = d[0];
    s.k_dim = d[1];
    s.v_dim = d[2];
    const SlotType slot_types[3] = {SlotType::kInt64, SlotType::kInt32, SlotType::kPageTable};
    s.slot_type = slot_types[(variant + page_size) % 3];
    s.head_padded = variant % 2 == 1;
    s.input_offset = variant == 3 ? 8 : 0;  // 16 bytes of bf16 / fp16, 32 of fp32
    s.num_tokens = 45;
    SCOPED_TRACE("H " + std::to_string(s.heads) + " Dk " + std::to_string(s.k_dim) + " Dv " +
                 std::to_string(s.v_dim) + " " + slot_type_name(s.slot_type) +
                 (s.head_padded ? " head-padded" : ""));
    KvCase c(s);
    run_random_steps(c);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(run_step(c, 17, true, LaunchOptions{true})) << "PDL";
  }
}

std::string token_head_name(const ::testing::TestParamInfo<TokenHeadParam>& info) {
  static const char* const kInputs[] = {"bf16", "fp16", "fp32"};
  return std::string(kv_layout_name(std::get<0>(info.param))) + "_" +
         kInputs[static_cast<int>(std::get<1>(info.param))] + "_P" +
         std::to_string(std::get<2>(info.param));
}
INSTANTIATE_TEST_SUITE_P(
    Layouts, PagedKvTokenHead,
    ::testing::Combine(::testing::Values(KvLayout::kNhd, KvLayout::kHnd, KvLayout::kStacked),
                       ::testing::Values(KvDataType::kBf16, KvDataType::kFp16, KvDataType::kFp32),
                       ::testing::Values(1, 16, 6)),
    token_head_name);

// The general kernel with PDL, with and without a count: fp32 into fp8, odd D, paged attention.
TEST_F(PagedKvTest, GeneralKernelPdlWithAndWithoutCount) {
  for (KvLayout layout : {KvLayout::kNhd, KvLayout::kPagedAttention}) {
    for (bool counted : {true, false}) {
      KvShape shape;
      shape.layout = layout;
      shape.cache_type = KvCacheType::kFp8E4m3;
      shape.input_type = KvDataType::kFp32;
      shape.k_dim = shape.v_dim = layout == KvLayout::kNhd ? 100 : 128;
      shape.count_on_device = counted;
      KvCase c(shape);
      ASSERT_TRUE(run_step(c, counted ? std::optional<int32_t>(29) : std::nullopt, true,
                           LaunchOptions{true}))
          << kv_layout_name(layout) << (counted ? ", count" : ", no count");
    }
  }
}

// Head dims up to 1024 and H up to 256 (16-bit cache), one row each way.
// With PDL the kernel addresses the count before its wait and, without a count, reads the first
// slot's word in its place (GuardSources): each cache type, with and without a count.
TEST_F(PagedKvTest, PdlWithAndWithoutCount) {
  for (KvCacheType type : {KvCacheType::kAuto, KvCacheType::kFp8E4m3, KvCacheType::kFp8E5m2}) {
    for (bool counted : {true, false}) {
      KvShape shape;
      shape.cache_type = type;
      shape.count_on_device = counted;
      KvCase c(shape);
      ASSERT_TRUE(run_step(c, counted ? std::optional<int32_t>(29) : std::nullopt, true,
                           LaunchOptions{true}))
          << "cache type " << static_cast<int>(type) << (counted ? ", count" : ", no count");
    }
  }
}

TEST_F(PagedKvTest, LargestHeadDimAndHeadCount) {
  for (auto [h, d] : {std::pair{2, 1024}, std::pair{256, 16}}) {
    KvShape s;
    s.heads = h;
    s.k_dim = s.v_dim = d;
    s.num_tokens = 24;
    KvCase c(s);
    run_random_steps(c);
  }
}

// Large batches: from tuning's wide_rows the 16-byte kernel takes four vectors a thread (j + v *
// vecs / 4: K with V, K with K (K only, or Dk != Dv), V with V), the nvfp4 kernel four blocks. vLLM's MLA rows (Mla576) are
// kv_c 512 as K and k_pe 64 as V in one buffer. Each layout, cache type, input type and slot
// type there, an odd batch, faults, PDL on and off.
TEST_F(PagedKvTest, LargeBatchFourVectorsAThread) {
  // KvShape's leading fields: layout, cache type, input type, rows, P, H, Dk, Dv.
  const std::pair<KvShape, SlotType> configs[] = {
      {{KvLayout::kNhd, KvCacheType::kFp8E4m3, KvDataType::kBf16, 3001, 16, 8, 128, 128}, SlotType::kInt64},
      {{KvLayout::kHnd, KvCacheType::kAuto, KvDataType::kBf16, 2048, 16, 8, 128, 128}, SlotType::kInt32},
      {{KvLayout::kNhd, KvCacheType::kFp8E5m2, KvDataType::kFp16, 2500, 16, 8, 192, 128}, SlotType::kPageTable},
      {{KvLayout::kMla576, KvCacheType::kFp8E4m3, KvDataType::kBf16, 2053, 16, 1, 576, 0}, SlotType::kInt32},
      {{KvLayout::kMla576, KvCacheType::kAuto, KvDataType::kBf16, 2053, 16, 1, 576, 0}, SlotType::kInt64},
      {{KvLayout::kNhd, KvCacheType::kFp8E4m3, KvDataType::kBf16, 2049, 16, 4, 128, 0}, SlotType::kInt64},
      {{KvLayout::kStacked, KvCacheType::kFp8E4m3, KvDataType::kFp32, 3001, 16, 4, 64, 64}, SlotType::kInt64},
      {{KvLayout::kNhd, KvCacheType::kAuto, KvDataType::kFp32, 2049, 16, 2, 128, 64}, SlotType::kPageTable},
      {{KvLayout::kNhd, KvCacheType::kNvfp4, KvDataType::kBf16, 2049, 16, 8, 128, 128}, SlotType::kInt64},
      {{KvLayout::kHnd, KvCacheType::kNvfp4, KvDataType::kFp32, 2500, 16, 4, 64, 64}, SlotType::kPageTable},
      {{KvLayout::kStacked, KvCacheType::kNvfp4, KvDataType::kFp16, 3001, 64, 2, 128, 128}, SlotType::kInt32},
  };
  for (const auto& [shape, slots] : configs) {
    for (bool pdl : {false, true}) {
      KvShape s = shape;
      s.slot_type = slots;
      s.scale_stride = pdl ? 1 : 0;
      KvCase c(s);
      const int32_t real = static_cast<int32_t>(s.num_tokens) - (pdl ? 0 : 97);
      ASSERT_TRUE(run_step(c, real, true, LaunchOptions{pdl}))
          << kv_layout_name(s.layout) << " cache " << static_cast<int>(s.cache_type) << " H "
          << s.heads << " Dk " << s.k_dim << " Dv " << s.v_dim << " rows " << s.num_tokens
          << (pdl ? " PDL" : "");
    }
  }
}

// ---- padded CUDA-graph replay: B = 32 captured, n = 0..32, padding 0 / stale / -1 ----------
class PagedKvReplay : public PagedKvTest, public ::testing::WithParamInterface<int> {};

TEST_P(PagedKvReplay, GraphReplayNeverWritesPaddingRowsAndSeesNewScales) {
  constexpr int64_t kRows = 32;
  KvShape s;
  s.num_tokens = kRows;
  s.page_size = 16;
  switch (GetParam()) {
    case 0: break;  // NHD auto: the naive control applies
    case 1: s.layout = KvLayout::kHnd; s.cache_type = KvCacheType::kFp8E4m3; s.scale_stride = 1; break;
    case 2: s.layout = KvLayout::kMla576; s.cache_type = KvCacheType::kFp8E4m3; break;
    case 3: s.layout = KvLayout::kStacked; s.cache_type = KvCacheType::kFp8E5m2;
            s.input_type = KvDataType::kFp16; s.page_size = 6; s.slot_type = SlotType::kInt32; break;
    case 4: s.layout = KvLayout::kPagedAttention; break;  // the general kernel, bf16
    case 5: s.cache_type = KvCacheType::kFp8E4m3; s.input_type = KvDataType::kFp32;
            s.k_dim = s.v_dim = 100; s.scale_stride = 1; break;
    case 6: s.cache_type = KvCacheType::kFp8E4m3; s.slot_type = SlotType::kPageTable; break;
    case 7: s.layout = KvLayout::kHnd; s.page_size = 6; s.slot_type = SlotType::kPageTable;
            break;
    case 8: s.cache_type = KvCacheType::kNvfp4; s.scale_stride = 1; break;
    case 9: s.layout = KvLayout::kHnd; s.cache_type = KvCacheType::kNvfp4;
            s.input_type = KvDataType::kFp32; s.slot_type = SlotType::kPageTable; break;
    case 10: s.cache_type = KvCacheType::kFp8E4m3PerTokenHead; break;
    case 11: s.layout = KvLayout::kHnd; s.cache_type = KvCacheType::kFp8E4m3PerTokenHead;
             s.input_type = KvDataType::kFp16; s.heads = 2; s.k_dim = s.v_dim = 64;
             s.slot_type = SlotType::kPageTable; break;
  }
  KvCase c(s);
  std::vector<int64_t> previous = c.prime_every_row(rng_);
  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_TRUE(capture_store(c, stream, &graph, &exec));

  // The control for NHD auto: what an engine composes, k_cache.view(-1, H*D)[slots] = k and the
  // same for v, as two unguarded scatters of contiguous copies of K and V.
  const bool control = GetParam() == 0;
  const int32_t kv_width = s.heads * s.k_dim;
  thrust::device_vector<uint8_t> naive_k_cache, naive_v_cache;
  thrust::device_vector<int64_t> naive_slots(kRows);
  thrust::device_vector<uint16_t> naive_k(kRows * kv_width), naive_v(kRows * kv_width);
  cudaGraphExec_t naive_exec = nullptr;
  if (control) {
    naive_k_cache.assign(c.k_cache().host.size(), kPoison);
    naive_v_cache.assign(c.v_cache()->host.size(), kPoison);
    cudaGraph_t naive_graph;
    const auto scatter = [&](thrust::device_vector<uint16_t>& in,
                             thrust::device_vector<uint8_t>& cache, cudaStream_t s) {
      return naive_scatter(thrust::raw_pointer_cast(in.data()),
                           thrust::raw_pointer_cast(naive_slots.data()),
                           thrust::raw_pointer_cast(cache.data()), kRows, kv_width, c.capacity(),
                           s);
    };
    ASSERT_TRUE(capture_graph(
        stream,
        [&](cudaStream_t s) {
          const cudaError_t k_err = scatter(naive_k, naive_k_cache, s);
          const cudaError_t v_err = scatter(naive_v, naive_v_cache, s);
          return cuda_result(k_err != cudaSuccess ? k_err : v_err);
        },
        &naive_graph, &naive_exec));
    CUDA_ASSERT(cudaGraphDestroy(naive_graph));
  }

  int corrupted = 0;
  for_each_padded_replay(kRows, [&](Padding padding, int64_t n) {
    const std::vector<int64_t> slots = c.prepare_replay(rng_, n, padding, previous);
    ASSERT_TRUE(replay_matches_reference(c, exec, stream));
    previous = slots;
    if (control) {
      thrust::copy(slots.begin(), slots.end(), naive_slots.begin());
      const auto* in = reinterpret_cast<const uint16_t*>(c.input().host.data());
      std::vector<uint16_t> k(kRows * kv_width), v(kRows * kv_width);
      for (int64_t r = 0; r < kRows; ++r) {
        std::copy(in + r * c.width(), in + r * c.width() + kv_width, k.begin() + r * kv_width);
        std::copy(in + r * c.width() + kv_width, in + r * c.width() + 2 * kv_width,
                  v.begin() + r * kv_width);
      }
      thrust::copy(k.begin(), k.end(), naive_k.begin());
      thrust::copy(v.begin(), v.end(), naive_v.begin());
      CUDA_ASSERT(cudaGraphLaunch(naive_exec, stream));
      CUDA_ASSERT(cudaStreamSynchronize(stream));
      const bool k_differs = naive_differs_then_resync(naive_k_cache, c.k_cache().host);
      const bool v_differs = naive_differs_then_resync(naive_v_cache, c.v_cache()->host);
      if (k_differs || v_differs) ++corrupted;
    }
  });
  if (HasFatalFailure()) return;
  if (control) {
    EXPECT_GT(corrupted, 0) << "the control never corrupted: the test cannot see the bug";
    std::printf("paged K/V: naive K+V scatter corrupted the caches in %d of %lld replays; guarded 0\n",
                corrupted, static_cast<long long>(3 * (kRows + 1)));
  }
  if (naive_exec != nullptr) CUDA_ASSERT(cudaGraphExecDestroy(naive_exec));
  CUDA_ASSERT(cudaGraphExecDestroy(exec));
  CUDA_ASSERT(cudaGraphDestroy(graph));
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

std::string replay_config_name(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"NhdAuto", "HndE4m3PerHead", "Mla576E4m3",
                                       "StackedE5m2Fp16P6", "PagedAttentionAuto",
                                       "NhdE4m3Fp32D100", "NhdE4m3PageTable",
                                       "HndAutoP6PageTable", "NhdNvfp4PerHead",
                                       "HndNvfp4Fp32PageTable", "NhdE4m3PerTokenHead",
                                       "HndE4m3PerTokenHeadFp16D64PageTable"};
  return kNames[info.param];
}
INSTANTIATE_TEST_SUITE_P(Configs, PagedKvReplay,
                         ::testing::Values(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
                         replay_config_name);

// ---- page-owner sharding: 1, 2, 4 owners; their caches' union equals the unsharded store ---
TEST_F(PagedKvTest, OwnerShardsUnionEqualsUnshardedStore) {
  for (const auto [page_size, slot_type, cache_type] :
       {std::tuple{16, SlotType::kInt64, KvCacheType::kFp8E4m3},
        std::tuple{6, SlotType::kInt64, KvCacheType::kFp8E4m3},
        std::tuple{16, SlotType::kPageTable, KvCacheType::kFp8E4m3},
        std::tuple{6, SlotType::kPageTable, KvCacheType::kFp8E4m3},
        std::tuple{16, SlotType::kInt64, KvCacheType::kNvfp4},
        std::tuple{6, SlotType::kPageTable, KvCacheType::kNvfp4}}) {
    SCOPED_TRACE(std::string(slot_type_name(slot_type)) + " " + kv_cache_type_name(cache_type));
    KvShape base;
    base.slot_type = slot_type;
    base.num_tokens = 64;
    base.page_size = page_size;
    base.cache_type = cache_type;
    base.scale_stride = 1;
    base.num_pages = 24;  // global pages: divisible by every owner count
    // The unsharded store: global pages, one cache.
    KvCase whole(base);
    const int64_t global_pages = whole.pages();
    whole.randomize_inputs(rng_, base.num_tokens);
    whole.randomize_scales(rng_);
    const std::vector<int64_t> slots =
        step_slots(rng_, base.num_tokens, 56, whole.capacity(), -1, /*faults=*/true);
    whole.set_count(56);
    whole.set_slots(slots);
    whole.upload_inputs();
    ASSERT_TRUE(store_matches_reference(whole));
    const std::vector<uint8_t> unsharded = whole.k_cache().download();
    const int64_t page_bytes = whole.k_strides().page;  // fp8, nvfp4: 1-byte elements

    for (const int32_t owners : {1, 2, 4}) {
      std::vector<uint8_t> combined(unsharded.size(), kPoison);
      for (int32_t rank = 0; rank < owners; ++rank) {
        KvShape s = base;
        s.owner_rank = rank;
        s.owner_size = owners;
        s.num_pages = base.num_pages / owners;
        KvCase shard(s);
        // Each owner holds global pages rank, rank + owners, ...; the same inputs, scales, count
        // and global slots.
        shard.input().host = whole.input().host;
        shard.set_scales(whole.host_scales(false), whole.host_scales(true));
        shard.set_count(56);
        shard.set_slots(slots);
        shard.upload_inputs();
        ASSERT_TRUE(store_matches_reference(shard)) << owners << " owners, rank " << rank;
        const std::vector<uint8_t> local = shard.k_cache().download();
        for (int64_t g = rank; g < global_pages; g += owners) {
          const int64_t lp = g / owners;
          if (lp >= shard.pages()) continue;
          std::copy(local.begin() + lp * page_bytes, local.begin() + (lp + 1) * page_bytes,
                    combined.begin() + g * page_bytes);
        }
      }
      EXPECT_TRUE(bytes_equal(unsharded, combined, "union of " + std::to_string(owners) +
                                                       " owners' K caches vs unsharded, P " +
                                                       std::to_string(page_size)));
    }
  }
}

// The DeepSeek paged stores take the same option: the fp8 index-K and both caches of the fused
// store, against the (independently written) sharded reference, with slots over all owners.
TEST_F(GpuTest, OwnerShardingOnIndexKAndFusedStores) {
  for (StoreKind kind : {StoreKind::kIndexKFp8Amax, StoreKind::kFusedV4Index, StoreKind::kFusedV32Index,
                         StoreKind::kIndexKFp4TowardZero, StoreKind::kFusedV41IndexFp4,
                         StoreKind::kFusedV41Fp4IndexFp8}) {
    for (const int32_t owners : {2, 4}) {
      for (int32_t rank = 0; rank < owners; ++rank) {
        CaseShape shape;
        shape.num_tokens = 64;
        shape.page_size = 16;
        shape.owner_rank = rank;
        shape.owner_size = owners;
        shape.slot_type = rank % 2 == 0 ? SlotType::kInt64 : SlotType::kPageTable;
        StoreCase c(kind, shape);
        c.randomize_inputs(rng_, 60);
        c.set_count(60);
        const int64_t global = c.capacity() * owners;
        c.set_slots(step_slots(rng_, 64, 60, global, -1, true));
        c.set_index_slots(step_slots(rng_, 64, 60, global, -1, true));
        c.upload_inputs();
        EXPECT_TRUE(store_matches_reference(c))
            << store_kind_name(kind) << ", " << owners << " owners, rank " << rank;
      }
    }
  }
}

// ---- interop: vLLM's reshape_and_cache_flash and concat_and_cache_mla records ---------------
TEST_F(GpuTest, GoldenVllmFlashAndMlaRecords) {
  const std::vector<uint16_t> in = golden_input();
  const std::vector<int64_t> slots = read_golden<int64_t>("slots_i64_256.bin", kGoldenRows);
  struct File { const char* name; KvCacheType type; bool per_head; };
  for (const File f : {File{"kv_flash_e4m3_tensor_records_256x2048.bin", KvCacheType::kFp8E4m3, false},
                       File{"kv_flash_e4m3_head_records_256x2048.bin", KvCacheType::kFp8E4m3, true},
                       File{"kv_flash_e5m2_tensor_records_256x2048.bin", KvCacheType::kFp8E5m2, false}}) {
    SCOPED_TRACE(f.name);
    KvShape s;
    s.num_tokens = kGoldenRows;
    s.cache_type = f.type;
    s.scale_stride = f.per_head ? 1 : 0;
    s.extra_pages = *std::max_element(slots.begin(), slots.end()) / 16 + 1;
    KvCase c(s);
    // K = columns 0..1023 of row i, V = the same of row 255 - i, in the case's [K | V | spare].
    std::vector<uint16_t> values(kGoldenRows * c.width(), 0);
    for (int r = 0; r < kGoldenRows; ++r) {
      std::copy_n(&in[r * kGoldenCols], 1024, &values[r * c.width()]);
      std::copy_n(&in[(kGoldenRows - 1 - r) * kGoldenCols], 1024, &values[r * c.width() + 1024]);
    }
    c.set_input(values);
    std::vector<float> k(8), v(8);
    for (int h = 0; h < 8; ++h) {
      k[h] = f.per_head ? 0.01f * static_cast<float>(h + 1) : 0.05f;
      v[h] = f.per_head ? 0.03f / static_cast<float>(h + 1) : 0.02f;
    }
    c.set_scales(k, v);
    c.set_count(kGoldenRows);
    c.set_slots(slots);
    c.upload_inputs();
    STORE_ASSERT(c.run_device(nullptr));
    CUDA_ASSERT(cudaDeviceSynchronize());
    const std::vector<uint8_t> kc = c.k_cache().download(), vc = c.v_cache()->download();
    std::vector<uint8_t> records;
    for (int64_t slot : slots) {
      const int64_t off = (slot / 16) * c.k_strides().page + (slot % 16) * c.k_strides().entry;
      records.insert(records.end(), kc.begin() + off, kc.begin() + off + 1024);
      records.insert(records.end(), vc.begin() + off, vc.begin() + off + 1024);
    }
    EXPECT_TRUE(bytes_equal(read_golden<uint8_t>(f.name, 256 * 2048), records, f.name));
  }
  // concat_and_cache_mla: kv_c = columns 0..511, k_pe = 512..575, one scale 0.04.
  KvShape s;
  s.layout = KvLayout::kMla576;
  s.num_tokens = kGoldenRows;
  s.cache_type = KvCacheType::kFp8E4m3;
  s.extra_pages = *std::max_element(slots.begin(), slots.end()) / 16 + 1;
  KvCase c(s);
  std::vector<uint16_t> values(kGoldenRows * c.width(), 0);
  for (int r = 0; r < kGoldenRows; ++r) std::copy_n(&in[r * kGoldenCols], 576, &values[r * c.width()]);
  c.set_input(values);
  c.set_scales({0.04f}, {0.04f});
  c.set_count(kGoldenRows);
  c.set_slots(slots);
  c.upload_inputs();
  STORE_ASSERT(c.run_device(nullptr));
  CUDA_ASSERT(cudaDeviceSynchronize());
  const std::vector<uint8_t> cache = c.k_cache().download();
  std::vector<uint8_t> records;
  for (int64_t slot : slots) {
    const int64_t off = (slot / 16) * c.k_strides().page + (slot % 16) * c.k_strides().entry;
    records.insert(records.end(), cache.begin() + off, cache.begin() + off + 576);
  }
  EXPECT_TRUE(bytes_equal(read_golden<uint8_t>("mla_fp8_tensor_records_256x576.bin", 256 * 576),
                          records, "vLLM concat_and_cache_mla fp8"));
}

// ---- the fp8 quotient of the paged K/V store against IEEE division -------------------------
// Every bf16 and fp16 pattern x, for scales: the golden ones, 1, powers of two at the ends of
// the fast range and beyond it, 0, a subnormal, Inf, NaN, and random scales over 2^-70..2^70.
// What must agree is the stored byte, e4m3 and e5m2: of the scalar quotient, and of x in the
// store's 8-value vectors (kernels::kv_fp8), once beside zeros (the vector's products are then
// x's) and once beside 3e38 (whose product decides the checked path for scales up to ~1.7).
struct QuotientMismatches {
  unsigned long long count;
  uint32_t first[8];
};

__global__ void kv_quotient_kernel(const float* scales, int num_scales, QuotientMismatches* out) {
  const float s = scales[blockIdx.x];
  for (uint32_t i = threadIdx.x; i < 2 * 65536; i += blockDim.x) {
    const uint16_t bits = static_cast<uint16_t>(i & 0xffff);
    const float x = i < 65536 ? detail::bf16_bits_to_float(bits)
                              : reference::fp16_bits_to_float(bits);
    const float fast = kernels::exact_quotient(x, s);
    const float ieee = __fdiv_rn(x, s);
    const float beside_zeros[8] = {x, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const float beside_large[8] = {x, 3e38f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const uint32_t vectors[2][2] = {
        {kernels::kv_fp8<KvCacheType::kFp8E4m3>(beside_zeros, s).x & 0xffu,
         kernels::kv_fp8<KvCacheType::kFp8E4m3>(beside_large, s).x & 0xffu},
        {kernels::kv_fp8<KvCacheType::kFp8E5m2>(beside_zeros, s).x & 0xffu,
         kernels::kv_fp8<KvCacheType::kFp8E5m2>(beside_large, s).x & 0xffu}};
    int f = 0;
    for (auto fmt : {__NV_E4M3, __NV_E5M2}) {
      const auto byte = [fmt](float q) {
        return __nv_cvt_float2_to_fp8x2(make_float2(q, q), __NV_SATFINITE, fmt) & 0xff;
      };
      const uint32_t want = byte(ieee);
      if (byte(fast) != want || vectors[f][0] != want || vectors[f][1] != want) {
        const unsigned long long k = atomicAdd(&out->count, 1ull);
        if (k < 8) out->first[k] = (blockIdx.x << 17) | i;
      }
      ++f;
    }
  }
}

TEST_F(GpuTest, PagedKvQuotientMatchesIeeeDivisionForEveryInput) {
  std::vector<float> scales = {0.05f, 0.02f, 0.04f, 1.0f, 0x1p-64f, 0x1p64f, 0x1.fffffep-65f,
                               0x1p-70f, 0x1p70f, 0.0f, 1e-40f, INFINITY, NAN, 3.0f, 448.0f};
  for (int h = 0; h < 8; ++h) {
    scales.push_back(0.01f * static_cast<float>(h + 1));
    scales.push_back(0.03f / static_cast<float>(h + 1));
  }
  std::uniform_real_distribution<float> exponent(-70.0f, 70.0f);
  const int random = sanitizer_run() ? 16 : 2048;
  for (int i = 0; i < random; ++i) scales.push_back(std::exp2(exponent(rng_)));
  thrust::device_vector<float> d_scales(scales.begin(), scales.end());
  thrust::device_vector<QuotientMismatches> result(1, QuotientMismatches{});
  kv_quotient_kernel<<<static_cast<unsigned>(scales.size()), 256>>>(
      thrust::raw_pointer_cast(d_scales.data()), static_cast<int>(scales.size()),
      thrust::raw_pointer_cast(result.data()));
  CUDA_ASSERT(cudaGetLastError());
  CUDA_ASSERT(cudaDeviceSynchronize());
  const QuotientMismatches m = result[0];
  std::string first;
  for (unsigned long long k = 0; k < std::min<unsigned long long>(m.count, 8); ++k)
    first += " scale#" + std::to_string(m.first[k] >> 17) + "/x" + std::to_string(m.first[k] & 0x1ffff);
  EXPECT_EQ(m.count, 0u) << first;
}

}  // namespace
}  // namespace cachestore::test
