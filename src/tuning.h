// Launch tuning: every threshold and block shape of the stores, as named fields of one policy per
// architecture, and the rules that turn a policy and a batch into a launch shape. The launchers
// (launch.cuh, dispatch/) hold the mechanism only. docs/design.md says how the values were found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cachestore::tuning {

// ---- compile-time bounds (the kernels' __launch_bounds__) -----------------------------------
inline constexpr int kMaxBlockThreads = 512;      // the largest block a policy launches
inline constexpr int kIndexKThreadsPerSm = 2048;  // index-K kernels: registers for 2048 threads
inline constexpr int kMlaThreadsPerSm = 1536;     // MLA and fused kernels: 1536 threads an SM
inline constexpr int kMlaRopeThreadsPerSm = 1024; // ... with RoPE: the rotation's registers
inline constexpr int kPagedKvMaxThreads = 256;    // the paged K/V kernel's block
// Vectors a thread of the paged K/V 16-byte kernel on large batches (the one width compiled
// besides 1): four 16-byte loads in flight under one guard, at 64 registers (1024 threads an SM)
// against one at 32 (2048): twice the bytes in flight an SM. Two measured 4-6% slower (fp8).
inline constexpr int kPagedKvWideVectors = 4;

// The index-K head dim compiled into the decode-size kernels (the DeepSeek indexer's D); any
// other D, and every D at large batches, reads it at run time.
inline constexpr int32_t kCompiledIndexDim = 128;

// ---- per-architecture policies ---------------------------------------------------------------
struct IndexKPolicy {
  int32_t block_threads;      // threads a block at large n
  int32_t min_block_threads;  // ... and at small n, where rows are spread over the SMs
  int32_t spread_sms;         // small batches are spread over sm_count / spread_sms SMs
};

struct MlaPolicy {
  int32_t kv_warps_per_block; // KV-row warps a block at large n (a row takes 1 or 2 warps)
  int32_t min_rows;           // rows a block at small n
  int32_t two_per_sm_rows;    // rows a block while two such blocks an SM cover the batch,
                              // without PDL (the fused kernel with PDL too); 0: off
  bool fused_pdl_one_row;     // with PDL, the fused kernel takes one row a block while one block
                              // an SM covers the batch
  int64_t freqs_cis_kernel;   // 1: SGLang's freqs_cis form (V4.1, no Q) runs its own kernel, the
                              // form compiled in; 0: the kernel of every rotation
};

struct PagedKvPolicy {
  int32_t max_threads;        // a block's threads (<= kPagedKvMaxThreads)
  int32_t min_threads;        // a block's threads at least, at small n
  int64_t wide_rows;          // from this many rows the 16-byte kernel takes
                              // kPagedKvWideVectors vectors a thread (0: never)
  int64_t gptj_pair_rows;     // from this many rows a GPT-J rotation's units take two adjacent
                              // vectors where its rotary dim has an even count (0: never)
};

// Values a lane of the quantizing kernels: 4 (fp8 index-K only) up to four_max_rows rows, 8 up to
// eight_max_rows, 16 above. Fewer values a lane shorten the chain after the loads, which is a
// decode-size store's latency; more move the same bytes on fewer lanes at large batches.
struct ValuesPerLanePolicy {
  int64_t four_max_rows;
  int64_t eight_max_rows;
};

struct StorePolicy {
  IndexKPolicy index_k;
  MlaPolicy mla;
  PagedKvPolicy paged_kv;
  ValuesPerLanePolicy values_per_lane;
};

// sm_100a images (Blackwell). Not measured (no Blackwell device was available): larger blocks at
// large n keep more bytes in flight per SM for its higher bandwidth.
inline constexpr StorePolicy kBlackwellPolicy{
    .index_k = {.block_threads = 512, .min_block_threads = 64, .spread_sms = 1},
    .mla = {.kv_warps_per_block = 8, .min_rows = 2, .two_per_sm_rows = 0,
            .fused_pdl_one_row = false, .freqs_cis_kernel = 1},
    .paged_kv = {.max_threads = 256, .min_threads = 64, .wide_rows = 2048, .gptj_pair_rows = 512},
    .values_per_lane = {.four_max_rows = 512, .eight_max_rows = 1024},
};

// sm_90 images (H100, H200): the decode-size shapes measured fastest on the H200 (bench_store).
inline constexpr StorePolicy kHopperPolicy{
    .index_k = {.block_threads = 256, .min_block_threads = 128, .spread_sms = 2},
    .mla = {.kv_warps_per_block = 8, .min_rows = 2, .two_per_sm_rows = 2,
            .fused_pdl_one_row = true, .freqs_cis_kernel = 1},
    .paged_kv = {.max_threads = 256, .min_threads = 64, .wide_rows = 2048, .gptj_pair_rows = 512},
    .values_per_lane = {.four_max_rows = 512, .eight_max_rows = 1024},
};

