// Kernel parameter structs: plain values the launchers fill after validation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"

namespace cachestore::kernels {

struct GuardArgs {
  int64_t num_tokens;           // rows in the padded batch
  const int32_t* n_ptr;         // device [1] or nullptr (all rows real)
  Diagnostics* diagnostics;     // device or nullptr
  bool early_trigger;           // with PDL (the kernels' kPdl): every thread triggers before its
                                // wait (one-wave grids)
  int32_t rows_per_block;       // the fused kernel's rows a block (its warps' roles depend on it;
                                // in the first constant line, read first by every warp); 0 for
                                // the other kernels
};
static_assert(sizeof(GuardArgs) == 32, "GuardArgs: 0x210-0x22f");

struct SlotArgs {
  const void* data;             // device [num_tokens] SlotT
  int64_t reserved;             // < 0: none
  int64_t capacity;             // slots of all owners together: local capacity * owner_size
  int32_t owner_log2;           // page-owner sharding: log2(owner_size), 0 = off
  int32_t owner_rank;           // pages g with g % owner_size == owner_rank are this cache's
};

struct PagedCacheArgs {
  uint8_t* data;                // device [num_pages, page_stride] bytes
  int64_t page_stride;          // bytes
  int32_t page_shift;           // log2(page size)
  ScaleRule rule;               // read at run time by the fused kernel's fp8 index-K rows only (a
                                // uniform branch before their loads); every other kernel has its
                                // rule as a template parameter. In the struct's tail, where it
                                // costs no space.
};

// n / d and n % d for 32-bit n by a divisor fixed at launch (Granlund-Montgomery, as CUTLASS's
// FastDivmod): q = (umulhi(n, m) + n) >> l, l = ceil(log2 d), m = 2^32 (2^l - d) / d + 1. A
// power of two has m = 0, so its quotient is the shift n >> l.
struct FastDivmod {
  uint32_t divisor;
  uint32_t multiplier;
  uint32_t shift;

  static FastDivmod make(uint32_t d) {
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << l) - d)) / d + 1;
    return {d, (d & (d - 1)) == 0 ? 0u : static_cast<uint32_t>(m), l};
  }
#if defined(__CUDACC__)
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(__umulhi(n, multiplier)) + n) >> shift);
  }
#endif
};

// The page-table slot source (SlotType::kPageTable, FlashInfer's form): a row's slot is
// indices[indptr[b] + pos / P] * P + pos % P, b and pos read from SlotArgs::data (the batch
// indices) and `positions`. A trailing kernel parameter, read only by the kernels instantiated
// for PageTableSlots, so that no parameter of any other kernel moves in the constant bank.
struct PageTableArgs {
  const int32_t* positions;     // device [num_tokens]
  const int32_t* indptr;        // device [batch + 1]
  const int32_t* indices;       // device page ids, indexed by indptr
  int32_t batch;
  FastDivmod page;              // P of the cache the slots address
};
static_assert(sizeof(PageTableArgs) == 40, "PageTableArgs: five 8-byte words");

// The SlotT of the kernels that read a page table (the others' SlotT is the mapping's type).
struct PageTableSlots {};

struct IndexKBf16Args {
  SlotArgs slots;
  const uint16_t* k;            // [num_tokens, D] bf16, row stride k_row_stride elements
  int64_t k_row_stride;
  uint16_t* cache;              // [capacity, D] bf16, row stride cache_row_stride elements
  int64_t cache_row_stride;
  int32_t vecs_per_row;         // D / 8 (16-byte vectors)
};

// Field order (IndexKArgs, MlaArgs): the kernel parameters sit in the constant bank from 0x210,
// and the first read of each 64-byte line of it misses the constant cache. Fields read after the
// loads (the cache's page shift, the rule, the fp4 ties) are therefore kept in lines that the
// kernel already reads before its loads (the input pointers and strides, the block's row count),
// so that no miss lands on the chain between the loads and the stores.

