/* cachestore C ABI: every entry point with plain C types, for ctypes / cffi / other languages.
 * Compiles as C99 and as C++. Pointers are device pointers unless stated; sizes and strides are
 * int64_t (strides of bf16 inputs in elements, of paged caches in bytes); enums are int32_t
 * with the values below; the stream is a cudaStream_t passed as void* (NULL: legacy stream).
 * Semantics, layouts and the row guard are those of cachestore.h (docs/layouts.md). */
#ifndef CACHESTORE_CACHESTORE_C_H_
#define CACHESTORE_CACHESTORE_C_H_

#include <stdint.h>
#include <string.h>

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
enum { CACHESTORE_SLOT_INT32 = 0, CACHESTORE_SLOT_INT64 = 1, CACHESTORE_SLOT_PAGE_TABLE = 2 };
enum { CACHESTORE_SCALE_AMAX = 0, CACHESTORE_SCALE_POW2 = 1 };
enum { CACHESTORE_MLA_V4 = 0, CACHESTORE_MLA_V32 = 1, CACHESTORE_MLA_V41 = 2,
       CACHESTORE_MLA_V41_FP4 = 3 };
enum { CACHESTORE_FP4_TIES_TO_EVEN = 0, CACHESTORE_FP4_TIES_TOWARD_ZERO = 1 };
enum { CACHESTORE_INDEX_K_FP8 = 0, CACHESTORE_INDEX_K_FP4 = 1 };
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
 *   diagnostics            device uint64[2] {out_of_range_slots, negative_token_counts}, [3]
 *                          with out_of_range_positions for a store with RoPE; NULL ok
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

/* ---- Extensible entry points (the rule for every entry point from version 0.2 on) ----------
 * Each takes one parameter struct whose first member is `uint32_t struct_size`: the caller sets
 * it to sizeof the struct as it was compiled (CACHESTORE_PARAMS_INIT zeroes the struct and sets
 * it). Fields are only ever appended, never moved or removed, and every field's zero is its
 * default (owner_size 0 means 1, no sharding). So a caller compiled against an older header
 * passes a shorter struct and gets the defaults for the newer fields, and a caller compiled
 * against a newer header runs on an older library as long as the fields that library does not
 * know are zero (otherwise CACHESTORE_ERROR_NOT_SUPPORTED, naming the byte offset). struct_size
 * is checked before any other field is read: a size that no released header ever had for the
 * struct (below the oldest release's size, or between two releases' sizes) is refused with
 * CACHESTORE_ERROR_INVALID_ARGUMENT naming struct_size, so that a caller's fault never becomes a
 * different store. The embedded cachestore_slots_t is frozen; new options go at the end of the
 * outer struct. The flat-argument functions above are frozen as they are (version 0.1) and stay
 * exported. */
#define CACHESTORE_PARAMS_INIT(params)          \
  do {                                          \
    memset(&(params), 0, sizeof(params));       \
    (params).struct_size = sizeof(params);      \
  } while (0)

enum { CACHESTORE_KV_BF16 = 0, CACHESTORE_KV_FP16 = 1, CACHESTORE_KV_FP32 = 2 };
enum { CACHESTORE_KV_CACHE_AUTO = 0, CACHESTORE_KV_CACHE_FP8_E4M3 = 1,
       CACHESTORE_KV_CACHE_FP8_E5M2 = 2, CACHESTORE_KV_CACHE_NVFP4 = 3,
       CACHESTORE_KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD = 4 };

/* A slot mapping: slot_type CACHESTORE_SLOT_*; reserved_slot -1 for none (0 is a slot: set -1
 * explicitly); owner sharding of paged caches (page g = slot / P is owner g % owner_size's, at
 * its local page g / owner_size), owner_size 0 or 1 = off. */
typedef struct cachestore_slots_t {
  const void* data;       /* device int32 or int64 [num_tokens] */
  int32_t slot_type;
  int32_t owner_rank;
  int64_t reserved_slot;
  int32_t owner_size;
  int32_t pad0;           /* zero */
} cachestore_slots_t;

