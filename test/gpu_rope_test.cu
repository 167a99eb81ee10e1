// store_paged_kv with RoPE fused, on the GPU: every cache type and input type, NeoX and GPT-J,
// both rounding options, full and partial rotary dims, GQA ratios 1, 4 and 8, Q in place and out
// of place, the rotated K written out, int32 and int64 positions, positions at 0, the last one and
// outside the cos/sin cache, bf16 / fp16 / fp32 cos/sin caches, slot mappings and page tables,
// page-owner sharding and PDL; whole caches, Q, key_out and the diagnostics compared byte for byte
// with the host reference. Then padded CUDA-graph replay, with the engines' unguarded pair (a
// rotary kernel, then the naive scatter) as the control.
#include "naive_rope.cuh"
#include "naive_scatter.cuh"
#include "paged_kv_case.cuh"
#include "store_cases.cuh"

namespace cachestore::test {
namespace {

class RopeTest : public GpuTest {
 protected:
  ::testing::AssertionResult run_step(KvCase& c, int32_t n, bool faults, LaunchOptions launch) {
    const int64_t b = c.shape().num_tokens;
    c.randomize_inputs(rng_, n);
    c.randomize_scales(rng_);
    c.randomize_rope(rng_, n, faults);
    c.set_count(n);
    c.set_slots(step_slots(rng_, b, n, c.global_capacity(), c.shape().reserved_slot, faults));
    c.upload_inputs();
    return store_matches_reference(c, launch);
  }
};

using SweepParam = std::tuple<KvCacheType, KvDataType, RopeStyle>;
class RopeSweep : public RopeTest, public ::testing::WithParamInterface<SweepParam> {};

TEST_P(RopeSweep, CachesQueryAndKeyOutMatchReference) {
  const auto [cache_type, input_type, style] = GetParam();
  const bool nvfp4 = cache_type == KvCacheType::kNvfp4;
  const size_t index = static_cast<size_t>(cache_type) * 7 + static_cast<size_t>(input_type) * 3 +
                       static_cast<size_t>(style);
  for (int variant = 0; variant < 4; ++variant) {
    const size_t v = index + variant;
    KvShape s;
    s.cache_type = cache_type;
    s.input_type = input_type;
    s.layout = v % 2 == 0 ? KvLayout::kNhd : KvLayout::kHnd;
    s.num_tokens = 24;
    s.heads = (v / 3) % 2 == 0 ? 8 : 2;
    s.k_dim = (v / 2) % 3 == 2 ? 64 : 128;
    s.v_dim = variant == 3 ? 0 : s.k_dim;
    s.scale_stride = static_cast<int32_t>(v % 2);
    const SlotType slot_types[3] = {SlotType::kInt64, SlotType::kInt32, SlotType::kPageTable};
    s.slot_type = slot_types[v % 3];
    s.page_size = variant == 2 ? 6 : 16;
    s.reserved_slot = variant == 1 ? 0 : kNoReservedSlot;
    if (variant == 2) {  // the second of two owners: Q and key_out for every real row still
      s.owner_size = 2;
      s.owner_rank = 1;
    }
    KvRope& r = s.rope;
    r.on = true;
    r.style = style;
    r.rounding = (v / 2) % 2 == 0 ? RopeRounding::kInputType : RopeRounding::kFp32;
    const int32_t ratios[3] = {1, 4, 8};
    r.q_heads = s.heads * ratios[v % 3];
    r.rotary_dim = variant % 2 == 1 ? s.k_dim / 2 : 0;  // partial rotary (64 of 128, 32 of 64)
    if (nvfp4 && style == RopeStyle::kNeox && r.rotary_dim == 32) r.rotary_dim = 0;
    r.q_out_of_place = variant == 1;
    r.key_out = variant != 0;
    const KvDataType cos_sin[3] = {KvDataType::kFp32, KvDataType::kBf16, KvDataType::kFp16};
    r.cos_sin_type = cos_sin[(v / 3) % 3];
    r.positions_type = v % 2 == 0 ? SlotType::kInt64 : SlotType::kInt32;
    r.max_position = 1000 + static_cast<int64_t>(v % 5);
    SCOPED_TRACE("variant " + std::to_string(variant) + (s.layout == KvLayout::kNhd ? " NHD" : " HND") +
                 " H " + std::to_string(s.heads) + " D " + std::to_string(s.k_dim) + " Dv " +
                 std::to_string(s.v_dim) + " Hq " + std::to_string(r.q_heads) + " rot " +
                 std::to_string(r.rotary_dim) + " " + slot_type_name(s.slot_type) +
                 (r.rounding == RopeRounding::kFp32 ? " fp32 rounding" : " input rounding"));
    KvCase c(s);
    LaunchOptions launch;
    launch.enable_pdl = variant % 2 == 1;
    std::uniform_int_distribution<int32_t> n(5, static_cast<int32_t>(s.num_tokens));
    ASSERT_TRUE(run_step(c, static_cast<int32_t>(s.num_tokens), false, launch)) << "every row";
    for (int step = 0; step < 2; ++step)
      ASSERT_TRUE(run_step(c, n(rng_), true, launch)) << "step " << step;
    ASSERT_TRUE(run_step(c, -2, false, launch)) << "negative n";
  }
}

std::string sweep_name(const ::testing::TestParamInfo<SweepParam>& info) {
  const auto [cache, input, style] = info.param;
  const char* inputs[3] = {"Bf16", "Fp16", "Fp32"};
  return std::string(kv_cache_type_name(cache)) + inputs[static_cast<int>(input)] +
         (style == RopeStyle::kNeox ? "Neox" : "Gptj");
}
INSTANTIATE_TEST_SUITE_P(
    Types, RopeSweep,
    ::testing::Combine(::testing::Values(KvCacheType::kAuto, KvCacheType::kFp8E4m3,
                                         KvCacheType::kFp8E5m2, KvCacheType::kNvfp4),
                       ::testing::Values(KvDataType::kBf16, KvDataType::kFp16, KvDataType::kFp32),
                       ::testing::Values(RopeStyle::kNeox, RopeStyle::kGptj)),
    sweep_name);

// One bf16 NeoX pair by hand, where the two roundings differ: x = 1.5, y = 0.3125 at a position
// whose pair-0 cos and sin are 0.6 and 0.8 (fp32 cache). vLLM (kInputType): cos, sin -> bf16
// 0.6015625, 0.80078125; x' = bf16(bf16(0.90234375) - bf16(0.25024414)) = 0.65234375 (0x3F27).
// FlashInfer (kFp32): x' = bf16(fma(1.5, 0.6, -(0.3125 * 0.8))) = bf16(0.65) = 0x3F26. Both give
// y' = 1.390625 (0x3FB2).
TEST_F(RopeTest, OneBf16PairByHandInBothRoundings) {
  for (const RopeRounding rounding : {RopeRounding::kInputType, RopeRounding::kFp32}) {
    KvShape s;
    s.num_tokens = 2;
    s.heads = 1;
    s.k_dim = s.v_dim = 16;
    s.rope.on = true;
    s.rope.q_heads = 1;
    s.rope.max_position = 2;
    s.rope.rounding = rounding;
    KvCase c(s);
    c.randomize_inputs(rng_, 2);
    c.randomize_rope(rng_, 2, false);
    c.set_positions({0, 1});
    c.set_count(2);
    c.set_slots({3, 5});
    std::vector<uint8_t>& cs = c.rope_cos_sin().host;  // [2, 16] fp32: position 1 at 64 bytes
    const float cos_sin[2] = {0.6f, 0.8f};
    std::memcpy(cs.data() + 4 * 16, &cos_sin[0], 4);
    std::memcpy(cs.data() + 4 * (16 + 8), &cos_sin[1], 4);
    std::vector<uint8_t>& in = c.input().host;  // row 1's K: d = 0 and its partner d = 8
    const uint16_t x = 0x3fc0, y = 0x3ea0;      // 1.5, 0.3125
    std::memcpy(in.data() + 2 * c.width(), &x, 2);
    std::memcpy(in.data() + 2 * (c.width() + 8), &y, 2);
    c.upload_inputs();
    ASSERT_TRUE(store_matches_reference(c));
    const std::vector<uint8_t> cache = c.k_cache().download();  // NHD, P 16: slot 5 at 5 * 16
    uint16_t got[2];
    std::memcpy(&got[0], cache.data() + 2 * (5 * 16), 2);
    std::memcpy(&got[1], cache.data() + 2 * (5 * 16 + 8), 2);
    EXPECT_EQ(got[0], rounding == RopeRounding::kInputType ? 0x3f27 : 0x3f26);
    EXPECT_EQ(got[1], 0x3fb2);
  }
}

// ---- padded CUDA-graph replay: nothing of a padded row rotated, read or stored --------------
class RopeReplay : public RopeTest, public ::testing::WithParamInterface<int> {};

TEST_P(RopeReplay, GraphReplayNeverTouchesPaddingRows) {
  constexpr int64_t kRows = 32;
  KvShape s;
  s.num_tokens = kRows;
  s.page_size = 16;
  s.rope.on = true;
  s.rope.q_heads = 32;
  s.rope.cos_sin_type = KvDataType::kBf16;
  s.rope.rounding = RopeRounding::kFp32;
  switch (GetParam()) {
    case 0: break;  // Llama GQA bf16 NHD: the naive pair is the control
    case 1: s.layout = KvLayout::kHnd; s.cache_type = KvCacheType::kFp8E4m3; s.scale_stride = 1;
            s.rope.style = RopeStyle::kGptj; s.rope.key_out = true; break;
    case 2: s.cache_type = KvCacheType::kNvfp4; s.scale_stride = 1; s.slot_type = SlotType::kPageTable;
            s.rope.q_out_of_place = true; s.rope.rotary_dim = 64; break;
    case 3: s.input_type = KvDataType::kFp16; s.rope.rounding = RopeRounding::kInputType;
            s.rope.cos_sin_type = KvDataType::kFp32; s.rope.positions_type = SlotType::kInt32;
            break;
  }
  KvCase c(s);
  std::vector<int64_t> previous = c.prime_every_row(rng_);
  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_TRUE(capture_store(c, stream, &graph, &exec));

  // The control (case 0): the engines' pair captured the same way: the rotary kernel on Q and
  // K in place over every row (positions of padded rows 0, as engines pad them), then
  // k_cache.view(-1, H*D)[slots] = k and the same for v (negative slots wrapping, as a Python
  // index does).
  const bool control = GetParam() == 0;
  const int32_t q_width = s.rope.q_heads * s.k_dim, kv_width = s.heads * s.k_dim;
  thrust::device_vector<uint8_t> naive_k_cache, naive_v_cache;
  thrust::device_vector<int64_t> naive_slots(kRows), naive_positions(kRows);
  thrust::device_vector<uint16_t> naive_q(kRows * q_width), naive_k(kRows * kv_width),
      naive_v(kRows * kv_width);
  const std::vector<uint8_t>& cs = c.rope_cos_sin().host;  // bf16, the same every replay
  thrust::device_vector<uint16_t> naive_cos_sin(reinterpret_cast<const uint16_t*>(cs.data()),
                                                reinterpret_cast<const uint16_t*>(cs.data()) +
                                                    cs.size() / 2);
  cudaGraphExec_t naive_exec = nullptr;
  if (control) {
    naive_k_cache.assign(c.k_cache().host.size(), kPoison);
    naive_v_cache.assign(c.v_cache()->host.size(), kPoison);
    cudaGraph_t naive_graph;
    ASSERT_TRUE(capture_graph(
        stream,
        [&](cudaStream_t st) {
          const int64_t* positions = thrust::raw_pointer_cast(naive_positions.data());
          const uint16_t* cos_sin = thrust::raw_pointer_cast(naive_cos_sin.data());
          cudaError_t err = lean_rope(thrust::raw_pointer_cast(naive_q.data()), q_width,
                                      s.rope.q_heads, s.k_dim, positions, cos_sin, kRows, st);
          if (err == cudaSuccess)
            err = lean_rope(thrust::raw_pointer_cast(naive_k.data()), kv_width, s.heads, s.k_dim,
                            positions, cos_sin, kRows, st);
          const auto scatter = [&](thrust::device_vector<uint16_t>& in,
                                   thrust::device_vector<uint8_t>& cache) {
            return naive_scatter(thrust::raw_pointer_cast(in.data()),
                                 thrust::raw_pointer_cast(naive_slots.data()),
                                 thrust::raw_pointer_cast(cache.data()), kRows, kv_width,
                                 c.capacity(), st);
          };
          if (err == cudaSuccess) err = scatter(naive_k, naive_k_cache);
          if (err == cudaSuccess) err = scatter(naive_v, naive_v_cache);
          return cuda_result(err);
        },
        &naive_graph, &naive_exec));
    CUDA_ASSERT(cudaGraphDestroy(naive_graph));
  }

  int corrupted = 0;
  for_each_padded_replay(kRows, [&](Padding padding, int64_t n) {
    // Padded rows: garbage positions, never read past.
    const std::vector<int64_t> slots = c.prepare_replay(rng_, n, padding, previous);
    // The pair's inputs before the guarded replay rotates Q in place.
    std::vector<uint16_t> q(kRows * q_width), k(kRows * kv_width), v(kRows * kv_width);
    std::vector<int64_t> positions(kRows, 0);
    if (control) {
      const auto* in = reinterpret_cast<const uint16_t*>(c.input().host.data());
      const auto* qh = reinterpret_cast<const uint16_t*>(c.query()->host.data());
      std::copy(qh, qh + kRows * q_width, q.begin());
      for (int64_t r = 0; r < kRows; ++r) {
        std::copy(in + r * c.width(), in + r * c.width() + kv_width, k.begin() + r * kv_width);
        std::copy(in + r * c.width() + kv_width, in + r * c.width() + 2 * kv_width,
                  v.begin() + r * kv_width);
      }
      const auto& pos_bytes = c.rope_positions().host;
      for (int64_t r = 0; r < n; ++r) std::memcpy(&positions[r], pos_bytes.data() + 8 * r, 8);
    }
    ASSERT_TRUE(replay_matches_reference(c, exec, stream));
    previous = slots;
    if (control) {
      thrust::copy(slots.begin(), slots.end(), naive_slots.begin());
      thrust::copy(positions.begin(), positions.end(), naive_positions.begin());
      thrust::copy(q.begin(), q.end(), naive_q.begin());
      thrust::copy(k.begin(), k.end(), naive_k.begin());
      thrust::copy(v.begin(), v.end(), naive_v.begin());
      CUDA_ASSERT(cudaGraphLaunch(naive_exec, stream));
      CUDA_ASSERT(cudaStreamSynchronize(stream));
      const bool k_differs = naive_differs_then_resync(naive_k_cache, c.k_cache().host);
      const bool v_differs = naive_differs_then_resync(naive_v_cache, c.v_cache()->host);
      // Without padding the pair writes what the fused store writes (the same rounding).
      if (n == kRows) EXPECT_FALSE(k_differs || v_differs) << "the pair's real rows differ";
      if (k_differs || v_differs) ++corrupted;
    }
  });
  if (HasFatalFailure()) return;
  if (control) {
    EXPECT_GT(corrupted, 0) << "the control never corrupted: the test cannot see the bug";
    std::printf("RoPE + paged K/V: the rotary kernel + naive scatter pair corrupted the caches in "
                "%d of %lld replays; the fused guarded store 0\n",
                corrupted, static_cast<long long>(3 * (kRows + 1)));
  }
  if (naive_exec != nullptr) CUDA_ASSERT(cudaGraphExecDestroy(naive_exec));
  CUDA_ASSERT(cudaGraphExecDestroy(exec));
  CUDA_ASSERT(cudaGraphDestroy(graph));
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

std::string replay_name(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"LlamaGqaBf16Nhd", "HndE4m3GptjKeyOut",
                                       "Nvfp4PageTablePartialQOut", "Fp16InputRoundingInt32"};
  return kNames[info.param];
}
INSTANTIATE_TEST_SUITE_P(Configs, RopeReplay, ::testing::Values(0, 1, 2, 3), replay_name);

// ---- fused_store_cache with RoPE: every MLA layout, with and without the fused index-K --------
// The rows' RoPE part and DeepSeek's q_pe (64 of each head's 192) rotated, NeoX and GPT-J, both
// roundings, 0 / 16 / 128 Q heads in place or out, the rotated RoPE part into its own buffer or
// in place, the three cos/sin types, int32 / int64 positions with 0, the last one, -1 and past
// the cache, slot mappings and page tables, PDL; whole caches, Q, the RoPE part and the
// diagnostics compared byte for byte with the host reference, for n = every row and random n.
using MlaRopeParam = std::tuple<StoreKind, RopeStyle>;
class MlaRopeSweep : public GpuTest, public ::testing::WithParamInterface<MlaRopeParam> {};

MlaRotary mla_rotary(RopeStyle style, int variant) {
  MlaRotary r;
  r.on = true;
  r.style = style;
  r.rounding = variant % 2 == 0 ? RopeRounding::kInputType : RopeRounding::kFp32;
  const int32_t q_heads[3] = {16, 0, 128};
  r.q_heads = q_heads[variant % 3];
  r.q_out_of_place = variant == 1 || variant == 3;
  r.key_out = variant != 0;
  r.key_out_in_place = variant == 2;
  const KvDataType cos_sin[3] = {KvDataType::kFp32, KvDataType::kBf16, KvDataType::kFp16};
  r.cos_sin_type = cos_sin[variant % 3];
  r.positions_type = variant % 2 == 0 ? SlotType::kInt64 : SlotType::kInt32;
  r.max_position = 1000 + variant;
  r.by_row = variant >= 4;  // row i rotates by cos/sin row i: every real row rotates
  r.interleaved = variant == 3 || variant >= 5;  // cos and sin side by side
  if (variant >= 6) {  // SGLang's freqs_cis: fp32 (cos, sin) pairs a row, the fp32 rotation;
    r.rounding = RopeRounding::kFp32;  // without Q (6) the V4.1 layouts' kernel of that form
    r.cos_sin_type = KvDataType::kFp32;
    r.q_heads = variant == 6 ? 0 : 16;
  }
  return r;
}

TEST_P(MlaRopeSweep, CachesQueryAndRopePartMatchReference) {
  const auto [kind, style] = GetParam();
  for (int variant = 0; variant < 8; ++variant) {
    CaseShape shape;
    shape.num_tokens = 40;
    shape.page_size = 16;
    const SlotType slot_types[3] = {SlotType::kInt64, SlotType::kInt32, SlotType::kPageTable};
    shape.slot_type = slot_types[variant % 3];
    shape.rotary = mla_rotary(style, variant);
    SCOPED_TRACE("variant " + std::to_string(variant) + " " + slot_type_name(shape.slot_type) +
                 " Hq " + std::to_string(shape.rotary.q_heads));
    StoreCase c(kind, shape);
    LaunchOptions launch;
    launch.enable_pdl = variant % 2 == 1;
    std::uniform_int_distribution<int32_t> count(5, static_cast<int32_t>(shape.num_tokens));
    for (int step = 0; step < 3; ++step) {
      const int32_t n = step == 0 ? static_cast<int32_t>(shape.num_tokens) : count(rng_);
      const std::vector<int64_t> slots =
          step_slots(rng_, shape.num_tokens, n, c.capacity(), shape.reserved_slot, step == 2);
      c.set_step(rng_, n, slots);
      c.upload_inputs();
      ASSERT_TRUE(store_matches_reference(c, launch)) << "step " << step << ", n = " << n;
    }
  }
}

std::string mla_rope_name(const ::testing::TestParamInfo<MlaRopeParam>& info) {
  return std::string(store_kind_name(std::get<0>(info.param))) +
         (std::get<1>(info.param) == RopeStyle::kNeox ? "_NeoX" : "_GptJ");
}
INSTANTIATE_TEST_SUITE_P(
    Layouts, MlaRopeSweep,
    ::testing::Combine(::testing::Values(StoreKind::kV4, StoreKind::kV32Pow2, StoreKind::kV32Amax,
                                         StoreKind::kV41, StoreKind::kV41Fp4,
                                         StoreKind::kFusedV4Index, StoreKind::kFusedV32Index,
                                         StoreKind::kFusedV41IndexFp4,
                                         StoreKind::kFusedV41Fp4IndexFp8),
                       ::testing::Values(RopeStyle::kGptj, RopeStyle::kNeox)),
    mla_rope_name);

// The same pair by hand in a V4 row's RoPE part (GPT-J: values 0 and 1) and in q_pe: the device
// writes the contract's bytes, not only the reference's.
TEST_F(GpuTest, MlaRopeOneBf16PairByHandInBothRoundings) {
  for (const bool interleaved : {false, true})
  for (const RopeRounding rounding : {RopeRounding::kInputType, RopeRounding::kFp32}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "halves");
    CaseShape shape;
    shape.num_tokens = 2;
    shape.page_size = 16;
    shape.rotary.on = true;
    shape.rotary.rounding = rounding;
    shape.rotary.q_heads = 1;
    shape.rotary.key_out = true;
    shape.rotary.max_position = 2;
    shape.rotary.interleaved = interleaved;
    StoreCase c(StoreKind::kV4, shape);
    c.randomize_inputs(rng_, 2);
    c.set_count(2);
    c.set_slots({3, 5});
    c.set_positions({1, 0});
    std::vector<uint8_t>& cs = c.rope_cos_sin().host;  // [2, 64] fp32: position 1 at 256 bytes
    const float cos_sin[2] = {0.6f, 0.8f};
    std::memcpy(cs.data() + 4 * 64, &cos_sin[0], 4);
    std::memcpy(cs.data() + 4 * (64 + (interleaved ? 1 : 32)), &cos_sin[1], 4);
    const uint16_t pair[2] = {0x3fc0, 0x3ea0};  // 1.5, 0.3125 at row 0's RoPE values 0 and 1
    std::memcpy(c.rope_input().host.data(), pair, 4);
    c.upload_inputs();
    ASSERT_TRUE(store_matches_reference(c));
    const std::vector<uint8_t> out = c.rope_out().download();
    uint16_t got[2];
    std::memcpy(got, out.data(), 4);
    EXPECT_EQ(got[0], rounding == RopeRounding::kInputType ? 0x3f27 : 0x3f26);
    EXPECT_EQ(got[1], 0x3fb2);
  }
}

// Padded CUDA-graph replay of the rotating MLA stores: for every n in 0..32 and each padding,
// the caches, Q and the RoPE part equal the reference (padded rows rotate and store nothing).
class MlaRopeReplay : public GpuTest, public ::testing::WithParamInterface<MlaRopeParam> {};

TEST_P(MlaRopeReplay, GraphReplayNeverTouchesPaddingRows) {
  constexpr int64_t kRows = 32;
  const auto [kind, style] = GetParam();
  CaseShape shape;
  shape.num_tokens = kRows;
  shape.page_size = 16;
  // Variant 2: Q heads 128 and the RoPE part in place, by position; variant 5: Q heads 128 in
  // place by a cos/sin row a row; variant 6: SGLang's freqs_cis form, no Q.
  for (const int variant : {2, 5, 6}) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    shape.rotary = mla_rotary(style, variant);
    StoreCase c(kind, shape);
    std::vector<int64_t> previous = distinct_slots(rng_, kRows, c.capacity(), -1);
    c.set_step(rng_, kRows, previous);
    c.upload_inputs();
    cudaStream_t stream;
    CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_TRUE(capture_store(c, stream, &graph, &exec));
    for_each_padded_replay(kRows, [&](Padding padding, int64_t n) {
      const std::vector<int64_t> slots =
          padded_replay_slots(rng_, kRows, n, c.capacity(), padding, previous);
      c.set_step(rng_, n, slots);
      ASSERT_TRUE(replay_matches_reference(c, exec, stream));
      previous = slots;
    });
    CUDA_ASSERT(cudaGraphExecDestroy(exec));
    CUDA_ASSERT(cudaGraphDestroy(graph));
    CUDA_ASSERT(cudaStreamDestroy(stream));
  }
}
INSTANTIATE_TEST_SUITE_P(Layouts, MlaRopeReplay,
                         ::testing::Values(MlaRopeParam{StoreKind::kV4, RopeStyle::kGptj},
                                           MlaRopeParam{StoreKind::kV32Pow2, RopeStyle::kNeox},
                                           MlaRopeParam{StoreKind::kFusedV41IndexFp4,
                                                        RopeStyle::kGptj},
                                           MlaRopeParam{StoreKind::kV41Fp4, RopeStyle::kNeox}),
                         mla_rope_name);

}  // namespace
}  // namespace cachestore::test
