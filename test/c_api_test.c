/* The C ABI from a C99 translation unit: every function reached through its host-side
 * validation (no GPU needed), statuses and messages checked. */
#include <stdio.h>
#include <string.h>

#include "cachestore/cachestore_c.h"

static int failures = 0;

#define EXPECT(cond)                                                              \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: expected %s (last message: %s)\n", __FILE__, __LINE__, #cond, \
              cachestore_last_error_message());                                   \
      ++failures;                                                                 \
    }                                                                             \
  } while (0)

static void* fake(unsigned long address) { return (void*)address; }

int main(void) {
  cachestore_status_t s;
  EXPECT(cachestore_version() >= 100);
  EXPECT(strcmp(cachestore_status_string(CACHESTORE_SUCCESS), "kSuccess") == 0);
  EXPECT(strcmp(cachestore_status_string(CACHESTORE_ERROR_CAPACITY_OVERFLOW), "kErrorCapacityOverflow") == 0);

  s = cachestore_store_index_k_bf16(-1, NULL, NULL, fake(0x1000), CACHESTORE_SLOT_INT64, -1,
                                    fake(0x2000), 128, fake(0x4000), 128, 64, 128, 0, NULL);
  EXPECT(s == CACHESTORE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cachestore_last_error_message(), "batch.num_tokens") != NULL);

  s = cachestore_store_index_k_bf16(4, NULL, NULL, fake(0x1000), CACHESTORE_SLOT_INT64, -1,
                                    fake(0x2002), 128, fake(0x4000), 128, 64, 128, 0, NULL);
  EXPECT(s == CACHESTORE_ERROR_MISALIGNED_OPERAND);

  s = cachestore_store_index_k_fp8(4, NULL, NULL, fake(0x1000), CACHESTORE_SLOT_INT32, -1,
                                   fake(0x2000), 128, fake(0x4000), 8, 64, 8448, 128, 7, 0, NULL);
  EXPECT(s == CACHESTORE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cachestore_last_error_message(), "cache.scale_rule") != NULL);

  s = cachestore_store_index_k_fp8(4, NULL, NULL, fake(0x1000), CACHESTORE_SLOT_INT32, -1,
                                   fake(0x2000), 128, fake(0x4000), 8, 48, 8448, 128,
                                   CACHESTORE_SCALE_AMAX, 0, NULL);
  EXPECT(s == CACHESTORE_ERROR_NOT_SUPPORTED);

  s = cachestore_fused_store_cache(4, NULL, NULL, fake(0x1000), CACHESTORE_SLOT_INT64, -1,
                                   fake(0x2000), 576, fake(0x2000 + 896), 576, CACHESTORE_MLA_V4,
                                   fake(0x8000), 4, 64, 37440, CACHESTORE_SCALE_AMAX,
                                   NULL, 0, NULL, -1, NULL, 0, 0, 0, 0, 0, 0, NULL);
  EXPECT(s == CACHESTORE_ERROR_NOT_SUPPORTED);
  EXPECT(strstr(cachestore_last_error_message(), "kv_cache.scale_rule") != NULL);

  s = cachestore_fused_store_cache(4, NULL, NULL, fake(0x1000), CACHESTORE_SLOT_INT64, -1,
                                   fake(0x2000), 576, fake(0x2000 + 896), 576, CACHESTORE_MLA_V32,
                                   fake(0x8000), 4, 64, 656 * 64, CACHESTORE_SCALE_POW2,
                                   fake(0x3000), 128, NULL, -1, fake(0x4000), 4, 64, 8448, 128,
                                   CACHESTORE_SCALE_AMAX, 1, NULL);
  EXPECT(s == CACHESTORE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cachestore_last_error_message(), "index_slots.data") != NULL);

  s = cachestore_query_device(0, NULL, NULL, NULL);
  EXPECT(s == CACHESTORE_SUCCESS || s == CACHESTORE_ERROR_CUDA_RUNTIME ||
         s == CACHESTORE_ERROR_ARCH_MISMATCH);

  if (failures == 0) printf("c_api_test: all checks passed (cachestore %d)\n", cachestore_version());
  return failures == 0 ? 0 : 1;
}
