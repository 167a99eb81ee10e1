// The paged K/V rows: Llama-3-8B/70B's H = 8, D = 128 (input [K | V] per token, 2048 wide) in
// NHD and HND, 16-bit, fp8 e4m3 or NVFP4 with per-head scales, and vLLM's 576-wide MLA rows (H = 1,
// K = kv_c 512, V = k_pe 64); P = 16 (vLLM's default block). Beside them: the two naive
// scatters an engine composes (K, then V) and, for x_naive, the K scatter alone. The general
// kernel's rows: fp32 inputs (the same H and D, half the slots), a head dim of 100 (4 values a
// thread), vLLM's paged-attention layout (K chunked by 16 bytes, V d-major).
#include <cmath>
#include <vector>

#include "harness.cuh"
#include "naive_rope.cuh"
#include "naive_scatter.cuh"
#include "reference/conversions.h"

namespace cachestore::bench {
namespace {

constexpr int32_t kKvHeads = 8, kKvDim = 128, kKvPage = 16;
static_assert(kKvPage == kTablePage, "the page-table row reads the pool's table of kTablePage pages");
constexpr int64_t kKvSlots = int64_t{1} << 19;  // 1 GiB per 16-bit cache of H = 8, D = 128
constexpr int32_t kHeadsWidth = kKvHeads * kKvDim;

// The RoPE rows: Llama-3-8B's attention, H_q = 32 over H_kv = 8, D = rotary_dim = 128 (NeoX), a
// bf16 cos/sin cache of kRopePositions positions; input [Q | K | V] per token (6144 wide), Q
// rotated in place.
constexpr int32_t kQHeads = 32, kRopePositions = 4096;
constexpr int32_t kQkvWidth = (kQHeads + 2 * kKvHeads) * kKvDim;

struct Caches {
  thrust::device_vector<uint8_t> k, v;  // 16-bit, fp8 or nvfp4 alike
  thrust::device_vector<int64_t> positions;  // [kMaxRows], in the cos/sin cache
  thrust::device_vector<uint16_t> cos_sin;   // [kRopePositions, 128] bf16
  thrust::device_vector<uint8_t> k_blocks, v_blocks;  // nvfp4's e4m3 block scales; the
                                                      // per-token-head fp32 scales
  thrust::device_vector<float> scales;  // K's then V's, one per head
};
Caches* g = nullptr;

int64_t kv_capacity() { return kKvSlots; }
int64_t kv_fp32_capacity() { return kKvSlots / 2; }  // the same bytes as the 16-bit caches
int64_t mla576_capacity() { return kKvSlots * kKvHeads * kKvDim / layout::kMlaRowDim; }

// A node's batch, slots, page size and launch options, into a cache of `type`.
PagedKvParams node_params(const Node& node, KvCacheType type) {
  PagedKvParams kv;
  kv.batch = node.batch;
  kv.slots = node.slot_map;
  kv.page_size = kKvPage;
  kv.launch = node.launch;
  kv.cache_type = type;
  return kv;
}

// The H = 8 rows' params without their cache views: input [K | V] of `input` type, head dim
// `dim`, `slots` of capacity.
PagedKvParams heads_params(const Node& node, KvCacheType type, KvDataType input, int32_t dim,
                           int64_t slots) {
  PagedKvParams kv = node_params(node, type);
  kv.num_heads = kKvHeads;
  kv.input_type = input;
  kv.num_pages = slots / kKvPage;
  const int64_t in_bytes = input == KvDataType::kFp32 ? 4 : 2;
  const auto* in = reinterpret_cast<const uint8_t*>(node.in);
  kv.k = {in, 2 * kKvHeads * dim, dim, dim};
  kv.v = {in + in_bytes * kKvHeads * dim, 2 * kKvHeads * dim, dim, dim};
  return kv;
}

// The store of an H = 8 row of head dim `dim` (input [K | V] of `input` type) in `st`'s layout,
// d contiguous unless given.
Status store_heads(const Node& node, const layout::KvStrides& st, KvCacheType type,
                   KvDataType input = KvDataType::kBf16, int32_t dim = kKvDim,
                   int64_t slots = kKvSlots,
                   layout::KvDimLayout k_dim = layout::kKvContiguousDim,
                   layout::KvStrides v_st = {}, layout::KvDimLayout v_dim = layout::kKvContiguousDim) {
  PagedKvParams kv = heads_params(node, type, input, dim, slots);
  if (v_st.page == 0) v_st = st;
  const float* scales = thrust::raw_pointer_cast(g->scales.data());
  kv.k_cache = {thrust::raw_pointer_cast(g->k.data()), st.page, st.entry, st.head, scales, 1,
                k_dim.chunk, k_dim.chunk_stride, k_dim.dim_stride};
  kv.v_cache = {thrust::raw_pointer_cast(g->v.data()), v_st.page, v_st.entry, v_st.head,
                scales + kKvHeads, 1, v_dim.chunk, v_dim.chunk_stride, v_dim.dim_stride};
  return store_paged_kv(kv, node.stream);
}

// The NVFP4 NHD caches of the H = 8, D = 128 rows (FlashInfer's form): D / 2 code bytes and
// D / 16 scale bytes an entry, per-head global scales.
Status store_nvfp4(const Node& node) {
  const layout::KvStrides st = layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim / 2);
  const layout::KvStrides bs = layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim / 16);
  PagedKvParams kv =
      heads_params(node, KvCacheType::kNvfp4, KvDataType::kBf16, kKvDim, kKvSlots);
  const float* scales = thrust::raw_pointer_cast(g->scales.data());
  const auto view = [&](thrust::device_vector<uint8_t>& data,
                        thrust::device_vector<uint8_t>& blocks, const float* scale) {
    KvCacheView c{thrust::raw_pointer_cast(data.data()), st.page, st.entry, st.head, scale, 1};
    c.block_scales = thrust::raw_pointer_cast(blocks.data());
    c.block_scale_page_stride = bs.page;
    c.block_scale_entry_stride = bs.entry;
    c.block_scale_head_stride = bs.head;
    return c;
  };
  kv.k_cache = view(g->k, g->k_blocks, scales);
  kv.v_cache = view(g->v, g->v_blocks, scales + kKvHeads);
  return store_paged_kv(kv, node.stream);
}

