// bench_store: every cachestore store against the baselines an engine has today, in one run.
//
// Timing (named in every row): "graph" = a CUDA graph of 32 back-to-back nodes of the same
// store (each node on its own input set when inputs rotate), replays timed with CUDA events,
// per-node time = replay time / 32 (what an engine's decode graph pays); "stream" = events
// around 100 launches in a stream, per launch. Each row is the median of its samples.
// Caches are >= 4x the L2; inputs rotate for n >= 16384 so the L2 does not serve them; slots
// are "decode" (random distinct slots) or "prefill" (whole pages in random order, n >= 4096).
// Counters: us (median per store), GBps (decimal, explicit byte model: input + slots read,
// records written), pct_copy (of the same-run device-to-device copy bandwidth), x_baseline
// (time over the baseline's, sampled alternately with the store in the same row: naive bf16
// scatter, naive fp8 composition, the two separate stores a fused store replaces, or the two
// naive K and V scatters a paged K/V store replaces), x_naive (time over one lean naive scatter
// node's, sampled alternately in the same row: 128-wide rows for the DeepSeek stores, the K
// width H*Dk for paged K/V). The lean naive scatter is one 16-byte vector per thread, row and
// vector by shift and mask (test/naive_scatter.cuh).
#include <benchmark/benchmark.h>
#include <thrust/device_vector.h>
#include <thrust/random.h>
#include <thrust/sequence.h>
#include <thrust/shuffle.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"
#include "naive_fp8.cuh"
#include "cuda_check.h"
#include "naive_scatter.cuh"