// The sm_80 PTX (JIT on any other device): the shapes chosen up front.
inline constexpr StorePolicy kPortablePolicy{
    .index_k = {.block_threads = 256, .min_block_threads = 64, .spread_sms = 1},
    .mla = {.kv_warps_per_block = 4, .min_rows = 2, .two_per_sm_rows = 0,
            .fused_pdl_one_row = false, .freqs_cis_kernel = 1},
    .paged_kv = {.max_threads = 256, .min_threads = 64, .wide_rows = 2048, .gptj_pair_rows = 512},
    .values_per_lane = {.four_max_rows = 512, .eight_max_rows = 1024},
};

static_assert(kHopperPolicy.paged_kv.max_threads <= kPagedKvMaxThreads &&
                  kBlackwellPolicy.paged_kv.max_threads <= kPagedKvMaxThreads &&
                  kPortablePolicy.paged_kv.max_threads <= kPagedKvMaxThreads,
              "the paged K/V block fits the kernel's launch bounds");
static_assert(kHopperPolicy.index_k.block_threads <= kMaxBlockThreads &&
                  kBlackwellPolicy.index_k.block_threads <= kMaxBlockThreads &&
                  kPortablePolicy.index_k.block_threads <= kMaxBlockThreads,
              "blocks fit the kernels' launch bounds");

// ---- overrides -------------------------------------------------------------------------------
// CACHESTORE_TUNING="field=value[,field=value...]" replaces fields of the device's policy, read
// once per device at its first store (arch.cu): the shapes the policy chooses between can be
// timed and tested without a rebuild. The fields whose every value is a valid policy:
//   paged_kv.wide_rows            rows from which the 16-byte paged K/V kernel takes
//                                 kPagedKvWideVectors vectors a thread (0: never; 1: always)
//   paged_kv.gptj_pair_rows       rows from which GPT-J rotation units take two vectors
//   values_per_lane.four_max_rows, values_per_lane.eight_max_rows
//   mla.freqs_cis_kernel          0 | 1
// Returns true, or false with what is wrong with `spec` (naming the field) in `error`. Plain C
// strings: a std::string here would put a libstdc++ template in the shared library's exports.
inline bool apply_overrides(const char* spec, StorePolicy* policy, char* error,
                            size_t error_size) {
  struct Field {
    const char* name;
    int64_t* value;
  };
  const Field fields[] = {
      {"paged_kv.wide_rows", &policy->paged_kv.wide_rows},
      {"paged_kv.gptj_pair_rows", &policy->paged_kv.gptj_pair_rows},
      {"values_per_lane.four_max_rows", &policy->values_per_lane.four_max_rows},
      {"values_per_lane.eight_max_rows", &policy->values_per_lane.eight_max_rows},
      {"mla.freqs_cis_kernel", &policy->mla.freqs_cis_kernel},
  };
  const char* item = spec;
  while (*item != '\0') {
    const char* end = std::strchr(item, ',');
    if (end == nullptr) end = item + std::strlen(item);
    const char* eq = static_cast<const char*>(std::memchr(item, '=', end - item));
    const char* name_end = eq != nullptr ? eq : end;
    const int name_length = static_cast<int>(name_end - item);
    const Field* field = nullptr;
    for (const Field& f : fields)
      if (std::strlen(f.name) == static_cast<size_t>(name_length) &&
          std::strncmp(f.name, item, name_length) == 0)
        field = &f;
    if (field == nullptr) {
      std::snprintf(error, error_size, "'%.*s' is not a field that can be set", name_length, item);
      return false;
    }
    if (eq == nullptr) {
      std::snprintf(error, error_size, "'%s' has no value (field=value)", field->name);
      return false;
    }
    const int text_length = static_cast<int>(end - eq - 1);
    char* parsed = nullptr;
    const long long value = std::strtoll(eq + 1, &parsed, 10);
    if (text_length == 0 || parsed != end || value < 0) {
      std::snprintf(error, error_size, "%s = '%.*s': must be a whole number >= 0", field->name,
                    text_length, eq + 1);
      return false;
    }
    *field->value = value;
    item = *end == ',' ? end + 1 : end;
  }
  return true;
}

