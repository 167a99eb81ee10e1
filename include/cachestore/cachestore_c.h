/* cachestore C ABI: every entry point with plain C types, for ctypes / cffi / other languages.
 * Compiles as C99 and as C++. Pointers are device pointers unless stated; sizes and strides are
 * int64_t (strides of bf16 inputs in elements, of paged caches in bytes); enums are int32_t
 * with the values below; the stream is a cudaStream_t passed as void* (NULL: legacy stream).
 * Semantics, layouts and the row guard are those of cachestore.h and README.md. */
#ifndef CACHESTORE_CACHESTORE_C_H_
#define CACHESTORE_CACHESTORE_C_H_

#include <stdint.h>

#include "cachestore/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t cachestore_status_t;
enum {
  CACHESTORE_SUCCESS = 0,
  CACHESTORE_ERROR_INVALID_ARGUMENT = 1,
  CACHESTORE_ERROR_MISALIGNED_OPERAND = 2,
  CACHESTORE_ERROR_NOT_SUPPORTED = 3,
  CACHESTORE_ERROR_CAPACITY_OVERFLOW = 4,
  CACHESTORE_ERROR_ARCH_MISMATCH = 5,
  CACHESTORE_ERROR_CUDA_RUNTIME = 6
};
enum { CACHESTORE_SLOT_INT32 = 0, CACHESTORE_SLOT_INT64 = 1 };
enum { CACHESTORE_SCALE_AMAX = 0, CACHESTORE_SCALE_POW2 = 1 };
enum { CACHESTORE_MLA_V4 = 0, CACHESTORE_MLA_V32 = 1 };
enum { CACHESTORE_PATH_PORTABLE = 0, CACHESTORE_PATH_HOPPER = 1, CACHESTORE_PATH_BLACKWELL = 2 };

/* Constant name of a status, e.g. "kErrorMisalignedOperand". */
CACHESTORE_EXPORT const char* cachestore_status_string(cachestore_status_t status);
/* Message of this thread's last failed call, naming the argument; "" after a success. */
CACHESTORE_EXPORT const char* cachestore_last_error_message(void);
/* MAJOR*10000 + MINOR*100 + PATCH. */
CACHESTORE_EXPORT int32_t cachestore_version(void);
/* The kernel path (CACHESTORE_PATH_*) and image versions the library runs on `device`. */
CACHESTORE_EXPORT cachestore_status_t cachestore_query_device(int32_t device, int32_t* path,
                                                              int32_t* binary_version,
                                                              int32_t* compute_capability);

/* Common arguments of every store:
 *   num_tokens             rows in the padded batch (host)
 *   num_tokens_non_padded  device int32[1], real rows n read at run time; NULL = all rows
 *   diagnostics            device uint64[2] {out_of_range_slots, negative_token_counts}; NULL ok
 *   slot_mapping           device int32 or int64 [num_tokens] (slot_type)
 *   reserved_slot          a slot never written (e.g. 0), or -1 for none
 *   enable_pdl             nonzero: programmatic dependent launch on sm_90+ */
CACHESTORE_EXPORT cachestore_status_t cachestore_store_index_k_bf16(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* slot_mapping, int32_t slot_type, int64_t reserved_slot,
    const void* k, int64_t k_row_stride,            /* bf16 [num_tokens, head_dim] */
    void* cache, int64_t cache_row_stride,          /* bf16 [num_slots, head_dim] */
    int64_t num_slots, int32_t head_dim, int32_t enable_pdl, void* stream);

CACHESTORE_EXPORT cachestore_status_t cachestore_store_index_k_fp8(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* slot_mapping, int32_t slot_type, int64_t reserved_slot,
    const void* k, int64_t k_row_stride,            /* bf16 [num_tokens, head_dim] */
    void* cache, int64_t num_pages, int32_t page_size, int64_t page_stride_bytes,
    int32_t head_dim, int32_t scale_rule, int32_t enable_pdl, void* stream);

/* index_k == NULL: no fused index-K (the index_* arguments are then ignored). */
CACHESTORE_EXPORT cachestore_status_t cachestore_fused_store_cache(
    int64_t num_tokens, const int32_t* num_tokens_non_padded, void* diagnostics,
    const void* kv_slot_mapping, int32_t slot_type, int64_t kv_reserved_slot,
    const void* nope, int64_t nope_row_stride,      /* bf16 [num_tokens, 448 | 512] */
    const void* rope, int64_t rope_row_stride,      /* bf16 [num_tokens, 64] */
    int32_t layout, void* kv_cache, int64_t kv_num_pages, int32_t kv_page_size,
    int64_t kv_page_stride_bytes, int32_t kv_scale_rule,
    const void* index_k, int64_t index_k_row_stride, /* bf16 [num_tokens, index_head_dim] */
    const void* index_slot_mapping, int64_t index_reserved_slot,
    void* index_cache, int64_t index_num_pages, int32_t index_page_size,
    int64_t index_page_stride_bytes, int32_t index_head_dim, int32_t index_scale_rule,
    int32_t enable_pdl, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* CACHESTORE_CACHESTORE_C_H_ */
