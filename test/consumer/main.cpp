// Links the installed cachestore and checks a call's argument validation (no GPU needed).
#include <cachestore/cachestore.h>
#include <cachestore/layout.h>

#include <cstdio>
#include <cstring>

int main() {
  cachestore::IndexKBf16Params params;  // no buffers: refused before anything is launched
  params.batch.num_tokens = 4;
  const cachestore::Status status = cachestore::store_index_k_bf16(params, nullptr);
  std::printf("cachestore %d: %s: %s\n", cachestore::version(), cachestore::status_string(status),
              cachestore::last_error_message());
  const bool ok = status == cachestore::Status::kErrorInvalidArgument &&
                  std::strstr(cachestore::last_error_message(), "slots") != nullptr &&
                  cachestore::layout::min_page_stride(cachestore::MlaLayout::kV4, 64) == 37440 &&
                  cachestore::check(params) == status;
  return ok ? 0 : 1;
}
