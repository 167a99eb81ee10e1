// Per-device facts and launch policies, CUB-style: the policy follows the code image the
// driver actually runs for this library on the current device (cudaFuncGetAttributes on one of
// the library's own kernels), cached per device.
#pragma once

#include <cstdint>

#include "cachestore/cachestore.h"

namespace cachestore::detail {

struct StorePolicy {
  int32_t block_threads;       // index-K kernels: threads per block at large n
  int32_t min_block_threads;   // ... and at small n, where rows are spread over the SMs
  int32_t index_k_spread_sms;  // ... over sm_count / this many SMs (1: all of them)
  int32_t mla_rows_per_block;  // fused_store_cache: KV warps (rows) per block at large n
  int32_t mla_min_rows;        // ... and at small n
  int32_t mla_two_per_sm_rows; // rows a block up to two such blocks an SM (0: off), without PDL,
                               // and for the fused kernel with PDL too (launch.cuh)
  bool fused_pdl_one_row;      // with PDL, the fused kernel takes one row a block up to one
                               // block an SM (launch.cuh)
};

// Hopper: the large-n sizes were chosen up front and not swept; spreading small batches was
// measured on the H200 (NOTES.md, version 5), and the index-K kernels' small-n blocks again in
// item 25: blocks of at least 128 threads over half the SMs (bf16: 8 rows a block up to 512 rows;
// fp8 at D = 128: 4 rows up to 256, 8 at 512) ran 0.01-0.05x of the lean node faster than 64
// threads over all of them, at every n <= 512; the MLA stores' 2-row blocks likewise (items 24,
// 25), and the fused kernel's 1-row blocks with PDL up to one block an SM (item 26). Blackwell:
// not measured (no device lent); a larger block keeps more bytes in flight per SM for its higher
// bandwidth.
inline constexpr StorePolicy kPortablePolicy{256, 64, 1, 4, 2, 0, false};
inline constexpr StorePolicy kHopperPolicy{256, 128, 2, 8, 2, 2, true};
inline constexpr StorePolicy kBlackwellPolicy{512, 64, 1, 8, 2, 0, false};

// Rows per block for `rows` rows: a small batch is spread over the SMs (one SM works through
// a block's memory requests one after another), a large one fills whole blocks. Powers of two
// in [min_rows, max_rows].
inline int32_t rows_per_block(int64_t rows, int32_t min_rows, int32_t max_rows, int32_t sm_count) {
  const int64_t per_sm = (rows + sm_count - 1) / sm_count;
  int32_t r = min_rows;
  while (r < max_rows && r < per_sm) r *= 2;
  return r;
}

struct ArchInfo {
  DeviceInfo device;
  StorePolicy policy;
  int32_t sm_count;
  bool pdl;  // the running image executes griddepcontrol.wait: PDL may be requested
};

// Facts for the current device; kErrorArchMismatch when no image of the library runs on it.
Status current_arch(ArchInfo* out);

}  // namespace cachestore::detail