namespace cachestore::bench {
namespace {

enum class Op {
  kNaiveBf16, kNaiveFp8, kCopy, kSeparateV4Index, kSeparateV32Index,  // baselines first
  kNaiveKv, kNaiveK,
  kBf16, kFp8Amax, kFp8Pow2, kV4, kV32, kV32Amax, kFusedV4Index, kFusedV32Index,
  kFp4Index, kV41, kV41Fp4, kFusedV41Fp4Index,
  kKvNhd, kKvHnd, kKvNhdFp8, kKvHndFp8, kKvMla576,
};
enum class Mode { kGraph, kStream };
enum class Slots { kDecode, kPrefill };

struct OpInfo {
  Op op;
  const char* name;
  int64_t bytes_per_row;  // input + slot read, record written
  int64_t input_width;    // bf16 elements per row of the main input
  bool index_input;       // plus a [n, 128] index-K input
  std::optional<Op> baseline;
  bool pdl_capable;
  std::optional<Op> naive = std::nullopt;  // x_naive's node: kNaiveBf16 or kNaiveK
};

// Paged K/V rows: Llama-3-8B/70B's H = 8, D = 128 (input [K | V] per token, 2048 wide), and vLLM's
// 576-wide MLA rows (H = 1, K = kv_c 512, V = k_pe 64); P = 16 (vLLM's default block).
constexpr int32_t kKvHeads = 8, kKvDim = 128, kKvPage = 16;
bool is_kv(Op op) { return op >= Op::kKvNhd; }
bool is_mla576(Op op) { return op == Op::kKvMla576; }

const OpInfo kOps[] = {
    {Op::kNaiveBf16, "naive_bf16_scatter", 520, 128, false, std::nullopt, false},
    {Op::kNaiveFp8, "naive_fp8_composition", 396, 128, false, std::nullopt, false},
    {Op::kCopy, "d2d_copy", 512, 128, false, std::nullopt, false},
    {Op::kSeparateV4Index, "separate_v4_plus_index", 2004, 512, true, std::nullopt, true},
    {Op::kSeparateV32Index, "separate_v32_plus_index", 2204, 576, true, std::nullopt, true},
    {Op::kNaiveKv, "naive_kv_two_nodes", 8200, 2048, false, std::nullopt, false},
    {Op::kNaiveK, "naive_k_one_node", 4104, 2048, false, std::nullopt, false},
    {Op::kBf16, "index_k_bf16", 520, 128, false, Op::kNaiveBf16, true, Op::kNaiveBf16},
    {Op::kFp8Amax, "index_k_fp8_amax", 396, 128, false, Op::kNaiveFp8, true, Op::kNaiveBf16},
    {Op::kFp8Pow2, "index_k_fp8_pow2", 396, 128, false, Op::kNaiveFp8, true, Op::kNaiveBf16},
    {Op::kV4, "mla_v4", 1616, 512, false, std::nullopt, true, Op::kNaiveBf16},
    {Op::kV32, "mla_v32", 1816, 576, false, std::nullopt, true, Op::kNaiveBf16},
    {Op::kV32Amax, "mla_v32_amax", 1816, 576, false, std::nullopt, true, Op::kNaiveBf16},
    {Op::kFusedV4Index, "fused_v4_index", 2004, 512, true, Op::kSeparateV4Index, true, Op::kNaiveBf16},
    {Op::kFusedV32Index, "fused_v32_index", 2204, 576, true, Op::kSeparateV32Index, true, Op::kNaiveBf16},
    {Op::kFp4Index, "index_k_fp4", 332, 128, false, std::nullopt, true, Op::kNaiveBf16},
    {Op::kV41, "mla_v41", 1560, 512, false, std::nullopt, true, Op::kNaiveBf16},
    {Op::kV41Fp4, "mla_v41_fp4", 1320, 512, false, std::nullopt, true, Op::kNaiveBf16},
    {Op::kFusedV41Fp4Index, "fused_v41_fp4_index", 1884, 512, true, std::nullopt, true, Op::kNaiveBf16},
    {Op::kKvNhd, "paged_kv_nhd", 8200, 2048, false, Op::kNaiveKv, true, Op::kNaiveK},
    {Op::kKvHnd, "paged_kv_hnd", 8200, 2048, false, Op::kNaiveKv, true, Op::kNaiveK},
    {Op::kKvNhdFp8, "paged_kv_nhd_fp8", 6152, 2048, false, Op::kNaiveKv, true, Op::kNaiveK},
    {Op::kKvHndFp8, "paged_kv_hnd_fp8", 6152, 2048, false, Op::kNaiveKv, true, Op::kNaiveK},
    {Op::kKvMla576, "paged_kv_mla576", 2312, 576, false, Op::kNaiveKv, true, Op::kNaiveK},
};

constexpr int kNodesPerGraph = 32;
constexpr int kStreamLaunches = 100;
constexpr int32_t kPage = 64;
constexpr int64_t kMaxRows = 262144;

const auto g_process_start = std::chrono::steady_clock::now();

// Device buffers shared by all rows, allocated once.
struct Pool {
  int64_t l2_bytes = 0;
  double copy_gbps = 0;
  thrust::device_vector<uint16_t> input;     // random bf16, never zero
  thrust::device_vector<int64_t> slots;
  thrust::device_vector<uint8_t> bf16_cache, fp8_cache, v4_cache, v32_cache, copy_dst;
  thrust::device_vector<uint8_t> fp4_cache, v41_cache, v41_fp4_cache;
  thrust::device_vector<uint8_t> kv_k_cache, kv_v_cache;  // paged K/V: 16-bit or fp8 alike
  thrust::device_vector<float> kv_scales;
  thrust::device_vector<float> naive_scale;
  thrust::device_vector<uint8_t> naive_q;
  thrust::device_vector<int32_t> count;
  int64_t bf16_slots = 0, fp8_pages = 0, mla_pages = 0, kv_slots = 0;
};
Pool* g_pool = nullptr;

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
  p.input.resize(size_t{640} << 20);  // 1.25 GiB of bf16
  fill_random_bf16<<<4096, 256>>>(thrust::raw_pointer_cast(p.input.data()),
                                  static_cast<int64_t>(p.input.size()), 2026u);
  CACHESTORE_CHECK_CUDA(cudaGetLastError());
  p.slots.resize(size_t{4} << 20);
  // Caches of >= 4x the L2 (and >= 4x the largest n in slots), poisoned once.
  p.bf16_slots = int64_t{1} << 21;
  p.fp8_pages = (int64_t{1} << 21) / kPage;
  p.mla_pages = (int64_t{1} << 20) / kPage;
  p.bf16_cache.assign(p.bf16_slots * 256, 0xab);
  p.fp8_cache.assign(p.fp8_pages * layout::index_k_fp8_min_page_stride(kPage, 128), 0xab);
  p.v4_cache.assign(p.mla_pages * layout::v4_min_page_stride(kPage), 0xab);
  p.v32_cache.assign(p.mla_pages * layout::v32_min_page_stride(kPage), 0xab);
  p.fp4_cache.assign(p.fp8_pages * layout::index_k_fp4_min_page_stride(kPage, 128), 0xab);
  p.v41_cache.assign(p.mla_pages * layout::split_min_page_stride(layout::kV41Rows, kPage), 0xab);
  p.v41_fp4_cache.assign(
      p.mla_pages * layout::split_min_page_stride(layout::kV41Fp4Rows, kPage), 0xab);
  p.kv_slots = int64_t{1} << 19;  // 1 GiB per 16-bit cache of H = 8, D = 128
  p.kv_k_cache.assign(p.kv_slots * kKvHeads * kKvDim * 2, 0xab);
  p.kv_v_cache.assign(p.kv_slots * kKvHeads * kKvDim * 2, 0xab);
  p.kv_scales.assign(2 * kKvHeads, 0.0173f);
  p.copy_dst.resize(size_t{600} << 20);
  p.naive_scale.resize(kMaxRows);
  p.naive_q.resize(kMaxRows * 128);
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
  const int64_t* src = thrust::raw_pointer_cast(order.data());
  const int64_t total = n * sets, count = static_cast<int64_t>(order.size());
  const bool prefill = pattern == Slots::kPrefill;
  thrust::for_each(thrust::counting_iterator<int64_t>(0), thrust::counting_iterator<int64_t>(total),
                   [=] __device__(int64_t i) {
                     const int64_t set = i / n, row = i % n;
                     // each set starts its own run of pages/slots so sets do not overlap
                     out[i] = prefill ? src[(set * ((n + kPage - 1) / kPage) + row / kPage) % count] * kPage + row % kPage
                                      : src[i % count];
                   });
  CACHESTORE_CHECK_CUDA(cudaGetLastError());
}

struct Row {
  const OpInfo* op;
  Mode mode;
  bool pdl;
  Slots slots;
  int64_t n;
  const OpInfo* subject = nullptr;  // a baseline's store row (its K/V shape)
};

// The paged K/V store of one row: NHD or HND, auto or fp8, or the 576-wide MLA rows.
PagedKvParams kv_params(Op op, const uint16_t* in, const Batch& batch, const SlotMapping& slots,
                        const LaunchOptions& launch) {
  Pool& p = *g_pool;
  PagedKvParams kv;
  kv.batch = batch;
  kv.slots = slots;
  kv.page_size = kKvPage;
  kv.launch = launch;
  uint8_t* k_cache = thrust::raw_pointer_cast(p.kv_k_cache.data());
  if (is_mla576(op)) {
    const layout::KvStrides st = layout::kv_mla_row_strides(kKvPage);
    kv.num_pages = p.kv_k_cache.size() / 2 / st.page;
    kv.k = {in, 576, 0, layout::kMlaKvcDim};
    kv.v = {in + layout::kMlaKvcDim, 576, 0, 64};
    kv.k_cache = {k_cache, st.page, st.entry, st.head};
    kv.v_cache = {k_cache + 2 * layout::kMlaKvcDim, st.page, st.entry, st.head};
    return kv;
  }
  const bool fp8 = op == Op::kKvNhdFp8 || op == Op::kKvHndFp8;
  const bool hnd = op == Op::kKvHnd || op == Op::kKvHndFp8;
  const layout::KvStrides st = hnd ? layout::kv_hnd_strides(kKvPage, kKvHeads, kKvDim)
                                   : layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim);
  kv.num_heads = kKvHeads;
  kv.cache_type = fp8 ? KvCacheType::kFp8E4m3 : KvCacheType::kAuto;
  kv.num_pages = p.kv_slots / kKvPage;
  kv.k = {in, 2 * kKvHeads * kKvDim, kKvDim, kKvDim};
  kv.v = {in + kKvHeads * kKvDim, 2 * kKvHeads * kKvDim, kKvDim, kKvDim};
  const float* scales = thrust::raw_pointer_cast(p.kv_scales.data());
  kv.k_cache = {k_cache, st.page, st.entry, st.head, scales, 1};
  kv.v_cache = {thrust::raw_pointer_cast(p.kv_v_cache.data()), st.page, st.entry, st.head,
                scales + kKvHeads, 1};
  return kv;
}

