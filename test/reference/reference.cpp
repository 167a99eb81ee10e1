#include "reference.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cachestore/layout.h"
#include "conversions.h"
#include "detail/guard.h"
#include "detail/scale_rules.h"

namespace cachestore::reference {
namespace {

using detail::bf16_bits_to_float;

// Row `row`'s slot: the mapping's, or the page table's lookup (cachestore.h PageTable) with
// INT64_MAX, past every capacity, for a real row whose lookup fails. A padded row (row >= n)
// reads nothing of the table: -1.
int64_t slot_at(const SlotMapping& slots, int64_t row, int64_t n, int64_t page_size) {
  if (slots.type == SlotType::kInt32) return static_cast<const int32_t*>(slots.data)[row];
  if (slots.type == SlotType::kInt64) return static_cast<const int64_t*>(slots.data)[row];
  if (row >= n) return -1;
  constexpr int64_t kFailed = INT64_MAX;
  const PageTable& t = slots.page_table;
  const int64_t b = static_cast<const int32_t*>(slots.data)[row];
  const int64_t pos = t.positions[row];
  if (b < 0 || b >= t.batch_size || pos < 0) return kFailed;
  const int64_t first = t.indptr[b], end = t.indptr[b + 1];
  if (first < 0 || first + pos / page_size >= end) return kFailed;
  const int64_t page = t.indices[first + pos / page_size];
  return page < 0 ? kFailed : page * page_size + pos % page_size;
}

// Runs `store(row, local_slot)` for every row the guard admits (detail::classify_owned_row, the
// kernels' guard), and counts the diagnostics. A paged cache (page_size > 0) applies page-owner
// sharding: the row lands at local slot (g / owner_size) * P + slot % P of page g = slot / P; the
// flat bf16 cache (page_size 0) ignores it. Owner sharding is checked independently of this by
// the owners' union equalling the unsharded store (gpu_paged_kv_test).
template <typename StoreRow>
void for_each_stored_row(const Batch& batch, const SlotMapping& slots, int64_t local_capacity,
                         int64_t page_size, StoreRow&& store) {
  int64_t n = batch.num_tokens;
  if (batch.num_tokens_non_padded != nullptr) {
    const int32_t raw = *batch.num_tokens_non_padded;
    if (raw < 0 && batch.diagnostics != nullptr) ++batch.diagnostics->negative_token_counts;
    n = detail::clamp_token_count(raw, batch.num_tokens);
  }
  const bool paged = page_size > 0;
  int32_t owner_log2 = 0;
  while (paged && (int64_t{1} << owner_log2) < slots.owner_size) ++owner_log2;
  const int32_t owner_rank = paged ? slots.owner_rank : 0;
  const int64_t capacity = local_capacity << owner_log2;
  for (int64_t row = 0; row < batch.num_tokens; ++row) {
    const int64_t slot = slot_at(slots, row, n, page_size);
    const int64_t page = paged && slot >= 0 ? slot / page_size : 0;
    switch (detail::classify_owned_row(row, n, slot, page, slots.reserved_slot, capacity,
                                       owner_log2, owner_rank)) {
      case detail::RowVerdict::kStore:
        store(row, paged ? (page >> owner_log2) * page_size + slot % page_size : slot);
        break;
      case detail::RowVerdict::kOutOfRange:
        if (batch.diagnostics != nullptr) ++batch.diagnostics->out_of_range_slots;
        break;
      case detail::RowVerdict::kSkip: break;
    }
  }
}

float block_amax(const uint16_t* values, int count) {
  float amax = 0.0f;
  for (int i = 0; i < count; ++i) amax = detail::amax_fold(amax, bf16_bits_to_float(values[i]));
  return amax;
}

const uint16_t* row_ptr(const void* base, int64_t row, int64_t stride) {
  return static_cast<const uint16_t*>(base) + row * stride;
}

}  // namespace

void quantize_index_k_row(const uint16_t* k, int32_t head_dim, ScaleRule rule, uint8_t* data,
                          float* scales) {
  const int32_t group = layout::index_k_format(IndexKFormat::kFp8).group;
  for (int32_t b = 0; b < head_dim / group; ++b) {
    const uint16_t* block = k + b * group;
    const float amax = block_amax(block, group);
    const float scale = rule == ScaleRule::kPow2
                            ? detail::ue8m0_to_float(v4_scale_byte_formula(amax))
                            : detail::index_k_scale_base(amax);
    for (int i = 0; i < group; ++i)
      data[b * group + i] = e4m3_from_float(bf16_bits_to_float(block[i]) / scale);
    scales[b] = scale;
  }
}

void quantize_v4_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                     uint8_t* scale_row) {
  const layout::MlaLayoutInfo& info = layout::mla_layout(MlaLayout::kV4);
  const int tiles = layout::mla_tiles(info);
  for (int t = 0; t < tiles; ++t) {
    const uint16_t* tile = nope + t * info.tile;
    const uint8_t e8 = v4_scale_byte_formula(block_amax(tile, info.tile));
    const float inv = detail::ue8m0_reciprocal(e8);
    for (int i = 0; i < info.tile; ++i)
      data_row[t * info.tile + i] = e4m3_from_float(bf16_bits_to_float(tile[i]) * inv);
    scale_row[t] = e8;
  }
  scale_row[tiles] = 0;  // the pad byte
  std::memcpy(data_row + info.rope_in_record, rope, 2 * layout::kRopeDim);
}