// vLLM's fp8_per_token_head NHD caches of the H = 8, D = 128 rows: fp8 entries and an fp32
// scale of each (slot, head) written into [slots, H] views (in the block-scale buffers).
Status store_token_head(const Node& node) {
  const layout::KvStrides st = layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim);
  const layout::KvStrides ss = layout::kv_nhd_strides(kKvPage, kKvHeads, 1);
  PagedKvParams kv = heads_params(node, KvCacheType::kFp8E4m3PerTokenHead, KvDataType::kBf16,
                                  kKvDim, kKvSlots);
  const auto view = [&](thrust::device_vector<uint8_t>& data,
                        thrust::device_vector<uint8_t>& scales) {
    KvCacheView c{thrust::raw_pointer_cast(data.data()), st.page, st.entry, st.head};
    c.block_scales = thrust::raw_pointer_cast(scales.data());
    c.block_scale_page_stride = ss.page;
    c.block_scale_entry_stride = ss.entry;
    c.block_scale_head_stride = ss.head;
    return c;
  };
  kv.k_cache = view(g->k, g->k_blocks);
  kv.v_cache = view(g->v, g->v_blocks);
  return store_paged_kv(kv, node.stream);
}

// The fused store of a [Q | K | V] row: Q rotated in place, K rotated and stored with V (NHD).
Status store_rope(const Node& node, KvCacheType type) {
  PagedKvParams kv = heads_params(node, type, KvDataType::kBf16, kKvDim, kKvSlots);
  const layout::KvStrides st = layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim);
  const float* scales = thrust::raw_pointer_cast(g->scales.data());
  auto* q = const_cast<uint16_t*>(node.in);
  kv.k = {q + kQHeads * kKvDim, kQkvWidth, kKvDim, kKvDim};
  kv.v = {q + (kQHeads + kKvHeads) * kKvDim, kQkvWidth, kKvDim, kKvDim};
  kv.k_cache = {thrust::raw_pointer_cast(g->k.data()), st.page, st.entry, st.head, scales, 1};
  kv.v_cache = {thrust::raw_pointer_cast(g->v.data()), st.page, st.entry, st.head,
                scales + kKvHeads, 1};
  RotaryEmbedding& r = kv.rope;
  r.positions = thrust::raw_pointer_cast(g->positions.data());
  r.positions_type = SlotType::kInt64;
  r.cos_sin_cache = thrust::raw_pointer_cast(g->cos_sin.data());
  r.cos_sin_type = KvDataType::kBf16;
  r.max_position = kRopePositions;
  r.rotary_dim = kKvDim;
  r.rounding = RopeRounding::kFp32;  // the lean rotary node's arithmetic
  r.num_query_heads = kQHeads;
  r.query = q;
  r.query_token_stride = kQkvWidth;
  r.query_head_stride = kKvDim;
  return store_paged_kv(kv, node.stream);
}

