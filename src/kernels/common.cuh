// Device pieces every store kernel uses: the PDL prologue, the count and slot loads, the
// guard with its diagnostics, 16-byte vectors of bf16 and their e4m3 encoding.
#pragma once

#include <cuda/ptx>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "detail/guard.h"
#include "detail/scale_rules.h"
#include "kernels/args.h"

// Whether this image has Blackwell's native short-type conversions (cvt.rn.satfinite.e2m1x2.f32,
// cvt.rp.satfinite.ue8m0x2.f32): the condition under which cuda_fp4.h and cuda_fp8.h emit them
// (sm_100a/f and the other family-specific targets), so that __nv_cvt_float2_to_fp4x2 and
// __nv_cvt_float_to_e8m0 below are the instructions and never the headers' emulations.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH__ >= 1000
#define CACHESTORE_NATIVE_SHORT_CVT 1
#else
#define CACHESTORE_NATIVE_SHORT_CVT 0
#endif

namespace cachestore::kernels {

// The count, the slots and the inputs may be written by the previous kernel in the stream:
// with PDL, wait for it before the first read. Dependents launch once every block of this grid
// has triggered or exited, and a block counts as triggered only when all its threads have
// (one thread's trigger releases nothing early). A grid that fits in one wave (guard.early_trigger,
// decided by the launcher) triggers from every thread before the wait, so the next node's launch
// overlaps this one; a larger grid releases by exiting, because dependents launched early would
// take SM slots from its remaining blocks. Their own griddepcontrol.wait still waits for this
// grid to complete and flush, so an early trigger never exposes partial writes.
//
// kPdl is each kernel's template parameter (the launcher picks the instantiation): without PDL
// there is no prologue at all, so the compiler interleaves the address arithmetic with the loads
// (the same order behind a run-time PDL branch cost 0.00-0.10x without PDL, V3.2 the most).
// An image without griddepcontrol (before sm_90) runs neither instruction; the launcher does
// not ask for PDL there. Rows call it through begin_row, after their addresses.
template <bool kPdl>
__device__ __forceinline__ void begin_store(const GuardArgs& guard) {
  if constexpr (kPdl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (guard.early_trigger) cudaTriggerProgrammaticLaunchCompletion();
    cudaGridDependencySynchronize();
#endif
  }
}

// An address computed here stays here: without the empty volatile asm the compiler sinks the
// arithmetic of a conditional load into the load's block, behind the wait (a volatile asm
// stays in order with the wait's).
template <typename T>
__device__ __forceinline__ void compute_before_wait(const T*& address) {
  asm volatile("" : "+l"(address));
}

// A load from an address begin_row pinned: an explicit ld.global (the instruction
// a plain global load compiles to, LDG.E; cuda's __ldca would be LDG.E.STRONG.SM), as a volatile
// asm, so it stays after the wait (a pointer out of an asm is no longer known to be global: a
// plain load through it became a generic LD, session 6's first version); unpinned, a plain load.
template <bool kPinned, typename T>
__device__ __forceinline__ T load_global(const T* p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "a 4-, 8- or 16-byte load");
  if constexpr (!kPinned) {
    return *p;
  } else {
    uint32_t w[sizeof(T) / 4];
    if constexpr (sizeof(T) == 4) {
      asm volatile("ld.global.b32 %0, [%1];" : "=r"(w[0]) : "l"(p));
    } else if constexpr (sizeof(T) == 8) {
      asm volatile("ld.global.v2.b32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
    } else {
      asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                   : "l"(p));
    }
    T value;
    memcpy(&value, w, sizeof(T));
    return value;
  }
}

// Where a row's guard reads: the count (nullptr: every row real) and the row's slot, at
// slot + row. Unpinned (no PDL), the address arithmetic stays at the loads, where the compiler
// schedules it with them. Pinned (begin_row's kPinned, always with PDL), begin_row computes both
// addresses before the wait; the count's is then a plain pointer, never null: without a count it
// is the first slot's word (in bounds: a launch has a row), read and ignored. A null test after
// the wait put two constant-bank reads and a compare in front of the count's load (ptxas re-reads
// a parameter from the constant bank rather than keep it in a register across the wait).
// load_count / load_slot take the row's kPinned.
template <typename SlotT>
struct GuardSources {
  const int32_t* count;
  const int32_t* count_read;  // with PDL: the address the count load reads
  const SlotT* slot;
  int64_t row;