// The fp8 (132-byte) and fp4 (68-byte) index-K layouts: which one is the kernel's template.
// 80 bytes: after GuardArgs (0x210-0x22f) the index-K kernels' parameters fill the lines 0x200 and
// 0x240 only (16-bit fields for the last three keep the fp4 ties out of a third line).
struct IndexKArgs {
  SlotArgs slots;
  const uint16_t* k;            // [num_tokens, D] bf16, row stride k_row_stride elements
  int64_t k_row_stride;
  PagedCacheArgs cache;
  int16_t head_dim;             // D: fp8 a multiple of 128, fp4 of 32; <= 512
  int16_t lanes_log2;           // log2 of the lanes per token: next_pow2(D / values per lane)
  uint8_t ties_byte;            // Fp4Ties (fp4)

  constexpr Fp4Ties ties() const { return static_cast<Fp4Ties>(ties_byte); }
};
static_assert(sizeof(IndexKArgs) == 80, "IndexKArgs fills the two constant lines after GuardArgs");

// Lanes per index-K row (IndexKArgs::lanes_log2) at `values_per_lane` values a lane, rounded up
// to a power of two; a constant in the kernels compiled for one D.
CACHESTORE_HOST_DEVICE constexpr int32_t index_k_lanes_log2(int32_t head_dim,
                                                            int32_t values_per_lane) {
  int32_t log2 = 0;
  while ((1 << log2) * values_per_lane < head_dim) ++log2;
  return log2;
}

// 80 bytes, as IndexKArgs: after GuardArgs the MLA kernels read the constant lines 0x200 and 0x240
// only; 64-bit strides would reach a third line. The row strides are therefore 32-bit
// (check_fused_store refuses a larger stride, unless there is one row).
struct MlaArgs {
  SlotArgs slots;
  PagedCacheArgs cache;         // the layout is the kernel's template parameter
  const uint16_t* nope;         // [num_tokens, 448 | 512] bf16
  const uint16_t* rope;         // [num_tokens, 64] bf16
  int32_t nope_row_stride;      // elements
  int32_t rope_row_stride;      // elements
};
static_assert(sizeof(MlaArgs) == 80, "MlaArgs fills the two constant lines after GuardArgs");

// One side (K or V) of store_paged_kv.
struct KvSideArgs {
  const uint16_t* src;          // [num_tokens, H, D] bf16 | fp16 | fp32 (read as its type)
  int64_t token_stride;         // elements
  int64_t head_stride;          // elements
  uint8_t* cache;               // elements of the cache type (the input's for auto; fp8: 1 byte)
  layout::KvStrides cache_strides;  // page, entry, head; elements
  const float* scale;           // fp8 only
  int32_t scale_stride;         // 0 or 1
  FastDivmod vecs_per_head;     // D / width: a vector index -> (head, vector in head)
};

// A side's head-dim layout in its cache (layout::KvDimLayout), read by the general kernel only.
struct KvDimArgs {
  int32_t chunk_shift;          // log2(chunk), or -1: no chunks
  int32_t pad0;
  int64_t chunk_stride;         // elements
  int64_t dim_stride;           // elements
};

struct PagedKvArgs {
  SlotArgs slots;
  KvSideArgs k;
  KvSideArgs v;
  int32_t k_vecs;               // H * Dk / width: vectors j < k_vecs are K's
  int32_t vecs_per_token;       // k_vecs + H * Dv / width
  int32_t page_shift;           // P = 2^page_shift, or -1: page_div
  FastDivmod page_div;          // P, when not a power of two (global capacity <= 2^32)
  // The general kernel's (after what the 16-byte kernel reads, so that its lines are unchanged):
  KvDimArgs k_dim;
  KvDimArgs v_dim;
  int32_t width;                // elements a thread: 8, 4, 2 or 1
  int32_t pad0;
};

// nvfp4 caches: each side's e4m3 block-scale view (bytes), a trailing parameter of the nvfp4
// kernel only, so that no parameter of the other paged K/V kernels moves.
struct BlockScaleSide {
  uint8_t* scales;
  layout::KvStrides strides;    // page, entry, head; bytes (block d / 16 at + d / 16)
};
struct BlockScaleArgs {
  BlockScaleSide k;
  BlockScaleSide v;
};

