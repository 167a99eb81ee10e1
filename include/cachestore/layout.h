// Byte layouts of the caches cachestore writes: constexpr offset math shared by the kernels,
// the launchers' checks, the host references and the tests. Plain C++17; host and device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CACHESTORE_HOST_DEVICE __host__ __device__
#else
#define CACHESTORE_HOST_DEVICE
#endif

namespace cachestore::layout {

inline constexpr int32_t kQuantBlock = 128;     // index-K: one fp32 scale per 128 values
inline constexpr int32_t kRopeDim = 64;         // bf16 RoPE values per MLA token
inline constexpr int32_t kMaxPageSize = 1024;
inline constexpr int32_t kMaxIndexKHeadDim = 512;  // fp8 index-K: D/128 in [1, 4]

// ---- index-K fp8 (the 132-byte indexer page) ---------------------------------------------
// page: [P x D e4m3][P x (D/128) fp32]
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp8_token_bytes(int64_t head_dim) {
  return head_dim + 4 * (head_dim / kQuantBlock);
}
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp8_min_page_stride(int64_t page_size,
                                                                     int64_t head_dim) {
  return page_size * index_k_fp8_token_bytes(head_dim);
}
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp8_data_offset(int64_t page, int64_t in_page,
                                                                 int64_t page_stride,
                                                                 int64_t head_dim) {
  return page * page_stride + in_page * head_dim;
}
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp8_scale_offset(int64_t page, int64_t in_page,
                                                                  int64_t page_size,
                                                                  int64_t page_stride,
                                                                  int64_t head_dim) {
  return page * page_stride + page_size * head_dim + in_page * 4 * (head_dim / kQuantBlock);
}

// ---- FlashMLA V4 "MODEL1": 584 B/token, split per page ------------------------------------
inline constexpr int32_t kV4NopeDim = 448;        // e4m3 values, 7 tiles of 64
inline constexpr int32_t kV4TileSize = 64;
inline constexpr int32_t kV4NumTiles = 7;
inline constexpr int64_t kV4DataRowBytes = 576;   // 448 e4m3 + 64 bf16
inline constexpr int64_t kV4ScaleRowBytes = 8;    // 7 UE8M0 + 1 pad byte (0)
inline constexpr int64_t kV4TokenBytes = kV4DataRowBytes + kV4ScaleRowBytes;

CACHESTORE_HOST_DEVICE constexpr int64_t v4_min_page_stride(int64_t page_size) {
  return (kV4TokenBytes * page_size + kV4DataRowBytes - 1) / kV4DataRowBytes * kV4DataRowBytes;
}
CACHESTORE_HOST_DEVICE constexpr int64_t v4_data_offset(int64_t page, int64_t in_page,
                                                        int64_t page_stride) {
  return page * page_stride + in_page * kV4DataRowBytes;
}
CACHESTORE_HOST_DEVICE constexpr int64_t v4_scale_offset(int64_t page, int64_t in_page,
                                                         int64_t page_size, int64_t page_stride) {
  return page * page_stride + page_size * kV4DataRowBytes + in_page * kV4ScaleRowBytes;
}

// ---- DeepSeek V4.1: split pages like V4, a data row and a scale row per token ------------
// page: [P x data rows][P x scale rows], rounded up to a whole number of data rows.
struct SplitRows {
  int64_t data_row;   // bytes of a token's data row
  int64_t scale_row;  // bytes of a token's scale row
};
inline constexpr int32_t kV41NopeDim = 448;     // + 64 RoPE: 512 values, all quantized
inline constexpr int32_t kV41Values = 512;
// V41: 512 e4m3 (NoPE 0..447, RoPE 448..511), one UE8M0 byte per 32 values.
inline constexpr SplitRows kV41Rows{512, 16};
inline constexpr int32_t kV41TileSize = 32;
// V41_FP4: 512 e2m1 (two per byte, even index in the low nibble), one e4m3 scale per 16 values.
inline constexpr SplitRows kV41Fp4Rows{256, 32};
inline constexpr int32_t kV41Fp4TileSize = 16;

CACHESTORE_HOST_DEVICE constexpr int64_t split_min_page_stride(SplitRows rows, int64_t page_size) {
  return ((rows.data_row + rows.scale_row) * page_size + rows.data_row - 1) / rows.data_row *
         rows.data_row;
}
CACHESTORE_HOST_DEVICE constexpr int64_t split_data_offset(SplitRows rows, int64_t page,
                                                           int64_t in_page, int64_t page_stride) {
  return page * page_stride + in_page * rows.data_row;
}
CACHESTORE_HOST_DEVICE constexpr int64_t split_scale_offset(SplitRows rows, int64_t page,
                                                            int64_t in_page, int64_t page_size,
                                                            int64_t page_stride) {
  return page * page_stride + page_size * rows.data_row + in_page * rows.scale_row;
}

// ---- index-K fp4 (the 68-byte indexer page) ------------------------------------------------
// page: [P x D/2 bytes e2m1][P x D/32 UE8M0 bytes]; D a multiple of 32, at most 512.
inline constexpr int32_t kFp4Group = 32;
inline constexpr int32_t kMaxIndexKFp4HeadDim = 512;
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp4_token_bytes(int64_t head_dim) {
  return head_dim / 2 + head_dim / kFp4Group;
}
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp4_min_page_stride(int64_t page_size,
                                                                     int64_t head_dim) {
  return page_size * index_k_fp4_token_bytes(head_dim);
}
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp4_data_offset(int64_t page, int64_t in_page,
                                                                 int64_t page_stride,
                                                                 int64_t head_dim) {
  return page * page_stride + in_page * (head_dim / 2);
}
CACHESTORE_HOST_DEVICE constexpr int64_t index_k_fp4_scale_offset(int64_t page, int64_t in_page,
                                                                  int64_t page_size,
                                                                  int64_t page_stride,
                                                                  int64_t head_dim) {
  return page * page_stride + page_size * (head_dim / 2) + in_page * (head_dim / kFp4Group);
}

// ---- FlashMLA V3.2 "fp8_ds_mla": 656 B/token, one record per token -------------------------
inline constexpr int32_t kV32NopeDim = 512;       // e4m3 values, 4 tiles of 128
inline constexpr int32_t kV32TileSize = 128;
inline constexpr int32_t kV32NumTiles = 4;
inline constexpr int64_t kV32ScalesOffset = 512;  // 4 fp32
inline constexpr int64_t kV32RopeOffset = 528;    // 64 bf16
inline constexpr int64_t kV32RecordBytes = 656;

CACHESTORE_HOST_DEVICE constexpr int64_t v32_min_page_stride(int64_t page_size) {
  return page_size * kV32RecordBytes;
}
CACHESTORE_HOST_DEVICE constexpr int64_t v32_record_offset(int64_t page, int64_t in_page,
                                                           int64_t page_stride) {
  return page * page_stride + in_page * kV32RecordBytes;
}

// ---- paged K/V (store_paged_kv): element strides of the layouts engines use --------------
// Element (slot s, head h, index d) = base + (s / P) * page + (s % P) * entry + h * head + d.
struct KvStrides {
  int64_t page;
  int64_t entry;
  int64_t head;
};
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
CACHESTORE_HOST_DEVICE constexpr KvStrides kv_stacked_nhd_strides(int64_t page_size, int64_t heads,
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
inline constexpr int32_t kMaxKvHeads = 256;
inline constexpr int32_t kMaxKvHeadDim = 1024;

static_assert(v4_min_page_stride(64) == 37440, "DESIGN.md: V4 page stride for P=64");
static_assert(v4_min_page_stride(256) == 149760, "DESIGN.md: V4 page stride for P=256");
static_assert(index_k_fp8_min_page_stride(64, 128) == 8448, "indexer page for P=64, D=128");
static_assert(split_min_page_stride(kV41Rows, 64) == 33792, "DESIGN.md: V41 page stride for P=64");
static_assert(split_min_page_stride(kV41Fp4Rows, 64) == 18432, "DESIGN.md: V41_FP4, P=64");
static_assert(split_min_page_stride({kV4DataRowBytes, kV4ScaleRowBytes}, 64) ==
                  v4_min_page_stride(64), "V4 is a split layout too");
static_assert(index_k_fp4_min_page_stride(64, 128) == 4352, "fp4 indexer page for P=64, D=128");

}  // namespace cachestore::layout
