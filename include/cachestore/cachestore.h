// cachestore: guarded KV-cache and index-K cache stores for LLM serving engines.
//
// Every entry point stores row i of a (possibly padded) batch if and only if
//   i < num_tokens, i < n (n = *num_tokens_non_padded, read on the device at run time,
//   clamped to [0, num_tokens]), 0 <= slot[i], slot[i] != reserved_slot, slot[i] < capacity,
// where slot[i] comes from a slot mapping or, for the paged caches, a page table (PageTable).
// A row that fails writes nothing. Nothing in a call synchronizes, allocates or copies to the
// host, so every call can be captured in a CUDA graph. Host-checkable faults return a Status
// before anything is launched; last_error_message() names the offending argument. check(params)
// runs the same checks without launching.
//
// This header is plain C++17: it needs only cuda_runtime_api.h from the CUDA toolkit.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cachestore/export.h"
#include "cachestore/layout.h"
#include "cachestore/version.h"

namespace cachestore {

enum class Status : int32_t {
  kSuccess = 0,
  kErrorInvalidArgument = 1,     // null required pointer, negative size, unknown enum value
  kErrorMisalignedOperand = 2,   // pointer or stride not aligned for the kernel's vector width
  kErrorNotSupported = 3,        // head dim, page size or option combination not implemented
  kErrorCapacityOverflow = 4,    // cache sizes whose byte offsets overflow int64
  kErrorArchMismatch = 5,        // the library holds no kernel image that runs on this device
  kErrorCudaRuntime = 6,         // a CUDA runtime call or the kernel launch failed
};

// Constant name of a status, e.g. "kErrorMisalignedOperand".
CACHESTORE_EXPORT const char* status_string(Status status);

// Message of the last call on this thread that did not succeed ("" after a success): says which
// argument was wrong and why. Thread-local; valid until the next call on this thread.
CACHESTORE_EXPORT const char* last_error_message();

// Library version as MAJOR*10000 + MINOR*100 + PATCH.
CACHESTORE_EXPORT int32_t version();

// kPageTable: the slots come from a page table (SlotMapping::page_table), paged caches only.
enum class SlotType : int32_t { kInt32 = 0, kInt64 = 1, kPageTable = 2 };

inline constexpr int64_t kNoReservedSlot = -1;

// Device-resident counters of caller bugs, incremented atomically by the kernels; the caller
// zeroes them and reads them back whenever it likes (graph-safe, never a device trap).
struct Diagnostics {
  unsigned long long out_of_range_slots;     // real rows (i < n) whose slot >= capacity, or
                                             // whose page-table lookup fails
  unsigned long long negative_token_counts;  // launches that read n < 0 (treated as 0)
  unsigned long long out_of_range_positions; // real rows of a rotating store (RotaryEmbedding)
                                             // whose position is outside the cos/sin cache;
                                             // written by such stores only
};

// The padded batch: the same for every cache a call writes.
struct Batch {
  int64_t num_tokens = 0;                          // rows in the padded batch; sets the grid
  const int32_t* num_tokens_non_padded = nullptr;  // device [1]: real rows n; nullptr = all rows
  Diagnostics* diagnostics = nullptr;              // device, optional
};

// A page table as the slot source (FlashInfer's form; SlotType::kPageTable): row i's slot is
//   indices[indptr[b] + pos / P] * P + pos % P,  b = batch_indices[i], pos = positions[i],
// P the cache's page size. A real row whose b is outside [0, batch_size), whose pos is negative,
// or whose page indptr[b] + pos / P is not below indptr[b + 1] (or is negative, or holds a
// negative page id) is not stored and counts as out of range. batch_indices and positions are
// read for every row of the padded batch, as a slot mapping is; indptr and indices only for real
// rows, so a padded row never reads past indptr[0 .. batch_size].
struct PageTable {
  const int32_t* positions = nullptr;  // device [num_tokens]: the row's position in its request
  const int32_t* indptr = nullptr;     // device [batch_size + 1]: request b's pages start at
                                       // indices[indptr[b]]
  const int32_t* indices = nullptr;    // device page ids
  int32_t batch_size = 0;
};

struct SlotMapping {
  const void* data = nullptr;               // device [num_tokens] int32 or int64; kPageTable:
                                            // int32 batch_indices
  SlotType type = SlotType::kInt64;
  int64_t reserved_slot = kNoReservedSlot;  // e.g. 0 for SGLang's padding sink; -1 = none
  // Page-owner sharding (context parallel), paged caches only: slots are global; page
  // g = slot / P belongs to owner g % owner_size and lives at its local page g / owner_size. A
  // real row on another owner's page is skipped and not counted; capacity is checked on the
  // local page (< num_pages). owner_size a power of two; 1 = off (every page is local). The
  // flat bf16 index-K store has no pages and ignores both.
  int32_t owner_rank = 0;
  int32_t owner_size = 1;
  PageTable page_table;                     // SlotType::kPageTable only
};

struct LaunchOptions {
  // Programmatic dependent launch: the kernel may start while the previous kernel in the
  // stream finishes; it waits (griddepcontrol.wait) before its first read. Honoured on sm_90
  // and newer, ignored on older devices.
  bool enable_pdl = false;
};

// ---- store_index_k_bf16: row-per-slot bf16 copy ------------------------------------------
struct IndexKBf16Params {
  Batch batch;
  SlotMapping slots;
  const void* k = nullptr;       // device [num_tokens, head_dim] bf16, row stride k_row_stride
  int64_t k_row_stride = 0;      // in elements; >= head_dim, multiple of 8
  void* cache = nullptr;         // device [num_slots, head_dim] bf16, row stride cache_row_stride
  int64_t cache_row_stride = 0;  // in elements; >= head_dim, multiple of 8
  int64_t num_slots = 0;         // capacity (num_pages * page_size)
  int32_t head_dim = 128;        // D, a multiple of 8
  LaunchOptions launch;
};
CACHESTORE_EXPORT Status store_index_k_bf16(const IndexKBf16Params& params, cudaStream_t stream);

// ---- store_index_k_fp8: the paged 132-byte indexer layout --------------------------------
// page p: [P x D e4m3][P x (D/128) fp32 scales]; slot s on page s/P at offset s%P.
struct IndexKFp8Cache {
  void* data = nullptr;           // device [num_pages, page_stride_bytes] uint8
  int64_t num_pages = 0;
  int32_t page_size = 64;         // P, a power of two in [1, 1024]
  int64_t page_stride_bytes = 0;  // >= layout::index_k_fp8_min_page_stride(P, D), multiple of 4
                                  // (16-byte stores when a multiple of 16: every P >= 4)
  int32_t head_dim = 128;         // D, a multiple of 128, at most 512
  ScaleRule scale_rule = ScaleRule::kAmax;
};

struct IndexKFp8Params {
  Batch batch;
  SlotMapping slots;
  const void* k = nullptr;   // device [num_tokens, head_dim] bf16, row stride k_row_stride
  int64_t k_row_stride = 0;  // in elements; >= head_dim, multiple of 8
  IndexKFp8Cache cache;
  LaunchOptions launch;
};
CACHESTORE_EXPORT Status store_index_k_fp8(const IndexKFp8Params& params, cudaStream_t stream);

// ---- store_index_k_fp4: the paged 68-byte indexer layout (D = 128) ------------------------
// page p: [P x D/2 bytes e2m1][P x D/32 UE8M0 bytes]; slot s on page s/P at offset s%P.
struct IndexKFp4Cache {
  void* data = nullptr;           // device [num_pages, page_stride_bytes] uint8
  int64_t num_pages = 0;
  int32_t page_size = 64;         // P, a power of two in [1, 1024]
  int64_t page_stride_bytes = 0;  // >= layout::index_k_fp4_min_page_stride(P, D), multiple of 4
  int32_t head_dim = 128;         // D, a multiple of 32, at most 512
  Fp4Ties ties = Fp4Ties::kToEven;
};

struct IndexKFp4Params {
  Batch batch;
  SlotMapping slots;
  const void* k = nullptr;   // device [num_tokens, head_dim] bf16, row stride k_row_stride
  int64_t k_row_stride = 0;  // in elements; >= head_dim, multiple of 8
  IndexKFp4Cache cache;
  LaunchOptions launch;
};
CACHESTORE_EXPORT Status store_index_k_fp4(const IndexKFp4Params& params, cudaStream_t stream);

// ---- fused_store_cache: FlashMLA KV layouts, optionally with the index-K in one launch ---
struct MlaCache {
  MlaLayout layout = MlaLayout::kV4;
  void* data = nullptr;           // device [num_pages, page_stride_bytes] uint8
  int64_t num_pages = 0;
  int32_t page_size = 64;         // P, a power of two in [1, 1024]
  int64_t page_stride_bytes = 0;  // >= the layout's minimum (layout.h), multiple of 16
  // V3.2: kPow2 (FlashMLA) or kAmax (vLLM); V4: kPow2. The V4.1 layouts fix their scale formats
  // and do not read it.
  ScaleRule scale_rule = ScaleRule::kPow2;
};

// RoPE fused into a store (store_paged_kv, fused_store_cache): K is rotated before it is stored
// (and before quantization), Q (optionally) in the same launch, in vLLM's and FlashInfer's
// convention:
//   cos = cos_sin_cache[pos][i], sin = cos_sin_cache[pos][rotary_dim / 2 + i] (cos_sin_layout
//   kInterleaved: [2i] and [2i + 1]),
//   NeoX pairs (d, d + rotary_dim / 2), GPT-J pairs (2i, 2i + 1), i < rotary_dim / 2,
//   x' = x cos - y sin, y' = y cos + x sin; d >= rotary_dim passes unrotated.
// A row is rotated and stored only when it is real (i < n) and 0 <= pos < max_position; a real
// row with any other position writes nothing (no K, V, Q or key_out) and counts in
// Diagnostics::out_of_range_positions. positions[i] is read for every row of the padded batch, as
// a slot is; fused_store_cache reads a row's cos/sin row too (the position's when it is inside
// the cache, else row 0: the cache is read-only, and reading it before the guard decides takes
// it off the row's chain), store_paged_kv only a real row's. A padded row writes nothing. With
// cos_sin_rows = kByRow (fused_store_cache) the cos/sin row of row i is cos_sin_cache[i] (the
// caller gathered it by position once a step for every layer, as SGLang's DeepSeek stores take
// freqs_cis): positions are not read, max_position is the cache's rows (at least num_tokens),
// and every real row rotates; store_paged_kv refuses it. Q and key_out of a real row
// are written whatever its slot (another owner's page, the reserved slot, out of range): they
// serve attention on every rank, not the cache. The rotated values are rounded to the input type
// (the value the engines' rotary kernel hands their cache write), then stored as the cache type
// stores any input. docs/layouts.md gives the rounding of each option.
enum class RopeStyle : int32_t { kNeox = 0, kGptj = 1 };
enum class RopeCosSinRows : int32_t { kByPosition = 0, kByRow = 1 };
// Where pair i's cos and sin sit in a cos/sin row: cos at i and sin at rotary_dim / 2 + i
// (vLLM's and FlashInfer's cos_sin_cache), or side by side at 2i and 2i + 1 (SGLang's freqs_cis,
// (real, imag) interleaved; fused_store_cache only).
enum class RopeCosSinLayout : int32_t { kHalves = 0, kInterleaved = 1 };
enum class RopeRounding : int32_t {
  // vLLM rotary_embedding: 16-bit inputs round each product and the sum to the input type, and
  // cos / sin are first rounded to it (vLLM holds the cache in the query's dtype).
  kInputType = 0,
  // FlashInfer apply_rope_with_cos_sin_cache: fp32 arithmetic, fma(x, cos, -(y sin)), one
  // rounding to the input type.
  kFp32 = 1,
};

struct RotaryEmbedding {
  const void* positions = nullptr;         // device [num_tokens]; nullptr: no rotation (unless
                                           // cos_sin_rows is kByRow: then unread)
  SlotType positions_type = SlotType::kInt64;  // kInt32 | kInt64
  const void* cos_sin_cache = nullptr;     // device [max_position, >= rotary_dim], 16-byte
                                           // aligned rows
  KvDataType cos_sin_type = KvDataType::kFp32;
  int64_t cos_sin_stride = 0;              // elements between positions (0: rotary_dim)
  int64_t max_position = 0;
  int32_t rotary_dim = 0;                  // even, <= k.head_dim; NeoX a multiple of 16 (nvfp4:
                                           // 32), GPT-J of 8 (nvfp4: 16)
  RopeStyle style = RopeStyle::kNeox;
  RopeRounding rounding = RopeRounding::kInputType;
  // Optional Q, of input_type and K's head dim: rotated into query_out (nullptr: in place).
  int32_t num_query_heads = 0;             // 0: no Q
  void* query = nullptr;                   // device [num_tokens, num_query_heads, head_dim]
  int64_t query_token_stride = 0;          // elements
  int64_t query_head_stride = 0;
  void* query_out = nullptr;
  int64_t query_out_token_stride = 0;
  int64_t query_out_head_stride = 0;
  // Optional rotated K of input_type (e.g. k.data itself: vLLM's in-place key), for attention
  // kernels that read the new keys from a tensor; nullptr: K is rotated into the cache only.
  void* key_out = nullptr;
  int64_t key_out_token_stride = 0;
  int64_t key_out_head_stride = 0;
  // Which cos/sin row a row rotates by: its position's, or its own (cos_sin_cache [num_tokens or
  // more, >= rotary_dim]; fused_store_cache only).
  RopeCosSinRows cos_sin_rows = RopeCosSinRows::kByPosition;
  RopeCosSinLayout cos_sin_layout = RopeCosSinLayout::kHalves;
};

// Whether a store rotates: positions given, or a cos/sin row per row.
inline bool rotates(const RotaryEmbedding& r) {
  return r.positions != nullptr || r.cos_sin_rows == RopeCosSinRows::kByRow;
}

struct FusedStoreParams {
  Batch batch;
  SlotMapping kv_slots;
  const void* nope = nullptr;   // device [num_tokens, 448 (V4, V4.1) | 512 (V3.2)] bf16
  int64_t nope_row_stride = 0;  // in elements; multiple of 8; < 2^31 unless one row
  const void* rope = nullptr;   // device [num_tokens, 64] bf16
  int64_t rope_row_stride = 0;  // in elements; multiple of 8; < 2^31 unless one row
  MlaCache kv_cache;