// ---- shape rules -----------------------------------------------------------------------------
// Rows per block for `rows` rows: a small batch is spread over the SMs (one SM works through a
// block's memory requests one after another), a large one fills whole blocks. Powers of two in
// [min_rows, max_rows].
inline int32_t rows_per_block(int64_t rows, int32_t min_rows, int32_t max_rows, int32_t sm_count) {
  const int64_t per_sm = (rows + sm_count - 1) / sm_count;
  int32_t r = min_rows;
  while (r < max_rows && r < per_sm) r *= 2;
  return r;
}

inline int32_t max_i32(int32_t a, int32_t b) { return a > b ? a : b; }

// Values a lane for a batch of `num_tokens` rows; `four`: the kernel has a 4-value form.
inline int32_t values_per_lane(const StorePolicy& policy, int64_t num_tokens, bool four) {
  const ValuesPerLanePolicy& v = policy.values_per_lane;
  return four && num_tokens <= v.four_max_rows ? 4 : num_tokens <= v.eight_max_rows ? 8 : 16;
}

// The index-K kernels' rows a block for `lanes` lanes a row.
inline int32_t index_k_rows_per_block(const StorePolicy& policy, int64_t num_tokens,
                                      int32_t lanes, int32_t sm_count) {
  const IndexKPolicy& p = policy.index_k;
  return rows_per_block(num_tokens, max_i32(1, p.min_block_threads / lanes),
                        max_i32(1, p.block_threads / lanes), max_i32(1, sm_count / p.spread_sms));
}

// The MLA kernels' rows a block (KV rows of warps_per_row warps each) and how many of its blocks
// an SM holds at once (the early PDL trigger's one-wave test, launch.cuh: guard_args).
struct MlaShape {
  int32_t rows_per_block;
  int32_t blocks_per_sm;
};
inline MlaShape mla_shape(const StorePolicy& policy, int64_t num_tokens, int32_t warps_per_row,
                          bool pdl, bool fused, int32_t sm_count) {
  const MlaPolicy& p = policy.mla;
  if (fused && pdl && p.fused_pdl_one_row && num_tokens <= sm_count) return {1, 1};
  // Two blocks of two_per_sm_rows rows are resident on an SM together under the MLA kernels'
  // launch bounds.
  if (p.two_per_sm_rows > 0 && (fused || !pdl) &&
      num_tokens <= int64_t{2} * p.two_per_sm_rows * sm_count)
    return {p.two_per_sm_rows, 2};
  return {rows_per_block(num_tokens, p.min_rows, p.kv_warps_per_block / warps_per_row, sm_count),
          1};
}

// A kernel's wide form (`wide` units of work a thread in place of 1) for a batch: from the
// policy's `from_rows` rows (0: never), where `wide` divides the `units` it splits.
inline int32_t wide_form(int64_t from_rows, int64_t num_tokens, int32_t units, int32_t wide) {
  return from_rows > 0 && num_tokens >= from_rows && units > 0 && units % wide == 0 ? wide : 1;
}

// Vectors a thread of the paged K/V 16-byte kernel (a row's vectors split kPagedKvWideVectors
// ways).
inline int32_t paged_kv_vectors_per_thread(const StorePolicy& policy, int64_t num_tokens,
                                           int32_t vectors_per_token) {
  return wide_form(policy.paged_kv.wide_rows, num_tokens, vectors_per_token,
                   kPagedKvWideVectors);
}

// The paged K/V block: a row's vectors across x (a warp's worth at least, when there are that
// many), rows across y. `packed` (the wide form, large batches only): a row takes exactly its
// vectors and the block as many whole rows as fit, so that a warp may hold the end of one row
// and the start of the next and no lane idles (vLLM's 576-wide MLA rows: 18 threads a row, 14
// rows, where a power of two would leave 14 of every 32 lanes idle).
struct PagedKvShape {
  int32_t vectors_per_block_row;  // blockDim.x
  int32_t rows_per_block;         // blockDim.y
};
inline PagedKvShape paged_kv_shape(const StorePolicy& policy, int64_t num_tokens,
                                   int32_t vectors_per_token, int32_t sm_count,
                                   bool packed = false) {
  const PagedKvPolicy& p = policy.paged_kv;
  if (packed && vectors_per_token <= p.max_threads)
    return {vectors_per_token, p.max_threads / vectors_per_token};
  int32_t bx = 1;
  while (bx < vectors_per_token && bx < 32) bx *= 2;
  if (vectors_per_token > 32) {
    const int32_t whole_warps = (vectors_per_token + 31) / 32 * 32;
    bx = whole_warps < p.max_threads ? whole_warps : p.max_threads;
  }
  return {bx, rows_per_block(num_tokens, max_i32(1, p.min_threads / bx),
                             max_i32(1, p.max_threads / bx), sm_count)};
}

}  // namespace cachestore::tuning
