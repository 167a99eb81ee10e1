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

static_assert(v4_min_page_stride(64) == 37440, "DESIGN.md: V4 page stride for P=64");
static_assert(v4_min_page_stride(256) == 149760, "DESIGN.md: V4 page stride for P=256");
static_assert(index_k_fp8_min_page_stride(64, 128) == 8448, "indexer page for P=64, D=128");

}  // namespace cachestore::layout