// What an engine runs without the fusion: the rotary kernel on [Q | K] in place, then one
// K + V scatter node (reshape_and_cache_flash's form), both lean.
Status rope_pair(const Node& node) {
  auto* qkv = const_cast<uint16_t*>(node.in);
  const Status rope = cuda_status(test::lean_rope(
      qkv, kQkvWidth, kQHeads + kKvHeads, kKvDim, thrust::raw_pointer_cast(g->positions.data()),
      thrust::raw_pointer_cast(g->cos_sin.data()), node.n, node.stream));
  if (rope != Status::kSuccess) return rope;
  return cuda_status(test::lean_naive_kv_scatter(
      qkv + kQHeads * kKvDim, kQkvWidth, kHeadsWidth, node.slots,
      thrust::raw_pointer_cast(g->k.data()), thrust::raw_pointer_cast(g->v.data()), node.n,
      kHeadsWidth, node.stream));
}

// vLLM's concat_and_cache_mla rows (H = 1, K = kv_c 512, V = k_pe 64, 576-element entries) in a
// cache of `type`; fp8 takes one per-tensor scale for both parts, as vLLM's k_scale.
Status store_mla576(const Node& node, KvCacheType type) {
  const layout::KvStrides st = layout::kv_mla_row_strides(kKvPage);
  const int64_t element = type == KvCacheType::kAuto ? 2 : 1;
  uint8_t* k_cache = thrust::raw_pointer_cast(g->k.data());
  const float* scale = thrust::raw_pointer_cast(g->scales.data());
  PagedKvParams kv = node_params(node, type);
  kv.num_pages = static_cast<int64_t>(g->k.size()) / element / st.page;
  kv.k = {node.in, layout::kMlaRowDim, 0, layout::kMlaKvcDim};
  kv.v = {node.in + layout::kMlaKvcDim, layout::kMlaRowDim, 0, 64};
  kv.k_cache = {k_cache, st.page, st.entry, st.head, scale, 0};
  kv.v_cache = {k_cache + element * layout::kMlaKvcDim, st.page, st.entry, st.head, scale, 0};
  return store_paged_kv(kv, node.stream);
}

