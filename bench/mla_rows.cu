// The MLA rows: FlashMLA V4 and V3.2 (either scale rule), DeepSeek V4.1 and V4.1 FP4, alone and
// with the index-K fused (beside the two separate stores it replaces), pages of kPage slots.
#include <cstring>

#include "harness.cuh"
#include "layout_pattern.cuh"
#include "naive_rope.cuh"
#include "rope_operands.h"

namespace cachestore::bench {
namespace {

constexpr int64_t kMlaPages = (int64_t{1} << 20) / kPage;
// One cache per layout, allocated with the pool (never freed: the process ends with them).
thrust::device_vector<uint8_t>* g_caches = nullptr;
// RoPE rows: DeepSeek at TP 8 (16 local Q heads), input [NoPE 448 | RoPE 64 | q_pe 16 x 64] per
// token, positions in a bf16 cos/sin cache [kMlaRopePositions, 64].
constexpr int32_t kMlaQHeads = 16, kMlaRopePositions = 4096;
constexpr int64_t kMlaRopeWidth = 512 + kMlaQHeads * 64;
thrust::device_vector<int64_t>* g_positions = nullptr;
thrust::device_vector<uint8_t>* g_cos_sin = nullptr;
// The K-only rows (DeepSeek's GPT-J pairs, fp32 cos/sin as SGLang's freqs_cis): a table of
// positions, and a cos/sin row a row ([kMaxRows, 64] fp32, gathered by position once a step).
thrust::device_vector<uint8_t>* g_cos_sin_fp32 = nullptr;
thrust::device_vector<uint8_t>* g_cos_sin_rows = nullptr;

int64_t mla_capacity() { return kMlaPages * kPage; }

// The store of `layout` on a row whose input is [n, input_width]: NoPE first, then RoPE.
FusedStoreParams mla_params(const Node& node, MlaLayout layout, ScaleRule rule) {
  FusedStoreParams p;
  p.batch = node.batch;
  p.kv_slots = node.slot_map;
  p.nope = node.in;
  p.nope_row_stride = node.input_width;
  p.rope = node.in + layout::mla_layout(layout).nope_dim;
  p.rope_row_stride = node.input_width;
  p.kv_cache = {layout, thrust::raw_pointer_cast(g_caches[static_cast<int>(layout)].data()),
                kMlaPages, kPage, layout::min_page_stride(layout, kPage), rule};
  p.launch = node.launch;
  return p;
}

// The same with the fp8 (or fp4) index-K of the row's [n, 128] index input fused.
FusedStoreParams fused_params(const Node& node, MlaLayout layout, IndexKFormat format) {
  FusedStoreParams p = mla_params(node, layout, ScaleRule::kPow2);
  p.index_k = node.index_in;
  p.index_k_row_stride = 128;
  p.index_slots = node.slot_map;
  p.index_format = format;
  if (format == IndexKFormat::kFp8) p.index_cache = pool().fp8(ScaleRule::kAmax);
  else p.index_fp4_cache = pool().fp4(Fp4Ties::kToEven);
  return p;
}

// The V4.1 store of a RoPE row with its RoPE part and q_pe rotated in the same launch (NeoX and
// fp32 arithmetic: the lean rotary node's).
Status mla_rope(const Node& node) {
  FusedStoreParams p = mla_params(node, MlaLayout::kV41, ScaleRule::kPow2);
  RotaryEmbedding& r = p.rotary;
  r.positions = thrust::raw_pointer_cast(g_positions->data());
  r.positions_type = SlotType::kInt64;
  r.cos_sin_cache = thrust::raw_pointer_cast(g_cos_sin->data());
  r.cos_sin_type = KvDataType::kBf16;
  r.max_position = kMlaRopePositions;
  r.rotary_dim = 64;
  r.rounding = RopeRounding::kFp32;
  r.num_query_heads = kMlaQHeads;
  r.query = const_cast<uint16_t*>(node.in) + 512;
  r.query_token_stride = node.input_width;
  r.query_head_stride = 64;
  return fused_store_cache(p, node.stream);
}

// The V4.1 store with its RoPE tail rotated and no Q (the record only): GPT-J, fp32 cos/sin,
// at each row's position in a table or in the row's own cos/sin row of (cos, sin) pairs
// (SGLang's freqs_cis and its fp32 rotation: its fused_store_flashmla_cache_v41 bytes).
Status mla_rope_k(const Node& node, RopeCosSinRows rows) {
  FusedStoreParams p = mla_params(node, MlaLayout::kV41, ScaleRule::kPow2);
  RotaryEmbedding& r = p.rotary;
  const bool by_row = rows == RopeCosSinRows::kByRow;
  r.positions = by_row ? nullptr : thrust::raw_pointer_cast(g_positions->data());
  r.positions_type = SlotType::kInt64;
  r.cos_sin_rows = rows;
  r.cos_sin_layout = by_row ? RopeCosSinLayout::kInterleaved : RopeCosSinLayout::kHalves;
  r.cos_sin_cache = thrust::raw_pointer_cast((by_row ? g_cos_sin_rows : g_cos_sin_fp32)->data());
  r.cos_sin_type = KvDataType::kFp32;
  r.max_position = by_row ? kMaxRows : kMlaRopePositions;
  r.rotary_dim = 64;
  r.style = RopeStyle::kGptj;
  r.rounding = RopeRounding::kFp32;
  return fused_store_cache(p, node.stream);
}

// What an engine runs without the fusion: the rotary kernel on [RoPE | q_pe] in place, then the
// V4.1 store.
Status mla_rope_pair(const Node& node) {
  const Status rope = cuda_status(test::lean_rope(
      const_cast<uint16_t*>(node.in) + 448, node.input_width, 1 + kMlaQHeads, 64,
      thrust::raw_pointer_cast(g_positions->data()),
      reinterpret_cast<const uint16_t*>(thrust::raw_pointer_cast(g_cos_sin->data())), node.n,
      node.stream));
  if (rope != Status::kSuccess) return rope;
  return fused_store_cache(mla_params(node, MlaLayout::kV41, ScaleRule::kPow2), node.stream);
}

// The write pattern of `layout`'s records at the row's slots, without quantizing
// (layout_pattern.cuh): the control of the store's % of copy.
Status mla_pattern(const Node& node, MlaLayout layout) {
  return cuda_status(layout_pattern(
      node.in, static_cast<int32_t>(node.input_width), node.slots,
      thrust::raw_pointer_cast(g_caches[static_cast<int>(layout)].data()), node.n,
      kPageShift, layout::min_page_stride(layout, kPage), layout::mla_layout(layout).rows,
      node.stream));
}

// What the fused store replaces: the MLA store, then the fp8 index-K store.
Status separate(const Node& node, MlaLayout layout) {
  const Status kv = fused_store_cache(mla_params(node, layout, ScaleRule::kPow2), node.stream);
  if (kv != Status::kSuccess) return kv;
  return store_index_k_fp8(index_k_fp8_params(node, node.index_in, ScaleRule::kAmax), node.stream);
}

const Family kMla(
    {
        {3, "separate_v4_plus_index", 2004, 512, true, nullptr, true, nullptr, mla_capacity,
         [](const Node& node) { return separate(node, MlaLayout::kV4); }},
        {4, "separate_v32_plus_index", 2204, 576, true, nullptr, true, nullptr, mla_capacity,
         [](const Node& node) { return separate(node, MlaLayout::kV32); }},
        {10, "mla_v4", 1616, 512, false, nullptr, true, "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(mla_params(node, MlaLayout::kV4, ScaleRule::kPow2),
                                    node.stream);
         }},
        {11, "mla_v32", 1816, 576, false, nullptr, true, "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(mla_params(node, MlaLayout::kV32, ScaleRule::kPow2),
                                    node.stream);
         }},
        {12, "mla_v32_amax", 1816, 576, false, nullptr, true, "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(mla_params(node, MlaLayout::kV32, ScaleRule::kAmax),
                                    node.stream);
         }},
        {13, "fused_v4_index", 2004, 512, true, "separate_v4_plus_index", true,
         "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(fused_params(node, MlaLayout::kV4, IndexKFormat::kFp8),
                                    node.stream);
         }},
        {14, "fused_v32_index", 2204, 576, true, "separate_v32_plus_index", true,
         "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(fused_params(node, MlaLayout::kV32, IndexKFormat::kFp8),
                                    node.stream);
         }},
        {16, "mla_v41", 1560, 512, false, nullptr, true, "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(mla_params(node, MlaLayout::kV41, ScaleRule::kPow2),
                                    node.stream);
         }},
        {17, "mla_v41_fp4", 1320, 512, false, nullptr, true, "naive_bf16_scatter", mla_capacity,
         [](const Node& node) {
           return fused_store_cache(mla_params(node, MlaLayout::kV41Fp4, ScaleRule::kPow2),
                                    node.stream);
         }},
        {18, "fused_v41_fp4_index", 1884, 512, true, nullptr, true, "naive_bf16_scatter",
         mla_capacity,
         [](const Node& node) {
           return fused_store_cache(fused_params(node, MlaLayout::kV41, IndexKFormat::kFp4),
                                    node.stream);
         }},
        // Each layout's record written at the store's slots from the store's input bytes,
        // without its arithmetic: what the layout's addresses alone reach.
        {38, "pattern_mla_v4", 1616, 512, false, nullptr, false, nullptr, mla_capacity,
         [](const Node& node) { return mla_pattern(node, MlaLayout::kV4); }},
        {38, "pattern_mla_v32", 1816, 576, false, nullptr, false, nullptr, mla_capacity,
         [](const Node& node) { return mla_pattern(node, MlaLayout::kV32); }},
        {38, "pattern_mla_v41", 1560, 512, false, nullptr, false, nullptr, mla_capacity,
         [](const Node& node) { return mla_pattern(node, MlaLayout::kV41); }},
        {38, "pattern_mla_v41_fp4", 1320, 512, false, nullptr, false, nullptr, mla_capacity,
         [](const Node& node) { return mla_pattern(node, MlaLayout::kV41Fp4); }},
        // RoPE fused into the V4.1 store: NoPE and RoPE read (1024 bytes), q_pe read and written
        // (4096), the slot and the position, the record written (528). Beside the lean pair and
        // beside the store without RoPE.
        {35, "mla_rope_pair_two_nodes", 5664, kMlaRopeWidth, false, nullptr, false, nullptr,
         mla_capacity, mla_rope_pair},
        {36, "mla_v41_rope", 5664, kMlaRopeWidth, false, "mla_rope_pair_two_nodes", true,
         "naive_bf16_scatter", mla_capacity, mla_rope},
        {37, "mla_v41_rope_vs_store", 5664, kMlaRopeWidth, false, "mla_v41", true,
         "naive_bf16_scatter", mla_capacity, mla_rope},
        // The RoPE tail rotated in the record alone (no Q): NoPE and RoPE read (1024 bytes),
        // the slot, the record written (528); by position (8 bytes, the table in L2) or by a
        // cos/sin row a row (256 bytes read), beside the store without RoPE.
        {37, "mla_v41_rope_k", 1568, 512, false, "mla_v41", true, "naive_bf16_scatter",
         mla_capacity,
         [](const Node& node) { return mla_rope_k(node, RopeCosSinRows::kByPosition); }},
        {37, "mla_v41_rope_k_by_row", 1816, 512, false, "mla_v41", true, "naive_bf16_scatter",
         mla_capacity,
         [](const Node& node) { return mla_rope_k(node, RopeCosSinRows::kByRow); }},
    },
    [] {
      g_caches = new thrust::device_vector<uint8_t>[layout::kNumMlaLayouts];
      for (int32_t l = 0; l < layout::kNumMlaLayouts; ++l)
        poisoned_cache(g_caches[l],
                       kMlaPages * layout::min_page_stride(static_cast<MlaLayout>(l), kPage));
      std::vector<int64_t> positions(kMaxRows);
      for (int64_t i = 0; i < kMaxRows; ++i) positions[i] = (i * 2654435761) % kMlaRopePositions;
      g_positions = new thrust::device_vector<int64_t>(positions.begin(), positions.end());
      const std::vector<uint8_t> cos_sin =
          test::cos_sin_table(KvDataType::kBf16, kMlaRopePositions, 64);
      g_cos_sin = new thrust::device_vector<uint8_t>(cos_sin.begin(), cos_sin.end());
      const std::vector<uint8_t> fp32 =
          test::cos_sin_table(KvDataType::kFp32, kMlaRopePositions, 64);
      g_cos_sin_fp32 = new thrust::device_vector<uint8_t>(fp32.begin(), fp32.end());
      std::vector<uint8_t> rows(static_cast<size_t>(kMaxRows) * 64 * 4);
      for (int64_t i = 0; i < kMaxRows; ++i)  // row i: position i's cos/sin
        std::memcpy(rows.data() + i * 256, fp32.data() + positions[i] * 256, 256);
      g_cos_sin_rows = new thrust::device_vector<uint8_t>(rows.begin(), rows.end());
    });

}  // namespace
}  // namespace cachestore::bench
