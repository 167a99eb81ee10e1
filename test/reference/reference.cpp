#include "reference.h"

#include <cmath>
#include <cstring>

#include "cachestore/layout.h"
#include "conversions.h"
#include "detail/guard.h"
#include "detail/scale_rules.h"

namespace cachestore::reference {
namespace {

using detail::bf16_bits_to_float;

int64_t slot_at(const SlotMapping& slots, int64_t row) {
  return slots.type == SlotType::kInt32 ? static_cast<const int32_t*>(slots.data)[row]
                                        : static_cast<const int64_t*>(slots.data)[row];
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
    const int64_t slot = slot_at(slots, row);
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
  for (int32_t b = 0; b < head_dim / layout::kQuantBlock; ++b) {
    const uint16_t* block = k + b * layout::kQuantBlock;
    const float amax = block_amax(block, layout::kQuantBlock);
    const float scale = rule == ScaleRule::kPow2
                            ? detail::ue8m0_to_float(v4_scale_byte_formula(amax))
                            : detail::index_k_scale_base(amax);
    for (int i = 0; i < layout::kQuantBlock; ++i)
      data[b * layout::kQuantBlock + i] = e4m3_from_float(bf16_bits_to_float(block[i]) / scale);
    scales[b] = scale;
  }
}

void quantize_v4_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                     uint8_t* scale_row) {
  for (int t = 0; t < layout::kV4NumTiles; ++t) {
    const uint16_t* tile = nope + t * layout::kV4TileSize;
    const uint8_t e8 = v4_scale_byte_formula(block_amax(tile, layout::kV4TileSize));
    const float inv = detail::ue8m0_reciprocal(e8);
    for (int i = 0; i < layout::kV4TileSize; ++i)
      data_row[t * layout::kV4TileSize + i] = e4m3_from_float(bf16_bits_to_float(tile[i]) * inv);
    scale_row[t] = e8;
  }
  scale_row[layout::kV4NumTiles] = 0;
  std::memcpy(data_row + layout::kV4NopeDim, rope, 2 * layout::kRopeDim);
}

void quantize_v32_row(const uint16_t* nope, const uint16_t* rope, ScaleRule rule,
                      uint8_t* record) {
  for (int t = 0; t < layout::kV32NumTiles; ++t) {
    const uint16_t* tile = nope + t * layout::kV32TileSize;
    const float amax = block_amax(tile, layout::kV32TileSize);
    const float scale = rule == ScaleRule::kPow2
                            ? detail::ue8m0_to_float(v32_pow2_scale_byte_formula(amax))
                            : detail::v32_amax_scale(amax);
    for (int i = 0; i < layout::kV32TileSize; ++i)
      record[t * layout::kV32TileSize + i] = e4m3_from_float(bf16_bits_to_float(tile[i]) / scale);
    std::memcpy(record + layout::kV32ScalesOffset + 4 * t, &scale, 4);
  }
  std::memcpy(record + layout::kV32RopeOffset, rope, 2 * layout::kRopeDim);
}

namespace {
// The 512 values of a V4.1 token in storage order: NoPE 0..447, RoPE 448..511.
void v41_values(const uint16_t* nope, const uint16_t* rope, uint16_t* out) {
  std::memcpy(out, nope, 2 * layout::kV41NopeDim);
  std::memcpy(out + layout::kV41NopeDim, rope, 2 * layout::kRopeDim);
}
uint8_t pack_nibbles(uint8_t lo, uint8_t hi) { return static_cast<uint8_t>(lo | (hi << 4)); }
}  // namespace

void quantize_v41_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                      uint8_t* scale_row) {
  uint16_t v[layout::kV41Values];
  v41_values(nope, rope, v);
  for (int t = 0; t < layout::kV41Values / layout::kV41TileSize; ++t) {
    const uint16_t* tile = v + t * layout::kV41TileSize;
    const uint8_t e8 = v41_scale_byte_formula(block_amax(tile, layout::kV41TileSize));
    const float inv = std::ldexp(1.0f, 127 - e8);
    for (int i = 0; i < layout::kV41TileSize; ++i)
      data_row[t * layout::kV41TileSize + i] = e4m3_from_float(bf16_bits_to_float(tile[i]) * inv);
    scale_row[t] = e8;
  }
}

void quantize_v41_fp4_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                          uint8_t* scale_row) {
  uint16_t v[layout::kV41Values];
  v41_values(nope, rope, v);
  constexpr int kTile = layout::kV41Fp4TileSize;
  for (int t = 0; t < layout::kV41Values / kTile; ++t) {
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
  for (int32_t g = 0; g < head_dim / layout::kFp4Group; ++g) {
    const uint16_t* group = k + g * layout::kFp4Group;
    const uint8_t e8 = detail::index_k_fp4_scale_byte(block_amax(group, layout::kFp4Group));
    const float scale = std::ldexp(1.0f, e8 - 127);
    for (int i = 0; i < layout::kFp4Group; i += 2)
      data[(g * layout::kFp4Group + i) / 2] =
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
    float scales[layout::kMaxIndexKHeadDim / layout::kQuantBlock];
    quantize_index_k_row(row_ptr(k, row, k_row_stride), c.head_dim, c.scale_rule,
                         base + layout::index_k_fp8_data_offset(page, in_page,
                                                                c.page_stride_bytes, c.head_dim),
                         scales);
    std::memcpy(base + layout::index_k_fp8_scale_offset(page, in_page, c.page_size,
                                                        c.page_stride_bytes, c.head_dim),
                scales, 4 * static_cast<size_t>(c.head_dim / layout::kQuantBlock));
  });
}