// vLLM's concat_and_cache_mla_rope_fused at DeepSeek's TP 8: rows [kv_c 512 | k_pe 64 | q_pe 16 x
// 64], k_pe and q_pe rotated in place (GPT-J, each operation rounded to bf16, as vLLM computes),
// the rotated k_pe stored after kv_c in 576-element entries (K = k_pe, V = kv_c, one head).
constexpr int32_t kMlaRopeQHeads = 16;
constexpr int64_t kMla576RopeWidth = layout::kMlaRowDim + kMlaRopeQHeads * 64;
Status store_mla576_rope(const Node& node, KvCacheType type) {
  const layout::KvStrides st = layout::kv_mla_row_strides(kKvPage);
  const int64_t element = type == KvCacheType::kAuto ? 2 : 1;
  uint8_t* cache = thrust::raw_pointer_cast(g->k.data());
  const float* scale = thrust::raw_pointer_cast(g->scales.data());
  auto* row = const_cast<uint16_t*>(node.in);
  PagedKvParams kv = node_params(node, type);
  kv.num_pages = static_cast<int64_t>(g->k.size()) / element / st.page;
  kv.k = {row + layout::kMlaKvcDim, kMla576RopeWidth, 0, 64};
  kv.v = {row, kMla576RopeWidth, 0, layout::kMlaKvcDim};
  kv.k_cache = {cache + element * layout::kMlaKvcDim, st.page, st.entry, st.head, scale, 0};
  kv.v_cache = {cache, st.page, st.entry, st.head, scale, 0};
  RotaryEmbedding& r = kv.rope;
  r.positions = thrust::raw_pointer_cast(g->positions.data());
  r.positions_type = SlotType::kInt64;
  r.cos_sin_cache = thrust::raw_pointer_cast(g->cos_sin.data());
  r.cos_sin_type = KvDataType::kBf16;
  r.cos_sin_stride = kKvDim;  // the 128-wide table's rows, its first 64 columns
  r.max_position = kRopePositions;
  r.rotary_dim = 64;
  r.style = RopeStyle::kGptj;
  r.rounding = RopeRounding::kInputType;
  r.num_query_heads = kMlaRopeQHeads;
  r.query = row + layout::kMlaRowDim;
  r.query_token_stride = kMla576RopeWidth;
  r.query_head_stride = 64;
  r.key_out = row + layout::kMlaKvcDim;  // in place, as vLLM rotates k_pe
  r.key_out_token_stride = kMla576RopeWidth;
  return store_paged_kv(kv, node.stream);
}

// vLLM's paged-attention layout of the H = 8, D = 128 caches (x = 16 bytes of the cache type).
Status store_paged_attention(const Node& node, KvCacheType type) {
  const int32_t x = layout::kv_paged_attention_x(type == KvCacheType::kAuto ? 2 : 1);
  return store_heads(node, layout::kv_paged_attention_key_strides(kKvPage, kKvHeads, kKvDim, x),
                     type, KvDataType::kBf16, kKvDim, kKvSlots,
                     layout::kv_paged_attention_key_dim(kKvPage, x),
                     layout::kv_paged_attention_value_strides(kKvPage, kKvHeads, kKvDim),
                     layout::kv_paged_attention_value_dim(kKvPage));
}

// What an engine composes: k_cache.view(-1, H*D)[slots] = k, then the same for v (`with_v`).
Status naive_kv(const Node& node, bool with_v) {
  const StoreOp& s = *node.subject;
  const Status k = cuda_status(test::lean_naive_scatter(
      node.in, s.input_width, node.slots, thrust::raw_pointer_cast(g->k.data()), node.n,
      s.k_width, node.stream));
  if (k != Status::kSuccess || !with_v) return k;
  return cuda_status(test::lean_naive_scatter(node.in + s.k_width, s.input_width, node.slots,
                                              thrust::raw_pointer_cast(g->v.data()), node.n,
                                              s.v_width, node.stream));
}