void quantize_v32_row(const uint16_t* nope, const uint16_t* rope, ScaleRule rule,
                      uint8_t* record) {
  const layout::MlaLayoutInfo& info = layout::mla_layout(MlaLayout::kV32);
  for (int t = 0; t < layout::mla_tiles(info); ++t) {
    const uint16_t* tile = nope + t * info.tile;
    const float amax = block_amax(tile, info.tile);
    const float scale = rule == ScaleRule::kPow2
                            ? detail::ue8m0_to_float(v32_pow2_scale_byte_formula(amax))
                            : detail::v32_amax_scale(amax);
    for (int i = 0; i < info.tile; ++i)
      record[t * info.tile + i] = e4m3_from_float(bf16_bits_to_float(tile[i]) / scale);
    std::memcpy(record + info.scales_in_record + 4 * t, &scale, 4);
  }
  std::memcpy(record + info.rope_in_record, rope, 2 * layout::kRopeDim);
}

namespace {
// The 512 values of a V4.1 token in storage order: NoPE 0..447, RoPE 448..511.
constexpr int kV41Values = 512;
void v41_values(const uint16_t* nope, const uint16_t* rope, uint16_t* out) {
  const int nope_dim = layout::mla_layout(MlaLayout::kV41).nope_dim;
  std::memcpy(out, nope, 2 * static_cast<size_t>(nope_dim));
  std::memcpy(out + nope_dim, rope, 2 * layout::kRopeDim);
}
uint8_t pack_nibbles(uint8_t lo, uint8_t hi) { return static_cast<uint8_t>(lo | (hi << 4)); }
}  // namespace

void quantize_v41_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                      uint8_t* scale_row) {
  uint16_t v[kV41Values];
  v41_values(nope, rope, v);
  const int tile_size = layout::mla_layout(MlaLayout::kV41).tile;
  for (int t = 0; t < kV41Values / tile_size; ++t) {
    const uint16_t* tile = v + t * tile_size;
    const uint8_t e8 = v41_scale_byte_formula(block_amax(tile, tile_size));
    const float inv = std::ldexp(1.0f, 127 - e8);
    for (int i = 0; i < tile_size; ++i)
      data_row[t * tile_size + i] = e4m3_from_float(bf16_bits_to_float(tile[i]) * inv);
    scale_row[t] = e8;
  }
}