/* A page table as the slot source (slot_type CACHESTORE_SLOT_PAGE_TABLE, paged caches; the
 * slots struct's data is then the int32 batch_indices): row i's slot is
 * indices[indptr[b] + pos / P] * P + pos % P with b = batch_indices[i], pos = positions[i]
 * (cachestore.h PageTable: a failed lookup on a real row is skipped and counted). Appended (0.6)
 * to each paged store's params struct; all zero with any other slot_type. */
typedef struct cachestore_page_table_t {
  const int32_t* positions;  /* device int32 [num_tokens] */
  const int32_t* indptr;     /* device int32 [batch_size + 1] */
  const int32_t* indices;    /* device int32 page ids */
  int32_t batch_size;
  int32_t pad0;              /* zero */
} cachestore_page_table_t;

/* The batch fields every params struct starts with, after struct_size. */
#define CACHESTORE_BATCH_FIELDS                                                            \
  uint32_t struct_size;                                                                    \
  int32_t enable_pdl;                  /* nonzero: programmatic dependent launch, sm_90+ */ \
  int64_t num_tokens;                  /* rows in the padded batch */                       \
  const int32_t* num_tokens_non_padded; /* device [1] or NULL (all rows real) */           \
  void* diagnostics                    /* device uint64[2] ([3] with RoPE) or NULL */

typedef struct cachestore_index_k_bf16_params_t {
  CACHESTORE_BATCH_FIELDS;
  cachestore_slots_t slots;
  const void* k; int64_t k_row_stride;          /* bf16 [num_tokens, head_dim], elements */
  void* cache; int64_t cache_row_stride;        /* bf16 [num_slots, head_dim], elements */
  int64_t num_slots;
  int32_t head_dim;
  int32_t pad0;
} cachestore_index_k_bf16_params_t;

typedef struct cachestore_index_k_fp8_cache_t {
  void* data;             /* device [num_pages, page_stride_bytes] uint8 */
  int64_t num_pages;
  int64_t page_stride_bytes;
  int32_t page_size;
  int32_t head_dim;
  int32_t scale_rule;     /* CACHESTORE_SCALE_* */
  int32_t pad0;
} cachestore_index_k_fp8_cache_t;

typedef struct cachestore_index_k_fp8_params_t {
  CACHESTORE_BATCH_FIELDS;
  cachestore_slots_t slots;
  const void* k; int64_t k_row_stride;          /* bf16 [num_tokens, head_dim], elements */
  cachestore_index_k_fp8_cache_t cache;
  /* Appended in 0.6 (the 0.2 struct is 120 bytes, the 0.6 one 152): */
  cachestore_page_table_t page_table;           /* slots.slot_type CACHESTORE_SLOT_PAGE_TABLE */
} cachestore_index_k_fp8_params_t;

/* The 68-byte fp4 indexer layout (D = 128): [P x D/2 e2m1][P x D/32 UE8M0] per page. */
typedef struct cachestore_index_k_fp4_cache_t {
  void* data;             /* device [num_pages, page_stride_bytes] uint8 */
  int64_t num_pages;
  int64_t page_stride_bytes;
  int32_t page_size;
  int32_t head_dim;       /* a multiple of 32, at most 512 */
  int32_t ties;           /* CACHESTORE_FP4_TIES_* */
  int32_t pad0;
} cachestore_index_k_fp4_cache_t;

typedef struct cachestore_index_k_fp4_params_t {
  CACHESTORE_BATCH_FIELDS;
  cachestore_slots_t slots;
  const void* k; int64_t k_row_stride;          /* bf16 [num_tokens, head_dim], elements */
  cachestore_index_k_fp4_cache_t cache;
  /* Appended in 0.6 (the 0.3 struct is 120 bytes, the 0.6 one 152): */
  cachestore_page_table_t page_table;           /* slots.slot_type CACHESTORE_SLOT_PAGE_TABLE */
} cachestore_index_k_fp4_params_t;

