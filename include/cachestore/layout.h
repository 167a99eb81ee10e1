// The layout table: every cache layout cachestore writes, its traits and its byte math.
//
// One entry per layout. The tables and their accessors are host constexpr (device code reads
// them in constant expressions only, which the kernels compile with --expt-relaxed-constexpr);
// the byte math of a PagedRows is host and device. Validation, the launchers, the kernels, the host references, the C ABI
// (cachestore_mla_layout_info, ...) and through it the Python package all read these entries;
// nothing else restates a layout's sizes. docs/layouts.md gives the formulas in prose.
// Plain C++17, host and device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CACHESTORE_HOST_DEVICE __host__ __device__
#else
#define CACHESTORE_HOST_DEVICE
#endif

namespace cachestore {

// fp32 scale rule of a quantized block (docs/layouts.md has the formulas).
enum class ScaleRule : int32_t {
  kAmax = 0,  // s = max(amax, floor) / 448 (index-K) or max(amax / 448, FLT_MIN) (MLA V3.2)
  kPow2 = 1,  // s rounded up to a power of two (UE8M0-representable)
};

// Ties of an e2m1 (fp4) rounding to nearest.
enum class Fp4Ties : int32_t {
  kToEven = 0,      // DeepSeek's reference and the hardware conversion (default)
  kTowardZero = 1,  // SGLang's fp4 indexer default (rne=False)
};

// The DeepSeek MLA KV layouts of fused_store_cache; each value indexes layout::kMlaLayouts.
enum class MlaLayout : int32_t {
  kV4 = 0,      // FlashMLA "MODEL1": 584 B/token split per page
  kV32 = 1,     // FlashMLA "fp8_ds_mla": 656 B/token, one record per token
  kV41 = 2,     // DeepSeek V4.1: 528 B/token split per page (e4m3, UE8M0 per 32 values)
  kV41Fp4 = 3,  // DeepSeek V4.1 FP4: 288 B/token split per page (e2m1, e4m3 per 16 values)
};

// The paged index-K layouts (store_index_k_fp8 / _fp4, the fused index-K); each value indexes
// layout::kIndexKFormats.
enum class IndexKFormat : int32_t {
  kFp8 = 0,  // the 132-byte indexer page (D = 128)
  kFp4 = 1,  // the 68-byte indexer page (D = 128)
};

// store_paged_kv: the input type, and the cache type (each value indexes layout::kKvCacheTypes).
enum class KvDataType : int32_t { kBf16 = 0, kFp16 = 1, kFp32 = 2 };
enum class KvCacheType : int32_t {
  kAuto = 0,     // the input type: bits copied
  kFp8E4m3 = 1,  // fp8_satfinite_rn(x / scale), IEEE division (vLLM's reshape_and_cache_flash)
  kFp8E5m2 = 2,
  kNvfp4 = 3,    // e2m1 codes with an e4m3 scale per 16 values under a device fp32 global scale
                 // (FlashInfer's nvfp4 paged cache); the block scales are a second cache view
  kFp8E4m3PerTokenHead = 4,  // e4m3 of x / s, s = max(amax / 448, 1e-6) of each (token, head),
                             // computed at store time and written to an fp32 view beside the
                             // cache (vLLM's fp8_per_token_head)
};

namespace layout {

inline constexpr int32_t kMaxPageSize = 1024;  // paged DeepSeek layouts: P a power of two
inline constexpr int32_t kRopeDim = 64;        // bf16 RoPE values per MLA token

// How the values and scales of a quantized layout are encoded.
enum class Encoding : int32_t {
  kBf16 = 0,   // raw bits
  kE4m3 = 1,   // OCP FP8 E4M3, round to nearest even, saturating to +-448
  kE2m1 = 2,   // FP4 E2M1, two codes a byte, the even-indexed value in the low nibble
  kFp32 = 3,   // an fp32 scale
  kUe8m0 = 4,  // a biased power-of-two exponent byte
};

// How an MLA layout uses MlaCache::scale_rule.
enum class RuleUse : int32_t {
  kSelectable = 0,  // the cache's rule (kAmax or kPow2) is the layout's
  kPow2Only = 1,    // UE8M0 scales: kPow2, anything else refused
  kFixed = 2,       // the layout fixes its scale formats and does not read the rule
};

// A paged byte layout: page p holds P data rows (one per token), then P scale rows, and its
// minimum stride is rounded up to a multiple of `page_round`. A token's scale row holds one
// `scale_unit`-byte scale per `scale_group` of its `scaled_values` values (an index-K row's
// depend on its head dim). A layout whose token is one record (V3.2) has no scale rows.
struct PagedRows {
  int64_t data_row;       // bytes of a token's data row (its whole record without scale rows)
  int64_t scale_unit;     // bytes of one scale
  int64_t scaled_values;  // values of a token that the scale row covers
  int64_t scale_group;    // values per scale
  int64_t page_round;     // the minimum page stride is a multiple of this many bytes
};

CACHESTORE_HOST_DEVICE constexpr int64_t scale_row_bytes(PagedRows rows) {
  return rows.scale_unit * (rows.scaled_values / rows.scale_group);
}
CACHESTORE_HOST_DEVICE constexpr int64_t token_bytes(PagedRows rows) {
  return rows.data_row + scale_row_bytes(rows);
}
CACHESTORE_HOST_DEVICE constexpr int64_t min_page_stride(PagedRows rows, int64_t page_size) {
  return (token_bytes(rows) * page_size + rows.page_round - 1) / rows.page_round *
         rows.page_round;
}
// Byte offset of a token's data row: `page` of the cache, `in_page` in [0, P).
CACHESTORE_HOST_DEVICE constexpr int64_t data_offset(PagedRows rows, int64_t page,
                                                     int64_t in_page, int64_t page_stride) {
  return page * page_stride + in_page * rows.data_row;
}
// Byte offset of a token's scale row.
CACHESTORE_HOST_DEVICE constexpr int64_t scale_offset(PagedRows rows, int64_t page,
                                                      int64_t in_page, int64_t page_size,
                                                      int64_t page_stride) {
  return page * page_stride + page_size * rows.data_row +
         in_page * rows.scale_unit * (rows.scaled_values / rows.scale_group);
}

// ---- MLA KV layouts --------------------------------------------------------------------------
// Input per token: nope_dim bf16 NoPE values and kRopeDim bf16 RoPE values, each part with its
// own row stride.
struct MlaLayoutInfo {
  const char* name;              // the Python and docs name
  int32_t nope_dim;              // bf16 NoPE values per token
  int32_t quantized_values;      // values quantized per token, from value 0 (NoPE, then RoPE)
  int32_t tile;                  // values per scale
  Encoding values;               // of the quantized values
  Encoding scales;               // of the tile scales
  bool rope_quantized;           // the RoPE part is quantized with the NoPE (else copied bf16)
  RuleUse scale_rule;            // what MlaCache::scale_rule means to the layout
  int32_t scales_in_record;      // one-record layouts: byte offset of the scales in the record
  int32_t rope_in_record;        // byte offset of the bf16 RoPE values in the data row / record
  PagedRows rows;
};

inline constexpr MlaLayoutInfo kMlaLayouts[] = {
    // kV4: data row 448 e4m3 (7 tiles of 64) + 64 bf16 RoPE; scale row 7 UE8M0 + a zero pad byte
    // (the RoPE values' "tile").
    {"v4", 448, 448, 64, Encoding::kE4m3, Encoding::kUe8m0, false, RuleUse::kPow2Only, 0, 448,
     {576, 1, 512, 64, 576}},
    // kV32: record 512 e4m3 (4 tiles of 128), 4 fp32 scales at 512, 64 bf16 RoPE at 528.
    {"v32", 512, 512, 128, Encoding::kE4m3, Encoding::kFp32, false, RuleUse::kSelectable, 512,
     528,
     {656, 0, 0, 1, 656}},
    // kV41: data row 512 e4m3 (NoPE then RoPE, 16 tiles of 32); scale row 16 UE8M0.
    {"v41", 448, 512, 32, Encoding::kE4m3, Encoding::kUe8m0, true, RuleUse::kFixed, 0, 0,
     {512, 1, 512, 32, 512}},
    // kV41Fp4: data row 512 e2m1 (32 tiles of 16); scale row 32 e4m3.
    {"v41_fp4", 448, 512, 16, Encoding::kE2m1, Encoding::kE4m3, true, RuleUse::kFixed, 0, 0,
     {256, 1, 512, 16, 256}},
};
inline constexpr int32_t kNumMlaLayouts =
    static_cast<int32_t>(sizeof(kMlaLayouts) / sizeof(kMlaLayouts[0]));

constexpr bool is_mla_layout(MlaLayout layout) {
  return static_cast<int32_t>(layout) >= 0 && static_cast<int32_t>(layout) < kNumMlaLayouts;
}
// The entry of a layout for which is_mla_layout holds.
constexpr const MlaLayoutInfo& mla_layout(MlaLayout layout) {
  return kMlaLayouts[static_cast<int32_t>(layout)];
}
// Tiles (scales) per token.
constexpr int32_t mla_tiles(const MlaLayoutInfo& info) {
  return info.quantized_values / info.tile;
}

constexpr int64_t min_page_stride(MlaLayout layout, int64_t page_size) {
  return min_page_stride(mla_layout(layout).rows, page_size);
}

// ---- index-K layouts -------------------------------------------------------------------------
// Page p: [P x data rows][P x scale rows]; a row's bytes depend on the head dim D.
struct IndexKFormatInfo {
  const char* name;      // "fp8", "fp4"
  int32_t group;         // values per scale
  int32_t max_head_dim;  // D is a multiple of `group` in [group, max_head_dim]
  Encoding values;
  Encoding scales;
  int32_t scale_bytes;   // bytes per scale
  int32_t values_per_byte;
};

inline constexpr IndexKFormatInfo kIndexKFormats[] = {
    {"fp8", 128, 512, Encoding::kE4m3, Encoding::kFp32, 4, 1},
    {"fp4", 32, 512, Encoding::kE2m1, Encoding::kUe8m0, 1, 2},
};
inline constexpr int32_t kNumIndexKFormats =
    static_cast<int32_t>(sizeof(kIndexKFormats) / sizeof(kIndexKFormats[0]));

constexpr bool is_index_k_format(IndexKFormat format) {
  return static_cast<int32_t>(format) >= 0 && static_cast<int32_t>(format) < kNumIndexKFormats;
}
constexpr const IndexKFormatInfo& index_k_format(IndexKFormat format) {
  return kIndexKFormats[static_cast<int32_t>(format)];
}
// The rows of an index-K layout for head dim D (a multiple of the format's group).
constexpr PagedRows index_k_rows(const IndexKFormatInfo& f,
                                                       int64_t head_dim) {
  return {head_dim / f.values_per_byte, f.scale_bytes, head_dim, f.group, 1};
}
constexpr PagedRows index_k_rows(IndexKFormat format, int64_t head_dim) {
  return index_k_rows(index_k_format(format), head_dim);
}
// The same with the format a constant, for device code (the table is read at compile time).
template <IndexKFormat kFormat>
CACHESTORE_HOST_DEVICE constexpr PagedRows index_k_rows(int64_t head_dim) {
  constexpr int32_t kValuesPerByte = index_k_format(kFormat).values_per_byte;
  constexpr int32_t kScaleBytes = index_k_format(kFormat).scale_bytes;
  constexpr int32_t kGroup = index_k_format(kFormat).group;
  return {head_dim / kValuesPerByte, kScaleBytes, head_dim, kGroup, 1};
}

constexpr int64_t min_page_stride(IndexKFormat format, int64_t page_size,
                                                         int64_t head_dim) {
  return min_page_stride(index_k_rows(format, head_dim), page_size);
}

// ---- paged K/V (store_paged_kv): element strides of the layouts engines use -----------------
// Element (slot s, head h, index d) = base + (s / P) * page + (s % P) * entry + h * head + d.
struct KvStrides {
  int64_t page;
  int64_t entry;
  int64_t head;
};
inline constexpr int32_t kMaxKvHeads = 256;
inline constexpr int32_t kMaxKvHeadDim = 1024;

struct KvCacheTypeInfo {
  const char* name;          // "auto", "fp8_e4m3", "fp8_e5m2", "nvfp4", "fp8_e4m3_per_token_head"
  int32_t element_bytes;     // 0: the input type's
  bool scaled;               // reads a device fp32 scale per tensor or per head
  int32_t head_dim_multiple; // the head dim is a multiple of this
  int32_t values_per_element;  // values a cache element holds (nvfp4: two codes a byte)
  int32_t block;             // values per block scale in the block-scale view; 0: none
  int32_t values_per_thread; // the 16-byte kernels' values a thread: one vector of 8 (16-byte
                             // loads of 16-bit input); nvfp4 one 16-value block
  bool token_head_scales;    // writes an fp32 scale per (slot, head) into the scale view
  bool rope;                 // RoPE can be fused into its store
};
inline constexpr KvCacheTypeInfo kKvCacheTypes[] = {
    {"auto", 0, false, 1, 1, 0, 8, false, true},
    {"fp8_e4m3", 1, true, 1, 1, 0, 8, false, true},
    {"fp8_e5m2", 1, true, 1, 1, 0, 8, false, true},
    {"nvfp4", 1, true, 16, 2, 16, 16, false, true},
    {"fp8_e4m3_per_token_head", 1, false, 8, 1, 0, 8, true, false},
};
inline constexpr int32_t kNumKvCacheTypes =
    static_cast<int32_t>(sizeof(kKvCacheTypes) / sizeof(kKvCacheTypes[0]));
constexpr bool is_kv_cache_type(KvCacheType type) {
  return static_cast<int32_t>(type) >= 0 && static_cast<int32_t>(type) < kNumKvCacheTypes;
}
constexpr const KvCacheTypeInfo& kv_cache_type(KvCacheType type) {
  return kKvCacheTypes[static_cast<int32_t>(type)];
}

// NHD [pages, P, H, D]: vLLM flash, FlashInfer NHD.
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_nhd_strides(int64_t page_size, int64_t heads,
                                                          int64_t head_dim) {
  return {page_size * heads * head_dim, heads * head_dim, head_dim};
}
// HND [pages, H, P, D]: FlashInfer HND, TensorRT-LLM head-major.
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_hnd_strides(int64_t page_size, int64_t heads,
                                                          int64_t head_dim) {
  return {heads * page_size * head_dim, head_dim, page_size * head_dim};
}
// FlashInfer stacked [pages, 2, P, H, D]: K and V pages interleaved; V base = K base +
// kv_stacked_v_offset.
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_stacked_nhd_strides(int64_t page_size,
                                                                  int64_t heads,
                                                                  int64_t head_dim) {
  return {2 * page_size * heads * head_dim, heads * head_dim, head_dim};
}
CACHESTORE_HOST_DEVICE constexpr int64_t kv_stacked_v_offset(int64_t page_size, int64_t heads,
                                                             int64_t head_dim) {
  return page_size * heads * head_dim;
}
// vLLM concat_and_cache_mla: 576-wide rows, kv_c (512) then k_pe (64); H = 1; K = kv_c
// (Dk = 512), V = k_pe (Dv = 64) at V base = K base + kMlaKvcDim.
inline constexpr int32_t kMlaKvcDim = 512;
inline constexpr int32_t kMlaRowDim = 576;
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_mla_row_strides(int64_t page_size) {
  return {page_size * kMlaRowDim, kMlaRowDim, kMlaRowDim};
}
CACHESTORE_HOST_DEVICE constexpr int64_t kv_element_offset(const KvStrides& s, int64_t page,
                                                           int64_t in_page, int64_t head,
                                                           int64_t d) {
  return page * s.page + in_page * s.entry + head * s.head + d;
}

// How a cache lays out the head dim d of one (slot, head) entry: at element
// (d / chunk) * chunk_stride + (d % chunk) * dim_stride, or d * dim_stride with chunk 0 (no
// chunks). Every layout above has {0, 0, 1}: d contiguous.
struct KvDimLayout {
  int32_t chunk;          // elements per chunk (a power of two dividing the head dim), 0: none
  int64_t chunk_stride;   // elements between chunks
  int64_t dim_stride;     // elements between consecutive d within a chunk
};
inline constexpr KvDimLayout kKvContiguousDim = {0, 0, 1};
CACHESTORE_HOST_DEVICE constexpr int64_t kv_dim_offset(const KvDimLayout& l, int64_t d) {
  return l.chunk == 0 ? d * l.dim_stride
                      : d / l.chunk * l.chunk_stride + d % l.chunk * l.dim_stride;
}

// vLLM's paged-attention layout (reshape_and_cache): K [pages, H, D / x, P, x] with x the
// elements of 16 bytes, V [pages, H, D, P].
CACHESTORE_HOST_DEVICE constexpr int32_t kv_paged_attention_x(int32_t element_bytes) {
  return 16 / element_bytes;
}
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_paged_attention_key_strides(int64_t page_size,
                                                                          int64_t heads,
                                                                          int64_t head_dim,
                                                                          int64_t x) {
  return {heads * head_dim * page_size, x, head_dim * page_size};
}
CACHESTORE_HOST_DEVICE constexpr KvDimLayout kv_paged_attention_key_dim(int64_t page_size,
                                                                        int64_t x) {
  return {static_cast<int32_t>(x), page_size * x, 1};
}
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_paged_attention_value_strides(int64_t page_size,
                                                                            int64_t heads,
                                                                            int64_t head_dim) {
  return {heads * head_dim * page_size, 1, head_dim * page_size};
}
CACHESTORE_HOST_DEVICE constexpr KvDimLayout kv_paged_attention_value_dim(int64_t page_size) {
  return {0, 0, page_size};
}

// ---- the table's figures as the contract (docs/layouts.md) states them ----------------------
static_assert(min_page_stride(mla_layout(MlaLayout::kV4).rows, 64) == 37440, "V4, P = 64");
static_assert(min_page_stride(mla_layout(MlaLayout::kV4).rows, 256) == 149760, "V4, P = 256");
static_assert(token_bytes(mla_layout(MlaLayout::kV4).rows) == 584, "V4: 584 B/token");
static_assert(token_bytes(mla_layout(MlaLayout::kV32).rows) == 656, "V3.2: 656 B/token");
static_assert(min_page_stride(mla_layout(MlaLayout::kV41).rows, 64) == 33792, "V4.1, P = 64");
static_assert(min_page_stride(mla_layout(MlaLayout::kV41Fp4).rows, 64) == 18432,
              "V4.1 FP4, P = 64");
static_assert(min_page_stride(index_k_rows(IndexKFormat::kFp8, 128), 64) == 8448,
              "fp8 indexer page, P = 64, D = 128");
static_assert(min_page_stride(index_k_rows(IndexKFormat::kFp4, 128), 64) == 4352,
              "fp4 indexer page, P = 64, D = 128");
static_assert(mla_tiles(mla_layout(MlaLayout::kV4)) + 1 ==
                  scale_row_bytes(mla_layout(MlaLayout::kV4).rows),
              "V4: the pad byte follows the seven scales");

}  // namespace layout
}  // namespace cachestore