  __device__ __forceinline__ GuardSources(const GuardArgs& guard, const SlotArgs& slots,
                                          int64_t row)
      : count(guard.n_ptr), count_read(guard.n_ptr),
        slot(static_cast<const SlotT*>(slots.data)), row(row) {}

  // The count as read; classify_row needs no clamp (see guard.h).
  template <bool kPinned>
  __device__ __forceinline__ int64_t load_count(const GuardArgs& guard) const {
    if constexpr (kPinned) {
      const int32_t n = load_global<true>(count_read);
      return count == nullptr ? guard.num_tokens : n;
    } else {
      return count == nullptr ? guard.num_tokens : *count;
    }
  }
  template <bool kPinned>
  __device__ __forceinline__ int64_t load_slot() const {
    return load_global<kPinned>(slot + row);
  }
};

// The start of a row whose guard reads `sources` and whose inputs are `inputs`, right before its
// first load. kPinned (always with PDL): the addresses of all its loads are computed here,
// before the wait (the kernel parameters cannot change under it, only the memory the previous
// kernel writes), so the first reads of the parameters' constant-bank lines overlap the previous
// kernel instead of following its completion (with PDL at n <= 512: 0.03-0.14x of the lean naive
// node off the DeepSeek stores, 0.2-0.3x off paged K/V at n <= 32; NOTES.md, item 22), and the
// loads issue right after the wait (up to another 0.06x, item 23); the count's address has no
// null test, and the row's loads take <kPinned> (load_global). A kernel may pin without PDL as
// well: the bf16 row does (see there). Then begin_store.
template <bool kPdl, bool kPinned = kPdl, typename SlotT, typename... Pointers>
__device__ __forceinline__ void begin_row(const GuardArgs& guard, GuardSources<SlotT>& sources,
                                          Pointers&... inputs) {
  static_assert(kPinned || !kPdl, "the PDL prologue needs the addresses before its wait");
  if constexpr (kPinned) {
    if (sources.count == nullptr)
      sources.count_read = reinterpret_cast<const int32_t*>(sources.slot);
    sources.slot += sources.row;
    sources.row = 0;
    compute_before_wait(sources.count_read);
    compute_before_wait(sources.slot);
    (compute_before_wait(inputs), ...);
  }
  begin_store<kPdl>(guard);
}

// The guard, with page-owner sharding (DESIGN.md): the verdict on the global slot against the
// capacity of all owners together (slots.capacity = local capacity * owner_size), then a row on
// another owner's page is skipped, not counted. `leader` is one thread of the row's group: it
// counts an out-of-range slot, and (when `count_negative`, row 0) a negative n, once per launch.
// The negative-n check runs here, on the count the row loaded anyway: a separate load at the
// top of the kernel put a whole memory latency in front of warp 0's loads. A stored row is never
// counted (row 0 with n < 0 is not stored), so the counting sits on the path of the rows that
// are not: a stored row's path is the stored test (detail::row_is_stored) and one branch.
__device__ __forceinline__ bool row_is_stored(const GuardArgs& guard, const SlotArgs& slots,
                                              int64_t row, int64_t n, int64_t slot,
                                              int64_t page, bool leader,
                                              bool count_negative = true) {
  if (detail::row_is_stored(row, n, slot, page, slots.reserved, slots.capacity, slots.owner_log2,
                            slots.owner_rank))
    return true;
  if (leader && guard.diagnostics != nullptr) {
    if (detail::classify_owned_row(row, n, slot, page, slots.reserved, slots.capacity,
                                   slots.owner_log2, slots.owner_rank) ==
        detail::RowVerdict::kOutOfRange)
      atomicAdd(&guard.diagnostics->out_of_range_slots, 1ull);
    if (count_negative && row == 0 && n < 0)
      atomicAdd(&guard.diagnostics->negative_token_counts, 1ull);
  }
  return false;
}

// Where a stored row lands: its global page (the owner filter reads it), the page in this
// owner's cache and the offset in the page.
struct PagePosition {
  int64_t global_page;
  int64_t local_page;
  int64_t in_page;

  __device__ __forceinline__ PagePosition(int64_t page, int64_t offset, const SlotArgs& slots)
      : global_page(page), local_page(page >> slots.owner_log2), in_page(offset) {}

  // Power-of-two page sizes: shifts.
  __device__ __forceinline__ static PagePosition of_slot(int64_t slot, int32_t page_shift,
                                                         const SlotArgs& slots) {
    return {slot >> page_shift, slot & ((int64_t{1} << page_shift) - 1), slots};
  }
};

