// The row guard of docs/layouts.md, written once: used by every kernel and by the host references.
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

// Row `row` (< num_tokens) with slot `slot`; `n` is the device count as read (clamping it to
// [0, num_tokens] changes nothing here: rows are in [0, num_tokens)); reserved < 0 means no
// reserved slot. The store test is one unsigned compare for 0 <= slot < capacity: the
// kernels evaluate it between their loads and their stores, on the critical path.
CACHESTORE_HOST_DEVICE constexpr RowVerdict classify_row(int64_t row, int64_t n, int64_t slot,
                                                         int64_t reserved, int64_t capacity) {
  if (row < n && static_cast<uint64_t>(slot) < static_cast<uint64_t>(capacity) &&
      slot != reserved)
    return RowVerdict::kStore;
  return row < n && slot >= capacity && slot != reserved ? RowVerdict::kOutOfRange
                                                         : RowVerdict::kSkip;
}

// Page-owner sharding (context parallel): page g of the global slot space lives on owner
// g % owner_size (owner_size = 2^owner_log2), at its local page g / owner_size. owner_log2 = 0
// (one owner) owns every page.
// owner_size <= 2^20 (check_owner), so the page's low 32 bits decide: one 32-bit mask and
// compare instead of 64-bit ones on the kernels' chain after the slot load.
CACHESTORE_HOST_DEVICE constexpr bool owns_page(int64_t page, int32_t owner_log2,
                                                int32_t owner_rank) {
  return (static_cast<uint32_t>(page) & ((uint32_t{1} << owner_log2) - 1u)) ==
         static_cast<uint32_t>(owner_rank);
}

// The full verdict with sharding, as the kernels apply it: `capacity` is the capacity of all
// owners together (local capacity * owner_size); a row on another owner's page is skipped and
// not counted, whatever its slot.
CACHESTORE_HOST_DEVICE constexpr RowVerdict classify_owned_row(int64_t row, int64_t n, int64_t slot,
                                                               int64_t page, int64_t reserved,
                                                               int64_t capacity, int32_t owner_log2,
                                                               int32_t owner_rank) {
  const RowVerdict verdict = classify_row(row, n, slot, reserved, capacity);
  return owns_page(page, owner_log2, owner_rank) ? verdict : RowVerdict::kSkip;
}

// classify_owned_row(...) == kStore alone: the stored row's path in the kernels. Its four tests
// are independent, so they evaluate side by side (the three-way verdict chains selects after
// them); the verdict is computed only for a row that is not stored, for the diagnostics.
CACHESTORE_HOST_DEVICE constexpr bool row_is_stored(int64_t row, int64_t n, int64_t slot,
                                                    int64_t page, int64_t reserved,
                                                    int64_t capacity, int32_t owner_log2,
                                                    int32_t owner_rank) {
  return (row < n) & (static_cast<uint64_t>(slot) < static_cast<uint64_t>(capacity)) &
         (slot != reserved) & owns_page(page, owner_log2, owner_rank);
}

}  // namespace cachestore::detail