/* RoPE fused into a store (cachestore.h RotaryEmbedding); positions NULL: no rotation, unless
 * cos_sin_rows is CACHESTORE_ROPE_COS_SIN_BY_ROW (row i rotates by cos_sin_cache row i).
 * Strides in elements of the input type (cos_sin_stride: of cos_sin_type; 0 = rotary_dim). */
enum { CACHESTORE_ROPE_NEOX = 0, CACHESTORE_ROPE_GPTJ = 1 };
enum { CACHESTORE_ROPE_ROUND_INPUT_TYPE = 0, CACHESTORE_ROPE_ROUND_FP32 = 1 };
enum { CACHESTORE_ROPE_COS_SIN_BY_POSITION = 0, CACHESTORE_ROPE_COS_SIN_BY_ROW = 1 };
enum { CACHESTORE_ROPE_COS_SIN_HALVES = 0, CACHESTORE_ROPE_COS_SIN_INTERLEAVED = 1 };
typedef struct cachestore_rope_t {
  const void* positions;  /* device [num_tokens] */
  int32_t positions_type; /* CACHESTORE_SLOT_INT32 | _INT64 */
  int32_t cos_sin_type;   /* CACHESTORE_KV_BF16 | _FP16 | _FP32 */
  const void* cos_sin_cache;
  int64_t cos_sin_stride;
  int64_t max_position;
  int32_t rotary_dim;
  int32_t style;          /* CACHESTORE_ROPE_NEOX | _GPTJ */
  int32_t rounding;       /* CACHESTORE_ROPE_ROUND_* */
  int32_t num_query_heads;
  void* query; int64_t query_token_stride; int64_t query_head_stride;
  /* NULL: in place */
  void* query_out; int64_t query_out_token_stride; int64_t query_out_head_stride;
  /* NULL: none; k's data: in place */
  void* key_out; int64_t key_out_token_stride; int64_t key_out_head_stride;
  /* Appended in 0.9 (136 bytes, with cos_sin_layout; the params structs that end with it
   * grow with it): */
  int32_t cos_sin_rows;   /* CACHESTORE_ROPE_COS_SIN_BY_*; 0 = by position */
  int32_t cos_sin_layout; /* CACHESTORE_ROPE_COS_SIN_HALVES | _INTERLEAVED; 0 = halves */
} cachestore_rope_t;

typedef struct cachestore_fused_store_params_t {
  CACHESTORE_BATCH_FIELDS;
  cachestore_slots_t kv_slots;
  const void* nope; int64_t nope_row_stride;    /* bf16 [num_tokens, 448 | 512] */
  const void* rope; int64_t rope_row_stride;    /* bf16 [num_tokens, 64] */
  int32_t layout;                               /* CACHESTORE_MLA_* */
  int32_t kv_scale_rule;
  void* kv_cache; int64_t kv_num_pages; int64_t kv_page_stride_bytes; int32_t kv_page_size;
  int32_t pad0;
  const void* index_k; int64_t index_k_row_stride; /* NULL: no fused index-K */
  cachestore_slots_t index_slots;               /* same slot_type as kv_slots */
  cachestore_index_k_fp8_cache_t index_cache;   /* index_format CACHESTORE_INDEX_K_FP8 */
  /* Appended in 0.3 (the 0.2 struct is 224 bytes, the 0.3 one 272): */
  int32_t index_format;                         /* CACHESTORE_INDEX_K_*; 0 = fp8 */
  int32_t pad1;
  cachestore_index_k_fp4_cache_t index_fp4_cache; /* index_format CACHESTORE_INDEX_K_FP4 */
  /* Appended in 0.6 (336 bytes): the page tables of kv_slots and index_slots. */
  cachestore_page_table_t kv_page_table;
  cachestore_page_table_t index_page_table;
  /* Appended in 0.8 (464 bytes): RoPE of the rows' RoPE part and of Q's in the same launch
   * (cachestore.h FusedStoreParams::rotary: bf16, rotary_dim 64). */
  cachestore_rope_t rotary;                     /* 472 bytes from 0.9 (cos_sin_rows) */
} cachestore_fused_store_params_t;

