// A paged layout's write pattern without its arithmetic: bench_store's control for the % of copy
// that the layout's bytes can reach at all. Each row's input is read in 16-byte vectors (the
// store's input bytes) and written, unconverted, to the bytes the layout's record of that slot
// covers: its data row, then its scale row (layout::PagedRows, the table the stores use), at the
// same slots. Its time is what the layout's addresses cost the memory system (at decode-like
// slots, the small scale rows in sectors nothing else writes), with no quantization, guard or
// kernel shape of the store's in it. Unguarded: every slot is valid (bench_store's slots).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cachestore/layout.h"

namespace cachestore::bench {

// The pattern of `rows` for `num_tokens` rows of `in_width` bf16 values (a multiple of 8, at
// least the record's bytes / 2), pages of 2^page_shift slots.
cudaError_t layout_pattern(const uint16_t* in, int32_t in_width, const int64_t* slots,
                           uint8_t* cache, int64_t num_tokens, int32_t page_shift,
                           int64_t page_stride, layout::PagedRows rows, cudaStream_t stream);

}  // namespace cachestore::bench
