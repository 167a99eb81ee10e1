// Kernel parameter structs: plain values the launchers fill after validation.
#pragma once

#include <cstdint>

#include "cachestore/cachestore.h"

namespace cachestore::kernels {

struct GuardArgs {
  int64_t num_tokens;           // rows in the padded batch
  const int32_t* n_ptr;         // device [1] or nullptr (all rows real)
  Diagnostics* diagnostics;     // device or nullptr
  bool pdl;                     // launched as a programmatic dependent (sm_90+ images only)
};

struct SlotArgs {
  const void* data;             // device [num_tokens] SlotT
  int64_t reserved;             // < 0: none
  int64_t capacity;             // slots
};

struct PagedCacheArgs {
  uint8_t* data;                // device [num_pages, page_stride] bytes
  int64_t page_stride;          // bytes
  int32_t page_shift;           // log2(page size)
};

struct IndexKBf16Args {
  SlotArgs slots;
  const uint16_t* k;            // [num_tokens, D] bf16, row stride k_row_stride elements
  int64_t k_row_stride;
  uint16_t* cache;              // [capacity, D] bf16, row stride cache_row_stride elements
  int64_t cache_row_stride;
  int32_t vecs_per_row;         // D / 8 (16-byte vectors)
};

struct IndexKFp8Args {
  SlotArgs slots;
  const uint16_t* k;            // [num_tokens, D] bf16, row stride k_row_stride elements
  int64_t k_row_stride;
  PagedCacheArgs cache;         // 132-byte indexer layout
  int32_t head_dim;             // D, multiple of 128, <= 512
  int32_t lanes_log2;           // log2 of the lanes per token: next_pow2(D / 16)
  ScaleRule rule;
};

struct MlaArgs {
  SlotArgs slots;
  const uint16_t* nope;         // [num_tokens, 448 | 512] bf16
  int64_t nope_row_stride;
  const uint16_t* rope;         // [num_tokens, 64] bf16
  int64_t rope_row_stride;
  PagedCacheArgs cache;         // V4 or V3.2 layout (template parameter of the kernel)
  ScaleRule rule;               // V3.2 only
};

}  // namespace cachestore::kernels
