// Device pieces every store kernel uses: the PDL prologue, the count and slot loads, the
// guard with its diagnostics, 16-byte vectors of bf16 and their e4m3 encoding.
#pragma once

#include <cuda/ptx>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "detail/guard.h"
#include "detail/scale_rules.h"
#include "kernels/args.h"

namespace cachestore::kernels {

// The count, the slots and the inputs may be written by the previous kernel in the stream:
// with PDL, wait for it before the first read. Dependents launch once every block of this grid
// has triggered or exited, and a block counts as triggered only when all its threads have
// (one thread's trigger releases nothing early). A grid that fits in one wave (guard.early_trigger,
// decided by the launcher) triggers from every thread at the top, so the next node's launch
// overlaps this one; a larger grid releases by exiting, because dependents launched early would
// take SM slots from its remaining blocks. Their own griddepcontrol.wait still waits for this
// grid to complete and flush, so an early trigger never exposes partial writes. Without PDL
// (guard.pdl false, or an image without griddepcontrol) neither instruction runs.
__device__ __forceinline__ void begin_store(const GuardArgs& guard) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (guard.pdl) {
    if (guard.early_trigger) cudaTriggerProgrammaticLaunchCompletion();
    cudaGridDependencySynchronize();
  }
#endif
}

// The count as read; classify_row needs no clamp (see guard.h).
__device__ __forceinline__ int64_t load_token_count(const GuardArgs& guard) {
  return guard.n_ptr == nullptr ? guard.num_tokens : *guard.n_ptr;
}

template <typename SlotT>
__device__ __forceinline__ int64_t load_slot(const SlotArgs& slots, int64_t row) {
  return static_cast<const SlotT*>(slots.data)[row];
}

// The guard, with page-owner sharding (DESIGN.md): the verdict on the global slot against the
// capacity of all owners together (slots.capacity = local capacity * owner_size), then a row on
// another owner's page is skipped, not counted. `leader` is one thread of the row's group: it
// counts an out-of-range slot, and (when `count_negative`, row 0) a negative n, once per launch.
// The negative-n check runs here, on the count the row loaded anyway: a separate load at the
// top of the kernel put a whole memory latency in front of warp 0's loads.
__device__ __forceinline__ bool row_is_stored(const GuardArgs& guard, const SlotArgs& slots,
                                              int64_t row, int64_t n, int64_t slot,
                                              int64_t page, bool leader,
                                              bool count_negative = true) {
  const detail::RowVerdict verdict = detail::classify_owned_row(
      row, n, slot, page, slots.reserved, slots.capacity, slots.owner_log2, slots.owner_rank);
  if (leader && guard.diagnostics != nullptr) {
    if (verdict == detail::RowVerdict::kOutOfRange)
      atomicAdd(&guard.diagnostics->out_of_range_slots, 1ull);
    if (count_negative && row == 0 && n < 0)
      atomicAdd(&guard.diagnostics->negative_token_counts, 1ull);
  }
  return verdict == detail::RowVerdict::kStore;
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

__device__ __forceinline__ uint4 load_vec(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_vec(uint8_t* p, const uint4& v) {
  *reinterpret_cast<uint4*>(p) = v;
}

// kN fp8 bytes: one 8- or 16-byte vector.
template <int kN>
using Fp8Bytes = std::conditional_t<kN == 8, uint2, uint4>;

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
  const float corrected = fmaf(fmaf(-q, s, x), r, q);
  // The Inf check only where it can matter: under the MLA launch bounds it costs registers.
  return q == 0.0f || (kMayOverflow && isinf(q)) ? q : corrected;
}
// The scalar form for a caller's scale, for the exhaustive tests.
__device__ __forceinline__ float exact_quotient(float x, float s) {
  return markstein_applies(s) ? markstein_quotient<true>(x, s, __frcp_rn(s)) : __fdiv_rn(x, s);
}

// fp8(f(v[i])) of kN values (a multiple of 4), packed in memory order, satfinite, round to nearest
// even (cvt.rn.satfinite.{e4m3,e5m2}x2.f32); four values at a time so that few are live at once.
template <__nv_fp8_interpretation_t kFormat, int kN, typename F>
__device__ __forceinline__ Fp8Bytes<kN> pack_fp8(const float (&v)[kN], F f) {
  static_assert(kN == 8 || kN == 16, "one 8- or 16-byte vector");
  uint32_t w[kN / 4];
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f(v[4 * i]), f(v[4 * i + 1])),
                                                 __NV_SATFINITE, kFormat);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(f(v[4 * i + 2]), f(v[4 * i + 3])),
                                                 __NV_SATFINITE, kFormat);
    w[i] = lo | (hi << 16);
  }
  if constexpr (kN == 8) {
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
  const float r = __frcp_rn(s);
  return pack_fp8<kFormat>(v, [s, r](float x) {
    return markstein_quotient<kSource == ScaleSource::kGiven>(x, s, r);
  });
}

