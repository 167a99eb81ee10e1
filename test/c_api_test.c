/* The C ABI from a C99 translation unit: every function reached through its host-side
 * validation (no GPU needed), statuses and messages checked. */
#include <stddef.h>
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

/* A slot mapping at a fake address: no reserved slot, no sharding. */
static cachestore_slots_t fake_slots(unsigned long address, int32_t slot_type) {
  cachestore_slots_t slots;
  memset(&slots, 0, sizeof slots);
  slots.data = fake(address);
  slots.slot_type = slot_type;
  slots.reserved_slot = -1;
  return slots;
}

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

  /* Page movement: the versioned struct, then the check's refusals naming the field. */
  {
    cachestore_move_pages_params_t mv;
    EXPECT(cachestore_move_pages(NULL, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    memset(&mv, 0, sizeof mv);
    EXPECT(cachestore_check_move_pages(&mv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "struct_size") != NULL);
    CACHESTORE_PARAMS_INIT(mv);
    mv.num_entries = 4;
    mv.num_layers = 1;
    mv.num_planes = 1;
    mv.num_heads[0] = 1;
    mv.row_bytes[0] = 256;
    mv.src.data = fake(0x100000); mv.src.num_pages = 16; mv.src.page_size = 4;
    mv.src.planes[0].page_stride = 1024; mv.src.planes[0].token_stride = 256;
    mv.dst = mv.src;
    mv.dst.data = fake(0x200000);
    EXPECT(cachestore_check_move_pages(&mv) == CACHESTORE_SUCCESS);
    mv.dst.page_size = 3;
    EXPECT(cachestore_check_move_pages(&mv) == CACHESTORE_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(cachestore_last_error_message(), "dst.page_size = 3") != NULL);
    mv.dst.page_size = 4;
    mv.dst.data = fake(0x100000 + 512); /* inside the source's pages */
    EXPECT(cachestore_check_move_pages(&mv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "src and dst overlap") != NULL);
  }

  /* The extensible entry points: struct_size rules, then the same validation as the C++ API. */
  {
    cachestore_paged_kv_params_t kv;
    cachestore_index_k_fp8_params_t fp8;
    cachestore_fused_store_params_t fused;
    cachestore_index_k_bf16_params_t bf16;
    cachestore_index_k_fp4_params_t fp4;
    unsigned char newer[sizeof(cachestore_paged_kv_params_t) + 16];

    EXPECT(cachestore_store_paged_kv(NULL, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    memset(&kv, 0, sizeof kv); /* struct_size not set */
    EXPECT(cachestore_store_paged_kv(&kv, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "struct_size") != NULL);

    CACHESTORE_PARAMS_INIT(kv);
    kv.num_tokens = 4;
    kv.slots = fake_slots(0x1000, CACHESTORE_SLOT_INT64);
    kv.num_heads = 8;
    kv.page_size = 16;
    kv.num_pages = 4;
    kv.cache_type = CACHESTORE_KV_CACHE_FP8_E4M3;
    kv.k.data = fake(0x2000); kv.k.token_stride = 2048; kv.k.head_stride = 128; kv.k.head_dim = 128;
    kv.k.cache = fake(0x100000); kv.k.page_stride = 16 * 1024; kv.k.entry_stride = 1024;
    kv.k.cache_head_stride = 128; kv.k.scale = NULL;
    EXPECT(cachestore_store_paged_kv(&kv, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "k_cache.scale") != NULL);
    kv.k.scale = (const float*)fake(0x9000);
    kv.slots.owner_size = 3; /* owner_size 0 means 1; 3 is no power of two */
    EXPECT(cachestore_store_paged_kv(&kv, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "slots.owner_size") != NULL);
    kv.slots.owner_size = 0;
    kv.k_chunk = 3; /* 0.5: the head-dim layout; a chunk is a power of two */
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "k_cache.chunk") != NULL);
    kv.struct_size = 248; /* the 0.2 struct ends before the chunk: read with its defaults */
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_SUCCESS);
    kv.struct_size = (uint32_t)sizeof kv;
    kv.k_chunk = 0;
    /* 0.6: a page table as the slot source; a 288-byte struct has none (its fields read zero). */
    kv.slots.slot_type = CACHESTORE_SLOT_PAGE_TABLE;
    kv.page_table.positions = (const int32_t*)fake(0x12000);
    kv.page_table.indptr = (const int32_t*)fake(0x13000);
    kv.page_table.indices = (const int32_t*)fake(0x14000);
    kv.page_table.batch_size = 4;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_SUCCESS);
    kv.struct_size = 288;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "slots.page_table.positions") != NULL);
    kv.struct_size = (uint32_t)sizeof kv;
    kv.page_table.indptr = (const int32_t*)fake(0x13001);
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_MISALIGNED_OPERAND);
    EXPECT(strstr(cachestore_last_error_message(), "slots.page_table.indptr") != NULL);
    memset(&kv.page_table, 0, sizeof kv.page_table);
    kv.slots.slot_type = CACHESTORE_SLOT_INT64;
    /* 0.7: nvfp4 caches' block scales; a 320-byte struct has none (read as null). */
    {
    const cachestore_paged_kv_params_t before = kv;
    kv.cache_type = CACHESTORE_KV_CACHE_NVFP4;
    kv.k.scale = (const float*)fake(0x15000);
    kv.v.scale = (const float*)fake(0x15000);
    kv.k_block_scales.data = fake(0x16000);
    kv.v_block_scales.data = fake(0x17000);
    kv.k_block_scales.page_stride = kv.v_block_scales.page_stride = 16 * 8 * 8;
    kv.k_block_scales.entry_stride = kv.v_block_scales.entry_stride = 8 * 8;
    kv.k_block_scales.head_stride = kv.v_block_scales.head_stride = 8;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_SUCCESS);
    kv.struct_size = 320;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "k_cache.block_scales is null") != NULL);
    kv.struct_size = (uint32_t)sizeof kv;
    kv.k_block_scales.head_stride = 4; /* heads of 8 scale bytes overlap */
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "k_cache.block_scales") != NULL);
    kv = before;
    }
    /* 0.8: RoPE in the store; a 384-byte struct has none (positions read as null). */
    {
    const cachestore_paged_kv_params_t before = kv;
    kv.rope.positions = fake(0x18000);
    kv.rope.positions_type = CACHESTORE_SLOT_INT32;
    kv.rope.cos_sin_type = CACHESTORE_KV_BF16;
    kv.rope.cos_sin_cache = fake(0x19000);
    kv.rope.max_position = 100;
    kv.rope.rotary_dim = 96; /* partial: NeoX needs a multiple of 16 */
    kv.rope.style = CACHESTORE_ROPE_NEOX;
    kv.rope.rounding = CACHESTORE_ROPE_ROUND_FP32;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_SUCCESS);
    kv.rope.rotary_dim = 40;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(cachestore_last_error_message(), "rope.rotary_dim") != NULL);
    kv.struct_size = 384;
    EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_SUCCESS);
    kv.struct_size = (uint32_t)sizeof kv;
    kv = before;
    }
    kv.k.head_dim = 2000;
    EXPECT(cachestore_store_paged_kv(&kv, NULL) == CACHESTORE_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(cachestore_last_error_message(), "k.head_dim") != NULL);

    /* A caller compiled against a newer header: unknown trailing fields must be zero. */
    kv.k.head_dim = 2000;
    memset(newer, 0, sizeof newer);
    memcpy(newer, &kv, sizeof kv);
    {
      uint32_t size = (uint32_t)sizeof newer;
      memcpy(newer, &size, sizeof size);
    }
    EXPECT(cachestore_store_paged_kv((const cachestore_paged_kv_params_t*)newer, NULL) ==
           CACHESTORE_ERROR_NOT_SUPPORTED); /* the same head_dim error: zeros were accepted */
    EXPECT(strstr(cachestore_last_error_message(), "k.head_dim") != NULL);
    newer[sizeof kv + 3] = 1;
    EXPECT(cachestore_store_paged_kv((const cachestore_paged_kv_params_t*)newer, NULL) ==
           CACHESTORE_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(cachestore_last_error_message(), "does not know") != NULL);

    CACHESTORE_PARAMS_INIT(fp8);
    fp8.num_tokens = 4;
    fp8.slots = fake_slots(0x1000, CACHESTORE_SLOT_INT32);
    fp8.k = fake(0x2000); fp8.k_row_stride = 128;
    fp8.cache.data = fake(0x4000); fp8.cache.num_pages = 8; fp8.cache.page_size = 64;
    fp8.cache.page_stride_bytes = 8448; fp8.cache.head_dim = 128; fp8.cache.scale_rule = 7;
    EXPECT(cachestore_store_index_k_fp8_v2(&fp8, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "cache.scale_rule") != NULL);

    CACHESTORE_PARAMS_INIT(fused);
    fused.num_tokens = 4;
    fused.kv_slots = fake_slots(0x1000, CACHESTORE_SLOT_INT64);
    fused.kv_slots.owner_size = 2;
    fused.kv_slots.owner_rank = 2;
    fused.nope = fake(0x2000); fused.nope_row_stride = 576;
    fused.rope = fake(0x2000 + 896); fused.rope_row_stride = 576;
    fused.layout = CACHESTORE_MLA_V4; fused.kv_scale_rule = CACHESTORE_SCALE_POW2;
    fused.kv_cache = fake(0x8000); fused.kv_num_pages = 4; fused.kv_page_size = 64;
    fused.kv_page_stride_bytes = 37440;
    EXPECT(cachestore_fused_store_cache_v2(&fused, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "kv_slots.owner_rank") != NULL);
    /* A 0.2 caller's struct ends before index_format: read as it is, the new fields default. */
    fused.struct_size = (uint32_t)offsetof(cachestore_fused_store_params_t, index_format);
    EXPECT(cachestore_fused_store_cache_v2(&fused, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "kv_slots.owner_rank") != NULL);
    /* V4.1 with a fused fp4 index-K whose tie rule is unknown: named. */
    fused.struct_size = (uint32_t)sizeof fused;
    fused.kv_slots.owner_size = 0;
    fused.kv_slots.owner_rank = 0;
    fused.layout = CACHESTORE_MLA_V41;
    fused.kv_page_stride_bytes = 33792;
    fused.index_k = fake(0x2000); fused.index_k_row_stride = 576;
    fused.index_slots = fake_slots(0x1000, CACHESTORE_SLOT_INT64);
    fused.index_format = CACHESTORE_INDEX_K_FP4;
    fused.index_fp4_cache.data = fake(0x10000); fused.index_fp4_cache.num_pages = 4;
    fused.index_fp4_cache.page_size = 64; fused.index_fp4_cache.page_stride_bytes = 4352;
    fused.index_fp4_cache.head_dim = 128; fused.index_fp4_cache.ties = 9;
    EXPECT(cachestore_fused_store_cache_v2(&fused, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "index_fp4_cache.ties") != NULL);
    /* 0.8 appends the rotation of the rows' RoPE part (rotary_dim 64 only); a 336-byte struct
     * reads without it. */
    fused.index_fp4_cache.ties = CACHESTORE_FP4_TIES_TO_EVEN;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
    fused.rotary.positions = fake(0x1000);
    fused.rotary.positions_type = CACHESTORE_SLOT_INT64;
    fused.rotary.cos_sin_cache = fake(0x20000);
    fused.rotary.cos_sin_type = CACHESTORE_KV_FP32;
    fused.rotary.max_position = 4096;
    fused.rotary.rotary_dim = 32;
    fused.rotary.style = CACHESTORE_ROPE_GPTJ;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(cachestore_last_error_message(), "rotary.rotary_dim") != NULL);
    fused.struct_size = 336;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
    fused.struct_size = (uint32_t)sizeof fused;
    fused.rotary.rotary_dim = 64;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
    /* 0.9: a cos/sin row a row; positions unread, the cache's rows at least num_tokens. A
     * 464-byte struct reads without it (by position). */
    fused.rotary.positions = NULL;
    fused.rotary.cos_sin_rows = CACHESTORE_ROPE_COS_SIN_BY_ROW;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
    fused.rotary.max_position = fused.num_tokens - 1;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "rotary.max_position") != NULL);
    fused.struct_size = 464; /* no cos_sin_rows and no positions: no rotation to check */
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
    fused.struct_size = (uint32_t)sizeof fused;
    fused.rotary.cos_sin_rows = 7;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS); /* no rotation */
    fused.rotary.positions = fake(0x1000);
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "rotary.cos_sin_rows") != NULL);
    fused.rotary.cos_sin_rows = CACHESTORE_ROPE_COS_SIN_BY_POSITION;
    fused.rotary.max_position = 4096;
    /* (cos, sin) pairs side by side, and a layout that is none */
    fused.rotary.cos_sin_layout = CACHESTORE_ROPE_COS_SIN_INTERLEAVED;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
    fused.rotary.cos_sin_layout = 3;
    EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "rotary.cos_sin_layout") != NULL);
    fused.rotary.cos_sin_layout = CACHESTORE_ROPE_COS_SIN_HALVES;
    EXPECT(sizeof fused == 472);
    memset(&fused.rotary, 0, sizeof fused.rotary);
    fused.index_fp4_cache.ties = 9; /* as the size checks below expect */

    CACHESTORE_PARAMS_INIT(fp4);
    fp4.num_tokens = 4;
    fp4.slots = fake_slots(0x1000, CACHESTORE_SLOT_INT32);
    fp4.k = fake(0x2000); fp4.k_row_stride = 128;
    fp4.cache.data = fake(0x4000); fp4.cache.num_pages = 8; fp4.cache.page_size = 64;
    fp4.cache.page_stride_bytes = 4352; fp4.cache.head_dim = 100;
    EXPECT(cachestore_store_index_k_fp4(&fp4, NULL) == CACHESTORE_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(cachestore_last_error_message(), "cache.head_dim") != NULL);
    fp4.cache.head_dim = 128; fp4.cache.page_stride_bytes = 4354;
    EXPECT(cachestore_store_index_k_fp4(&fp4, NULL) == CACHESTORE_ERROR_MISALIGNED_OPERAND);
    EXPECT(strstr(cachestore_last_error_message(), "cache.page_stride_bytes") != NULL);

    CACHESTORE_PARAMS_INIT(bf16);
    bf16.num_tokens = -1;
    EXPECT(cachestore_store_index_k_bf16_v2(&bf16, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cachestore_last_error_message(), "batch.num_tokens") != NULL);

    /* struct_size is read first: a size no release had is refused naming it, whatever else the
     * struct holds (a paged K/V struct cut before its V fields never stores K only; an fp8 one
     * cut before its rule never switches the rule). */
    {
      const uint32_t bad_kv[] = {16, 24, 120, 247, 249, 287, 289, 319, 321, 383, 0};
      const uint32_t bad_fused[] = {16, 200, 223, 225, 240, 271, 273, 335, 0};
      int i;
      CACHESTORE_PARAMS_INIT(kv);
      for (i = 0; bad_kv[i] != 0; ++i) {
        kv.struct_size = bad_kv[i];
        EXPECT(cachestore_store_paged_kv(&kv, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
        EXPECT(strstr(cachestore_last_error_message(), "struct_size") != NULL);
        EXPECT(cachestore_check_paged_kv(&kv) == CACHESTORE_ERROR_INVALID_ARGUMENT);
        EXPECT(strstr(cachestore_last_error_message(), "struct_size") != NULL);
      }
      fp8.struct_size = 112; /* the bf16 struct's size, never the fp8 one's */
      EXPECT(cachestore_store_index_k_fp8_v2(&fp8, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
      EXPECT(strstr(cachestore_last_error_message(), "struct_size") != NULL);
      for (i = 0; bad_fused[i] != 0; ++i) {
        fused.struct_size = bad_fused[i];
        EXPECT(cachestore_fused_store_cache_v2(&fused, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
        EXPECT(strstr(cachestore_last_error_message(), "struct_size") != NULL);
      }
      /* The two released fused sizes are read: the 0.2 one without the fp4 fields (index_format
       * then reads as fp8, whose cache is the zero struct: its head dim is named). */
      fused.struct_size = 224;
      EXPECT(cachestore_fused_store_cache_v2(&fused, NULL) == CACHESTORE_ERROR_NOT_SUPPORTED);
      EXPECT(strstr(cachestore_last_error_message(), "index_cache.head_dim") != NULL);
      fused.struct_size = 272;
      EXPECT(cachestore_fused_store_cache_v2(&fused, NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
      EXPECT(strstr(cachestore_last_error_message(), "index_fp4_cache.ties") != NULL);
      fused.index_fp4_cache.ties = CACHESTORE_FP4_TIES_TOWARD_ZERO;
      EXPECT(cachestore_check_fused_store_cache(&fused) == CACHESTORE_SUCCESS);
      EXPECT(cachestore_check_index_k_fp8(NULL) == CACHESTORE_ERROR_INVALID_ARGUMENT);
      CACHESTORE_PARAMS_INIT(fp8);
      EXPECT(cachestore_check_index_k_fp8(&fp8) == CACHESTORE_ERROR_NOT_SUPPORTED);
      EXPECT(strstr(cachestore_last_error_message(), "cache.head_dim") != NULL);
      CACHESTORE_PARAMS_INIT(bf16);
      bf16.head_dim = 128; /* an empty batch of a valid shape: nothing to refuse */
      bf16.k_row_stride = 128;
      bf16.cache_row_stride = 128;
      EXPECT(cachestore_check_index_k_bf16(&bf16) == CACHESTORE_SUCCESS);
      CACHESTORE_PARAMS_INIT(fp4);
      EXPECT(cachestore_check_index_k_fp4(&fp4) == CACHESTORE_ERROR_NOT_SUPPORTED);
    }
  }

  /* The layout table, as bindings read it. */
  {
    cachestore_mla_layout_info_t mla;
    cachestore_index_k_format_info_t index;
    cachestore_kv_cache_type_info_t kv_type;
    int64_t bytes = 0;
    int32_t id, count = 0;
    const char* names[] = {"v4", "v32", "v41", "v41_fp4"};
    const int64_t token_bytes[] = {584, 656, 528, 288};
    for (id = 0;; ++id) {
      CACHESTORE_PARAMS_INIT(mla);
      if (cachestore_mla_layout_info(id, &mla) != CACHESTORE_SUCCESS) break;
      EXPECT(id < 4 && strcmp(mla.name, names[id]) == 0);
      EXPECT(id < 4 && mla.data_row_bytes + mla.scale_row_bytes == token_bytes[id]);
      EXPECT(mla.layout == id && mla.rope_dim == 64 && mla.struct_size == sizeof mla);
      ++count;
    }
    EXPECT(count == 4);
    EXPECT(strstr(cachestore_last_error_message(), "layout = 4") != NULL);
    EXPECT(cachestore_mla_min_page_stride(CACHESTORE_MLA_V4, 64, &bytes) == CACHESTORE_SUCCESS &&
           bytes == 37440);
    EXPECT(cachestore_mla_min_page_stride(CACHESTORE_MLA_V41_FP4, 64, &bytes) ==
               CACHESTORE_SUCCESS && bytes == 18432);
    EXPECT(cachestore_mla_min_page_stride(CACHESTORE_MLA_V32, 0, &bytes) ==
           CACHESTORE_ERROR_INVALID_ARGUMENT);
    EXPECT(cachestore_index_k_min_page_stride(CACHESTORE_INDEX_K_FP8, 64, 128, &bytes) ==
               CACHESTORE_SUCCESS && bytes == 8448);
    EXPECT(cachestore_index_k_min_page_stride(CACHESTORE_INDEX_K_FP4, 64, 128, &bytes) ==
               CACHESTORE_SUCCESS && bytes == 4352);
    EXPECT(cachestore_index_k_min_page_stride(CACHESTORE_INDEX_K_FP8, 64, 100, &bytes) ==
           CACHESTORE_ERROR_INVALID_ARGUMENT);
    CACHESTORE_PARAMS_INIT(index);
    EXPECT(cachestore_index_k_format_info(CACHESTORE_INDEX_K_FP4, &index) == CACHESTORE_SUCCESS &&
           strcmp(index.name, "fp4") == 0 && index.group == 32 && index.values_per_byte == 2);
    EXPECT(cachestore_index_k_format_info(2, &index) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    CACHESTORE_PARAMS_INIT(kv_type);
    EXPECT(cachestore_kv_cache_type_info(CACHESTORE_KV_CACHE_FP8_E5M2, &kv_type) ==
               CACHESTORE_SUCCESS && strcmp(kv_type.name, "fp8_e5m2") == 0 && kv_type.scaled);
    EXPECT(cachestore_kv_cache_type_info(CACHESTORE_KV_CACHE_NVFP4, &kv_type) ==
               CACHESTORE_SUCCESS && strcmp(kv_type.name, "nvfp4") == 0 && kv_type.scaled &&
           kv_type.values_per_element == 2 && kv_type.block == 16 &&
           kv_type.head_dim_multiple == 16 && kv_type.values_per_thread == 16);
    EXPECT(cachestore_kv_cache_type_info(CACHESTORE_KV_CACHE_AUTO, &kv_type) ==
               CACHESTORE_SUCCESS && kv_type.values_per_thread == 8 && kv_type.block == 0);
    EXPECT(cachestore_kv_cache_type_info(CACHESTORE_KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD,
                                         &kv_type) == CACHESTORE_SUCCESS &&
           strcmp(kv_type.name, "fp8_e4m3_per_token_head") == 0 && !kv_type.scaled &&
           kv_type.element_bytes == 1 && kv_type.head_dim_multiple == 8);
    EXPECT(cachestore_kv_cache_type_info(5, &kv_type) == CACHESTORE_ERROR_INVALID_ARGUMENT);
    /* An older caller's shorter info struct gets only the bytes it has. */
    memset(&mla, 0xee, sizeof mla);
    mla.struct_size = (uint32_t)offsetof(cachestore_mla_layout_info_t, nope_dim);
    EXPECT(cachestore_mla_layout_info(CACHESTORE_MLA_V32, &mla) == CACHESTORE_SUCCESS);
    EXPECT(mla.struct_size == offsetof(cachestore_mla_layout_info_t, nope_dim) &&
           strcmp(mla.name, "v32") == 0 && mla.nope_dim == (int32_t)0xeeeeeeee);
  }

  s = cachestore_query_device(0, NULL, NULL, NULL);
  EXPECT(s == CACHESTORE_SUCCESS || s == CACHESTORE_ERROR_CUDA_RUNTIME ||
         s == CACHESTORE_ERROR_ARCH_MISMATCH);

  if (failures == 0) printf("c_api_test: all checks passed (cachestore %d)\n", cachestore_version());
  return failures == 0 ? 0 : 1;
}