// Where an MLA row's lane reads its kN values: lanes below `nope_lanes` from the NoPE input,
// the rest from the RoPE input. Selected operand by operand, so that the address is a few selects
// rather than two branches that reconverge in front of the load.
template <int kN>
__device__ __forceinline__ const uint16_t* nope_or_rope_source(const MlaArgs& a, int64_t row,
                                                               int lane, int nope_lanes) {
  const bool is_nope = lane < nope_lanes;
  return (is_nope ? a.nope : a.rope) + (row * (is_nope ? a.nope_row_stride : a.rope_row_stride) +
                                        kN * (is_nope ? lane : lane - nope_lanes));
}

__device__ __forceinline__ uint4 load_vec(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_vec(uint8_t* p, const uint4& v) {
  *reinterpret_cast<uint4*>(p) = v;
}

// kN fp8 bytes: one 4-, 8- or 16-byte vector.
template <int kN>
using Fp8Bytes = std::conditional_t<kN == 4, uint32_t, std::conditional_t<kN == 8, uint2, uint4>>;

// Where a divisor comes from decides which checks its quotient needs (fp8_divided).
enum class ScaleSource {
  kIndexKAmax,  // max(amax, 1e-4) / 448: in [2^-64, 2^64] or +Inf, and |x / s| <= 448
  kTileAmax,    // V3.2's max(amax / 448, FLT_MIN): |x / s| <= 448, but s may be below 2^-64
  kGiven,       // a caller's scale (K/V caches): any value, and x / s may overflow
};

// x / s with the stored fp8 byte IEEE division gives, without a division instruction (whose
// range checks serialize the values), given r = 1/s correctly rounded: a product and one fma
// residual correction (Markstein). A zero product is kept as it is (its sign, which the
// correction would lose; also s = Inf, where x * 0 is exactly x / Inf), and with kMayOverflow an
// Inf one (x / s overflows or lies within a rounding of FLT_MAX: both saturate; the residual
// would make NaN of it). Valid for scales in [2^-64, 2^64] (markstein_applies; below, the
// residual can underflow) and +Inf; callers divide outside. Checked against div.rn for every
// bf16 (and fp16) x over the scales of every rule and 2,000+ others (gpu_conversion_test,
// gpu_paged_kv_test).
__device__ __forceinline__ bool markstein_applies(float s) {
  return s >= 0x1p-64f && s <= 0x1p64f;  // false for NaN
}
template <bool kMayOverflow>
__device__ __forceinline__ float markstein_quotient(float x, float s, float r) {
  const float q = x * r;
  const float corrected = detail::markstein_correct(x, s, r, q);
  // The Inf check only where it can matter: under the MLA launch bounds it costs registers.
  return q == 0.0f || (kMayOverflow && isinf(q)) ? q : corrected;
}
// RN(1 / s) for s in [FLT_MIN, 2^126) or s = +Inf (0), without the range check and slow-path
// call of rcp.rn.f32: its fast path (an approximate reciprocal and one Newton step in fma),
// which is the whole computation for these s. The amax rules' scales lie there. Checked against
// __frcp_rn for every such s (gpu_conversion_test).
__device__ __forceinline__ float reciprocal_rn(float s) {
  float r0;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(s));
  const float r = fmaf(r0, fmaf(-s, r0, 1.0f), r0);
  return s == INFINITY ? 0.0f : r;
}

// The scalar form for a caller's scale, for the exhaustive tests.
__device__ __forceinline__ float exact_quotient(float x, float s) {
  return markstein_applies(s) ? markstein_quotient<true>(x, s, __frcp_rn(s)) : __fdiv_rn(x, s);
}

