#include <cstdarg>
#include <cstdio>

#include "detail/status.h"

namespace cachestore {
namespace {
thread_local char g_last_error[512] = "";
}  // namespace

const char* status_string(Status status) {
  switch (status) {
    case Status::kSuccess: return "kSuccess";
    case Status::kErrorInvalidArgument: return "kErrorInvalidArgument";
    case Status::kErrorMisalignedOperand: return "kErrorMisalignedOperand";
    case Status::kErrorNotSupported: return "kErrorNotSupported";
    case Status::kErrorCapacityOverflow: return "kErrorCapacityOverflow";
    case Status::kErrorArchMismatch: return "kErrorArchMismatch";
    case Status::kErrorCudaRuntime: return "kErrorCudaRuntime";
  }
  return "kUnknownStatus";
}

const char* last_error_message() { return g_last_error; }

int32_t version() {
  return CACHESTORE_VERSION_MAJOR * 10000 + CACHESTORE_VERSION_MINOR * 100 +
         CACHESTORE_VERSION_PATCH;
}

namespace detail {

Status fail(Status status, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(g_last_error, sizeof g_last_error, format, args);
  va_end(args);
  return status;
}

Status succeed() {
  g_last_error[0] = '\0';
  return Status::kSuccess;
}

}  // namespace detail
}  // namespace cachestore
