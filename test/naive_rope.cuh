// The engines' rotary kernel before their cache write, unguarded: every row of the padded batch
// rotated in place, Q heads and K heads alike (NeoX, bf16, fp32 arithmetic, a bf16 cos/sin cache
// [max_position, rotary_dim]). The lean form, as the lean naive scatter: one thread per 8 pairs
// (a vector of the first half and its partner), 16-byte loads and stores, row and unit by shift
// and mask. bench_store's RoPE node and the padded-replay test's control (with the scatter).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace cachestore::test {

__device__ __forceinline__ void lean_rope_vectors(uint4* x, uint4* y, const uint4& c,
                                                  const uint4& s) {
  __nv_bfloat162* xv = reinterpret_cast<__nv_bfloat162*>(x);
  __nv_bfloat162* yv = reinterpret_cast<__nv_bfloat162*>(y);
  const __nv_bfloat162* cv = reinterpret_cast<const __nv_bfloat162*>(&c);
  const __nv_bfloat162* sv = reinterpret_cast<const __nv_bfloat162*>(&s);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(xv[i]), b = __bfloat1622float2(yv[i]);
    const float2 co = __bfloat1622float2(cv[i]), si = __bfloat1622float2(sv[i]);
    xv[i] = __floats2bfloat162_rn(a.x * co.x - b.x * si.x, a.y * co.y - b.y * si.y);
    yv[i] = __floats2bfloat162_rn(b.x * co.x + a.x * si.x, b.y * co.y + a.y * si.y);
  }
}

// qk: [rows, heads, head_dim] bf16 (e.g. Q's heads then K's in a qkv row, row stride
// row_elems), head_dim = rotary_dim; 1 << units_shift = head_dim / 16 units a head.
template <typename PosT>
__global__ void lean_rope_kernel(uint16_t* __restrict__ qk, int32_t row_elems, int32_t head_dim,
                                 const PosT* __restrict__ positions,
                                 const uint16_t* __restrict__ cos_sin, int32_t units_shift,
                                 int32_t row_units, int32_t total) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= total) return;
  const int32_t row = i / row_units;
  const int32_t in_row = i - row * row_units;
  const int32_t head = in_row >> units_shift, unit = in_row & ((1 << units_shift) - 1);
  const int32_t half = head_dim / 2;
  uint4* x = reinterpret_cast<uint4*>(qk + static_cast<int64_t>(row) * row_elems +
                                      head * head_dim + 8 * unit);
  uint4* y = reinterpret_cast<uint4*>(reinterpret_cast<uint16_t*>(x) + half);
  const uint16_t* cs = cos_sin + static_cast<int64_t>(positions[row]) * head_dim + 8 * unit;
  const uint4 c = *reinterpret_cast<const uint4*>(cs);
  const uint4 s = *reinterpret_cast<const uint4*>(cs + half);
  uint4 xv = *x, yv = *y;
  lean_rope_vectors(&xv, &yv, c, s);
  *x = xv;
  *y = yv;
}

// Rotates `heads` heads of head_dim (a power of two >= 16, fully rotated) of each of `rows` rows
// in place.
template <typename PosT>
inline cudaError_t lean_rope(uint16_t* qk, int64_t row_elems, int32_t heads, int32_t head_dim,
                             const PosT* positions, const uint16_t* cos_sin, int64_t rows,
                             cudaStream_t stream) {
  int32_t units_shift = 0;
  while ((16 << units_shift) < head_dim) ++units_shift;
  const int32_t row_units = heads << units_shift;
  const int64_t total = rows * row_units;
  if (total == 0) return cudaSuccess;
  lean_rope_kernel<PosT><<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(
      qk, static_cast<int32_t>(row_elems), head_dim, positions, cos_sin, units_shift, row_units,
      static_cast<int32_t>(total));
  return cudaGetLastError();
}

}  // namespace cachestore::test