void quantize_v41_fp4_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                          uint8_t* scale_row) {
  uint16_t v[kV41Values];
  v41_values(nope, rope, v);
  constexpr int kTile = layout::mla_layout(MlaLayout::kV41Fp4).tile;
  for (int t = 0; t < kV41Values / kTile; ++t) {
    const uint16_t* tile = v + t * kTile;
    const uint8_t sb = e4m3_from_float(detail::v41_fp4_scale_input(block_amax(tile, kTile)));
    const float s = e4m3_to_float(sb);
    for (int i = 0; i < kTile; i += 2)
      data_row[(t * kTile + i) / 2] = pack_nibbles(e2m1_from_float(bf16_bits_to_float(tile[i]) / s),
                                                   e2m1_from_float(bf16_bits_to_float(tile[i + 1]) / s));
    scale_row[t] = sb;
  }
}

void quantize_index_k_fp4_row(const uint16_t* k, int32_t head_dim, Fp4Ties ties, uint8_t* data,
                              uint8_t* scales) {
  const bool even = ties == Fp4Ties::kToEven;
  // The indexer keeps the sign only with a nonzero magnitude (never 0x8).
  const auto code = [even](float y) {
    const uint8_t c = e2m1_from_float(y, even);
    return (c & 0x7) == 0 ? uint8_t{0} : c;
  };
  const int32_t size = layout::index_k_format(IndexKFormat::kFp4).group;
  for (int32_t g = 0; g < head_dim / size; ++g) {
    const uint16_t* group = k + g * size;
    const uint8_t e8 = detail::index_k_fp4_scale_byte(block_amax(group, size));
    const float scale = std::ldexp(1.0f, e8 - 127);
    for (int i = 0; i < size; i += 2)
      data[(g * size + i) / 2] =
          pack_nibbles(code(bf16_bits_to_float(group[i]) / scale),
                       code(bf16_bits_to_float(group[i + 1]) / scale));
    scales[g] = e8;
  }
}

void store_index_k_bf16(const IndexKBf16Params& p) {
  for_each_stored_row(p.batch, p.slots, p.num_slots, 0, [&](int64_t row, int64_t slot) {
    std::memcpy(static_cast<uint16_t*>(p.cache) + slot * p.cache_row_stride,
                row_ptr(p.k, row, p.k_row_stride), 2 * static_cast<size_t>(p.head_dim));
  });
}

namespace {
void store_index_k_fp8_rows(const Batch& batch, const SlotMapping& slots, const void* k,
                            int64_t k_row_stride, const IndexKFp8Cache& c) {
  auto* base = static_cast<uint8_t*>(c.data);
  for_each_stored_row(batch, slots, c.num_pages * c.page_size, c.page_size, [&](int64_t row, int64_t slot) {
    const int64_t page = slot / c.page_size, in_page = slot % c.page_size;
    const layout::PagedRows rows = layout::index_k_rows(IndexKFormat::kFp8, c.head_dim);
    float scales[layout::index_k_format(IndexKFormat::kFp8).max_head_dim /
                 layout::index_k_format(IndexKFormat::kFp8).group];
    quantize_index_k_row(row_ptr(k, row, k_row_stride), c.head_dim, c.scale_rule,
                         base + layout::data_offset(rows, page, in_page, c.page_stride_bytes),
                         scales);
    std::memcpy(base + layout::scale_offset(rows, page, in_page, c.page_size, c.page_stride_bytes),
                scales, static_cast<size_t>(layout::scale_row_bytes(rows)));
  });
}

}  // namespace

void quantize_nvfp4_block(const float* x, float g, uint8_t* packed, uint8_t* scale_byte) {
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) amax = a;  // NaN compares false: ignored
  }
  const bool scaled = amax > 0.0f && g > 0.0f;
  *scale_byte = e4m3_from_float(scaled ? amax / (6.0f * g) : 0.0f);
  const float sf = e4m3_to_float(*scale_byte);
  const float out = scaled && sf > 0.0f ? 1.0f / (sf * g) : 0.0f;
  uint8_t codes[16];
  for (int i = 0; i < 16; ++i) {
    // A NaN product (a NaN input, or an Inf under a zero out) gives 0: no threshold passes, and
    // the device's NaN products carry no sign.
    const float v = x[i] * out;
    codes[i] = std::isnan(v) ? 0 : e2m1_from_float(v, true);
  }
  for (int i = 0; i < 8; ++i) packed[i] = static_cast<uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
}