void store_index_k_fp4_rows(const Batch& batch, const SlotMapping& slots, const void* k,
                            int64_t k_row_stride, const IndexKFp4Cache& c) {
  auto* base = static_cast<uint8_t*>(c.data);
  for_each_stored_row(batch, slots, c.num_pages * c.page_size, c.page_size, [&](int64_t row, int64_t slot) {
    const int64_t page = slot / c.page_size, in_page = slot % c.page_size;
    quantize_index_k_fp4_row(
        row_ptr(k, row, k_row_stride), c.head_dim, c.ties,
        base + layout::index_k_fp4_data_offset(page, in_page, c.page_stride_bytes, c.head_dim),
        base + layout::index_k_fp4_scale_offset(page, in_page, c.page_size, c.page_stride_bytes,
                                                c.head_dim));
  });
}

}  // namespace

void store_index_k_fp4(const IndexKFp4Params& p) {
  store_index_k_fp4_rows(p.batch, p.slots, p.k, p.k_row_stride, p.cache);
}

void store_index_k_fp8(const IndexKFp8Params& p) {
  store_index_k_fp8_rows(p.batch, p.slots, p.k, p.k_row_stride, p.cache);
}

void fused_store_cache(const FusedStoreParams& p) {
  const MlaCache& c = p.kv_cache;
  auto* base = static_cast<uint8_t*>(c.data);
  for_each_stored_row(p.batch, p.kv_slots, c.num_pages * c.page_size, c.page_size,
                      [&](int64_t row, int64_t slot) {
    const int64_t page = slot / c.page_size, in_page = slot % c.page_size;
    const uint16_t* nope = row_ptr(p.nope, row, p.nope_row_stride);
    const uint16_t* rope = row_ptr(p.rope, row, p.rope_row_stride);
    if (c.layout == MlaLayout::kV4) {
      quantize_v4_row(nope, rope, base + layout::v4_data_offset(page, in_page, c.page_stride_bytes),
                      base + layout::v4_scale_offset(page, in_page, c.page_size,
                                                     c.page_stride_bytes));
    } else if (c.layout == MlaLayout::kV41 || c.layout == MlaLayout::kV41Fp4) {
      const bool fp4 = c.layout == MlaLayout::kV41Fp4;
      const layout::SplitRows rows = fp4 ? layout::kV41Fp4Rows : layout::kV41Rows;
      uint8_t* data_row = base + layout::split_data_offset(rows, page, in_page, c.page_stride_bytes);
      uint8_t* scale_row =
          base + layout::split_scale_offset(rows, page, in_page, c.page_size, c.page_stride_bytes);
      if (fp4) quantize_v41_fp4_row(nope, rope, data_row, scale_row);
      else quantize_v41_row(nope, rope, data_row, scale_row);
    } else {
      quantize_v32_row(nope, rope, c.scale_rule,
                       base + layout::v32_record_offset(page, in_page, c.page_stride_bytes));
    }
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
  for (int32_t h = 0; h < p.num_heads; ++h) {
    const uint16_t* src =
        static_cast<const uint16_t*>(in.data) + row * in.token_stride + h * in.head_stride;
    const int64_t base = layout::kv_element_offset({c.page_stride, c.entry_stride, c.head_stride},
                                                   page, in_page, h, 0);
    for (int32_t d = 0; d < in.head_dim; ++d) {
      if (p.cache_type == KvCacheType::kAuto) {
        static_cast<uint16_t*>(c.data)[base + d] = src[d];
        continue;
      }
      const float x = p.input_type == KvDataType::kBf16 ? bf16_bits_to_float(src[d])
                                                        : fp16_bits_to_float(src[d]);
      const float q = x / c.scale[h * c.scale_stride];
      static_cast<uint8_t*>(c.data)[base + d] =
          p.cache_type == KvCacheType::kFp8E4m3 ? e4m3_from_float(q) : e5m2_from_float(q);
    }
  }
}
}  // namespace

void store_paged_kv(const PagedKvParams& p) {
  for_each_stored_row(p.batch, p.slots, p.num_pages * p.page_size, p.page_size,
                      [&](int64_t row, int64_t slot) {
    const int64_t page = slot / p.page_size, in_page = slot % p.page_size;
    store_kv_side(p, p.k, p.k_cache, row, page, in_page);
    if (p.v.data != nullptr) store_kv_side(p, p.v, p.v_cache, row, page, in_page);
  });
}

}  // namespace cachestore::reference
