// Per-device facts, CUB-style: the code image the driver actually runs for this library on the
// current device (cudaFuncGetAttributes on one of the library's own kernels) and the tuning
// policy for it, cached per device.
#pragma once

#include <cstdint>

#include "cachestore/cachestore.h"
#include "tuning.h"

namespace cachestore::detail {

struct ArchInfo {
  DeviceInfo device;
  tuning::StorePolicy policy;
  int32_t sm_count;
  bool pdl;  // the running image executes griddepcontrol.wait: PDL may be requested
};

// Facts for the current device; kErrorArchMismatch when no image of the library runs on it.
Status current_arch(ArchInfo* out);

}  // namespace cachestore::detail