/* One side (K or V) of store_paged_kv: the input and the cache view (cachestore.h). */
typedef struct cachestore_kv_side_t {
  const void* data; int64_t token_stride; int64_t head_stride; int32_t head_dim; int32_t pad0;
  void* cache; int64_t page_stride; int64_t entry_stride; int64_t cache_head_stride;
  const float* scale; int32_t scale_stride; int32_t pad1;
} cachestore_kv_side_t;

/* An nvfp4 cache's e4m3 block scales (cachestore.h KvCacheView::block_scales): one byte per 16
 * values of a (slot, head), strides in bytes; an fp8_e4m3_per_token_head cache's fp32 scale of
 * each (slot, head), strides in fp32 elements. */
typedef struct cachestore_block_scales_t {
  void* data;
  int64_t page_stride;
  int64_t entry_stride;
  int64_t head_stride;
} cachestore_block_scales_t;


typedef struct cachestore_paged_kv_params_t {
  CACHESTORE_BATCH_FIELDS;
  cachestore_slots_t slots;
  int32_t num_heads;
  int32_t input_type;     /* CACHESTORE_KV_BF16 | _FP16 */
  int32_t cache_type;     /* CACHESTORE_KV_CACHE_* */
  int32_t page_size;
  int64_t num_pages;
  cachestore_kv_side_t k;
  cachestore_kv_side_t v; /* v.data == NULL: K only */
  /* Appended in 0.5 (the 0.2 struct is 248 bytes, the 0.5 one 288): each cache's head-dim
   * layout (cachestore.h KvCacheView; vLLM's paged-attention layout); all zero: d contiguous. */
  int32_t k_chunk;        /* elements per head-dim chunk, a power of two; 0: no chunks */
  int32_t v_chunk;
  int64_t k_chunk_stride; /* elements between chunks */
  int64_t v_chunk_stride;
  int64_t k_dim_stride;   /* elements between consecutive d; 0 means 1 */
  int64_t v_dim_stride;
  /* Appended in 0.6 (320 bytes): */
  cachestore_page_table_t page_table;           /* slots.slot_type CACHESTORE_SLOT_PAGE_TABLE */
  /* Appended in 0.7 (384 bytes): cache_type CACHESTORE_KV_CACHE_NVFP4's block scales; the
   * sides' scale is then the global decode scale. CACHESTORE_KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD:
   * the scale views the store writes (the sides' scale unread). */
  cachestore_block_scales_t k_block_scales;
  cachestore_block_scales_t v_block_scales;
  /* Appended in 0.8 (512 bytes; 520 from 0.9, cos_sin_rows): RoPE in the same launch. */
  cachestore_rope_t rope;
} cachestore_paged_kv_params_t;

CACHESTORE_EXPORT cachestore_status_t cachestore_store_index_k_bf16_v2(
    const cachestore_index_k_bf16_params_t* params, void* stream);
CACHESTORE_EXPORT cachestore_status_t cachestore_store_index_k_fp8_v2(
    const cachestore_index_k_fp8_params_t* params, void* stream);
CACHESTORE_EXPORT cachestore_status_t cachestore_store_index_k_fp4(
    const cachestore_index_k_fp4_params_t* params, void* stream);
CACHESTORE_EXPORT cachestore_status_t cachestore_fused_store_cache_v2(
    const cachestore_fused_store_params_t* params, void* stream);
CACHESTORE_EXPORT cachestore_status_t cachestore_store_paged_kv(
    const cachestore_paged_kv_params_t* params, void* stream);

