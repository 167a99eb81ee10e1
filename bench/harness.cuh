// bench_store's shared harness: the device pool, the rows' timing and counters, the registry of
// stores and baselines. Each family file (index_k_rows.cu, mla_rows.cu, paged_kv_rows.cu,
// baselines.cu) registers its rows; main.cu runs them.
//
// Timing (named in every row): "graph" = a CUDA graph of 32 back-to-back nodes of the same
// store (each node on its own input set when inputs rotate), replays timed with CUDA events,
// per-node time = replay time / 32 (what an engine's decode graph pays); "stream" = events
// around 100 launches in a stream, per launch. Each row is the median of its samples.
// Caches are >= 4x the L2; inputs rotate for n >= 16384 so the L2 does not serve them; slots
// are "decode" (random distinct slots) or "prefill" (whole pages in random order, n >= 4096).
// Counters: us (median per store), GBps (decimal, explicit byte model: input + slots read,
// records written), pct_copy (of the same-run device-to-device copy bandwidth), x_baseline
// (time over the baseline's, sampled alternately with the store in the same row), x_naive
// (time over one lean naive scatter node's, sampled alternately in the same row: 128-wide rows
// for the DeepSeek stores, the K width H*Dk for paged K/V). The lean naive scatter is one
// 16-byte vector per thread, row and vector by shift and mask (test/naive_scatter.cuh).
#pragma once

#include <thrust/device_vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"

namespace cachestore::bench {

enum class Mode { kGraph, kStream };
enum class Slots { kDecode, kPrefill };

inline constexpr int32_t kPage = 64;        // the DeepSeek caches' page size
inline constexpr int32_t kPageShift = 6;    // log2(kPage)
static_assert(1 << kPageShift == kPage, "kPage = 2^kPageShift");
inline constexpr int64_t kMaxRows = 262144;
inline constexpr int32_t kTablePage = 16;   // the page size of the page-table view of the slots

// Device buffers every row shares, allocated once before the first row: the inputs and slots,
// and the index-K caches that the index-K rows, the fused MLA rows and the baselines all write.
struct Pool {
  int64_t l2_bytes = 0;
  double copy_gbps = 0;
  thrust::device_vector<uint16_t> input;  // random bf16, never zero
  thrust::device_vector<int64_t> slots;
  // The same slots as a page table of kTablePage-slot pages (FlashInfer's form): row i is
  // request i, whose one page is table_indices[i] (table_indptr[i] = i), at table_positions[i].
  thrust::device_vector<int32_t> table_batch, table_positions, table_indptr, table_indices;
  thrust::device_vector<int32_t> count;
  thrust::device_vector<uint8_t> copy_dst;
  thrust::device_vector<uint8_t> bf16_cache;  // bf16_slots rows of 128 bf16
  thrust::device_vector<uint8_t> fp8_cache;   // index_pages 132-byte indexer pages of kPage
  thrust::device_vector<uint8_t> fp4_cache;   // index_pages 68-byte indexer pages of kPage
  int64_t bf16_slots = int64_t{1} << 21;
  int64_t index_pages = (int64_t{1} << 21) / kPage;

  IndexKFp8Cache fp8(ScaleRule rule) {
    return {thrust::raw_pointer_cast(fp8_cache.data()), index_pages, kPage,
            layout::min_page_stride(IndexKFormat::kFp8, kPage, 128), 128, rule};
  }
  IndexKFp4Cache fp4(Fp4Ties ties) {
    return {thrust::raw_pointer_cast(fp4_cache.data()), index_pages, kPage,
            layout::min_page_stride(IndexKFormat::kFp4, kPage, 128), 128, ties};
  }
};
Pool& pool();

// One node of a row: its input set, slots, the padded batch (n real rows, read from the device)
// and the launch options; `subject` is the store a baseline stands beside.
struct StoreOp;
struct Node {
  const uint16_t* in;        // [n, input_width] bf16
  int64_t input_width;
  const uint16_t* index_in;  // [n, 128] bf16 after it (rows with an index-K input)
  const int64_t* slots;
  int64_t n;
  Batch batch;
  SlotMapping slot_map;
  SlotMapping table_map;     // the same slots through the pool's page table (kTablePage)
  LaunchOptions launch;
  const StoreOp* subject;
  cudaStream_t stream;
};

// A store or a baseline: one family file's entry.
struct StoreOp {
  int order;                  // rows run in this order (a baseline's place does not matter)
  const char* name;
  int64_t bytes_per_row;      // input + slot read, record written
  int64_t input_width;        // bf16 elements per row of the main input
  bool index_input;           // plus a [n, 128] index-K input
  const char* baseline;       // x_baseline's op, or nullptr
  bool pdl_capable;
  const char* naive;          // x_naive's node, or nullptr
  int64_t (*capacity)();      // slots of the cache it writes
  Status (*issue)(const Node& node);
  int32_t k_width = 0;        // paged K/V: K and V widths of a row, for the naive K/V baselines
  int32_t v_width = 0;
  int64_t max_rows = 0;       // the largest n it runs (0: every size)
};

// Registers a family: its ops and its caches' allocation (run once, after the pool).
struct Family {
  Family(std::vector<StoreOp> ops, void (*allocate)());
};

// A cache of `bytes` bytes poisoned with 0xab, for a family's allocate().
uint8_t* poisoned_cache(thrust::device_vector<uint8_t>& buffer, size_t bytes);

Status cuda_status(cudaError_t err);
// A row's own refusal (kErrorNotSupported): the row is skipped with `why` as its error.
Status refuse(const char* why);

// The fp8 index-K store of `k` ([n, 128] bf16) into the pool's fp8 cache with `rule`.
inline IndexKFp8Params index_k_fp8_params(const Node& node, const uint16_t* k, ScaleRule rule) {
  IndexKFp8Params p;
  p.batch = node.batch;
  p.slots = node.slot_map;
  p.k = k;
  p.k_row_stride = 128;
  p.cache = pool().fp8(rule);
  p.launch = node.launch;
  return p;
}

}  // namespace cachestore::bench