// store_paged_kv with RoPE: the rotation's operands, a trailing parameter of the rotating
// kernels only. A unit is what one thread rotates and stores: NeoX, a pair of vectors (d and
// d + rotary_dim / 2) below rotary_dim / 2, else one vector; GPT-J, one vector. Vector u of a head
// covers d in [kW u, kW u + kW). What a K row reads fills the first 64 bytes, one constant-bank
// line: a parameter line a kernel touches first is a miss on the row's chain.
struct RopeArgs {
  const void* positions;        // device [num_tokens] int32 | int64
  const uint8_t* cos_sin;       // device [max_position, cos_sin_stride] of cos_sin_type
                                // (by_row(): row i's own row; positions unread)
  int64_t cos_sin_stride;       // bytes
  int64_t max_position;
  uint8_t* k_out;               // nullptr: none; == the K input: in place
  int64_t k_out_token_stride;
  int32_t half_rot;             // rotary_dim / 2: the sin offset and NeoX's partner (elements)
  int32_t pair_units;           // units that are pairs of vectors: rotary_dim / (2 kW) for NeoX
                                // and adjacent_pairs, else 0
  int32_t rotated_units;        // units that rotate: pair_units, or rotary_dim / kW
  uint8_t positions_int64;
  uint8_t cos_sin_type;         // KvDataType
  uint8_t input_rounding;       // RopeRounding::kInputType
  uint8_t cos_sin_form;         // kByRow | kInterleaved (RopeCosSinRows, RopeCosSinLayout)
  int64_t k_out_head_stride;
  // Q: units j >= q_begin of a row, as many a head as K's (k.vecs_per_head).
  int32_t q_begin;
  int32_t adjacent_pairs;       // GPT-J with rotary_dim / kW even: 1, a pair unit holds two
                                // adjacent vectors (pair_units of them); 0: NeoX's pairs or none
  const uint8_t* q;             // element strides of the input type
  int64_t q_token_stride;
  int64_t q_head_stride;
  uint8_t* q_out;               // == q: in place (the unrotated vectors are not written)
  int64_t q_out_token_stride;
  int64_t q_out_head_stride;
};
static_assert(offsetof(RopeArgs, k_out_head_stride) == 64, "a K row's fields in 64 bytes");
static_assert(offsetof(RopeArgs, q) == 80, "adjacent_pairs fills q_begin's padding");

// fused_store_cache's rotation in SGLang's freqs_cis form (V4.1 layouts, no Q; mla_launch.cuh's
// freqs_cis_form): row i's own row of 32 fp32 (cos, sin) pairs. The kernel of that form takes it
// after MlaArgs in place of MlaRopeArgs: its rows read nothing else of the rotation.
struct FreqsCisArgs {
  const uint8_t* freqs;         // device [>= num_tokens, stride]; 16-byte aligned rows
  int64_t stride;               // bytes
  uint8_t* k_out;               // nullptr: none; [num_tokens, k_out_token_stride] bf16
  int64_t k_out_token_stride;   // elements
};

// RopeArgs::cos_sin_form's bits: row i rotates by cos/sin row i; each pair's cos and sin side by
// side (the MLA rotations only: store_paged_kv refuses both).
inline constexpr uint8_t kCosSinByRow = 1;
inline constexpr uint8_t kCosSinInterleaved = 2;

// fused_store_cache with RoPE (mla_rope kernels): the rotation of the rows' RoPE parts (`rope`:
// half_rot 32; pair_units > 0 for NeoX; q_begin unused) and Q's RoPE part, rotated by the blocks
// with blockIdx.y >= 1: unit u of a block's rows is row u / q_units_per_row, unit u % that.
// The rotating MLA kernels take it right after MlaArgs (0x280: the line after the row's).
struct MlaRopeArgs {
  RopeArgs rope;
  FastDivmod q_units_per_row;   // num_query_heads * q_units_per_head; divisor 1 and no Q blocks
                                // without Q
  FastDivmod q_units_per_head;  // NeoX 4 pairs, GPT-J 8 vectors (8 bf16 each)
};

}  // namespace cachestore::kernels