// fp8(f(v[i])) of kN values (a multiple of 4), packed in memory order, satfinite, round to nearest
// even (cvt.rn.satfinite.{e4m3,e5m2}x2.f32); four values at a time so that few are live at once.
template <__nv_fp8_interpretation_t kFormat, int kN, typename F>
__device__ __forceinline__ Fp8Bytes<kN> pack_fp8(const float (&v)[kN], F f) {
  static_assert(kN == 4 || kN == 8 || kN == 16, "one 4-, 8- or 16-byte vector");
  uint32_t w[kN / 4];
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f(v[4 * i]), f(v[4 * i + 1])),
                                                 __NV_SATFINITE, kFormat);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(f(v[4 * i + 2]), f(v[4 * i + 3])),
                                                 __NV_SATFINITE, kFormat);
    w[i] = lo | (hi << 16);
  }
  if constexpr (kN == 4) {
    return w[0];
  } else if constexpr (kN == 8) {
    return make_uint2(w[0], w[1]);
  } else {
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// fp8(v[i] / s) of kN values sharing the scale s, with IEEE division's bytes. The range decision
// is taken once for the vector, never per value: per-value checks made 16 branch-and-reconverge
// regions that ran the quotients one after another. The index-K amax rule needs no decision, so
// its kernels do not carry the division path (registers under their launch bounds).
template <__nv_fp8_interpretation_t kFormat, ScaleSource kSource, int kN>
__device__ __forceinline__ Fp8Bytes<kN> fp8_divided(const float (&v)[kN], float s) {
  if (kSource != ScaleSource::kIndexKAmax && !markstein_applies(s))
    return pack_fp8<kFormat>(v, [s](float x) { return __fdiv_rn(x, s); });
  // The amax rules' scales are in reciprocal_rn's range (index-K: [2^-22, 2^120) or +Inf;
  // V3.2: within [2^-64, 2^64] here); a caller's may be anything.
  const float r = kSource == ScaleSource::kGiven ? __frcp_rn(s) : reciprocal_rn(s);
  return pack_fp8<kFormat>(v, [s, r](float x) {
    return markstein_quotient<kSource == ScaleSource::kGiven>(x, s, r);
  });
}

// The two bf16 values of a 32-bit word decoded to fp32 (exact), the low half first.
__device__ __forceinline__ void decode_bf16x2(uint32_t w, float* out) {
  out[0] = __uint_as_float(w << 16);
  out[1] = __uint_as_float(w & 0xffff0000u);
}

// The 8 16-bit values of one vector decoded to fp32 (exact), in memory order.
template <KvDataType kType>
__device__ __forceinline__ void decode_vec(const uint4& x, float* out) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kType == KvDataType::kBf16) {
      decode_bf16x2(w[i], out + 2 * i);
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

// ---- e2m1 (fp4) -------------------------------------------------------------------------------

// The e2m1 code of y (round to nearest; |y| > 6 gives 6; NaN gives +6, 0x7; the sign kept on a
// zero magnitude, 0x8), as the PTX ISA defines cvt.rn.satfinite.e2m1x2.f32 for ties to even.
// The magnitude code counts the midpoints between the 8 values {0, .5, 1, 1.5, 2, 3, 4, 6} that
// |y| passes; a tie (|y| on a midpoint) goes to the even code (the midpoints above the odd codes
// 1, 3, 5: 0.75, 1.75, 3.5 count when reached) or toward zero (no midpoint counts when only
// reached). Branch-free; checked against the reference for all 2^32 inputs (gpu_conversion_test).
__host__ __device__ __forceinline__ uint32_t e2m1_code_software(float y, Fp4Ties ties) {
  const float a = fabsf(y);
  uint32_t code = (a > 0.25f) + (a > 1.25f) + (a > 2.5f) + (a > 5.0f);
  code += ties == Fp4Ties::kToEven ? (a >= 0.75f) + (a >= 1.75f) + (a >= 3.5f)
                                    : (a > 0.75f) + (a > 1.75f) + (a > 3.5f);
  uint32_t bits;
  memcpy(&bits, &y, sizeof bits);
  return a != a ? 0x7u : code | ((bits >> 28) & 0x8u);
}

// Two codes in one byte, `lo` in the low nibble. Ties to even on the native images: the
// instruction, whose NaN (+6) and zero-sign results are those of the software path above.
__device__ __forceinline__ uint32_t e2m1x2(float lo, float hi, Fp4Ties ties) {
#if CACHESTORE_NATIVE_SHORT_CVT
  if (ties == Fp4Ties::kToEven)
    return __nv_cvt_float2_to_fp4x2(make_float2(lo, hi), __NV_E2M1, cudaRoundNearest);
#endif
  return e2m1_code_software(lo, ties) | (e2m1_code_software(hi, ties) << 4);
}

// kN / 2 bytes of e2m1 codes: 4 (kN = 8) or 8 (kN = 16).
template <int kN>
using Fp4Bytes = std::conditional_t<kN == 8, uint32_t, uint2>;

// e2m1(f(v[i])) of kN values packed in memory order, two per byte, the even index low.
template <int kN, typename F>
__device__ __forceinline__ Fp4Bytes<kN> pack_e2m1(const float (&v)[kN], Fp4Ties ties, F f) {
  static_assert(kN == 8 || kN == 16, "one 4- or 8-byte vector");
  uint32_t w[kN / 8];
#pragma unroll
  for (int i = 0; i < kN / 8; ++i) {
    w[i] = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[i] |= e2m1x2(f(v[8 * i + 2 * j]), f(v[8 * i + 2 * j + 1]), ties) << (8 * j);
  }
  if constexpr (kN == 8) {
    return w[0];
  } else {
    return make_uint2(w[0], w[1]);
  }
}

// e2m1 codes of x / s for bf16 x and a scale s of a few significant bits (V41_FP4's e4m3 scale,
// the fp4 indexer's power of two), without a quotient: the code of x / s counts the e2m1
// midpoints t in {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} that |x| / s passes, and |x| / s > t iff
// |x| > t * s. t * s has at most 7 significant bits, so it is exact in bf16 (or +Inf past its
// range, where no finite x passes), and the comparison is exact. It is also what the rounded
// quotient gives: x != t * s means |x - t * s| >= one bf16 ulp, 2^16 times more than the
// rounding of x / s, so rn(x / s) never lands on a midpoint it did not reach. A tie (|x| == t *
// s) goes up where ties go to even and t is above an odd code (0.75, 1.75, 3.5): there the
// threshold is the next bf16 below t * s. Two values per instruction: the seven bf16x2 compares
// give 1.0 or 0.0 each, summed onto 128.0, whose low mantissa bits are then the code. NaN and Inf
// inputs (Inf thresholds) take the per-value path instead (e2m1_scaled). Checked against the
// reference for every bf16 x and every scale of both layouts, both tie rules (gpu_conversion_test).
struct E2m1Thresholds {
  __nv_bfloat162 t[7];

  __device__ __forceinline__ E2m1Thresholds(float scale, Fp4Ties ties) {
    const float midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
#pragma unroll
    for (int i = 0; i < 7; ++i) {
      uint32_t pair = static_cast<uint32_t>(
          __bfloat16_as_ushort(__float2bfloat16_rn(midpoints[i] * scale)));
      if (ties == Fp4Ties::kToEven && i % 2 == 1) pair -= 1;  // >= t*s: > its predecessor
      pair |= pair << 16;
      t[i] = *reinterpret_cast<const __nv_bfloat162*>(&pair);
    }
  }

  // The codes of 4 words of 2 bf16 values each (sign kept): 4 bytes in memory order.
  __device__ __forceinline__ uint32_t codes(const uint32_t* w) const {
    uint32_t out = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t magnitude = w[j] & 0x7fff7fffu;
      const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&magnitude);
      __nv_bfloat162 sum = __floats2bfloat162_rn(128.0f, 128.0f);
#pragma unroll
      for (int i = 0; i < 7; ++i) sum = __hadd2(sum, __hgt2(a, t[i]));
      const uint32_t c = *reinterpret_cast<const uint32_t*>(&sum);
      const uint32_t byte = (c & 0x7u) | ((c >> 12) & 0x70u) | ((w[j] >> 12) & 0x8u) |
                            ((w[j] >> 24) & 0x80u);
      out |= byte << (8 * j);
    }
    return out;
  }
};