/* ---- Checks (0.4): every refusal of the store of the same name, without launching or touching
 * the device; CACHESTORE_SUCCESS or the status and message the store returns for those params. */
CACHESTORE_EXPORT cachestore_status_t cachestore_check_index_k_bf16(
    const cachestore_index_k_bf16_params_t* params);
CACHESTORE_EXPORT cachestore_status_t cachestore_check_index_k_fp8(
    const cachestore_index_k_fp8_params_t* params);
CACHESTORE_EXPORT cachestore_status_t cachestore_check_index_k_fp4(
    const cachestore_index_k_fp4_params_t* params);
CACHESTORE_EXPORT cachestore_status_t cachestore_check_fused_store_cache(
    const cachestore_fused_store_params_t* params);
CACHESTORE_EXPORT cachestore_status_t cachestore_check_paged_kv(
    const cachestore_paged_kv_params_t* params);

/* ---- The layout table (0.4): the library's own description of every layout it writes, so
 * that bindings compute no byte math of their own. Each info struct is an output with the
 * versioned-struct rule: the caller sets struct_size (CACHESTORE_PARAMS_INIT) and the library
 * fills that many bytes. An id past the table is CACHESTORE_ERROR_INVALID_ARGUMENT: ids are
 * 0, 1, ... in order, so a binding lists the layouts by counting up until it is refused. */
enum { CACHESTORE_ENCODING_BF16 = 0, CACHESTORE_ENCODING_E4M3 = 1, CACHESTORE_ENCODING_E2M1 = 2,
       CACHESTORE_ENCODING_FP32 = 3, CACHESTORE_ENCODING_UE8M0 = 4 };
enum { CACHESTORE_RULE_SELECTABLE = 0, CACHESTORE_RULE_POW2_ONLY = 1, CACHESTORE_RULE_FIXED = 2 };

typedef struct cachestore_mla_layout_info_t {
  uint32_t struct_size;
  int32_t layout;             /* CACHESTORE_MLA_* */
  const char* name;           /* "v4", "v32", "v41", "v41_fp4" */
  int32_t nope_dim;           /* bf16 NoPE values per token (input width) */
  int32_t rope_dim;           /* bf16 RoPE values per token */
  int32_t quantized_values;   /* values quantized per token */
  int32_t tile;               /* values per scale */
  int32_t value_encoding;     /* CACHESTORE_ENCODING_* */
  int32_t scale_encoding;
  int32_t rope_quantized;     /* nonzero: the RoPE part is quantized, else copied as bf16 */
  int32_t scale_rule_use;     /* CACHESTORE_RULE_*: what kv_scale_rule means to the layout */
  int64_t data_row_bytes;     /* page: [P data rows][P scale rows], rounded up to page_round */
  int64_t scale_row_bytes;    /* 0: one record per token */
  int64_t page_round_bytes;
} cachestore_mla_layout_info_t;

typedef struct cachestore_index_k_format_info_t {
  uint32_t struct_size;
  int32_t format;             /* CACHESTORE_INDEX_K_* */
  const char* name;           /* "fp8", "fp4" */
  int32_t group;              /* values per scale; the head dim is a multiple of it */
  int32_t max_head_dim;
  int32_t value_encoding;
  int32_t scale_encoding;
  int32_t scale_bytes;
  int32_t values_per_byte;
} cachestore_index_k_format_info_t;

typedef struct cachestore_kv_cache_type_info_t {
  uint32_t struct_size;
  int32_t cache_type;         /* CACHESTORE_KV_CACHE_* */
  const char* name;           /* "auto", "fp8_e4m3", "fp8_e5m2", "nvfp4",
                                 "fp8_e4m3_per_token_head" */
  int32_t element_bytes;      /* 0: the input type's */
  int32_t scaled;             /* nonzero: reads a device fp32 scale per tensor or per head */
  int32_t head_dim_multiple;
  int32_t values_per_element; /* 0.7 (was a zero pad): nvfp4 2, else 1 */
  /* Appended in 0.7 (40 bytes): */
  int32_t block;              /* values per block scale (nvfp4: 16); 0: no block scales */
  int32_t values_per_thread;  /* (was a zero pad) the store's values a thread: nvfp4 16, else 8 */
} cachestore_kv_cache_type_info_t;

