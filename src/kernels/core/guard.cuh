// The guard of every store kernel, written once: the PDL prologue, the count and slot loads, the
// row verdict with its diagnostics, and where a stored row lands.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include <cstring>

#include "detail/guard.h"
#include "kernels/args.h"

namespace cachestore::kernels {

// The count, the slots and the inputs may be written by the previous kernel in the stream: with
// PDL, wait for it before the first read. Dependents launch once every block of this grid has
// triggered or exited, and a block counts as triggered only when all its threads have. A grid
// that fits in one wave (guard.early_trigger, decided by the launcher) triggers from every thread
// before the wait, so the next node's launch overlaps this one; a larger grid releases by
// exiting, because dependents launched early would take SM slots from its remaining blocks.
// Their own griddepcontrol.wait still waits for this grid to complete and flush, so an early
// trigger never exposes partial writes.
//
// kPdl is each kernel's template parameter: without PDL there is no prologue at all, so the
// compiler is free to interleave the address arithmetic with the loads. An image without
// griddepcontrol (before sm_90) runs neither instruction; the launcher does not ask for PDL
// there. Rows call it through begin_row, after their addresses.
template <bool kPdl>
__device__ __forceinline__ void begin_store(const GuardArgs& guard) {
  if constexpr (kPdl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (guard.early_trigger) cudaTriggerProgrammaticLaunchCompletion();
    cudaGridDependencySynchronize();
#endif
  }
}

// An address computed here stays here: without the empty volatile asm the compiler sinks the
// arithmetic of a conditional load into the load's block, behind the wait (a volatile asm stays
// in order with the wait's).
template <typename T>
__device__ __forceinline__ void compute_before_wait(const T*& address) {
  asm volatile("" : "+l"(address));
}

// A load from an address begin_row pinned: an explicit ld.global (what a plain global load
// compiles to, LDG.E) as a volatile asm, so that it stays after the wait; a plain load through a
// pointer that came out of an asm would be a generic LD. Unpinned, a plain load.
template <bool kPinned, typename T>
__device__ __forceinline__ T load_global(const T* p) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                "a 2-, 4-, 8- or 16-byte load");
  if constexpr (!kPinned) {
    return *p;
  } else if constexpr (sizeof(T) == 2) {
    uint16_t h;
    asm volatile("ld.global.b16 %0, [%1];" : "=h"(h) : "l"(p));
    T value;
    memcpy(&value, &h, sizeof(T));
    return value;
  } else {
    uint32_t w[sizeof(T) / 4];
    if constexpr (sizeof(T) == 4) {
      asm volatile("ld.global.b32 %0, [%1];" : "=r"(w[0]) : "l"(p));
    } else if constexpr (sizeof(T) == 8) {
      asm volatile("ld.global.v2.b32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
    } else {
      asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                   : "l"(p));
    }
    T value;
    memcpy(&value, w, sizeof(T));
    return value;
  }
}

// Where a row's guard reads: the count (nullptr: every row real) and the row's slot, at
// slot + row. Unpinned (no PDL), the address arithmetic stays at the loads, where the compiler
// schedules it with them. Pinned (begin_row's kPinned, always with PDL), begin_row computes both
// addresses before the wait (pin); the count's is then a plain pointer, never null: without a
// count it is the first slot's word (in bounds: a launch has a row), read and ignored. A null
// test after the wait would put two constant-bank reads and a compare in front of the count's
// load, because ptxas re-reads a parameter from the constant bank rather than keep it across
// the wait.
struct CountSource {
  const int32_t* count;
  const int32_t* count_read;  // with PDL: the address the count load reads

  // The count as read; classify_row needs no clamp (see detail/guard.h).
  template <bool kPinned>
  __device__ __forceinline__ int64_t load_count(const GuardArgs& guard) const {
    if constexpr (kPinned) {
      const int32_t n = load_global<true>(count_read);
      return count == nullptr ? guard.num_tokens : n;
    } else {
      return count == nullptr ? guard.num_tokens : *count;
    }
  }
};

// A slot mapping of SlotT (int32_t, int64_t); the page table is unread.
template <typename SlotT>
struct GuardSources : CountSource {
  const SlotT* slot;
  int64_t row;

  __device__ __forceinline__ GuardSources(const GuardArgs& guard, const SlotArgs& slots,
                                          const PageTableArgs&, int64_t row)
      : CountSource{guard.n_ptr, guard.n_ptr},
        slot(static_cast<const SlotT*>(slots.data)), row(row) {}

  __device__ __forceinline__ void pin() {
    if (count == nullptr) count_read = reinterpret_cast<const int32_t*>(slot);
    slot += row;
    row = 0;
    compute_before_wait(count_read);
    compute_before_wait(slot);
  }
  // The row's slot; the count `n` is not needed to read it.
  template <bool kPinned>
  __device__ __forceinline__ int64_t load_slot(int64_t /*n*/) const {
    return load_global<kPinned>(slot + row);
  }
};

// What a page-table lookup that fails on a real row gives: a slot past every capacity, so that
// the guard counts it as out of range (on the owner of its nominal page only, as every slot).
inline constexpr int64_t kUnmappedSlot = INT64_MAX;