// Whether any of the 16-bit values of kWords words is NaN or +-Inf (magnitude >= 0x7f80), per
// bf16x2 word without carries between the halves.
template <int kWords>
__device__ __forceinline__ bool any_bf16_nan_or_inf(const uint32_t* w) {
  uint32_t hit = 0;
#pragma unroll
  for (int j = 0; j < kWords; ++j) hit |= ((w[j] & 0x7fff7fffu) + 0x00800080u) & 0x80008000u;
  return hit != 0;
}

// Clears the sign of every nibble whose magnitude is 0 (0x8 -> 0x0): the fp4 indexer's rule.
__device__ __forceinline__ uint32_t e2m1_drop_zero_signs(uint32_t w) {
  const uint32_t nonzero = ((w & 0x77777777u) + 0x77777777u) & 0x88888888u;  // no carries
  return w & (0x77777777u | nonzero);
}

// kN bf16 values (one 8-byte vector, or kN / 8 16-byte vectors) decoded to fp32, and their amax.
// kN = 16 for large batches (fewer lanes, bandwidth), 8 for decode sizes, where the latency of the
// chain after the loads is the cost and idle lanes are free; 4 for the fp8 index-K kernel up to
// 512 rows (launch.cuh: values_per_lane).
template <int kN>
struct Bf16Vals {
  static_assert(kN == 4 || kN == 8 || kN == 16, "4, 8 or 16 values per lane");
  static constexpr int kWords = kN / 2;  // bf16 pairs
  // One 8-byte load (kN = 4) or kN / 8 16-byte loads, kept as loaded: the kN >= 8 kernels' SASS
  // depends on it (rebuilding V4's RoPE vector from words let the compiler merge the NoPE and RoPE
  // stores behind a reconvergence point, +0.08 us a node at n = 512).
  using LoadVec = std::conditional_t<kN == 4, uint2, uint4>;
  static constexpr int kLoads = kN == 4 ? 1 : kN / 8;
  LoadVec raw[kLoads];
  float v[kN];