// The 8 16-bit values of one vector decoded to fp32 (exact), in memory order.
template <KvDataType kType>
__device__ __forceinline__ void decode_vec(const uint4& x, float* out) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kType == KvDataType::kBf16) {
      out[2 * i] = detail::bf16_bits_to_float(static_cast<uint16_t>(w[i] & 0xffffu));
      out[2 * i + 1] = detail::bf16_bits_to_float(static_cast<uint16_t>(w[i] >> 16));
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

// kN bf16 values (kN / 8 16-byte vectors) decoded to fp32, and their amax. kN = 16 for large
// batches (fewer lanes, bandwidth), 8 for decode-size batches, where the latency of the chain
// after the loads is the cost and idle lanes are free.
template <int kN>
struct Bf16Vals {
  static_assert(kN == 8 || kN == 16, "8 or 16 values per lane");
  static constexpr int kVecs = kN / 8;
  uint4 raw[kVecs];
  float v[kN];

  __device__ __forceinline__ explicit Bf16Vals(const uint16_t* src, bool active = true) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) raw[i] = active ? load_vec(src + 8 * i) : uint4{};
  }

  // Decoding is separate from loading so that it runs after the count and slot loads issue.
  __device__ __forceinline__ void decode() {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) decode_vec<KvDataType::kBf16>(raw[i], v + 8 * i);
  }

  // max |x| of the values, on the packed bf16 pairs: exact (max picks one of the values) and as
  // NaN-ignoring as fmaxf (__hmax2 returns the other operand of a NaN).
  __device__ __forceinline__ float amax() const {
    __nv_bfloat162 m[kN / 2];
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) m[4 * i + j] = __habs2(*reinterpret_cast<const __nv_bfloat162*>(&w[j]));
    }
#pragma unroll
    for (int stride = kN / 4; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < stride; ++i) m[i] = __hmax2(m[i], m[i + stride]);
    return fmaxf(fmaxf(__low2float(m[0]), __high2float(m[0])), 0.0f);
  }

  // e4m3(x * factor), packed in memory order.
  __device__ __forceinline__ Fp8Bytes<kN> to_e4m3_times(float factor) const {
    return pack_fp8<__NV_E4M3>(v, [factor](float x) { return x * factor; });
  }

  // e4m3(x / s), with the byte IEEE division would give.
  template <ScaleSource kSource>
  __device__ __forceinline__ Fp8Bytes<kN> to_e4m3_divided(float s) const {
    return fp8_divided<__NV_E4M3, kSource>(v, s);
  }
};

// UE8M0 round-up (2^ceil(log2 x) as a biased exponent): cuda_fp8.h emits the native
// cvt.rp.satfinite.ue8m0x2.f32 on sm_100a/sm_100f and its software emulation elsewhere.
__device__ __forceinline__ uint8_t ue8m0_round_up(float x) {
  return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
}

// Amax over the `kLanes` consecutive lanes that hold one quantization block, returned to every
// lane of the group (each lane scales its own values by it). cub::WarpReduce returns the
// aggregate to the group's first lane only, which would cost a broadcast shuffle on top; this
// butterfly needs log2(kLanes) shuffles, masked to the group, so groups of other rows in the
// warp may have exited already.
template <int kLanes>
__device__ __forceinline__ float group_amax(float local) {
  static_assert(kLanes >= 2 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "power of two");
  const unsigned group_mask =
      kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u) << (cuda::ptx::get_sreg_laneid() & ~(kLanes - 1u));
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    local = fmaxf(local, __shfl_xor_sync(group_mask, local, offset));
  return local;
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

}  // namespace cachestore::kernels