  // Optional: the fp8 or fp4 index-K of the same rows (store_index_k_fp8 / _fp4 semantics),
  // stored in the same launch under the same count. Enabled when index_k != nullptr.
  // index_slots may be the same array as kv_slots and must have the same SlotType.
  const void* index_k = nullptr;   // device [num_tokens, head_dim of the index cache] bf16
  int64_t index_k_row_stride = 0;  // in elements; multiple of 8
  SlotMapping index_slots;
  IndexKFormat index_format = IndexKFormat::kFp8;
  IndexKFp8Cache index_cache;      // index_format kFp8
  IndexKFp4Cache index_fp4_cache;  // index_format kFp4

  LaunchOptions launch;

  // Optional: RoPE of each row's RoPE part (`rope`, 64 values) before the layout stores it, and
  // of Q's RoPE part in the same launch (RotaryEmbedding with the input type bf16, rotary_dim 64;
  // query [num_tokens, num_query_heads, 64] bf16; key_out [num_tokens, 64] bf16, one head). A
  // real row whose position is outside the cos/sin cache stores no KV record, Q or key_out; its
  // index-K, which is not rotated here, is stored as without RoPE. Enabled when
  // rotates(rotary).
  RotaryEmbedding rotary;
};
CACHESTORE_EXPORT Status fused_store_cache(const FusedStoreParams& params, cudaStream_t stream);

// ---- store_paged_kv: K/V of MHA / GQA / MQA models into a paged cache --------------------
// Every layout engines use, by element strides: element (slot s, head h, index d) of a cache is
// at data + (s / P) * page_stride + (s % P) * entry_stride + h * head_stride + dim(d) (elements
// of the cache type), dim(d) = d unless the cache chunks its head dim (vLLM's paged-attention
// layout, layout::kv_paged_attention_*). See layout.h for NHD, HND, FlashInfer's stacked 5-D
// cache and vLLM's 576-wide MLA rows. P is any positive integer (vLLM's hybrid models size pages
// to match state pages); powers of two take shifts. Any head dim in [1, 1024] and any
// element-aligned base and strides: 16-byte vectors where the alignment allows, narrower ones
// (down to one element) where it does not.
// fp8_e4m3_per_token_head caches (vLLM's fp8_per_token_head, docs/layouts.md): per (token, head)
// s = max(amax / 448, 1e-6) (IEEE division), the values e4m3(x * (1 / s)) (the reciprocal
// correctly rounded, saturating) and s into the fp32 scale view; D a power of two in [8, 256],
// num_heads * Dk a multiple of Dv, 16-byte aligned input vectors and 8-byte aligned cache
// entries, d contiguous; no RoPE.
// nvfp4 caches (FlashInfer's format, docs/layouts.md): per 16 values of a (token, head), amax,
// the e4m3 block scale sf = e4m3(amax / (6 g)) and 8 bytes of e2m1 codes of x / (sf g), g the
// device global scale; D a multiple of 16, 16-byte aligned input vectors and 8-byte aligned
// cache entries, d contiguous.
struct KvInput {
  const void* data = nullptr;  // device [num_tokens, num_heads, head_dim] bf16 | fp16 | fp32
  int64_t token_stride = 0;    // elements
  int64_t head_stride = 0;     // elements
  int32_t head_dim = 0;        // in [1, 1024]
};

struct KvCacheView {
  void* data = nullptr;          // device; aligned to its element (the input type's for auto)
  int64_t page_stride = 0;       // elements of the cache type (nvfp4: bytes, two values each)
  int64_t entry_stride = 0;
  int64_t head_stride = 0;
  const float* scale = nullptr;  // fp8: the divisor; nvfp4: the global decode scale g. Device
                                 // fp32, read at run time; ignored by auto caches
  int32_t scale_stride = 0;      // 0: one scale for the tensor; 1: one per head (scale[h])
  // The head dim's layout (layout::KvDimLayout): chunk 0 and dim_stride 1 for d contiguous.
  int32_t chunk = 0;
  int64_t chunk_stride = 0;
  int64_t dim_stride = 1;
  // nvfp4: the e4m3 block scales, one byte per 16 values of a (slot, head): block d / 16 of
  // (s, h) at block_scales + (s / P) * block_scale_page_stride + (s % P) *
  // block_scale_entry_stride + h * block_scale_head_stride + d / 16 (bytes).
  // fp8_e4m3_per_token_head: the fp32 scale of each (slot, head) at block_scales + (s / P) *
  // block_scale_page_stride + (s % P) * block_scale_entry_stride + h * block_scale_head_stride
  // (fp32 elements; vLLM's k_scale_cache [blocks, P, H]). Written by the store.
  void* block_scales = nullptr;
  int64_t block_scale_page_stride = 0;
  int64_t block_scale_entry_stride = 0;
  int64_t block_scale_head_stride = 0;
};


struct PagedKvParams {
  Batch batch;
  SlotMapping slots;             // owner sharding applies (page g = slot / page_size)
  int32_t num_heads = 1;         // H in [1, 256], K and V alike
  KvDataType input_type = KvDataType::kBf16;  // auto caches hold it (fp32 caches for fp32)
  KvCacheType cache_type = KvCacheType::kAuto;
  int64_t num_pages = 0;         // of this owner's caches
  int32_t page_size = 16;        // P >= 1
  KvInput k;
  KvInput v;                     // v.data == nullptr: a K-only cache (v_cache ignored)
  KvCacheView k_cache;
  KvCacheView v_cache;
  LaunchOptions launch;
  // RoPE in the same launch (positions != nullptr): the 16-byte kernel's layouts only (d
  // contiguous, 16-byte aligned vectors, D a multiple of 8; nvfp4 as it requires).
  RotaryEmbedding rope;
};
CACHESTORE_EXPORT Status store_paged_kv(const PagedKvParams& params, cudaStream_t stream);

// ---- checks --------------------------------------------------------------------------------
// Every refusal of a store, without launching or touching the device: what the store returns
// for the same params before it launches (kSuccess, or the status with last_error_message()).
CACHESTORE_EXPORT Status check(const IndexKBf16Params& params);
CACHESTORE_EXPORT Status check(const IndexKFp8Params& params);
CACHESTORE_EXPORT Status check(const IndexKFp4Params& params);
CACHESTORE_EXPORT Status check(const FusedStoreParams& params);
CACHESTORE_EXPORT Status check(const PagedKvParams& params);

// ---- runtime dispatch -------------------------------------------------------------------
// Which compiled path runs on `device`: the code image the driver picked for the library's
// kernels. kErrorArchMismatch when the library has none for that device.
enum class KernelPath : int32_t {
  kPortable = 0,   // sm_80 PTX (JIT) or an unknown newer image: no PDL assumptions
  kHopper = 1,     // sm_90 SASS: PDL, software UE8M0 conversion
  kBlackwell = 2,  // sm_100a SASS: PDL, native cvt.rp.satfinite.ue8m0x2
};
struct DeviceInfo {
  KernelPath path = KernelPath::kPortable;
  int32_t binary_version = 0;  // e.g. 90 for sm_90 SASS (cudaFuncAttributes::binaryVersion)
  int32_t ptx_version = 0;
  int32_t compute_capability = 0;  // e.g. 90
};
CACHESTORE_EXPORT Status query_device(int device, DeviceInfo* info);
CACHESTORE_EXPORT const char* kernel_path_string(KernelPath path);

}  // namespace cachestore