CACHESTORE_EXPORT cachestore_status_t cachestore_mla_layout_info(
    int32_t layout, cachestore_mla_layout_info_t* info);
CACHESTORE_EXPORT cachestore_status_t cachestore_index_k_format_info(
    int32_t format, cachestore_index_k_format_info_t* info);
CACHESTORE_EXPORT cachestore_status_t cachestore_kv_cache_type_info(
    int32_t cache_type, cachestore_kv_cache_type_info_t* info);
/* The smallest page stride in bytes of an MLA layout, or an index-K format at head_dim, for
 * page_size P (any P >= 1; the stores take powers of two up to 1024). */
CACHESTORE_EXPORT cachestore_status_t cachestore_mla_min_page_stride(
    int32_t layout, int32_t page_size, int64_t* bytes);
CACHESTORE_EXPORT cachestore_status_t cachestore_index_k_min_page_stride(
    int32_t format, int32_t page_size, int32_t head_dim, int64_t* bytes);

/* ---- Page movement (0.9; cachestore/move.h): guarded page copies between caches, staging
 * buffers and pinned host memory, one launch for a batch of entries, a device count of real
 * entries, ids >= num_pages skipped and counted, negative ids padding. Strides in bytes. */
#define CACHESTORE_MAX_PAGE_PLANES 4
typedef struct cachestore_plane_strides_t {
  int64_t offset; int64_t page_stride; int64_t token_stride; int64_t head_stride;
} cachestore_plane_strides_t;

typedef struct cachestore_page_side_t {
  void* data;                   /* device or pinned host: layer 0's base */
  int64_t layer_stride;
  const uint64_t* plane_bases;  /* device [num_layers * num_planes] or NULL (16-byte aligned) */
  int64_t num_pages;
  int32_t page_size;
  int32_t page_ids_type;        /* CACHESTORE_SLOT_INT32 | _INT64 */
  const void* page_ids;         /* device [entries] or NULL: entry e is page e */
  cachestore_plane_strides_t planes[CACHESTORE_MAX_PAGE_PLANES];
} cachestore_page_side_t;

typedef struct cachestore_move_pages_params_t {
  uint32_t struct_size;
  int32_t enable_pdl;
  int64_t num_entries;                   /* source entries in the padded batch */
  const int32_t* num_entries_non_padded; /* device [1] or NULL (all real) */
  void* diagnostics;                     /* device uint64[3] {out_of_range_pages,
                                            negative_entry_counts, checksum_mismatches} or
                                            NULL (uint64[2] without expected_checksums) */
  int32_t num_layers;
  int32_t num_planes;
  int32_t num_heads[CACHESTORE_MAX_PAGE_PLANES];
  int32_t row_bytes[CACHESTORE_MAX_PAGE_PLANES];
  cachestore_page_side_t src;
  cachestore_page_side_t dst;            /* num_entries * src.page_size / dst.page_size entries */
  /* CRC-32 (zlib's) of each block, uint32 [num_entries][num_layers][num_planes], device or
   * NULL: checksums receives each real source block's; a block whose CRC-32 differs from
   * expected_checksums is not written and is counted (cachestore/move.h). */
  void* checksums;
  const void* expected_checksums;
} cachestore_move_pages_params_t;

CACHESTORE_EXPORT cachestore_status_t cachestore_move_pages(
    const cachestore_move_pages_params_t* params, void* stream);
CACHESTORE_EXPORT cachestore_status_t cachestore_check_move_pages(
    const cachestore_move_pages_params_t* params);

#ifdef __cplusplus
}
#endif

#endif /* CACHESTORE_CACHESTORE_C_H_ */
