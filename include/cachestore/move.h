// cachestore page movement: guarded page copies between caches, staging buffers and pinned host
// memory, for offload (hierarchical caching), prefix caching and prefill -> decode transfer.
//
// A cache page, as the stores lay it out, is a set of planes. Plane j of page p of layer l holds,
// for every token t < page_size and head h < rows[j].num_heads, rows[j].row_bytes contiguous
// bytes at
//   base(l, j) + p * page_stride + t * token_stride + h * head_stride        (bytes)
//   base(l, j) = (plane_bases ? plane_bases[l * num_planes + j] : data + l * layer_stride)
//                + offset.
// A paged K/V cache is a K plane and a V plane (nvfp4 adds their block-scale planes); a byte
// page (an MLA page, an index-K page) is one plane of one token whose row is the page, or the
// layout's own planes (the data rows and the scale rows) where its page size changes. A staging
// buffer is the same thing with contiguous strides (docs/layouts.md, "Staging buffers").
//
// move_pages copies token t of the batch, t < n * src.page_size (n = *num_entries_non_padded,
// read on the device, clamped to [0, num_entries]), from source entry t / src.page_size to
// destination entry t / dst.page_size, at the same position in every plane and layer. Entry e
// of a side is page page_ids[e] (page_ids nullptr: page e). An entry whose page id is negative
// is padding: nothing is read or written for it. An id >= num_pages is skipped and counted once
// per launch and entry in MoveDiagnostics::out_of_range_pages. The two sides may differ in page
// size (one divides the other), in every stride and in layer bases: that is a relayout (NHD ->
// HND, P = 64 -> 16), byte for byte. Nothing synchronizes, allocates or copies to the host, so
// a call can be captured in a CUDA graph; pinned host memory is read and written in place by
// the kernel (zero copy), which is how one launch moves a whole batch to or from the host.
// With checksums each block's CRC-32 is computed from the source before the block is written:
// a gather records them beside its staging buffer, a scatter given them writes only the blocks
// that still match (a page corrupted in transit is counted, never stored).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cachestore/cachestore.h"

namespace cachestore {

inline constexpr int32_t kMaxPagePlanes = 4;

// Device-resident counters of a move, incremented atomically (the caller zeroes them).
struct MoveDiagnostics {
  unsigned long long out_of_range_pages;     // real entries whose page id is >= num_pages
                                             // (source or destination; counted once each)
  unsigned long long negative_entry_counts;  // launches that read n < 0 (treated as 0)
  unsigned long long checksum_mismatches;    // source blocks whose CRC-32 differs from
                                             // expected_checksums (not written); read and
                                             // written only when those are given
};

// What plane j holds per token: the same on both sides of a move.
struct PlaneRows {
  int32_t num_heads = 1;
  int32_t row_bytes = 0;
};

// Where plane j lies in one side (bytes; any non-negative strides, any alignment: the copy
// uses the widest vector that every address and stride of the plane allows on both sides).
struct PlaneStrides {
  int64_t offset = 0;
  int64_t page_stride = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

struct PageSide {
  void* data = nullptr;                // device or pinned host: layer 0's base
  int64_t layer_stride = 0;            // bytes between layers' bases
  const uint64_t* plane_bases = nullptr;  // optional device [num_layers * num_planes]: each
                                          // layer's and plane's base (lists of tensors); data
                                          // and layer_stride are then unread
  int64_t num_pages = 0;               // pages per layer (ids >= num_pages are out of range)
  int32_t page_size = 1;               // tokens per page
  const void* page_ids = nullptr;      // device [entries]: the page of each entry; nullptr: e
  SlotType page_ids_type = SlotType::kInt64;  // kInt32 | kInt64
  PlaneStrides planes[kMaxPagePlanes];
};

struct MovePagesParams {
  int64_t num_entries = 0;                          // source entries in the padded batch
  const int32_t* num_entries_non_padded = nullptr;  // device [1]: real entries n; nullptr: all
  MoveDiagnostics* diagnostics = nullptr;           // device, optional
  int32_t num_layers = 1;
  int32_t num_planes = 1;
  PlaneRows rows[kMaxPagePlanes];
  PageSide src;                                     // its entries: num_entries
  PageSide dst;  // its entries: num_entries * src.page_size / dst.page_size
  bool enable_pdl = false;                          // as LaunchOptions::enable_pdl
  // Integrity, a CRC-32 per block (an entry's plane of one layer: its rows in row order, token
  // then head, as a contiguous staging buffer holds them; zlib's CRC-32, as Python's
  // zlib.crc32 computes it), indexed (entry * num_layers + layer) * num_planes + plane:
  uint32_t* checksums = nullptr;  // device, optional: each real source block's, as read
  const uint32_t* expected_checksums = nullptr;  // device, optional: a source block whose
                                                 // CRC-32 differs is not written (counted)
};

// The copy (see above). Refused before anything is launched (the message names the argument):
// a plane, layer or entry count out of range, page sizes that do not divide, a destination
// entry list that does not hold the source's tokens, a side with no pages, a negative stride,
// strides that overlap rows or pages of one side, source and destination layers that share a
// byte (copy within one cache: through a staging buffer), pageable host memory.
CACHESTORE_EXPORT Status move_pages(const MovePagesParams& params, cudaStream_t stream);
// Every refusal of move_pages that needs no device query (all but the pageable-memory one).
CACHESTORE_EXPORT Status check(const MovePagesParams& params);

}  // namespace cachestore