namespace {

void store_index_k_fp4_rows(const Batch& batch, const SlotMapping& slots, const void* k,
                            int64_t k_row_stride, const IndexKFp4Cache& c) {
  auto* base = static_cast<uint8_t*>(c.data);
  for_each_stored_row(batch, slots, c.num_pages * c.page_size, c.page_size, [&](int64_t row, int64_t slot) {
    const int64_t page = slot / c.page_size, in_page = slot % c.page_size;
    const layout::PagedRows rows = layout::index_k_rows(IndexKFormat::kFp4, c.head_dim);
    quantize_index_k_fp4_row(
        row_ptr(k, row, k_row_stride), c.head_dim, c.ties,
        base + layout::data_offset(rows, page, in_page, c.page_stride_bytes),
        base + layout::scale_offset(rows, page, in_page, c.page_size, c.page_stride_bytes));
  });
}

}  // namespace

void store_index_k_fp4(const IndexKFp4Params& p) {
  store_index_k_fp4_rows(p.batch, p.slots, p.k, p.k_row_stride, p.cache);
}

void store_index_k_fp8(const IndexKFp8Params& p) {
  store_index_k_fp8_rows(p.batch, p.slots, p.k, p.k_row_stride, p.cache);
}

namespace {
// The reference row of each MLA layout, in the layout table's order.
using MlaRowReference = void (*)(const uint16_t* nope, const uint16_t* rope, ScaleRule rule,
                                 uint8_t* data_row, uint8_t* scale_row);
constexpr MlaRowReference kMlaRowReferences[] = {
    [](const uint16_t* nope, const uint16_t* rope, ScaleRule, uint8_t* data, uint8_t* scales) {
      quantize_v4_row(nope, rope, data, scales);
    },
    [](const uint16_t* nope, const uint16_t* rope, ScaleRule rule, uint8_t* record, uint8_t*) {
      quantize_v32_row(nope, rope, rule, record);
    },
    [](const uint16_t* nope, const uint16_t* rope, ScaleRule, uint8_t* data, uint8_t* scales) {
      quantize_v41_row(nope, rope, data, scales);
    },
    [](const uint16_t* nope, const uint16_t* rope, ScaleRule, uint8_t* data, uint8_t* scales) {
      quantize_v41_fp4_row(nope, rope, data, scales);
    },
};
static_assert(sizeof kMlaRowReferences / sizeof kMlaRowReferences[0] == layout::kNumMlaLayouts,
              "a reference row for every MLA layout");
}  // namespace

namespace {
// fused_store_cache's RoPE (rotates(p.rotary)): the rows' RoPE parts, rotated where the row
// rotates (real, its position in the cos/sin cache: `rotated`), with the out-of-range positions
// counted and Q and key_out written. Defined below, beside store_paged_kv's RoPE.
std::vector<uint16_t> rotate_mla_rope(const FusedStoreParams& p, std::vector<bool>* rotated);
}  // namespace

