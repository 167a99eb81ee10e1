// What the C ABI's translation units share: the status conversion, the versioned-struct rule
// for output structs, and the layout-table id check.
#pragma once

#include <cstdint>
#include <cstring>

#include "cachestore/cachestore.h"
#include "cachestore/cachestore_c.h"
#include "detail/status.h"

namespace cachestore::c_api {

inline cachestore_status_t to_c(Status s) { return static_cast<cachestore_status_t>(s); }

// An output struct of the versioned rule: `value` written over the caller's struct_size bytes.
template <typename T>
Status write_info(T value, T* out, const char* name) {
  if (out == nullptr)
    return detail::fail(Status::kErrorInvalidArgument, "%s is null", name);
  uint32_t size = 0;
  std::memcpy(&size, out, sizeof size);
  if (size < sizeof(uint32_t) + sizeof(int32_t))
    return detail::fail(Status::kErrorInvalidArgument,
                        "%s->struct_size = %u: set it to sizeof the struct "
                        "(CACHESTORE_PARAMS_INIT)", name, size);
  value.struct_size = size < sizeof(T) ? size : static_cast<uint32_t>(sizeof(T));
  std::memcpy(out, &value, value.struct_size);
  return detail::succeed();
}

// A layout-table id `what` in 0 .. count - 1.
inline Status table_id(int32_t id, int32_t count, const char* what) {
  if (id < 0 || id >= count)
    return detail::fail(Status::kErrorInvalidArgument,
                        "%s = %d: not in the layout table (0 .. %d)", what, id, count - 1);
  return Status::kSuccess;
}

}  // namespace cachestore::c_api