const Family kPagedKv(
    {
        {5, "naive_kv_two_nodes", 8200, 2048, false, nullptr, false, nullptr, kv_capacity,
         [](const Node& node) { return naive_kv(node, true); }, kHeadsWidth, kHeadsWidth},
        {6, "naive_k_one_node", 4104, 2048, false, nullptr, false, nullptr, kv_capacity,
         [](const Node& node) { return naive_kv(node, false); }, kHeadsWidth, kHeadsWidth},
        {19, "paged_kv_nhd", 8200, 2048, false, "naive_kv_two_nodes", true, "naive_k_one_node",
         kv_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kAuto);
         },
         kHeadsWidth, kHeadsWidth},
        {20, "paged_kv_hnd", 8200, 2048, false, "naive_kv_two_nodes", true, "naive_k_one_node",
         kv_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_hnd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kAuto);
         },
         kHeadsWidth, kHeadsWidth},
        {21, "paged_kv_nhd_fp8", 6152, 2048, false, "naive_kv_two_nodes", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kFp8E4m3);
         },
         kHeadsWidth, kHeadsWidth},
        {22, "paged_kv_hnd_fp8", 6152, 2048, false, "naive_kv_two_nodes", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_hnd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kFp8E4m3);
         },
         kHeadsWidth, kHeadsWidth},
        {23, "paged_kv_mla576", 2312, 576, false, "naive_kv_two_nodes", true, "naive_k_one_node",
         mla576_capacity,
         [](const Node& node) { return store_mla576(node, KvCacheType::kAuto); },
         layout::kMlaKvcDim, 64},
        // The same rows into an fp8 e4m3 cache (vLLM's kv_cache_dtype "fp8"): 576 bytes written.
        {23, "paged_kv_mla576_fp8", 1736, 576, false, "naive_kv_two_nodes", true,
         "naive_k_one_node", mla576_capacity,
         [](const Node& node) { return store_mla576(node, KvCacheType::kFp8E4m3); },
         layout::kMlaKvcDim, 64},
        // The same rows with k_pe and q_pe rotated (vLLM's fused RoPE form): kv_c read (1024
        // bytes), k_pe read and written (256), q_pe read and written (4096), the slot and the
        // position, the entry written (1152 bytes; fp8 576).
        {23, "paged_kv_mla576_rope", 6544, kMla576RopeWidth, false, nullptr, true,
         "naive_k_one_node", mla576_capacity,
         [](const Node& node) { return store_mla576_rope(node, KvCacheType::kAuto); },
         layout::kMlaKvcDim, 64},
        {23, "paged_kv_mla576_fp8_rope", 5968, kMla576RopeWidth, false, nullptr, true,
         "naive_k_one_node", mla576_capacity,
         [](const Node& node) { return store_mla576_rope(node, KvCacheType::kFp8E4m3); },
         layout::kMlaKvcDim, 64},
        {24, "paged_kv_nhd_fp32", 16392, 4096, false, nullptr, true, nullptr, kv_fp32_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kAuto, KvDataType::kFp32, kKvDim, kKvSlots / 2);
         }},
        {25, "paged_kv_nhd_fp32_fp8", 10248, 4096, false, nullptr, true, nullptr,
         kv_fp32_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kFp8E4m3, KvDataType::kFp32, kKvDim, kKvSlots / 2);
         }},
        {26, "paged_kv_nhd_d100", 6408, 1600, false, nullptr, true, nullptr, kv_capacity,
         [](const Node& node) {
           return store_heads(node, layout::kv_nhd_strides(kKvPage, kKvHeads, 100),
                              KvCacheType::kAuto, KvDataType::kBf16, 100);
         }},
        {27, "paged_kv_paged_attention", 8200, 2048, false, "naive_kv_two_nodes", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) { return store_paged_attention(node, KvCacheType::kAuto); },
         kHeadsWidth, kHeadsWidth},
        {28, "paged_kv_paged_attention_fp8", 6152, 2048, false, "naive_kv_two_nodes", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) { return store_paged_attention(node, KvCacheType::kFp8E4m3); },
         kHeadsWidth, kHeadsWidth},
        // paged_kv_nhd with its slots from a page table (batch index, position, the request's
        // indptr pair and page id: 20 bytes a row in place of the 8-byte slot), beside the
        // slot-mapping store in the same row.
        {29, "paged_kv_nhd_page_table", 8212, 2048, false, "paged_kv_nhd", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) {
           Node table = node;
           table.slot_map = node.table_map;
           return store_heads(table, layout::kv_nhd_strides(kKvPage, kKvHeads, kKvDim),
                              KvCacheType::kAuto);
         },
         kHeadsWidth, kHeadsWidth},
        // NVFP4 beside the fp8 store of the same rows: 4096 input bytes and the slot, 1024 code
        // bytes and 128 scale bytes written.
        {30, "paged_kv_nhd_nvfp4", 5256, 2048, false, "paged_kv_nhd_fp8", true,
         "naive_k_one_node", kv_capacity, store_nvfp4, kHeadsWidth, kHeadsWidth},
        // Per-token-head fp8 beside the per-tensor fp8 store of the same rows: 4096 input
        // bytes and the slot, 2048 fp8 bytes and 64 scale bytes written.
        {30, "paged_kv_nhd_fp8_per_token_head", 6216, 2048, false, "paged_kv_nhd_fp8", true,
         "naive_k_one_node", kv_capacity, store_token_head, kHeadsWidth, kHeadsWidth},
        // RoPE fused into the store: Q (8192 bytes) read and written, K and V read (4096) and
        // written, the slot and the position (cos/sin rows stay in the L2). Beside the lean
        // two-node pair, and beside the store without RoPE of the same K/V.
        {31, "rope_pair_two_nodes", 24592, kQkvWidth, false, nullptr, false, nullptr,
         kv_capacity, rope_pair, kHeadsWidth, kHeadsWidth},
        {32, "paged_kv_nhd_rope", 24592, kQkvWidth, false, "rope_pair_two_nodes", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) { return store_rope(node, KvCacheType::kAuto); }, kHeadsWidth,
         kHeadsWidth},
        {33, "paged_kv_nhd_rope_vs_store", 24592, kQkvWidth, false, "paged_kv_nhd", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) { return store_rope(node, KvCacheType::kAuto); }, kHeadsWidth,
         kHeadsWidth},
        // fp8 K/V (Q stays bf16): 2048 fewer bytes written.
        {34, "paged_kv_nhd_fp8_rope", 22544, kQkvWidth, false, "paged_kv_nhd_fp8", true,
         "naive_k_one_node", kv_capacity,
         [](const Node& node) { return store_rope(node, KvCacheType::kFp8E4m3); }, kHeadsWidth,
         kHeadsWidth},
    },
    [] {
      g = new Caches;
      poisoned_cache(g->k, kKvSlots * kHeadsWidth * 2);
      poisoned_cache(g->v, kKvSlots * kHeadsWidth * 2);
      poisoned_cache(g->k_blocks, kKvSlots * kKvHeads * (kKvDim / 16));
      poisoned_cache(g->v_blocks, kKvSlots * kKvHeads * (kKvDim / 16));
      g->scales.assign(2 * kKvHeads, 0.0173f);
      std::vector<int64_t> positions(kMaxRows);
      for (int64_t i = 0; i < kMaxRows; ++i) positions[i] = (i * 2654435761) % kRopePositions;
      g->positions.assign(positions.begin(), positions.end());
      std::vector<uint16_t> cos_sin(static_cast<size_t>(kRopePositions) * kKvDim);
      for (int32_t pos = 0; pos < kRopePositions; ++pos) {
        for (int32_t i = 0; i < kKvDim / 2; ++i) {
          const double angle = pos * std::pow(500000.0, -2.0 * i / kKvDim);
          const float cs[2] = {static_cast<float>(std::cos(angle)),
                               static_cast<float>(std::sin(angle))};
          for (int k = 0; k < 2; ++k)
            cos_sin[static_cast<size_t>(pos) * kKvDim + k * kKvDim / 2 + i] =
                reference::bf16_bits_rn(cs[k]);
        }
      }
      g->cos_sin.assign(cos_sin.begin(), cos_sin.end());
    });

}  // namespace
}  // namespace cachestore::bench