// A page table: the row's batch index and position load beside the count; a real row whose
// batch index is in [0, batch) and whose position is >= 0 then reads its request's page range,
// indptr[b] and indptr[b + 1], and, when the position's page is inside it, the page id. A padded
// row reads neither kv_indptr nor kv_indices, so nothing outside indptr[0 .. batch] is read.
template <>
struct GuardSources<PageTableSlots> : CountSource {
  const int32_t* batch_index;  // the arrays' first entries, then (pinned) the row's
  const int32_t* position;
  int64_t offset;              // the row's entry from the pointers above: row, 0 once pinned
  const int32_t* indptr;
  const int32_t* indices;
  int32_t batch;
  FastDivmod page;
  int64_t row;

  __device__ __forceinline__ GuardSources(const GuardArgs& guard, const SlotArgs& slots,
                                          const PageTableArgs& table, int64_t row)
      : CountSource{guard.n_ptr, guard.n_ptr},
        batch_index(static_cast<const int32_t*>(slots.data)), position(table.positions),
        offset(row), indptr(table.indptr), indices(table.indices), batch(table.batch),
        page(table.page), row(row) {}

  // As the slot mapping's: without a count, the first batch index's word (a row past the batch
  // reads the count too).
  __device__ __forceinline__ void pin() {
    if (count == nullptr) count_read = batch_index;
    batch_index += offset;
    position += offset;
    offset = 0;
    compute_before_wait(count_read);
    compute_before_wait(batch_index);
    compute_before_wait(position);
  }
  template <bool kPinned>
  __device__ __forceinline__ int64_t load_slot(int64_t n) const {
    const int32_t b = load_global<kPinned>(batch_index + offset);
    const int32_t pos = load_global<kPinned>(position + offset);
    if (row >= n || static_cast<uint32_t>(b) >= static_cast<uint32_t>(batch) || pos < 0)
      return kUnmappedSlot;
    const uint32_t page_in_request = page.div(static_cast<uint32_t>(pos));
    const uint32_t in_page = static_cast<uint32_t>(pos) - page_in_request * page.divisor;
    const int32_t first = indptr[b];
    const int32_t end = indptr[b + 1];
    const int64_t k = static_cast<int64_t>(first) + page_in_request;
    if (first < 0 || k >= end) return kUnmappedSlot;
    const int32_t id = indices[k];
    if (id < 0) return kUnmappedSlot;
    return static_cast<int64_t>(id) * page.divisor + in_page;
  }
};

// The start of a row whose guard reads `sources` and whose inputs are `inputs`, right before its
// first load. kPinned (always with PDL): the addresses of all its loads are computed here, before
// the wait (the kernel parameters cannot change under it, only the memory the previous kernel
// writes), so that the first reads of the parameters' constant-bank lines overlap the previous
// kernel and the loads issue right after the wait. A kernel may pin without PDL as well (the
// index-K rows at their compiled head dim). Then begin_store.
template <bool kPdl, bool kPinned = kPdl, typename SlotT, typename... Pointers>
__device__ __forceinline__ void begin_row(const GuardArgs& guard, GuardSources<SlotT>& sources,
                                          Pointers&... inputs) {
  static_assert(kPinned || !kPdl, "the PDL prologue needs the addresses before its wait");
  if constexpr (kPinned) {
    sources.pin();
    (compute_before_wait(inputs), ...);
  }
  begin_store<kPdl>(guard);
}

// The guard with page-owner sharding (docs/layouts.md): the verdict on the global slot against
// the capacity of all owners together (slots.capacity = local capacity * owner_size), then a row
// on another owner's page is skipped, not counted. `leader` is one thread of the row's group: it
// counts an out-of-range slot, and (when `count_negative`, row 0) a negative n, once per launch.
// The negative-n check reads the count the row loaded anyway, so that no extra load sits in
// front of warp 0's loads. A stored row is never counted (row 0 with n < 0 is not stored): a
// stored row's path is the stored test (detail::row_is_stored) and one branch.
__device__ __forceinline__ bool row_is_stored(const GuardArgs& guard, const SlotArgs& slots,
                                              int64_t row, int64_t n, int64_t slot,
                                              int64_t page, bool leader,
                                              bool count_negative = true) {
  if (detail::row_is_stored(row, n, slot, page, slots.reserved, slots.capacity, slots.owner_log2,
                            slots.owner_rank))
    return true;
  if (leader && guard.diagnostics != nullptr) {
    if (detail::classify_owned_row(row, n, slot, page, slots.reserved, slots.capacity,
                                   slots.owner_log2, slots.owner_rank) ==
        detail::RowVerdict::kOutOfRange)
      atomicAdd(&guard.diagnostics->out_of_range_slots, 1ull);
    if (count_negative && row == 0 && n < 0)
      atomicAdd(&guard.diagnostics->negative_token_counts, 1ull);
  }
  return false;
}

// Where a stored row lands: its global page (the owner filter reads it), the page in this
// owner's cache and the offset in the page.
struct PagePosition {
  int64_t global_page;
  int64_t local_page;
  int64_t in_page;

  __device__ __forceinline__ PagePosition(int64_t page, int64_t offset, const SlotArgs& slots)
      : global_page(page), local_page(page >> slots.owner_log2), in_page(offset) {}

  // Power-of-two page sizes: shifts.
  __device__ __forceinline__ static PagePosition of_slot(int64_t slot, int32_t page_shift,
                                                         const SlotArgs& slots) {
    return {slot >> page_shift, slot & ((int64_t{1} << page_shift) - 1), slots};
  }
};

}  // namespace cachestore::kernels
