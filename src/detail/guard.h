// The row guard of DESIGN.md, written once: used by every kernel and by the host references.
#pragma once

#include <cstdint>

#include "cachestore/layout.h"

namespace cachestore::detail {

enum class RowVerdict : int32_t {
  kStore = 0,
  kSkip = 1,        // padding: beyond n, negative slot or the reserved slot
  kOutOfRange = 2,  // a real row whose slot is past the capacity: a caller bug, counted
};

// n as read from the device, clamped to [0, num_tokens].
CACHESTORE_HOST_DEVICE constexpr int64_t clamp_token_count(int64_t n, int64_t num_tokens) {
  return n < 0 ? 0 : (n > num_tokens ? num_tokens : n);
}

// Row `row` (< num_tokens) with slot `slot`; n_clamped from clamp_token_count; reserved < 0
// means no reserved slot.
CACHESTORE_HOST_DEVICE constexpr RowVerdict classify_row(int64_t row, int64_t n_clamped,
                                                         int64_t slot, int64_t reserved,
                                                         int64_t capacity) {
  if (row >= n_clamped || slot < 0 || slot == reserved) return RowVerdict::kSkip;
  return slot < capacity ? RowVerdict::kStore : RowVerdict::kOutOfRange;
}

}  // namespace cachestore::detail
