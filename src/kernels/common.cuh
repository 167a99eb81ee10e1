// Device pieces every store kernel uses: the PDL prologue, the count and slot loads, the
// guard with its diagnostics, 16-byte vectors of bf16 and their e4m3 encoding.
#pragma once

#include <cuda/ptx>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "detail/guard.h"
#include "detail/scale_rules.h"
#include "kernels/args.h"

namespace cachestore::kernels {

// The count, the slots and the inputs may be written by the previous kernel in the stream:
// with PDL, wait for it before the first read. Dependents may launch as soon as every block
// has started (block 0 triggers, the others trigger by exiting): one trigger per launch, not
// one per block, so PDL costs no block throughput. Their own griddepcontrol.wait still waits
// for this grid to complete and flush, so the early trigger never exposes partial writes.
// Without PDL (guard.pdl false, or an image without griddepcontrol) neither instruction runs.
__device__ __forceinline__ void begin_store(const GuardArgs& guard) {
  const bool first_thread = blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (guard.pdl) {
    cudaGridDependencySynchronize();
    if (first_thread) cudaTriggerProgrammaticLaunchCompletion();
  }
#endif
  if (first_thread && guard.n_ptr != nullptr && guard.diagnostics != nullptr && *guard.n_ptr < 0)
    atomicAdd(&guard.diagnostics->negative_token_counts, 1ull);
}

// The count as read; classify_row needs no clamp (see guard.h).
__device__ __forceinline__ int64_t load_token_count(const GuardArgs& guard) {
  return guard.n_ptr == nullptr ? guard.num_tokens : *guard.n_ptr;
}

template <typename SlotT>
__device__ __forceinline__ int64_t load_slot(const SlotArgs& slots, int64_t row) {
  return static_cast<const SlotT*>(slots.data)[row];
}

// The guard. `leader` is one thread of the row's group: it counts an out-of-range slot.
__device__ __forceinline__ bool row_is_stored(const GuardArgs& guard, const SlotArgs& slots,
                                              int64_t row, int64_t n, int64_t slot, bool leader) {
  const detail::RowVerdict verdict =
      detail::classify_row(row, n, slot, slots.reserved, slots.capacity);
  if (verdict == detail::RowVerdict::kOutOfRange && leader && guard.diagnostics != nullptr)
    atomicAdd(&guard.diagnostics->out_of_range_slots, 1ull);
  return verdict == detail::RowVerdict::kStore;
}

__device__ __forceinline__ uint4 load_vec(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_vec(uint8_t* p, const uint4& v) {
  *reinterpret_cast<uint4*>(p) = v;
}

// 16 bf16 values (two 16-byte vectors) decoded to fp32, and their amax.
struct Bf16x16 {
  float v[16];

  __device__ __forceinline__ Bf16x16(const uint4& lo, const uint4& hi) {
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      v[2 * i] = detail::bf16_bits_to_float(static_cast<uint16_t>(w[i] & 0xffffu));
      v[2 * i + 1] = detail::bf16_bits_to_float(static_cast<uint16_t>(w[i] >> 16));
    }
  }

  // max |x| of the 16 values, on the packed bf16 pairs: exact (max picks one of the values)
  // and as NaN-ignoring as fmaxf (__hmax2 returns the other operand of a NaN).
  __device__ __forceinline__ static float amax(const uint4& lo, const uint4& hi) {
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    __nv_bfloat162 m[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) m[i] = __habs2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
#pragma unroll
    for (int stride = 4; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < stride; ++i) m[i] = __hmax2(m[i], m[i + stride]);
    return fmaxf(fmaxf(__low2float(m[0]), __high2float(m[0])), 0.0f);
  }

  // e4m3(x * factor), packed in memory order: satfinite, round to nearest even
  // (cvt.rn.satfinite.e4m3x2.f32).
  __device__ __forceinline__ uint4 to_e4m3_times(float factor) const {
    float q[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) q[i] = v[i] * factor;
    return pack_e4m3(q);
  }

  // e4m3(x / s), with the byte IEEE division would give; see quotient().
  template <bool kTinyScales>
  __device__ __forceinline__ uint4 to_e4m3_divided(float s) const {
    const float r = __frcp_rn(s);
    float q[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) q[i] = quotient<kTinyScales>(v[i], s, r);
    return pack_e4m3(q);
  }

  // x / s given r = 1/s correctly rounded: a product and one fma residual correction
  // (Markstein). Branch-free per value (the branches depend on s alone), unlike div.rn.f32,
  // whose range checks serialize 16 divisions. Its e4m3 byte equals that of IEEE division for
  // every (bf16 x, scale s) pair with |x| <= amax that the amax rules produce, checked
  // exhaustively in gpu_conversion_test. s = Inf (an Inf input): x * 0 is exactly x / Inf.
  // Scales below 2^-64 divide: there the residual can underflow. Only the V3.2 amax rule
  // (max(amax / 448, FLT_MIN)) produces them (kTinyScales), for a tile amax under 2.4e-17;
  // the index-K scales are >= 1e-4 / 448. A zero product keeps its sign, which the correction
  // would lose.
  template <bool kTinyScales>
  __device__ __forceinline__ static float quotient(float x, float s, float r) {
    if (isinf(s)) return x * r;
    if (kTinyScales && s < 0x1p-64f) return __fdiv_rn(x, s);
    const float q = x * r;
    const float corrected = fmaf(fmaf(-q, s, x), r, q);
    return q == 0.0f ? q : corrected;
  }

  __device__ __forceinline__ static uint4 pack_e4m3(const float (&q)[16]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(q[4 * i], q[4 * i + 1]), __NV_SATFINITE, __NV_E4M3);
      const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(q[4 * i + 2], q[4 * i + 3]), __NV_SATFINITE, __NV_E4M3);
      w[i] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
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

// 16 bytes to `p`: one vector store when p is 16-byte aligned, else four 4-byte stores (the
// index-K pages of 1 or 2 slots are 132 or 264 bytes long, so their rows are 4-byte aligned).
__device__ __forceinline__ void store_16_bytes(uint8_t* p, const uint4& v, bool aligned16) {
  if (aligned16) {
    store_vec(p, v);
    return;
  }
  auto* w = reinterpret_cast<uint32_t*>(p);
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
}

}  // namespace cachestore::kernels