// Issues one store (or baseline) on input set `set`.
Status issue(const Row& r, int set, int64_t set_elems, cudaStream_t stream) {
  Pool& p = *g_pool;
  const int64_t n = r.n;
  const uint16_t* in = thrust::raw_pointer_cast(p.input.data()) + set * set_elems;
  const uint16_t* index_in = in + n * r.op->input_width;
  const int64_t* slots = thrust::raw_pointer_cast(p.slots.data()) + set * n;
  const int32_t* count = thrust::raw_pointer_cast(p.count.data());
  const Batch batch{n, count, nullptr};
  const SlotMapping slot_map{slots, SlotType::kInt64};
  const LaunchOptions launch{r.pdl};
  const int64_t fp8_stride = layout::index_k_fp8_min_page_stride(kPage, 128);
  IndexKFp8Cache fp8_cache{thrust::raw_pointer_cast(p.fp8_cache.data()), p.fp8_pages, kPage,
                           fp8_stride, 128, ScaleRule::kAmax};
  const bool v4 = r.op->op == Op::kV4 || r.op->op == Op::kFusedV4Index ||
                  r.op->op == Op::kSeparateV4Index || r.op->op == Op::kV41 ||
                  r.op->op == Op::kV41Fp4 || r.op->op == Op::kFusedV41Fp4Index;
  FusedStoreParams fused;
  fused.batch = batch;
  fused.kv_slots = slot_map;
  fused.nope = in;
  fused.nope_row_stride = r.op->input_width;
  fused.rope = in + (v4 ? layout::kV4NopeDim : layout::kV32NopeDim);
  fused.rope_row_stride = r.op->input_width;
  fused.kv_cache = {v4 ? MlaLayout::kV4 : MlaLayout::kV32,
                    thrust::raw_pointer_cast(v4 ? p.v4_cache.data() : p.v32_cache.data()),
                    p.mla_pages, kPage,
                    v4 ? layout::v4_min_page_stride(kPage) : layout::v32_min_page_stride(kPage),
                    ScaleRule::kPow2};
  fused.launch = launch;
  const int64_t fp4_stride = layout::index_k_fp4_min_page_stride(kPage, 128);
  const IndexKFp4Cache fp4_cache{thrust::raw_pointer_cast(p.fp4_cache.data()), p.fp8_pages, kPage,
                                 fp4_stride, 128, Fp4Ties::kToEven};
  if (r.op->op == Op::kV41 || r.op->op == Op::kFusedV41Fp4Index)
    fused.kv_cache = {MlaLayout::kV41, thrust::raw_pointer_cast(p.v41_cache.data()), p.mla_pages,
                      kPage, layout::split_min_page_stride(layout::kV41Rows, kPage),
                      ScaleRule::kPow2};
  if (r.op->op == Op::kV41Fp4)
    fused.kv_cache = {MlaLayout::kV41Fp4, thrust::raw_pointer_cast(p.v41_fp4_cache.data()),
                      p.mla_pages, kPage, layout::split_min_page_stride(layout::kV41Fp4Rows, kPage),
                      ScaleRule::kPow2};
  IndexKFp8Params fp8;
  fp8.batch = batch;
  fp8.slots = slot_map;
  fp8.k = r.op->index_input ? index_in : in;
  fp8.k_row_stride = 128;
  fp8.cache = fp8_cache;
  fp8.launch = launch;

  const auto cuda = [](cudaError_t e) {
    return e == cudaSuccess ? Status::kSuccess : Status::kErrorCudaRuntime;
  };
  const Op subject = r.subject != nullptr ? r.subject->op : r.op->op;
  switch (r.op->op) {
    case Op::kNaiveBf16:
      return cuda(test::lean_naive_scatter(in, 128, slots,
                                           thrust::raw_pointer_cast(p.bf16_cache.data()), n, 128,
                                           stream));
    case Op::kNaiveK:
    case Op::kNaiveKv: {
      // What an engine composes: k_cache.view(-1, H*D)[slots] = k, then the same for v.
      const int64_t stride = is_mla576(subject) ? 576 : 2 * kKvHeads * kKvDim;
      const int32_t k_width = is_mla576(subject) ? layout::kMlaKvcDim : kKvHeads * kKvDim;
      const int32_t v_width = is_mla576(subject) ? 64 : kKvHeads * kKvDim;
      const Status k = cuda(test::lean_naive_scatter(
          in, stride, slots, thrust::raw_pointer_cast(p.kv_k_cache.data()), n, k_width, stream));
      if (k != Status::kSuccess || r.op->op == Op::kNaiveK) return k;
      return cuda(test::lean_naive_scatter(in + k_width, stride, slots,
                                           thrust::raw_pointer_cast(p.kv_v_cache.data()), n,
                                           v_width, stream));
    }
    case Op::kKvNhd:
    case Op::kKvHnd:
    case Op::kKvNhdFp8:
    case Op::kKvHndFp8:
    case Op::kKvMla576:
      return store_paged_kv(kv_params(r.op->op, in, batch, slot_map, launch), stream);
    case Op::kNaiveFp8:
      return naive_fp8_store(in, slots, thrust::raw_pointer_cast(p.fp8_cache.data()), n, 6,
                             fp8_stride, thrust::raw_pointer_cast(p.naive_scale.data()),
                             thrust::raw_pointer_cast(p.naive_q.data()), stream) == cudaSuccess
                 ? Status::kSuccess : Status::kErrorCudaRuntime;
    case Op::kCopy:
      return cudaMemcpyAsync(thrust::raw_pointer_cast(p.copy_dst.data()), in, n * 256,
                             cudaMemcpyDeviceToDevice, stream) == cudaSuccess
                 ? Status::kSuccess : Status::kErrorCudaRuntime;
    case Op::kBf16: {
      IndexKBf16Params b;
      b.batch = batch;
      b.slots = slot_map;
      b.k = in;
      b.k_row_stride = 128;
      b.cache = thrust::raw_pointer_cast(p.bf16_cache.data());
      b.cache_row_stride = 128;
      b.num_slots = p.bf16_slots;
      b.launch = launch;
      return store_index_k_bf16(b, stream);
    }
    case Op::kFp8Amax:
      return store_index_k_fp8(fp8, stream);
    case Op::kFp8Pow2:
      fp8.cache.scale_rule = ScaleRule::kPow2;
      return store_index_k_fp8(fp8, stream);
    case Op::kV4:
    case Op::kV32:
      return fused_store_cache(fused, stream);
    case Op::kV32Amax:
      fused.kv_cache.scale_rule = ScaleRule::kAmax;
      return fused_store_cache(fused, stream);
    case Op::kSeparateV4Index:
    case Op::kSeparateV32Index: {
      const Status s = fused_store_cache(fused, stream);
      return s != Status::kSuccess ? s : store_index_k_fp8(fp8, stream);
    }
    case Op::kFp4Index: {
      IndexKFp4Params f;
      f.batch = batch;
      f.slots = slot_map;
      f.k = in;
      f.k_row_stride = 128;
      f.cache = fp4_cache;
      f.launch = launch;
      return store_index_k_fp4(f, stream);
    }
    case Op::kV41:
    case Op::kV41Fp4:
      return fused_store_cache(fused, stream);
    case Op::kFusedV41Fp4Index:
      fused.index_k = index_in;
      fused.index_k_row_stride = 128;
      fused.index_slots = slot_map;
      fused.index_format = IndexKFormat::kFp4;
      fused.index_fp4_cache = fp4_cache;
      return fused_store_cache(fused, stream);
    case Op::kFusedV4Index:
    case Op::kFusedV32Index:
      fused.index_k = index_in;
      fused.index_k_row_stride = 128;
      fused.index_slots = slot_map;
      fused.index_cache = fp8_cache;
      return fused_store_cache(fused, stream);
  }
  return Status::kErrorInvalidArgument;
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
      error_ = last_error_message();
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

const OpInfo& op_info(Op op) {
  for (const OpInfo& info : kOps)
    if (info.op == op) return info;
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
  // The naive K/V rows scatter into the paged K/V caches: their capacity, not the MLA one.
  const bool kv = is_kv(r.op->op) || r.op->op == Op::kNaiveKv || r.op->op == Op::kNaiveK;
  const bool mla = r.op->input_width > 128 && !kv;
  const bool bf16 = r.op->op == Op::kNaiveBf16 || r.op->op == Op::kBf16 || r.op->op == Op::kCopy;
  const int64_t capacity = kv ? (is_mla576(r.op->op) ? p.kv_slots * kKvHeads * kKvDim / 576
                                                     : p.kv_slots)
                              : mla ? p.mla_pages * kPage
                              : bf16 ? p.bf16_slots : p.fp8_pages * kPage;
  make_slots(r.slots, r.n, sets, capacity, static_cast<uint32_t>(r.n * 31 + sets));
  const int32_t n32 = static_cast<int32_t>(r.n);
  CACHESTORE_CHECK_CUDA(cudaMemcpy(thrust::raw_pointer_cast(p.count.data()), &n32, 4, cudaMemcpyHostToDevice));

  // The store and its baseline, sampled alternately in this row: same inputs, slots, caches
  // and clocks, so the ratio is a same-run, same-moment ratio.
  // x_naive's node too, in the same rotation (the baseline itself when that is the node).
  Sampler store(r, sets, set_elems);
  std::unique_ptr<Sampler> baseline, naive;
  if (r.op->baseline)
    baseline = std::make_unique<Sampler>(
        Row{&op_info(*r.op->baseline), r.mode, false, r.slots, r.n, r.op}, sets, set_elems);
  if (r.op->naive && r.op->naive != r.op->baseline)
    naive = std::make_unique<Sampler>(
        Row{&op_info(*r.op->naive), r.mode, false, r.slots, r.n, r.op}, sets, set_elems);
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
  // When the row ran (seconds after the process started; the JSON's context has the start date):
  // gpu-check logs the clocks and temperature beside it (NOTES.md, items 16-17).
  state.counters["t_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                        g_process_start).count();
  if (baseline) {
    state.counters["baseline_us"] = median(baseline_us);
    state.counters["x_baseline"] = us / median(baseline_us);
  }
  if (r.op->naive) {
    const double naive_median = naive ? median(naive_us) : median(baseline_us);
    state.counters["naive_us"] = naive_median;
    state.counters["x_naive"] = us / naive_median;
  }
}

void register_rows() {
  const int64_t sizes[] = {1, 8, 32, 128, 512, 4096, 16384, 65536, 262144};
  // Every graph row before any stream row: once a stream row has launched its 100 kernels
  // eagerly, every non-PDL graph node of the process reads ~0.17 us slower at small n (PDL
  // edges do not; NOTES.md, items 16-17), so interleaving the modes measured the graph rows in two
  // states. The graph rows now all run in the state of a process that has only replayed graphs.
  for (Mode mode : {Mode::kGraph, Mode::kStream})
    for (const OpInfo& op : kOps)
      for (bool pdl : {false, true})
        for (Slots slots : {Slots::kDecode, Slots::kPrefill})
          for (int64_t n : sizes) {
            if (pdl && !op.pdl_capable) continue;
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
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "bench_store: no CUDA device; it needs a GPU (--benchmark_list_tests works anywhere)\n");
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
    benchmark::AddCustomContext("l2_bytes", std::to_string(bench::g_pool->l2_bytes));
    benchmark::AddCustomContext("copy_GBps", std::to_string(bench::g_pool->copy_gbps));
    benchmark::AddCustomContext("timing", "graph: 32-node CUDA graph replays / 32, median of 15; stream: 100 launches, median of 7; CUDA events");
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
