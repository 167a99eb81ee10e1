// Host references of every store: plain C++, the contract of docs/layouts.md, the library's own
// params structs with every pointer a host pointer (num_tokens_non_padded and diagnostics
// included). Used by the tests and the benchmark's verification.
#pragma once

#include "cachestore/cachestore.h"

namespace cachestore::reference {

void store_index_k_bf16(const IndexKBf16Params& params);
void store_index_k_fp8(const IndexKFp8Params& params);
void store_index_k_fp4(const IndexKFp4Params& params);
void fused_store_cache(const FusedStoreParams& params);
void store_paged_kv(const PagedKvParams& params);

// One token's 132-byte-layout record pieces: D e4m3 bytes and D/128 fp32 scales.
void quantize_index_k_row(const uint16_t* k, int32_t head_dim, ScaleRule rule, uint8_t* data,
                          float* scales);
// V4: 576-byte data row and 8-byte scale row. V3.2: the 656-byte record.
void quantize_v4_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                     uint8_t* scale_row);
void quantize_v32_row(const uint16_t* nope, const uint16_t* rope, ScaleRule rule,
                      uint8_t* record);
// V4.1: the 512-byte data row and 16-byte scale row (V41), or the 256-byte e2m1 data row and
// 32-byte e4m3 scale row (V41_FP4).
void quantize_v41_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                      uint8_t* scale_row);
void quantize_v41_fp4_row(const uint16_t* nope, const uint16_t* rope, uint8_t* data_row,
                          uint8_t* scale_row);
// One 16-value NVFP4 block under the global decode scale g (FlashInfer's
// nvfp4_quantize_append_paged_kv_cache): amax over the values (NaN ignored), the e4m3 scale byte
// of amax / (6 g) (IEEE division, round to nearest even, saturating), out = 1 / (sf g) (0 when
// amax, sf or g is not > 0), and 8 bytes of e2m1 codes of x * out, the even value in the low
// nibble: ties to even, saturating at 6, the sign bit kept, a NaN product giving 0.
void quantize_nvfp4_block(const float* x, float g, uint8_t* packed, uint8_t* scale_byte);
// One token of the 68-byte fp4 indexer layout: D/2 e2m1 bytes and D/32 UE8M0 bytes.
void quantize_index_k_fp4_row(const uint16_t* k, int32_t head_dim, Fp4Ties ties, uint8_t* data,
                              uint8_t* scales);


}  // namespace cachestore::reference