  // The values at `src` (pinned by begin_row when kPinned), or zeros where not `active`.
  template <bool kPinned>
  __device__ __forceinline__ static Bf16Vals load(const uint16_t* src, bool active = true) {
    Bf16Vals x;
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
      x.raw[i] = active ? load_global<kPinned>(reinterpret_cast<const LoadVec*>(src + 8 * i))
                        : LoadVec{};
    return x;
  }

  // The 32-bit words (bf16 pairs) in memory order.
  __device__ __forceinline__ void words(uint32_t (&w)[kWords]) const {
    if constexpr (kN == 4) {
      w[0] = raw[0].x;
      w[1] = raw[0].y;
    } else {
#pragma unroll
      for (int i = 0; i < kLoads; ++i) {
        w[4 * i] = raw[i].x;
        w[4 * i + 1] = raw[i].y;
        w[4 * i + 2] = raw[i].z;
        w[4 * i + 3] = raw[i].w;
      }
    }
  }

  // The raw values, copied (V4's RoPE lanes): kN * 2 bytes, aligned to the load vector.
  __device__ __forceinline__ void store_raw(uint8_t* dst) const {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) *reinterpret_cast<LoadVec*>(dst + 16 * i) = raw[i];
  }

  // Decoding is separate from loading so that it runs after the count and slot loads issue.
  __device__ __forceinline__ void decode() {
    uint32_t w[kWords];
    words(w);
#pragma unroll
    for (int i = 0; i < kWords; ++i) decode_bf16x2(w[i], v + 2 * i);
  }

  // max |x| of the values, on the packed bf16 pairs: exact (max picks one of the values) and as
  // NaN-ignoring as fmaxf (__hmax2 returns the other operand of a NaN). In [+0, +Inf], never NaN
  // or -0 (the magnitudes carry no sign): group_amax compares the bits as integers.
  __device__ __forceinline__ float amax() const {
    uint32_t w[kWords];
    words(w);
    __nv_bfloat162 m[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) m[i] = __habs2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
#pragma unroll
    for (int stride = kWords / 2; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < stride; ++i) m[i] = __hmax2(m[i], m[i + stride]);
    return fmaxf(fmaxf(__low2float(m[0]), __high2float(m[0])), 0.0f);
  }

  // e4m3(x * factor), packed in memory order.
  __device__ __forceinline__ Fp8Bytes<kN> to_e4m3_times(float factor) const {
    return pack_fp8<__NV_E4M3>(v, [factor](float x) { return x * factor; });
  }

  // e2m1 codes of x / s (sign kept; DESIGN.md's rounding with `ties`), two per byte.
  // `quotient(x)` is x / s exactly as the layout defines it (a true division for V41_FP4, a
  // power-of-two product for the indexer): the per-value path computes it and converts (the
  // native instruction on Blackwell for ties to even); elsewhere the bf16 thresholds decide.
  template <typename Quotient>
  __device__ __forceinline__ Fp4Bytes<kN> to_e2m1(float s, Fp4Ties ties, Quotient quotient) {
    static_assert(kN == 8 || kN == 16, "e2m1: 4 or 8 bytes a lane");
    bool per_value = false;
#if CACHESTORE_NATIVE_SHORT_CVT
    per_value = ties == Fp4Ties::kToEven;
#endif
    uint32_t w[kWords];
    words(w);
    per_value = per_value || any_bf16_nan_or_inf<kWords>(w);
    if (per_value) {
      decode();
      return pack_e2m1(v, ties, quotient);
    }
    const E2m1Thresholds thresholds(s, ties);
    if constexpr (kN == 8) {
      return thresholds.codes(w);
    } else {
      return make_uint2(thresholds.codes(w), thresholds.codes(w + 4));
    }
  }

  // e4m3(x / s), with the byte IEEE division would give.
  template <ScaleSource kSource>
  __device__ __forceinline__ Fp8Bytes<kN> to_e4m3_divided(float s) const {
    return fp8_divided<__NV_E4M3, kSource>(v, s);
  }
};

