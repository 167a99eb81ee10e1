// Error reporting of the entry points: a Status plus a thread-local message naming the argument.
#pragma once

#include "cachestore/cachestore.h"

namespace cachestore::detail {

// Records the message (printf-style) for last_error_message() and returns `status`.
Status fail(Status status, const char* format, ...) __attribute__((format(printf, 2, 3)));
// Clears the message and returns kSuccess.
Status succeed();

#define CACHESTORE_RETURN_IF_ERROR(expr)                              \
  do {                                                                \
    const ::cachestore::Status cachestore_status_ = (expr);           \
    if (cachestore_status_ != ::cachestore::Status::kSuccess) return cachestore_status_; \
  } while (0)

}  // namespace cachestore::detail