void fused_store_cache(const FusedStoreParams& p) {
  const MlaCache& c = p.kv_cache;
  const layout::PagedRows rows = layout::mla_layout(c.layout).rows;
  auto* base = static_cast<uint8_t*>(c.data);
  std::vector<bool> rotated;
  std::vector<uint16_t> rotated_rope;
  const void* rope = p.rope;
  int64_t rope_row_stride = p.rope_row_stride;
  if (rotates(p.rotary)) {
    rotated_rope = rotate_mla_rope(p, &rotated);
    rope = rotated_rope.data();
    rope_row_stride = layout::kRopeDim;
  }
  for_each_stored_row(p.batch, p.kv_slots, c.num_pages * c.page_size, c.page_size,
                      [&](int64_t row, int64_t slot) {
    if (!rotated.empty() && !rotated[row]) return;  // a real row past the cos/sin cache
    const int64_t page = slot / c.page_size, in_page = slot % c.page_size;
    kMlaRowReferences[static_cast<int>(c.layout)](
        row_ptr(p.nope, row, p.nope_row_stride), row_ptr(rope, row, rope_row_stride),
        c.scale_rule, base + layout::data_offset(rows, page, in_page, c.page_stride_bytes),
        base + layout::scale_offset(rows, page, in_page, c.page_size, c.page_stride_bytes));
  });
  if (p.index_k == nullptr) return;
  // The index-K shares the count but not the diagnostics of a negative count: that is one
  // fault of the launch, counted once.
  Batch index_batch = p.batch;
  int32_t clamped_n = 0;
  if (index_batch.num_tokens_non_padded != nullptr && *index_batch.num_tokens_non_padded < 0)
    index_batch.num_tokens_non_padded = &clamped_n;
  if (p.index_format == IndexKFormat::kFp4)
    store_index_k_fp4_rows(index_batch, p.index_slots, p.index_k, p.index_k_row_stride,
                           p.index_fp4_cache);
  else
    store_index_k_fp8_rows(index_batch, p.index_slots, p.index_k, p.index_k_row_stride,
                           p.index_cache);
}

namespace {
// One side (K or V) of a stored row: vLLM's bytes, x / scale with IEEE division (host float).
void store_kv_side(const PagedKvParams& p, const KvInput& in, const KvCacheView& c, int64_t row,
                   int64_t page, int64_t in_page) {
  const int64_t in_bytes = p.input_type == KvDataType::kFp32 ? 4 : 2;
  const layout::KvDimLayout dim{c.chunk, c.chunk_stride, c.dim_stride};
  for (int32_t h = 0; h < p.num_heads; ++h) {
    const uint8_t* src = static_cast<const uint8_t*>(in.data) +
                         in_bytes * (row * in.token_stride + h * in.head_stride);
    const auto value = [&](int32_t d) {
      float x;
      if (p.input_type == KvDataType::kFp32) {
        std::memcpy(&x, src + 4 * d, 4);
        return x;
      }
      uint16_t bits;
      std::memcpy(&bits, src + 2 * d, 2);
      return p.input_type == KvDataType::kBf16 ? bf16_bits_to_float(bits)
                                               : fp16_bits_to_float(bits);
    };
    const int64_t base = layout::kv_element_offset({c.page_stride, c.entry_stride, c.head_stride},
                                                   page, in_page, h, 0);
    if (p.cache_type == KvCacheType::kNvfp4) {  // 16-value blocks: 8 code bytes, 1 scale byte
      const int64_t scale_base = layout::kv_element_offset(
          {c.block_scale_page_stride, c.block_scale_entry_stride, c.block_scale_head_stride},
          page, in_page, h, 0);
      for (int32_t b = 0; b < in.head_dim / 16; ++b) {
        float x[16];
        for (int32_t i = 0; i < 16; ++i) x[i] = value(16 * b + i);
        quantize_nvfp4_block(x, c.scale[h * c.scale_stride],
                             static_cast<uint8_t*>(c.data) + base + 8 * b,
                             static_cast<uint8_t*>(c.block_scales) + scale_base + b);
      }
      continue;
    }
    if (p.cache_type == KvCacheType::kFp8E4m3PerTokenHead) {
      // vLLM's fp8_per_token_head: s = max(amax / 448, 1e-6), e4m3(x * (1 / s)), IEEE
      // operations each; a NaN value is left out of the amax (std::fmax) and stored as NaN.
      float amax = 0.0f;
      for (int32_t d = 0; d < in.head_dim; ++d) amax = std::fmax(amax, std::fabs(value(d)));
      const float s = std::fmax(amax / 448.0f, 1e-6f);
      const float r = 1.0f / s;
      for (int32_t d = 0; d < in.head_dim; ++d)
        static_cast<uint8_t*>(c.data)[base + d] = e4m3_from_float(value(d) * r);
      const int64_t at = layout::kv_element_offset(
          {c.block_scale_page_stride, c.block_scale_entry_stride, c.block_scale_head_stride},
          page, in_page, h, 0);
      std::memcpy(static_cast<float*>(c.block_scales) + at, &s, 4);
      continue;
    }
    for (int32_t d = 0; d < in.head_dim; ++d) {
      const int64_t at = base + layout::kv_dim_offset(dim, d);
      if (p.cache_type == KvCacheType::kAuto) {
        std::memcpy(static_cast<uint8_t*>(c.data) + in_bytes * at, src + in_bytes * d, in_bytes);
        continue;
      }
      const float q = value(d) / c.scale[h * c.scale_stride];
      static_cast<uint8_t*>(c.data)[at] =
          p.cache_type == KvCacheType::kFp8E4m3 ? e4m3_from_float(q) : e5m2_from_float(q);
    }
  }
}
}  // namespace

