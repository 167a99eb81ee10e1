// store_paged_kv with RoPE fused: the paged K/V kernel's indexing and guard (paged_kv.cuh), with
// K rotated before it is stored and Q rotated in the same launch. A row's threads are its K units,
// then its V vectors, then its Q units (RopeArgs); a unit owns both values of each pair it
// rotates, so that Q and key_out rotate in place without a race.
#pragma once

#include "kernels/core/rope.cuh"
#include "kernels/paged_kv.cuh"

namespace cachestore::kernels {

template <int kW, typename SlotT, KvCacheType kCache, KvDataType kIn, bool kPdl, bool kPacked>
__device__ __forceinline__ void paged_kv_rope_unit(const GuardArgs& guard, const PagedKvArgs& a,
                                                   const PageTableArgs& table,
                                                   const BlockScaleArgs& block_scales,
                                                   const RopeArgs& r) {
  using In = KvElement<kIn>;
  constexpr int kLoads = (kW * static_cast<int>(sizeof(In)) + 15) / 16;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int32_t j = static_cast<int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  if (row >= guard.num_tokens || j >= a.vecs_per_token) return;
  const bool is_q = j >= r.q_begin;
  const bool is_v = !is_q && j >= a.k_vecs;
  const KvSideArgs& side = is_v ? a.v : a.k;
  const uint32_t jj = static_cast<uint32_t>(is_q ? j - r.q_begin : is_v ? j - a.k_vecs : j);
  // Q's heads have K's head dim, so K's units a head are Q's too.
  const RopeUnit unit = is_v ? RopeUnit::plain(side.vecs_per_head, jj)
                             : RopeUnit::rotating<kPacked>(r, a.k.vecs_per_head, jj);
  const In* src =
      is_q ? reinterpret_cast<const In*>(r.q) +
                 (row * r.q_token_stride + unit.head * r.q_head_stride)
           : reinterpret_cast<const In*>(side.src) +
                 (row * side.token_stride + unit.head * side.head_stride);
  src += kW * unit.vec;
  const In* partner_src = src + kW * RopeUnit::partner_vecs<kPacked>(r);  // read by pairs only
  const float* scale_src = side.scale + static_cast<int64_t>(unit.head) * side.scale_stride;
  const uint8_t* position_src = position_address(r, row);
  GuardSources<SlotT> sources(guard, a.slots, table, row);
  if constexpr (kCache == KvCacheType::kAuto) {
    begin_row<kPdl>(guard, sources, src, partner_src, position_src);
  } else {
    begin_row<kPdl>(guard, sources, src, partner_src, position_src, scale_src);
  }
  uint4 x[kLoads], y[kLoads];
#pragma unroll
  for (int i = 0; i < kLoads; ++i)
    x[i] = load_global<kPdl>(reinterpret_cast<const uint4*>(src) + i);
  if (unit.pair) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
      y[i] = load_global<kPdl>(reinterpret_cast<const uint4*>(partner_src) + i);
  }
  const int64_t position = load_position<kPdl>(r, position_src);
  float scale = 0.0f;
  if constexpr (kCache != KvCacheType::kAuto) {
    if (!is_q) scale = load_global<kPdl>(scale_src);
  }
  const int64_t n = sources.template load_count<kPdl>(guard);
  const bool real = row < n;
  const bool position_ok = position >= 0 && position < r.max_position;
  if (j == 0 && real && !position_ok && guard.diagnostics != nullptr)
    atomicAdd(&guard.diagnostics->out_of_range_positions, 1ull);
  bool stored = false;
  PagePosition pos{0, 0, a.slots};
  if (!is_q) {
    const int64_t slot = sources.template load_slot<kPdl>(n);
    pos = position_of(a, slot);
    stored = row_is_stored(guard, a.slots, row, n, slot, pos.global_page, j == 0) && position_ok;
  }
  // Q and key_out: real rows with a position, every vector unless in place and unrotated.
  uint8_t* out = nullptr;
  int64_t out_token_stride = 0, out_head_stride = 0;
  if (is_q) {
    out = r.q_out;
    out_token_stride = r.q_out_token_stride;
    out_head_stride = r.q_out_head_stride;
  } else if (!is_v) {
    out = r.k_out;
    out_token_stride = r.k_out_token_stride;
    out_head_stride = r.k_out_head_stride;
  }
  const bool in_place =
      is_q ? r.q_out == r.q : r.k_out == reinterpret_cast<const uint8_t*>(side.src);
  const bool write_out = out != nullptr && real && position_ok && (unit.rotated || !in_place);
  if (!stored && !write_out) return;

  // A rotated unit: x (y) its input-type bits for what writes them, v (w) the same values as
  // fp32 for a quantized cache. Adjacent GPT-J units come with the packed form only.
  float v[kW], w[kW];
  const bool want_bits = write_out || kCache == KvCacheType::kAuto;
  if (unit.rotated)
    rotate_unit<kIn, kW, kLoads, false, kPacked, kPacked>(r, unit, position, x, y, v, w, want_bits);
  const uint32_t partner_vec =
      unit.vec + static_cast<uint32_t>(RopeUnit::partner_vecs<kPacked>(r));
  if (write_out) {
    uint8_t* base = out + sizeof(In) * (row * out_token_stride + unit.head * out_head_stride);
    store_vectors(base + sizeof(In) * kW * unit.vec, x);
    if (unit.pair) store_vectors(base + sizeof(In) * kW * partner_vec, y);
  }
  if (!stored) return;
  const BlockScaleSide bs = is_v ? block_scales.v : block_scales.k;
  if constexpr (kCache != KvCacheType::kAuto) {
    if (unit.rotated) {
      store_kv_values<kW, kCache>(side, bs, pos, unit.head, unit.vec, v, scale);
      if (unit.pair) store_kv_values<kW, kCache>(side, bs, pos, unit.head, partner_vec, w, scale);
      return;
    }
  }
  store_kv_vector<kW, kCache, kIn>(side, bs, pos, unit.head, unit.vec, x, scale);
  if (unit.pair) store_kv_vector<kW, kCache, kIn>(side, bs, pos, unit.head, partner_vec, y, scale);
}

// kPacked: kInputType rounding of a 16-bit input, on two values a word (its own kernel, so
// that the fp32 rounding's registers and schedule do not carry the packed path).
template <typename SlotT, KvCacheType kCache, KvDataType kIn, bool kPdl, bool kPacked>
__global__ void __launch_bounds__(tuning::kPagedKvMaxThreads)
paged_kv_rope_kernel(const GuardArgs guard, const PagedKvArgs a, const PageTableArgs table,
                     const BlockScaleArgs block_scales, const RopeArgs rope) {
  constexpr int kW = layout::kv_cache_type(kCache).values_per_thread;
  paged_kv_rope_unit<kW, SlotT, kCache, kIn, kPdl, kPacked>(guard, a, table, block_scales, rope);
}

}  // namespace cachestore::kernels
