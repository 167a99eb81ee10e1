// Per-device facts and launch policies, CUB-style: the policy follows the code image the
// driver actually runs for this library on the current device (cudaFuncGetAttributes on one of
// the library's own kernels), cached per device.
#pragma once

#include <cstdint>

#include "cachestore/cachestore.h"

namespace cachestore::detail {

struct StorePolicy {
  int32_t block_threads;       // index-K kernels: threads per block (rows = threads / lanes)
  int32_t mla_rows_per_block;  // fused_store_cache: KV warps (rows) per block
};

// Hopper: tuned on the H200 with bench_store. Blackwell: not measured here (no device lent);
// a larger block keeps more bytes in flight per SM for its higher bandwidth.
inline constexpr StorePolicy kPortablePolicy{256, 4};
inline constexpr StorePolicy kHopperPolicy{256, 8};
inline constexpr StorePolicy kBlackwellPolicy{512, 8};

struct ArchInfo {
  DeviceInfo device;
  StorePolicy policy;
  bool pdl;  // the running image executes griddepcontrol.wait: PDL may be requested
};

// Facts for the current device; kErrorArchMismatch when no image of the library runs on it.
Status current_arch(ArchInfo* out);

}  // namespace cachestore::detail