namespace {
// RoPE (cachestore.h RotaryEmbedding), value by value from the contract's formula.
float input_value(KvDataType t, const uint8_t* p) {
  if (t == KvDataType::kFp32) {
    float x;
    std::memcpy(&x, p, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return t == KvDataType::kBf16 ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
}
void write_input_value(KvDataType t, float x, uint8_t* p) {
  if (t == KvDataType::kFp32) {
    if (std::isnan(x)) {  // the device's canonical NaN
      const uint32_t nan = 0x7fffffffu;
      std::memcpy(p, &nan, 4);
    } else {
      std::memcpy(p, &x, 4);
    }
    return;
  }
  const uint16_t bits = t == KvDataType::kBf16 ? bf16_bits_rn(x) : fp16_bits_rn(x);
  std::memcpy(p, &bits, 2);
}
float round_to(KvDataType t, float x) {
  if (t == KvDataType::kFp32) return x;
  return t == KvDataType::kBf16 ? bf16_bits_to_float(bf16_bits_rn(x))
                                : fp16_bits_to_float(fp16_bits_rn(x));
}

// x cos - y sin (first) or y cos + x sin, own the value rotated and partner the other of its
// pair. kInputType on 16-bit inputs: each product and the sum rounded to the input type (vLLM);
// otherwise fma(own, cos, -+(partner sin)) in fp32, then one rounding (FlashInfer; vLLM's fp32).
float rotate(KvDataType t, bool input_rounding, float own, float partner, float c, float s,
             bool first) {
  if (t != KvDataType::kFp32 && input_rounding) {
    const float a = round_to(t, own * c);
    const float b = round_to(t, partner * s);
    return round_to(t, first ? a - b : a + b);
  }
  const float b = partner * s;
  return round_to(t, std::fma(own, c, first ? -b : b));
}

// A row's cos/sin row: its position's, or its own (RopeCosSinRows::kByRow).
int64_t rope_position(const RotaryEmbedding& r, int64_t row) {
  if (r.cos_sin_rows == RopeCosSinRows::kByRow) return row;
  return r.positions_type == SlotType::kInt64 ? static_cast<const int64_t*>(r.positions)[row]
                                              : static_cast<const int32_t*>(r.positions)[row];
}

// One head of `head_dim` values of type t at src rotated to dst (which may be src).
void rotate_head(const RotaryEmbedding& r, KvDataType t, int32_t head_dim, int64_t position,
                 const uint8_t* src, uint8_t* dst) {
  const int64_t bytes = t == KvDataType::kFp32 ? 4 : 2;
  const int64_t cs_bytes = r.cos_sin_type == KvDataType::kFp32 ? 4 : 2;
  const int64_t stride = r.cos_sin_stride == 0 ? r.rotary_dim : r.cos_sin_stride;
  const auto* row = static_cast<const uint8_t*>(r.cos_sin_cache) + position * stride * cs_bytes;
  const bool input_rounding = r.rounding == RopeRounding::kInputType;
  std::vector<uint8_t> out(src, src + bytes * head_dim);  // d >= rotary_dim: as it is
  const int32_t half = r.rotary_dim / 2;
  const bool interleaved = r.cos_sin_layout == RopeCosSinLayout::kInterleaved;
  for (int32_t i = 0; i < half; ++i) {
    float c = input_value(r.cos_sin_type, row + cs_bytes * (interleaved ? 2 * i : i));
    float s = input_value(r.cos_sin_type, row + cs_bytes * (interleaved ? 2 * i + 1 : half + i));
    if (input_rounding) {
      c = round_to(t, c);
      s = round_to(t, s);
    }
    const int32_t a = r.style == RopeStyle::kNeox ? i : 2 * i;
    const int32_t b = r.style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    const float x = input_value(t, src + bytes * a), y = input_value(t, src + bytes * b);
    write_input_value(t, rotate(t, input_rounding, x, y, c, s, true), out.data() + bytes * a);
    write_input_value(t, rotate(t, input_rounding, y, x, c, s, false), out.data() + bytes * b);
  }
  std::memcpy(dst, out.data(), out.size());
}

// Which rows rotate: the real ones (i < n) whose position is in the cos/sin cache; the other
// real rows are counted.
std::vector<bool> rotating_rows(const Batch& batch, const RotaryEmbedding& r) {
  const int64_t rows = batch.num_tokens;
  int64_t n = rows;
  if (batch.num_tokens_non_padded != nullptr)
    n = detail::clamp_token_count(*batch.num_tokens_non_padded, rows);
  std::vector<bool> rotated(static_cast<size_t>(rows), false);
  for (int64_t row = 0; row < n; ++row) {
    const int64_t pos = rope_position(r, row);
    rotated[row] = pos >= 0 && pos < r.max_position;
    if (!rotated[row] && batch.diagnostics != nullptr)
      ++batch.diagnostics->out_of_range_positions;
  }
  return rotated;
}

// The element of (row, head) at `base` with (token, head) strides, of `bytes` bytes each.
template <typename Byte>
Byte* head_at(Byte* base, int64_t bytes, int64_t row, int64_t head, int64_t token_stride,
              int64_t head_stride) {
  return base + bytes * (row * token_stride + head * head_stride);
}

// Rows that rotate get their Q rotated (in place or into query_out) and their rotated K (`k`:
// `heads` heads of `head_dim` values of type t) copied to key_out, whatever their slot.
void write_rope_outputs(const RotaryEmbedding& r, KvDataType t, int32_t head_dim, int32_t heads,
                        const std::vector<bool>& rotated, const uint8_t* k,
                        int64_t k_token_stride, int64_t k_head_stride) {
  const int64_t bytes = t == KvDataType::kFp32 ? 4 : 2;
  for (int64_t row = 0; row < static_cast<int64_t>(rotated.size()); ++row) {
    if (!rotated[row]) continue;
    const int64_t pos = rope_position(r, row);
    if (r.key_out != nullptr) {
      for (int32_t h = 0; h < heads; ++h)
        std::memcpy(head_at(static_cast<uint8_t*>(r.key_out), bytes, row, h,
                            r.key_out_token_stride, r.key_out_head_stride),
                    head_at(k, bytes, row, h, k_token_stride, k_head_stride), bytes * head_dim);
    }
    const bool in_place = r.query_out == nullptr;
    for (int32_t h = 0; h < r.num_query_heads; ++h)
      rotate_head(r, t, head_dim, pos,
                  head_at(static_cast<const uint8_t*>(r.query), bytes, row, h,
                          r.query_token_stride, r.query_head_stride),
                  head_at(static_cast<uint8_t*>(in_place ? r.query : r.query_out), bytes, row, h,
                          in_place ? r.query_token_stride : r.query_out_token_stride,
                          in_place ? r.query_head_stride : r.query_out_head_stride));
  }
}

// Rows real (i < n) with a position in the cos/sin cache: rotated and stored; the other real
// rows counted. Their Q and key_out whatever their slot; K rotated before store_kv_side.
void store_paged_kv_rope(const PagedKvParams& p) {
  const RotaryEmbedding& r = p.rope;
  const int64_t rows = p.batch.num_tokens;
  const int64_t bytes = p.input_type == KvDataType::kFp32 ? 4 : 2;
  const std::vector<bool> rotated = rotating_rows(p.batch, r);
  // K rotated into a copy with K's strides (the caches are written from it).
  const int64_t k_extent =
      rows == 0 ? 0
                : (rows - 1) * p.k.token_stride + (p.num_heads - 1) * p.k.head_stride +
                      p.k.head_dim;
  std::vector<uint8_t> k(static_cast<const uint8_t*>(p.k.data),
                         static_cast<const uint8_t*>(p.k.data) + bytes * k_extent);
  for (int64_t row = 0; row < rows; ++row) {
    if (!rotated[row]) continue;
    const int64_t pos = rope_position(r, row);
    for (int32_t h = 0; h < p.num_heads; ++h) {
      uint8_t* kh = head_at(k.data(), bytes, row, h, p.k.token_stride, p.k.head_stride);
      rotate_head(r, p.input_type, p.k.head_dim, pos, kh, kh);
    }
  }
  PagedKvParams stored = p;
  stored.k.data = k.data();
  for_each_stored_row(p.batch, p.slots, p.num_pages * p.page_size, p.page_size,
                      [&](int64_t row, int64_t slot) {
    if (!rotated[row]) return;
    const int64_t page = slot / p.page_size, in_page = slot % p.page_size;
    store_kv_side(stored, stored.k, p.k_cache, row, page, in_page);
    if (p.v.data != nullptr) store_kv_side(p, p.v, p.v_cache, row, page, in_page);
  });
  write_rope_outputs(r, p.input_type, p.k.head_dim, p.num_heads, rotated, k.data(),
                     p.k.token_stride, p.k.head_stride);
}

std::vector<uint16_t> rotate_mla_rope(const FusedStoreParams& p, std::vector<bool>* rotated) {
  constexpr int32_t kDim = layout::kRopeDim;
  const int64_t rows = p.batch.num_tokens;
  *rotated = rotating_rows(p.batch, p.rotary);
  std::vector<uint16_t> rope(static_cast<size_t>(rows * kDim));
  for (int64_t row = 0; row < rows; ++row) {
    uint16_t* dst = rope.data() + row * kDim;
    std::memcpy(dst, row_ptr(p.rope, row, p.rope_row_stride), 2 * kDim);
    if ((*rotated)[row]) {
      auto* bytes = reinterpret_cast<uint8_t*>(dst);
      rotate_head(p.rotary, KvDataType::kBf16, kDim, rope_position(p.rotary, row), bytes, bytes);
    }
  }
  write_rope_outputs(p.rotary, KvDataType::kBf16, kDim, 1, *rotated,
                     reinterpret_cast<const uint8_t*>(rope.data()), kDim, 0);
  return rope;
}
}  // namespace

void store_paged_kv(const PagedKvParams& p) {
  if (rotates(p.rope)) return store_paged_kv_rope(p);
  for_each_stored_row(p.batch, p.slots, p.num_pages * p.page_size, p.page_size,
                      [&](int64_t row, int64_t slot) {
    const int64_t page = slot / p.page_size, in_page = slot % p.page_size;
    store_kv_side(p, p.k, p.k_cache, row, page, in_page);
    if (p.v.data != nullptr) store_kv_side(p, p.v, p.v_cache, row, page, in_page);
  });
}

}  // namespace cachestore::reference