// UE8M0 round-up (2^ceil(log2 x) as a biased exponent, satfinite) of a scale x in [FLT_MIN,
// +Inf], the domain of every rule that uses it: Blackwell's native cvt.rp.satfinite.ue8m0x2.f32
// (through cuda_fp8.h) on sm_100a; elsewhere from x's bits, the exponent field plus one when the
// significand is not 1, at most 254 (cuda_fp8.h's emulation of the instruction handles every
// input, with branches, on the chain after the loads). Both checked against the PTX definition
// over the whole domain (gpu_conversion_test). The stores call it on the native images only
// (pow2_scale_byte); the other images take the byte from amax's bits, and the bits path here is
// what the conversion test checks against the instruction's definition.
__device__ __forceinline__ uint8_t ue8m0_round_up(float x) {
#if CACHESTORE_NATIVE_SHORT_CVT
  return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
#else
  const uint32_t u = __float_as_uint(x);
  return static_cast<uint8_t>(min((u >> 23) + ((u & 0x7fffffu) != 0u), 254u));
#endif
}

// The UE8M0 byte of a power-of-two scale rule (index-K pow2, V4, V3.2 pow2): on the native images
// the instruction's round-up of the rule's quotient, `quotient(amax)`; elsewhere the same byte
// from amax's bits, `from_bits(amax)` (detail::pow2_scale_byte: a compare and an add instead of
// the division and the round-up on the chain after the loads). Both are checked against the
// formula over every fp32 amax (gpu_conversion_test: the bits directly, the instruction through
// cuda_fp8.h's emulation of it and the PTX definition).
template <typename Quotient, typename FromBits>
__device__ __forceinline__ uint8_t pow2_scale_byte(float amax, Quotient quotient,
                                                   FromBits from_bits) {
#if CACHESTORE_NATIVE_SHORT_CVT
  return ue8m0_round_up(quotient(amax));
#else
  return from_bits(amax);
#endif
}

// Amax over the `kLanes` consecutive lanes that hold one quantization block, returned to every
// lane of the group (each lane scales its own values by it). The whole warp must take part
// (callers keep the lanes of rows past the batch until here): a mask of the group's lanes made
// the compiler add a convergence check (MATCH.ANY, REDUX, a divergent-path branch) in front.
//  - Groups of 8 to 32 lanes: one warp-wide integer max (redux.sync, sm_80+) per group, each
//    group's lanes contributing their bits and the others 0. The amax is non-negative and never
//    NaN (Bf16Vals::amax), and non-negative floats order as their bit patterns. The reductions
//    are independent, so they overlap: one latency instead of log2(kLanes) dependent shuffles.
//  - Groups of 2 or 4 lanes: a butterfly of shuffles (one or two).
template <int kLanes>
__device__ __forceinline__ float group_amax(float local) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "power of two");
  if constexpr (kLanes >= 8) {
    const uint32_t bits = __float_as_uint(local);
    const uint32_t group = cuda::ptx::get_sreg_laneid() / kLanes;
    uint32_t result = 0;
#pragma unroll
    for (uint32_t g = 0; g < 32 / kLanes; ++g) {
      const uint32_t m = __reduce_max_sync(0xffffffffu, group == g ? bits : 0u);
      result = group == g ? m : result;
    }
    return __uint_as_float(result);
  } else {
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2)
      local = fmaxf(local, __shfl_xor_sync(0xffffffffu, local, offset));
    return local;
  }
}

// An 8- or 16-byte vector to `p`: one store when p is aligned for it, else 4-byte stores (the
// index-K pages of 1 or 2 slots are 132 or 264 bytes long, so their rows are 4-byte aligned).
template <typename Vec>
__device__ __forceinline__ void store_bytes(uint8_t* p, const Vec& v, bool aligned) {
  if (aligned) {
    *reinterpret_cast<Vec*>(p) = v;
    return;
  }
  const auto* w = reinterpret_cast<const uint32_t*>(&v);
  auto* out = reinterpret_cast<uint32_t*>(p);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(Vec) / 4); ++i) out[i] = w[i];
}

// The guard of an MLA row (V4, V3.2, V4.1) whose values `x` are loading: the count and the slot
// load beside them, then the tile's amax (the whole warp takes part), the row's page position
// and the verdict. The row returns when `stored` is false. A row past the batch (`live` false:
// the last block's spare rows) loads no slot (-1: never stored, never counted).
struct MlaRowGuard {
  float amax;
  PagePosition pos;
  bool stored;
};
template <int kTileLanes, bool kPdl, typename SlotT, int kN>
__device__ __forceinline__ MlaRowGuard guard_mla_row(const GuardArgs& guard, const MlaArgs& a,
                                                     const GuardSources<SlotT>& sources,
                                                     int64_t row, int lane, bool live,
                                                     const Bf16Vals<kN>& x) {
  const int64_t n = sources.template load_count<kPdl>(guard);
  const int64_t slot = live ? sources.template load_slot<kPdl>() : -1;
  const float amax = group_amax<kTileLanes>(x.amax());
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  return {amax, pos, row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0)};
}

// The row whose input an MLA row reads: its own, or for a row past the batch (`live` false) row
// 0's (a launch has a row), read and never stored. An exit of those rows before the loads, or a
// load under their condition, put the first read of the inputs' constant line (0x240) behind the
// test of num_tokens (line 0x200): two constant-cache misses one after the other on the way to
// the loads (NOTES.md, item 26). A select keeps the two reads side by side.
__device__ __forceinline__ int64_t mla_input_row(int64_t row, bool live) { return live ? row : 0; }

// The start of a V4 / V4.1 row: each lane's kN values `x` from the NoPE input or, on the lanes
// from `nope_lanes` on, the RoPE input (nope_or_rope_source), loaded beside the count and the
// slot, then guard_mla_row.
template <typename SlotT, int kTileLanes, bool kPdl, int kN>
__device__ __forceinline__ MlaRowGuard load_nope_or_rope_row(const GuardArgs& guard,
                                                             const MlaArgs& a, int64_t row,
                                                             int lane, bool live, int nope_lanes,
                                                             Bf16Vals<kN>& x) {
  const uint16_t* src = nope_or_rope_source<kN>(a, mla_input_row(row, live), lane, nope_lanes);
  GuardSources<SlotT> sources(guard, a.slots, row);
  begin_row<kPdl>(guard, sources, src);
  x = Bf16Vals<kN>::template load<kPdl>(src);
  return guard_mla_row<kTileLanes, kPdl>(guard, a, sources, row, lane, live, x);
}

// An index-K row's D: kDim where the kernel is compiled for one (0: the run-time head_dim).
template <int kDim>
__device__ __forceinline__ int index_k_dim(const IndexKArgs& a) {
  return kDim != 0 ? kDim : a.head_dim;
}

// The loads and the guard of an index-K row (fp8, fp4) on kN values a lane, kGroupLanes lanes
// to a quantization group, then `store(x, amax, pos)`: the row's quantization and writes. The
// input, count and slot load together; the group's amax takes the whole warp (a row past the
// batch, `live` false, reads nothing but shuffles, as do lanes past D). Rows past the batch and
// lanes past D leave first, before the guard (lane 0, the leader, is active in every live row),
// then the rows the guard refuses: one condition per exit, so that no reconvergence point
// (BSSY / BSYNC) sits on the path of a stored row.
// kPinned (always with PDL): begin_row's addresses and loads; the fp4 index-K kernel pins
// without PDL too (NOTES.md, item 23).
template <typename SlotT, int kN, int kGroupLanes, bool kPdl, bool kPinned, int kDim,
          typename Store>
__device__ __forceinline__ void guarded_index_k_row(const GuardArgs& guard, const IndexKArgs& a,
                                                    int64_t row, int lane, bool live,
                                                    bool count_negative, Store&& store) {
  const bool active = live && lane * kN < index_k_dim<kDim>(a);
  const uint16_t* src = a.k + (row * a.k_row_stride + lane * kN);
  GuardSources<SlotT> sources(guard, a.slots, row);
  begin_row<kPdl, kPinned>(guard, sources, src);
  auto x = Bf16Vals<kN>::template load<kPinned>(src, active);
  const int64_t n = sources.template load_count<kPinned>(guard);
  const int64_t slot = live ? sources.template load_slot<kPinned>() : -1;
  const float amax = group_amax<kGroupLanes>(x.amax());
  if (!active) return;
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  if (!row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0, count_negative))
    return;
  store(x, amax, pos);
}

}  // namespace cachestore::kernels
