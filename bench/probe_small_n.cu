// probe_small_n: where a decode-size store's time goes. Each variant is a 32-node CUDA graph of
// one store (or one minimal kernel); every round replays every variant once, in turn, so clock
// drift reaches all of them alike; per-node medians over the rounds, and each variant over the
// lean naive 128-wide scatter (bench_store's x_naive node). The variants take one thing away at a
// time: the device count (n_ptr = nullptr), 64-bit slots, the block shape, values per lane,
// the quantization (minimal guarded copies of the same widths). The investigation harness
// behind NOTES.md; not a benchmark (bench_store is).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cachestore/cachestore.h"
#include "cachestore/layout.h"
#include "cuda_check.h"
#include "kernels/paged_kv.cuh"
#include "kernels/store_kernels.cuh"
#include "launch.cuh"
#include "naive_scatter.cuh"

namespace {

using namespace cachestore;

__global__ void empty_kernel() {}

// The least a guarded store can do: count, slot and row loaded together, one compare; one
// 16-byte vector per thread, 2^vec_shift vectors per row.
__device__ __forceinline__ void guarded_copy_body(const uint4* k, const int64_t* slots,
                                                  uint4* cache, int32_t total, int32_t vec_shift,
                                                  const int32_t* n, int64_t capacity) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= total) return;
  const int32_t row = i >> vec_shift, vec = i & ((1 << vec_shift) - 1);
  const uint4 v = k[i];
  const int64_t slot = slots[row];
  if (row < *n && static_cast<uint64_t>(slot) < static_cast<uint64_t>(capacity))
    cache[(slot << vec_shift) + vec] = v;
}
__global__ void guarded_copy(const uint4* k, const int64_t* slots, uint4* cache, int32_t total,
                             int32_t vec_shift, const int32_t* n, int64_t capacity) {
  guarded_copy_body(k, slots, cache, total, vec_shift, n, capacity);
}

// The guarded copy above with its parameters in one more 64-byte line of the constant bank, or
// spread over three more: what does a kernel-parameter line read before the loads cost? (The
// first line, 0x200-0x23f, holds the global memory descriptor as well, so every kernel reads it.)
struct CopyParams {
  const uint4* k;
  const int64_t* slots;
  uint4* cache;
  int32_t total;
  int32_t vec_shift;
  const int32_t* n;
  int64_t capacity;
};
struct SpreadCopyParams {
  const uint4* k;
  int64_t pad1[7];
  const int64_t* slots;
  int64_t pad2[7];
  const int32_t* n;
  uint4* cache;
  int64_t capacity;
  int32_t total;
  int32_t vec_shift;
};
struct FirstLinePad {
  int64_t pad[6];  // 0x210-0x23f: the parameters after it start at the next line
};
__global__ void guarded_copy_next_line(const FirstLinePad, const CopyParams p) {
  guarded_copy_body(p.k, p.slots, p.cache, p.total, p.vec_shift, p.n, p.capacity);
}
__global__ void guarded_copy_three_lines(const FirstLinePad, const SpreadCopyParams p) {
  guarded_copy_body(p.k, p.slots, p.cache, p.total, p.vec_shift, p.n, p.capacity);
}

// The fp8 index-K row (D = 128, amax rule, 16 lanes of 8 values, the library's pieces) with
// parts taken away, to price each: kReduce (the group amax), kQuantize (the scale and e4m3
// encoding; off: the raw low half of the input), kGuard (the count load and compare; off: the
// slot alone decides), kScale (the scale store).
// The library kernel's generality, priced the same way: kBegin (the PDL prologue), kRuntimeDim
// (D and the page size read at run time, as the library does), kAnyAlignment (store_bytes'
// run-time alignment choice), and the library's launch bounds (probe_fp8_bounded).
enum ProbePart : unsigned {
  kReduce = 1, kQuantize = 2, kGuard = 4, kScale = 8, kAll = 15,
  kBegin = 16, kRuntimeDim = 32, kAnyAlignment = 64, kLibrary = 127,
  kBeginAfterAddresses = 512,  // the PDL prologue after all the row's addresses (begin_row)
  kOffsetPinned = 1024,        // session 6's prologue: the input's offset pinned, the count and
                               // slot addressed after the wait (the count through its null test)
  kPinNoWait = 2048            // begin_row's addressing (and ld.global loads) without PDL
};
// Session 6's prologue, for the A/B against begin_row.
__device__ __forceinline__ void offset_pinned_prologue(const kernels::GuardArgs& guard,
                                                       int64_t& offset) {
  asm volatile("" : "+l"(offset));
  kernels::begin_store<true>(guard);
}
__device__ __forceinline__ int64_t count_after_wait(const kernels::GuardArgs& guard) {
  return guard.n_ptr == nullptr ? guard.num_tokens : *guard.n_ptr;
}
// A kernel parameter in its own 64-byte line of the constant bank, read after the loads (kLateLine:
// when the store address needs it) or pinned at the top (kEarlyLine): does a first touch of a
// parameter line on the chain after the loads cost a constant-cache miss?
struct FarParam {
  int64_t pad[15];
  int64_t offset;  // 0 at run time
};
enum ProbeLine : unsigned { kLateLine = 128, kEarlyLine = 256 };

template <unsigned kParts>
__device__ __forceinline__ void probe_fp8_row(const kernels::GuardArgs& guard,
                                              const kernels::IndexKArgs& a,
                                              const FarParam& far = FarParam{}) {
  using namespace kernels;
  // Early: the offset moves the input address (needed before the loads); late: the store address.
  const int64_t early_offset = (kParts & kEarlyLine) ? far.offset : 0;
  const int64_t far_offset = (kParts & kLateLine) ? far.offset : 0;
  if (kParts & kBegin) begin_store<true>(guard);
  const int head_dim = (kParts & kRuntimeDim) ? a.head_dim : 128;
  const int64_t page_size = (kParts & kRuntimeDim) ? int64_t{1} << a.cache.page_shift : 64;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int lane = threadIdx.x;
  const bool live = row < guard.num_tokens;
  constexpr bool kPinned = (kParts & kPinNoWait) != 0;
  constexpr bool kAfter = (kParts & kBeginAfterAddresses) != 0 || kPinned;
  constexpr bool kOld = (kParts & kOffsetPinned) != 0;
  int64_t offset = early_offset + row * a.k_row_stride + lane * 8;
  if (kOld) offset_pinned_prologue(guard, offset);
  const uint16_t* src = a.k + offset;
  GuardSources<int64_t> sources(guard, a.slots, row);
  if (kPinned) {
    begin_row<false, true>(guard, sources, src);
  } else if (kAfter) {
    begin_row<true>(guard, sources, src);
  }
  auto x = Bf16Vals<8>::load<kAfter>(src, live && lane * 8 < head_dim);
  const int64_t n = !(kParts & kGuard) ? guard.num_tokens
                    : kOld             ? count_after_wait(guard)
                                       : sources.load_count<kAfter>(guard);
  const int64_t slot = live ? sources.load_slot<kAfter>() : -1;
  const float amax = (kParts & kReduce) ? group_amax<16>(x.amax()) : x.amax();
  if (!live) return;
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  if ((kParts & kGuard) ? !row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0)
                        : slot < 0)
    return;
  uint2 q = make_uint2(x.raw[0].x, x.raw[0].y);
  float scale = amax;
  if (kParts & kQuantize) {
    x.decode();
    scale = detail::index_k_scale_base(amax);
    q = x.template to_e4m3_divided<ScaleSource::kIndexKAmax>(scale);
  }
  uint8_t* const data = a.cache.data + far_offset +
                        layout::index_k_fp8_data_offset(pos.local_page, pos.in_page,
                                                        a.cache.page_stride, head_dim);
  float* const scales = reinterpret_cast<float*>(
      a.cache.data + layout::index_k_fp8_scale_offset(pos.local_page, pos.in_page, page_size,
                                                      a.cache.page_stride, head_dim));
  if (kParts & kAnyAlignment) {
    store_bytes(data + 8 * lane, q, a.cache.page_stride % sizeof(q) == 0);
  } else {
    *reinterpret_cast<uint2*>(data + 8 * lane) = q;
  }
  if ((kParts & kScale) && lane == 0) scales[0] = scale;
}
template <unsigned kParts>
__global__ void probe_fp8_kernel(const kernels::GuardArgs guard, const kernels::IndexKArgs a) {
  probe_fp8_row<kParts>(guard, a);
}
template <unsigned kParts>
__global__ void probe_fp8_far(const kernels::GuardArgs guard, const kernels::IndexKArgs a,
                              const FarParam far) {
  probe_fp8_row<kParts>(guard, a, far);
}
template <unsigned kParts>
__global__ void __launch_bounds__(512, 4)
probe_fp8_bounded(const kernels::GuardArgs guard, const kernels::IndexKArgs a) {
  probe_fp8_row<kParts>(guard, a);
}

// The library's bf16 index-K kernel with session 6's PDL prologue (for the A/B against begin_row).
__global__ void bf16_offset_pinned_kernel(const kernels::GuardArgs guard,
                                          const kernels::IndexKBf16Args a) {
  using namespace kernels;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  int vec = threadIdx.x;
  int64_t first = row * a.k_row_stride + 8 * vec;
  const bool has_first = vec < a.vecs_per_row;
  offset_pinned_prologue(guard, first);
  if (row >= guard.num_tokens) return;
  const uint16_t* src = a.k + row * a.k_row_stride;
  const uint4 first_vec = has_first ? load_vec(a.k + first) : uint4{};
  const int64_t n = count_after_wait(guard);
  const int64_t slot = static_cast<const int64_t*>(a.slots.data)[row];
  if (!row_is_stored(guard, a.slots, row, n, slot, 0, threadIdx.x == 0)) return;
  auto* dst = reinterpret_cast<uint8_t*>(a.cache + slot * a.cache_row_stride);
  if (has_first) store_vec(dst + 16 * vec, first_vec);
  for (vec += blockDim.x; vec < a.vecs_per_row; vec += blockDim.x)
    store_vec(dst + 16 * vec, load_vec(src + 8 * vec));
}

// A V4 row's data row and scale row in the cache (as store_mla_v4_row computes them).
struct V4RowPointers {
  uint8_t* data;
  uint8_t* scale;
};
__device__ __forceinline__ V4RowPointers v4_row_pointers(const kernels::MlaArgs& a,
                                                         const kernels::PagePosition& pos) {
  const int64_t page_size = int64_t{1} << a.cache.page_shift;
  return {a.cache.data + layout::v4_data_offset(pos.local_page, pos.in_page, a.cache.page_stride),
          a.cache.data + layout::v4_scale_offset(pos.local_page, pos.in_page, page_size,
                                                 a.cache.page_stride)};
}

// The V4 row (kN = 8: 56 NoPE lanes in tiles of 8, 8 RoPE lanes; one row on two warps, as the
// library at decode sizes) with the same parts taken away as the fp8 probe above: does a guarded
// store of V4's shape (NoPE / RoPE selects, two regions of the page, the scale byte) already sit
// above V4's target before it quantizes anything? Off kQuantize: the NoPE lanes store the low 8
// bytes of their input, the scale byte is amax's exponent byte (no arithmetic after the loads).
template <unsigned kParts>
__global__ void probe_v4_kernel(const kernels::GuardArgs guard, const kernels::MlaArgs a) {
  using namespace kernels;
  constexpr int kN = 8;
  constexpr int kNopeLanes = layout::kV4NopeDim / kN;
  constexpr int kTileLanes = layout::kV4TileSize / kN;
  if (kParts & kBegin) begin_store<true>(guard);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.y / 2) + threadIdx.y / 2;
  const int lane = (threadIdx.y % 2) * 32 + static_cast<int>(threadIdx.x);
  if (row >= guard.num_tokens) return;
  const bool is_nope = lane < kNopeLanes;
  constexpr bool kPinned = (kParts & kPinNoWait) != 0;
  constexpr bool kAfter = (kParts & kBeginAfterAddresses) != 0 || kPinned;
  constexpr bool kOld = (kParts & kOffsetPinned) != 0;
  const uint16_t* base = is_nope ? a.nope : a.rope;
  int64_t offset = row * (is_nope ? a.nope_row_stride : a.rope_row_stride) +
                   kN * (is_nope ? lane : lane - kNopeLanes);
  if (kOld) offset_pinned_prologue(guard, offset);
  const uint16_t* src = base + offset;
  GuardSources<int64_t> sources(guard, a.slots, row);
  if (kPinned) {
    begin_row<false, true>(guard, sources, src);
  } else if (kAfter) {
    begin_row<true>(guard, sources, src);
  }
  auto x = Bf16Vals<kN>::template load<kAfter>(src);
  const int64_t n = !(kParts & kGuard) ? guard.num_tokens
                    : kOld             ? count_after_wait(guard)
                                       : sources.template load_count<kAfter>(guard);
  const int64_t slot = sources.template load_slot<kAfter>();
  const float amax = (kParts & kReduce) ? group_amax<kTileLanes>(x.amax()) : x.amax();
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  if ((kParts & kGuard) ? !row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0)
                        : slot < 0)
    return;
  const auto [data_row, scale_row] = v4_row_pointers(a, pos);
  Fp8Bytes<kN> q = make_uint2(x.raw[0].x, x.raw[0].y);
  uint8_t e8 = static_cast<uint8_t>(__float_as_uint(amax) >> 23);
  if (kParts & kQuantize) {
    x.decode();
    e8 = pow2_scale_byte(amax, [](float a) { return detail::v4_scale_base(a); },
                         [](float a) { return detail::v4_scale_byte(a); });
    q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
  }
  if (is_nope) {
    *reinterpret_cast<Fp8Bytes<kN>*>(data_row + kN * lane) = q;
  } else {
    x.store_raw(data_row + layout::kV4NopeDim + 2 * kN * (lane - kNopeLanes));
  }
  if (kParts & kScale) scale_row[lane / kTileLanes] = is_nope ? e8 : 0;
}

// V4 in SGLang's shape: 2 values a lane, one warp per 64-value tile (7 NoPE warps, the 8th
// copies the RoPE pairs), so the tile's amax is one full-warp redux.sync and each lane's chain is
// two products and one conversion. Same guard, page math and stores as the library row.
__global__ void probe_v4_pairs_kernel(const kernels::GuardArgs guard, const kernels::MlaArgs a) {
  using namespace kernels;
  const int64_t row = blockIdx.x;
  const int warp = threadIdx.y, lane = threadIdx.x;
  if (row >= guard.num_tokens) return;
  const bool is_nope = warp < layout::kV4NumTiles;
  const uint16_t* src = is_nope ? a.nope + row * a.nope_row_stride + 64 * warp + 2 * lane
                                : a.rope + row * a.rope_row_stride + 2 * lane;
  const uint32_t w = *reinterpret_cast<const uint32_t*>(src);
  const GuardSources<int64_t> sources(guard, a.slots, row);
  const int64_t n = sources.load_count<false>(guard);
  const int64_t slot = sources.load_slot<false>();
  const uint32_t magnitude = max(w & 0x7fffu, (w >> 16) & 0x7fffu) << 16;
  const float amax = __uint_as_float(__reduce_max_sync(0xffffffffu, magnitude));
  const auto pos = PagePosition::of_slot(slot, a.cache.page_shift, a.slots);
  if (!row_is_stored(guard, a.slots, row, n, slot, pos.global_page, lane == 0 && warp == 0))
    return;
  const auto [data_row, scale_row] = v4_row_pointers(a, pos);
  const uint8_t e8 = detail::v4_scale_byte(amax);
  const float r = detail::ue8m0_reciprocal(e8);
  const uint16_t q = static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(
      make_float2(__uint_as_float(w << 16) * r, __uint_as_float(w & 0xffff0000u) * r),
      __NV_SATFINITE, __NV_E4M3));
  if (is_nope) {
    *reinterpret_cast<uint16_t*>(data_row + 64 * warp + 2 * lane) = q;
  } else {
    *reinterpret_cast<uint32_t*>(data_row + layout::kV4NopeDim + 4 * lane) = w;
  }
  if (lane == 0) scale_row[warp] = is_nope ? e8 : 0;
}

// An MLA row at kN = 8 (two warps a row) whose rows past the batch exit first, as the library's
// kernel did before session 10 (the padded and exit-first kernels below).
template <MlaLayout kLayout, ScaleRule kRule, bool kPdl>
__device__ __forceinline__ void exit_first_mla_row(const kernels::GuardArgs& guard,
                                                   const kernels::MlaArgs& kv) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.y / 2) + threadIdx.y / 2;
  const int lane = static_cast<int>(threadIdx.y % 2) * 32 + static_cast<int>(threadIdx.x);
  if (row >= guard.num_tokens) return;
  kernels::store_mla_row<kLayout, kRule, int64_t, 8, kPdl>(guard, kv, row, lane, true);
}

// The MLA kernel with its parameters pushed one line on by a pad (GuardArgs and MlaArgs in lines
// 0x240 and 0x280 instead of 0x200 and 0x240: three lines with the first, which the memory
// descriptor makes every kernel read): the cost of the third line (session 9, NOTES.md item 25).
struct Pad48 {
  int64_t pad[6];
};
template <MlaLayout kLayout, ScaleRule kRule = ScaleRule::kPow2>
__global__ void __launch_bounds__(512, 3)
padded_mla_kernel(const Pad48, const kernels::GuardArgs guard, const kernels::MlaArgs kv) {
  exit_first_mla_row<kLayout, kRule, false>(guard, kv);
}

// The library's MLA kernel as it was before session 10: the rows past the batch exit before the
// row computes its input addresses. That exit reads num_tokens (line 0x200) and the addresses
// need the line 0x240, whose first read ptxas then issues only after the exit: two constant-cache
// misses one after the other instead of side by side.
template <MlaLayout kLayout, bool kPdl, ScaleRule kRule = ScaleRule::kPow2>
__global__ void __launch_bounds__(512, 3)
exit_first_mla_kernel(const kernels::GuardArgs guard, const kernels::MlaArgs kv) {
  exit_first_mla_row<kLayout, kRule, kPdl>(guard, kv);
}

// A launch with or without PDL in the library's configuration (detail::launch_config; the
// library's launch_store itself reports errors through its internal status).
template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t stream, bool pdl,
            Args... args) {
  cudaLaunchAttribute attribute{};
  const cudaLaunchConfig_t config = detail::launch_config(grid, block, stream, pdl, &attribute);
  CACHESTORE_CHECK_CUDA(cudaLaunchKernelEx(&config, kernel, args...));
}

struct Variant {
  std::string name;
  std::function<void(cudaStream_t)> launch;
  cudaGraphExec_t exec = nullptr;
  std::vector<float> us;
};

void check(Status s) {
  if (s != Status::kSuccess) {
    std::fprintf(stderr, "probe_small_n: %s\n", last_error_message());
    std::exit(1);
  }
}


// Session 11: the fused V4 + fp8 index-K store with the index row in the KV warps instead of warps
// of its own (item 20: either kind of row runs 0.06-0.10x slower in the fused kernel than alone).
// A V4 row on two warps (kN = 8, the library's row); the second warp also holds the row's index-K
// (D = 128, 4 values a lane, one 128-value block on the warp: one redux). Both rows' loads issue
// together at the top, then both guards, then both quantizations and their stores. Same bytes as
// the library's fused kernel (amax index rule here).
template <bool kSameSlot>
__global__ void __launch_bounds__(512, 3)
merged_fused_kernel(const kernels::GuardArgs guard, const kernels::MlaArgs kv,
                    const kernels::IndexKArgs index) {
  using namespace kernels;
  constexpr int kN = 8;
  constexpr int kNopeLanes = layout::kV4NopeDim / kN;
  constexpr int kTileLanes = layout::kV4TileSize / kN;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.y / 2) + threadIdx.y / 2;
  const bool index_warp = (threadIdx.y % 2) != 0;
  const int lane = static_cast<int>(threadIdx.y % 2) * 32 + static_cast<int>(threadIdx.x);
  const bool live = row < guard.num_tokens;
  const int64_t input_row = mla_input_row(row, live);
  const uint16_t* src = nope_or_rope_source<kN>(kv, input_row, lane, kNopeLanes);
  const uint16_t* index_src = index.k + (input_row * index.k_row_stride + 4 * threadIdx.x);
  GuardSources<int64_t> sources(guard, kv.slots, row);
  GuardSources<int64_t> index_sources(guard, index.slots, row);
  auto x = Bf16Vals<kN>::template load<false>(src);
  auto y = Bf16Vals<4>::template load<false>(index_src, index_warp);
  const int64_t n = sources.template load_count<false>(guard);
  const int64_t slot = live ? sources.template load_slot<false>() : -1;
  const int64_t index_slot =
      kSameSlot ? slot : (live && index_warp ? index_sources.template load_slot<false>() : -1);
  const float amax = group_amax<kTileLanes>(x.amax());
  const float index_amax = group_amax<32>(y.amax());
  const auto pos = PagePosition::of_slot(slot, kv.cache.page_shift, kv.slots);
  const auto index_pos = PagePosition::of_slot(index_slot, index.cache.page_shift, index.slots);
  const bool kv_stored = row_is_stored(guard, kv.slots, row, n, slot, pos.global_page, lane == 0);
  const bool index_stored =
      index_warp && row_is_stored(guard, index.slots, row, n, index_slot, index_pos.global_page,
                                  threadIdx.x == 0, false);
  if (kv_stored) {
    const auto [data_row, scale_row] = v4_row_pointers(kv, pos);
    x.decode();
    const uint8_t e8 = pow2_scale_byte(amax, [](float a) { return detail::v4_scale_base(a); },
                                       [](float a) { return detail::v4_scale_byte(a); });
    const Fp8Bytes<kN> q = x.to_e4m3_times(detail::ue8m0_reciprocal(e8));
    if (lane < kNopeLanes) {
      *reinterpret_cast<Fp8Bytes<kN>*>(data_row + kN * lane) = q;
    } else {
      x.store_raw(data_row + layout::kV4NopeDim + 2 * kN * (lane - kNopeLanes));
    }
    scale_row[lane / kTileLanes] = lane < kNopeLanes ? e8 : 0;
  }
  if (index_stored) {
    y.decode();
    const float scale = detail::index_k_scale_base(index_amax);
    const Fp8Bytes<4> q = y.template to_e4m3_divided<ScaleSource::kIndexKAmax>(scale);
    uint8_t* const data = index.cache.data + layout::index_k_fp8_data_offset(
                                                 index_pos.local_page, index_pos.in_page,
                                                 index.cache.page_stride, 128);
    float* const scales = reinterpret_cast<float*>(
        index.cache.data + layout::index_k_fp8_scale_offset(index_pos.local_page, index_pos.in_page,
                                                            int64_t{1} << index.cache.page_shift,
                                                            index.cache.page_stride, 128));
    *reinterpret_cast<Fp8Bytes<4>*>(data + 4 * threadIdx.x) = q;
    if (threadIdx.x == 0) scales[0] = scale;
  }
}


// Session 11: the floor of the paged K/V store's shape (H = 8, D = 128, K and V, NHD pages of 16
// contiguous: element offset slot * 1024) for the A/B against the library's kernel: one row of 256
// vector threads, side and vector by shifts, no strides, no divisions, one parameter line. With
// kGuard the count, the one compare and the library's row_is_stored (its cold counting path).
struct LeanKvArgs {
  const uint16_t* src;   // [rows, 2048]: K then V
  const int64_t* slots;
  uint16_t* k_cache;     // [capacity, 1024]
  uint16_t* v_cache;
};
template <bool kGuard>
__global__ void __launch_bounds__(256) lean_kv_kernel(const kernels::GuardArgs guard,
                                                      const kernels::SlotArgs slots,
                                                      const LeanKvArgs a) {
  using namespace kernels;
  const int64_t row = blockIdx.x;
  const int t = threadIdx.x;
  const uint4 x = load_vec(a.src + row * 2048 + 8 * t);
  const int64_t slot = a.slots[row];
  if constexpr (kGuard) {
    const int64_t n = guard.n_ptr == nullptr ? guard.num_tokens : *guard.n_ptr;
    if (!row_is_stored(guard, slots, row, n, slot, slot >> 4, t == 0)) return;
  } else {
    if (slot < 0) return;
  }
  uint16_t* cache = (t >> 7) != 0 ? a.v_cache : a.k_cache;
  store_vec(reinterpret_cast<uint8_t*>(cache + slot * 1024 + 8 * (t & 127)), x);
}

// "a,b,c" -> {"a", "b", "c"} (--n and --only).
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  // --dirty-l2: before every round, write a buffer of 4x the L2 (cudaMemset), as the large-n rows
  // before a small-n row of bench_store leave the L2 full of dirty lines. Inside the full
  // bench_store run the small-n non-PDL nodes read ~0.2 us slower than alone (NOTES.md, item 16);
  // this tests whether the L2's state is why.
  // --n=1,32,128,512: the batch sizes (default 1 and 32; at most 512 rows, the buffers' size).
  // --only=TEXT: only the variants whose names contain TEXT (and the reference), so that one
  // question's variants take one short device call.
  bool dirty_l2 = false;
  std::string only;
  std::vector<int64_t> sizes = {1, 32};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    dirty_l2 = dirty_l2 || arg == "--dirty-l2";
    if (arg.rfind("--only=", 0) == 0) only = arg.substr(7);
    if (arg.rfind("--n=", 0) == 0) {
      sizes.clear();
      for (const std::string& item : split_commas(arg.substr(4))) {
        const int64_t n = std::stoll(item);
        if (n < 1 || n > 512) {
          std::fprintf(stderr, "probe_small_n: --n: %lld is not in [1, 512]\n", static_cast<long long>(n));
          return 1;
        }
        sizes.push_back(n);
      }
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "probe_small_n: no CUDA device; it needs a GPU\n");
    return 1;
  }
  const int32_t page = 64;
  const int64_t pages = 4096, capacity = pages * page;
  auto* in = test::device_alloc<uint16_t>(1024 * 1024);
  auto* slots64 = test::device_alloc<int64_t>(1024);
  auto* slots32 = test::device_alloc<int32_t>(1024);
  auto* n_dev = test::device_alloc<int32_t>(1);
  auto* bf16_cache = test::device_alloc<uint16_t>(capacity * 512);
  auto* fp8_cache = test::device_alloc<uint8_t>(pages * layout::index_k_fp8_min_page_stride(page, 128));
  auto* v4_cache = test::device_alloc<uint8_t>(pages * layout::v4_min_page_stride(page));
  auto* v41_cache = test::device_alloc<uint8_t>(pages * layout::split_min_page_stride(layout::kV41Rows, page));
  auto* v32_cache = test::device_alloc<uint8_t>(pages * layout::v32_min_page_stride(page));
  CACHESTORE_CHECK_CUDA(cudaMemset(in, 0x3c, 1024 * 1024 * 2));
  std::vector<int64_t> h64(1024);
  std::vector<int32_t> h32(1024);
  for (int i = 0; i < 1024; ++i) h32[i] = static_cast<int32_t>(h64[i] = (i * 7919 + 13) % capacity);
  CACHESTORE_CHECK_CUDA(cudaMemcpy(slots64, h64.data(), 1024 * 8, cudaMemcpyHostToDevice));
  CACHESTORE_CHECK_CUDA(cudaMemcpy(slots32, h32.data(), 1024 * 4, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CACHESTORE_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int l2_bytes = 0;
  CACHESTORE_CHECK_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  const size_t dirty_bytes = dirty_l2 ? 4 * static_cast<size_t>(l2_bytes) : 0;
  uint8_t* dirty = dirty_l2 ? test::device_alloc<uint8_t>(dirty_bytes) : nullptr;
  if (dirty_l2) std::printf("before every round: %zu MB written (4x the L2)\n", dirty_bytes >> 20);

  for (const int64_t rows : sizes) {
    const int32_t n_host = static_cast<int32_t>(rows);
    CACHESTORE_CHECK_CUDA(cudaMemcpy(n_dev, &n_host, 4, cudaMemcpyHostToDevice));
    const Batch batch{rows, n_dev, nullptr};
    const Batch batch_all{rows, nullptr, nullptr};
    const SlotMapping s64{slots64, SlotType::kInt64};
    const SlotMapping s32{slots32, SlotType::kInt32};

    IndexKBf16Params bf16;
    bf16.batch = batch;
    bf16.slots = s64;
    bf16.k = in;
    bf16.k_row_stride = 128;
    bf16.cache = bf16_cache;
    bf16.cache_row_stride = 128;
    bf16.num_slots = capacity;
    IndexKFp8Params fp8;
    fp8.batch = batch;
    fp8.slots = s64;
    fp8.k = in;
    fp8.k_row_stride = 128;
    fp8.cache = {fp8_cache, pages, page, layout::index_k_fp8_min_page_stride(page, 128), 128, ScaleRule::kAmax};
    FusedStoreParams v4;
    v4.batch = batch;
    v4.kv_slots = s64;
    v4.nope = in;
    v4.nope_row_stride = 512;
    v4.rope = in + 448;
    v4.rope_row_stride = 512;
    v4.kv_cache = {MlaLayout::kV4, v4_cache, pages, page, layout::v4_min_page_stride(page), ScaleRule::kPow2};
    FusedStoreParams v41 = v4;
    v41.kv_cache = {MlaLayout::kV41, v41_cache, pages, page,
                    layout::split_min_page_stride(layout::kV41Rows, page), ScaleRule::kPow2};
    FusedStoreParams v32 = v4;
    v32.nope_row_stride = 576;
    v32.rope = in + 512;
    v32.rope_row_stride = 576;
    v32.kv_cache = {MlaLayout::kV32, v32_cache, pages, page, layout::v32_min_page_stride(page), ScaleRule::kPow2};
    FusedStoreParams v4_index = v4;
    v4_index.index_k = in + 512 * 1024;
    v4_index.index_k_row_stride = 128;
    v4_index.index_slots = s64;
    v4_index.index_cache = fp8.cache;

    // The V4 kernel launched directly with other block shapes (what the launcher would pass).
    const kernels::GuardArgs guard{rows, n_dev, nullptr, false};
    const kernels::MlaArgs mla{{slots64, -1, capacity, 0, 0},
                               {v4_cache, layout::v4_min_page_stride(page), 6, ScaleRule::kPow2},
                               in, in + 448, 512, 512};
    // The V4 kernel at 16 values a lane (one warp a row) with other block shapes.
    const auto v4_wide = [&](int rows_per_block) {
      return [=](cudaStream_t s) {
        const unsigned blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
        kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 16, false>
            <<<blocks, dim3(32, rows_per_block), 0, s>>>(guard, mla);
      };
    };
    const auto with = [](auto p, auto edit) { edit(p); return p; };
    const auto lean = [&](int width) {
      return [=](cudaStream_t s) {
        CACHESTORE_CHECK_CUDA(test::lean_naive_scatter(in, width, slots64, bf16_cache, rows, width, s));
      };
    };
    const auto guarded = [&](int vec_shift) {
      return [=](cudaStream_t s) {
        const int32_t total = static_cast<int32_t>(rows << vec_shift);
        guarded_copy<<<(total + 255) / 256, 256, 0, s>>>(
            reinterpret_cast<const uint4*>(in), slots64, reinterpret_cast<uint4*>(bf16_cache), total,
            vec_shift, n_dev, capacity);
      };
    };

    // The guarded copy with its parameters in other constant-bank lines (same body).
    const auto guarded_lines = [&](bool spread) {
      return [=](cudaStream_t s) {
        const int32_t total = static_cast<int32_t>(rows << 4);
        const auto* k = reinterpret_cast<const uint4*>(in);
        auto* cache = reinterpret_cast<uint4*>(bf16_cache);
        if (spread) {
          SpreadCopyParams p{};
          p = {k, {}, slots64, {}, n_dev, cache, capacity, total, 4};
          guarded_copy_three_lines<<<(total + 255) / 256, 256, 0, s>>>(FirstLinePad{}, p);
        } else {
          guarded_copy_next_line<<<(total + 255) / 256, 256, 0, s>>>(
              FirstLinePad{}, CopyParams{k, slots64, cache, total, 4, n_dev, capacity});
        }
      };
    };
    detail::ArchInfo arch{};
    check(detail::current_arch(&arch));
    const int sm_count = arch.sm_count;
    // A probe kernel launched with PDL (the library's launch configuration and early trigger).
    const auto with_pdl = [&](auto kernel, unsigned blocks, dim3 block, auto args) {
      const kernels::GuardArgs g{rows, n_dev, nullptr, blocks <= static_cast<unsigned>(sm_count)};
      return [=](cudaStream_t s) { launch(kernel, dim3(blocks), block, s, true, g, args); };
    };
    const unsigned bf16_blocks = static_cast<unsigned>((rows + 3) / 4);
    const kernels::IndexKBf16Args bf16_args{{slots64, -1, capacity, 0, 0}, in, 128,
                                            bf16_cache, 128, 16};

    std::vector<Variant> variants;
    const auto add = [&](std::string name, std::function<void(cudaStream_t)> f) {
      bool wanted = only.empty();
      for (const std::string& part : split_commas(only))
        wanted = wanted || name.find(part) != std::string::npos;
      if (variants.empty() || wanted)
        variants.push_back({std::move(name), std::move(f)});
    };
    add("naive lean 128 (reference)", lean(128));
    add("empty kernel", [](cudaStream_t s) { empty_kernel<<<1, 64, 0, s>>>(); });
    add("naive lean 512", lean(512));
    add("guarded copy 128", guarded(4));
    add("guarded copy 512", guarded(6));
    add("guarded copy 128, next line", guarded_lines(false));
    add("guarded copy 128, 3 lines", guarded_lines(true));
    add("bf16", [&, bf16](cudaStream_t s) { check(store_index_k_bf16(bf16, s)); });
    add("bf16 no count", [&, p = with(bf16, [&](auto& q) { q.batch = batch_all; })](cudaStream_t s) { check(store_index_k_bf16(p, s)); });
    add("fp8 amax", [&, fp8](cudaStream_t s) { check(store_index_k_fp8(fp8, s)); });
    add("fp8 amax no count", [&, p = with(fp8, [&](auto& q) { q.batch = batch_all; })](cudaStream_t s) { check(store_index_k_fp8(p, s)); });
    add("fp8 amax int32 slots", [&, p = with(fp8, [&](auto& q) { q.slots = s32; })](cudaStream_t s) { check(store_index_k_fp8(p, s)); });
    const kernels::IndexKArgs fp8_args{{slots64, -1, capacity, 0, 0}, in, 128,
                                       {fp8_cache, layout::index_k_fp8_min_page_stride(page, 128), 6,
                                        ScaleRule::kAmax},
                                       128, 4, static_cast<uint8_t>(Fp4Ties::kToEven)};
    const auto probe = [&](auto kernel) {
      return [=](cudaStream_t s) {
        kernel<<<static_cast<unsigned>((rows + 3) / 4), dim3(16, 4), 0, s>>>(guard, fp8_args);
      };
    };
    add("probe fp8: all", probe(probe_fp8_kernel<kAll>));
    add("probe fp8: no reduce", probe(probe_fp8_kernel<kAll & ~kReduce>));
    add("probe fp8: no quantize", probe(probe_fp8_kernel<kAll & ~kQuantize>));
    add("probe fp8: no guard", probe(probe_fp8_kernel<kAll & ~kGuard>));
    add("probe fp8: no scale store", probe(probe_fp8_kernel<kAll & ~kScale>));
    add("probe fp8: guard + copy", probe(probe_fp8_kernel<kGuard>));
    add("probe fp8: copy only", probe(probe_fp8_kernel<0>));
    add("probe fp8: all + PDL prologue", probe(probe_fp8_kernel<kAll | kBegin>));
    add("probe fp8: all + run-time D", probe(probe_fp8_kernel<kAll | kRuntimeDim>));
    add("probe fp8: all + any alignment", probe(probe_fp8_kernel<kAll | kAnyAlignment>));
    add("probe fp8: all, launch bounds", probe(probe_fp8_bounded<kAll>));
    add("probe fp8: library-like", probe(probe_fp8_bounded<kLibrary>));
    const auto probe_far = [&](auto kernel) {
      return [=](cudaStream_t s) {
        kernel<<<static_cast<unsigned>((rows + 3) / 4), dim3(16, 4), 0, s>>>(guard, fp8_args, FarParam{});
      };
    };
    add("probe fp8: far param unread", probe_far(probe_fp8_far<kAll>));
    add("probe fp8: far param late", probe_far(probe_fp8_far<kAll | kLateLine>));
    add("probe fp8: far param early", probe_far(probe_fp8_far<kAll | kEarlyLine>));
    add("library fp8 kernel, <<<>>>",
        probe(kernels::index_k_fp8_kernel<int64_t, 8, ScaleRule::kAmax, false>));
    add("library fp8 kernel, LaunchEx", [&](cudaStream_t s) {
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(static_cast<unsigned>((rows + 3) / 4));
      config.blockDim = dim3(16, 4);
      config.stream = s;
      CACHESTORE_CHECK_CUDA(cudaLaunchKernelEx(
          &config, kernels::index_k_fp8_kernel<int64_t, 8, ScaleRule::kAmax, false>, guard, fp8_args));
    });
    add("fp8 amax (API, again)", [&, fp8](cudaStream_t s) { check(store_index_k_fp8(fp8, s)); });
    add("fp8 pow2", [&, p = with(fp8, [&](auto& q) { q.cache.scale_rule = ScaleRule::kPow2; })](cudaStream_t s) { check(store_index_k_fp8(p, s)); });
    add("V4", [&, v4](cudaStream_t s) { check(fused_store_cache(v4, s)); });
    add("V4 no count", [&, p = with(v4, [&](auto& q) { q.batch = batch_all; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    add("V4 int32 slots", [&, p = with(v4, [&](auto& q) { q.kv_slots = s32; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    const auto probe_v4 = [&](auto kernel) {
      return [=](cudaStream_t s) {
        kernel<<<static_cast<unsigned>(rows), dim3(32, 2), 0, s>>>(guard, mla);
      };
    };
    add("probe V4: all", probe_v4(probe_v4_kernel<kAll>));
    add("probe V4: no reduce", probe_v4(probe_v4_kernel<kAll & ~kReduce>));
    add("probe V4: no quantize", probe_v4(probe_v4_kernel<kAll & ~kQuantize>));
    add("probe V4: no guard", probe_v4(probe_v4_kernel<kAll & ~kGuard>));
    add("probe V4: no scale store", probe_v4(probe_v4_kernel<kAll & ~kScale>));
    add("probe V4: guard + copy", probe_v4(probe_v4_kernel<kGuard | kScale>));
    add("probe V4: guard + copy, 1 region", probe_v4(probe_v4_kernel<kGuard>));
    add("probe V4: copy only", probe_v4(probe_v4_kernel<0>));
    add("probe V4: 2 a lane, 8 warps", [=](cudaStream_t s) {
      probe_v4_pairs_kernel<<<static_cast<unsigned>(rows), dim3(32, 8), 0, s>>>(guard, mla);
    });
    // The early trigger at n = 512 (one block per SM or fewer: 4 rows a block), on and off, against
    // 2 rows a block (two blocks per SM: no trigger), for the library's kernels (NOTES.md, item 22).
    const auto pdl_rows = [&](auto launch_kernel, int rows_per_block, bool trigger) {
      const unsigned blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
      const kernels::GuardArgs g{rows, n_dev, nullptr, trigger};
      return [=](cudaStream_t s) { launch_kernel(dim3(blocks), rows_per_block, s, g); };
    };
    const auto library_mla = [&](dim3 grid, int rows_per_block, cudaStream_t s, kernels::GuardArgs g) {
      launch(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, true>, grid, dim3(32, 2 * rows_per_block),
             s, true, g, mla);
    };
    // The fused kernel's block for `per_block` rows at kN = 8 and D = 128: two KV warps a row and
    // 16 index lanes a row in whole warps; and a PDL launch of one of its instantiations for
    // pdl_rows, with the KV arguments `kv_args`.
    const auto fused_block = [](int32_t per_block) {
      return dim3(32, 2 * per_block + (per_block * 16 + 31) / 32);
    };
    const auto fused_pdl = [&](auto kernel, const kernels::MlaArgs& kv_args) {
      return [=](dim3 grid, int rows_per_block, cudaStream_t s, kernels::GuardArgs g) {
        g.rows_per_block = rows_per_block;
        launch(kernel, grid, fused_block(rows_per_block), s, true, g, kv_args, fp8_args);
      };
    };
    const auto library_fused = fused_pdl(
        kernels::fused_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, IndexKFormat::kFp8, int64_t, 8, true>,
        mla);
    add("PDL V4 lib, 4 rows, trigger", pdl_rows(library_mla, 4, true));
    add("PDL V4 lib, 4 rows, no trigger", pdl_rows(library_mla, 4, false));
    add("PDL V4 lib, 2 rows, no trigger", pdl_rows(library_mla, 2, false));
    add("PDL fused lib, 4 rows, trigger", pdl_rows(library_fused, 4, true));
    add("PDL fused lib, 4 rows, no trigger", pdl_rows(library_fused, 4, false));
    add("PDL fused lib, 2 rows, no trigger", pdl_rows(library_fused, 2, false));
    // The trigger with more than one block per SM (all still resident at once): does a grid of
    // two or four blocks an SM gain from the early trigger as the one-block grids do?
    add("PDL fused lib, 2 rows, trigger", pdl_rows(library_fused, 2, true));
    add("PDL fused lib, 1 row, trigger", pdl_rows(library_fused, 1, true));
    add("PDL V4 lib, 2 rows, trigger", pdl_rows(library_mla, 2, true));
    add("PDL V4 lib, 1 row, trigger", pdl_rows(library_mla, 1, true));
    // Without PDL: no prologue (the library's kPdl = false) against the prologue at the top or after
    // the addresses, compiled in but launched without PDL (the wait returns at once).
    const kernels::MlaArgs v32_mla{{slots64, -1, capacity, 0, 0},
                                   {v32_cache, layout::v32_min_page_stride(page), 6, ScaleRule::kPow2},
                                   in, in + 512, 576, 576};
    const auto no_pdl = [&](auto kernel, unsigned blocks, dim3 block, auto args) {
      return [=](cudaStream_t s) { launch(kernel, dim3(blocks), block, s, false, guard, args); };
    };
    add("bf16: no prologue, no PDL", no_pdl(kernels::index_k_bf16_kernel<int64_t, false>, bf16_blocks, dim3(16, 4), bf16_args));
    add("bf16: addresses first, no PDL", no_pdl(kernels::index_k_bf16_kernel<int64_t, true>, bf16_blocks, dim3(16, 4), bf16_args));
    add("V4: no prologue, no PDL", no_pdl(probe_v4_kernel<kAll>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    add("V4: wait first, no PDL", no_pdl(probe_v4_kernel<kAll | kBegin>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    add("V4: addresses first, no PDL", no_pdl(probe_v4_kernel<kAll | kBeginAfterAddresses>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    // The library's V3.2 kernel (one row a block): without its prologue, with it but launched
    // without PDL, and with PDL.
    const auto v32_kernel = [](auto pdl) {
      return kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kPow2, int64_t, 8, decltype(pdl)::value>;
    };
    add("V3.2: no prologue, no PDL", no_pdl(v32_kernel(std::false_type{}), static_cast<unsigned>(rows), dim3(32, 2), v32_mla));
    add("V3.2: addresses first, no PDL", no_pdl(v32_kernel(std::true_type{}), static_cast<unsigned>(rows), dim3(32, 2), v32_mla));
    add("PDL V3.2: addresses first", with_pdl(v32_kernel(std::true_type{}), static_cast<unsigned>(rows), dim3(32, 2), v32_mla));
    add("V4 + fp8 index, PDL", [&, p = with(v4_index, [](auto& q) { q.launch.enable_pdl = true; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    add("library fp8 kernel kN=8, 4 rows", [=](cudaStream_t s) {
      kernels::index_k_fp8_kernel<int64_t, 8, ScaleRule::kAmax, false>
          <<<static_cast<unsigned>((rows + 3) / 4), dim3(16, 4), 0, s>>>(guard, fp8_args);
    });
    add("V4 kN=16, 1 row/block", v4_wide(1));
    add("V4 kN=16, 4 rows/block", v4_wide(4));
    add("V41", [&, v41](cudaStream_t s) { check(fused_store_cache(v41, s)); });
    add("V3.2 pow2", [&, v32](cudaStream_t s) { check(fused_store_cache(v32, s)); });
    add("V4 + fp8 index", [&, v4_index](cudaStream_t s) { check(fused_store_cache(v4_index, s)); });
    add("V3.2 pow2, PDL", [&, p = with(v32, [](auto& q) { q.launch.enable_pdl = true; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    add("V3.2 amax, PDL", [&, p = with(v32, [](auto& q) { q.launch.enable_pdl = true; q.kv_cache.scale_rule = ScaleRule::kAmax; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    add("V4, PDL", [&, p = with(v4, [](auto& q) { q.launch.enable_pdl = true; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    add("fp8 amax, PDL", [&, p = with(fp8, [](auto& q) { q.launch.enable_pdl = true; })](cudaStream_t s) { check(store_index_k_fp8(p, s)); });
    // PDL: the wait at the top against the wait after the row's addresses.
    add("bf16, PDL", [&, p = with(bf16, [](auto& q) { q.launch.enable_pdl = true; })](cudaStream_t s) { check(store_index_k_bf16(p, s)); });
    // Session 6's prologue (the input's offset pinned; count and slot addressed after the wait)
    // against begin_row (every address before the wait, loads by ld.global), same rows.
    add("PDL bf16: offset pinned (s6)", with_pdl(bf16_offset_pinned_kernel, bf16_blocks, dim3(16, 4), bf16_args));
    add("PDL bf16: begin_row (lib)", with_pdl(kernels::index_k_bf16_kernel<int64_t, true>, bf16_blocks, dim3(16, 4), bf16_args));
    add("PDL fp8: wait first", with_pdl(probe_fp8_kernel<kAll | kBegin>, bf16_blocks, dim3(16, 4), fp8_args));
    add("PDL fp8: offset pinned (s6)", with_pdl(probe_fp8_kernel<kAll | kOffsetPinned>, bf16_blocks, dim3(16, 4), fp8_args));
    add("PDL fp8: begin_row", with_pdl(probe_fp8_kernel<kAll | kBeginAfterAddresses>, bf16_blocks, dim3(16, 4), fp8_args));
    add("PDL V4: wait first", with_pdl(probe_v4_kernel<kAll | kBegin>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    add("PDL V4: offset pinned (s6)", with_pdl(probe_v4_kernel<kAll | kOffsetPinned>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    add("PDL V4: begin_row", with_pdl(probe_v4_kernel<kAll | kBeginAfterAddresses>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    add("bf16 PDL off (lib)", no_pdl(kernels::index_k_bf16_kernel<int64_t, false>, bf16_blocks, dim3(16, 4), bf16_args));
    add("V4 probe PDL off", no_pdl(probe_v4_kernel<kAll>, static_cast<unsigned>(rows), dim3(32, 2), mla));
    add("probe fp8 PDL off", probe(probe_fp8_kernel<kAll>));
    add("probe fp8 PDL off, pinned", probe(probe_fp8_kernel<kAll | kPinNoWait>));
    add("V4 probe PDL off, pinned", no_pdl(probe_v4_kernel<kAll | kPinNoWait>, static_cast<unsigned>(rows), dim3(32, 2), mla));

    // Session 8: the library's fp8 index-K kernel at the library's own launch shape (rows a
    // block from detail::index_k_rows_per_block, the policy of session 9 since), kN = 4 against
    // kN = 8, with begin_row's addressing (pinned) or without, PDL off; and both kN with PDL.
    // forced_rows > 0: that many rows a block instead of the library's choice.
    const auto fp8_lib = [&](auto kernel, int kN, bool pdl, int32_t forced_rows = 0) {
      const int32_t lanes = 128 / kN;
      kernels::IndexKArgs args = fp8_args;
      args.lanes_log2 = static_cast<int16_t>(kN == 4 ? 5 : 4);
      const int32_t per_block =
          forced_rows > 0 ? forced_rows : detail::index_k_rows_per_block(rows, lanes, arch);
      const unsigned blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
      const kernels::GuardArgs g{rows, n_dev, nullptr,
                                 pdl && blocks <= static_cast<unsigned>(sm_count)};
      return [=](cudaStream_t s) { launch(kernel, dim3(blocks), dim3(lanes, per_block), s, pdl, g, args); };
    };
    using kernels::index_k_fp8_kernel;
    // amax / pow2, kN, pinned, D: 0 = run-time (the library's), 128 = compiled in.
    const auto fp8_variant = [&](auto rule, auto kn, auto pinned, auto dim, auto pdl) {
      constexpr int kN = decltype(kn)::value;
      constexpr bool kPdl = decltype(pdl)::value;
      return fp8_lib(index_k_fp8_kernel<int64_t, kN, decltype(rule)::value, kPdl,
                                        decltype(pinned)::value, decltype(dim)::value>,
                     kN, kPdl);
    };
    using A = std::integral_constant<ScaleRule, ScaleRule::kAmax>;
    using P = std::integral_constant<ScaleRule, ScaleRule::kPow2>;
    using N4 = std::integral_constant<int, 4>;
    using N8 = std::integral_constant<int, 8>;
    using D0 = std::integral_constant<int, 0>;
    using D128 = std::integral_constant<int, 128>;
    using Pin = std::true_type;
    using NoPin = std::false_type;
    add("s8 fp8 amax kN=4", fp8_variant(A{}, N4{}, NoPin{}, D0{}, std::false_type{}));
    add("s8 fp8 amax kN=4 pinned", fp8_variant(A{}, N4{}, Pin{}, D0{}, std::false_type{}));
    add("s8 fp8 amax kN=4 D128", fp8_variant(A{}, N4{}, NoPin{}, D128{}, std::false_type{}));
    add("s8 fp8 amax kN=4 D128 pinned", fp8_variant(A{}, N4{}, Pin{}, D128{}, std::false_type{}));
    add("s8 fp8 amax kN=8", fp8_variant(A{}, N8{}, NoPin{}, D0{}, std::false_type{}));
    add("s8 fp8 amax kN=8 D128", fp8_variant(A{}, N8{}, NoPin{}, D128{}, std::false_type{}));
    add("s8 fp8 amax kN=8 D128 pinned", fp8_variant(A{}, N8{}, Pin{}, D128{}, std::false_type{}));
    add("s8 fp8 pow2 kN=4", fp8_variant(P{}, N4{}, NoPin{}, D0{}, std::false_type{}));
    add("s8 fp8 pow2 kN=4 D128", fp8_variant(P{}, N4{}, NoPin{}, D128{}, std::false_type{}));
    add("s8 fp8 pow2 kN=4 D128 pinned", fp8_variant(P{}, N4{}, Pin{}, D128{}, std::false_type{}));
    add("s8 fp8 pow2 kN=8 D128 pinned", fp8_variant(P{}, N8{}, Pin{}, D128{}, std::false_type{}));
    add("s8 PDL fp8 amax kN=4", fp8_variant(A{}, N4{}, Pin{}, D0{}, std::true_type{}));
    add("s8 PDL fp8 amax kN=4 D128", fp8_variant(A{}, N4{}, Pin{}, D128{}, std::true_type{}));
    add("s8 PDL fp8 amax kN=8 D128", fp8_variant(A{}, N8{}, Pin{}, D128{}, std::true_type{}));
    add("s8 PDL fp8 pow2 kN=4 D128", fp8_variant(P{}, N4{}, Pin{}, D128{}, std::true_type{}));
    // Session 8, not yet run: the library's D = 128 kernel (kN = 4, pinned) at other rows per block
    // (n = 512 is its worst cell: 4 rows a block, 128 blocks).
    for (const int32_t forced : {1, 2, 8}) {
      add("s8 fp8 amax lib, " + std::to_string(forced) + " rows/block",
          fp8_lib(index_k_fp8_kernel<int64_t, 4, ScaleRule::kAmax, false, true, 128>, 4, false, forced));
    }
    add("s8 fp8 amax (API)", [&, fp8](cudaStream_t s) { check(store_index_k_fp8(fp8, s)); });
    // Session 9: the library's MLA kernels (parameters in lines 0x200 and 0x240) against the
    // same kernel with them pushed into three lines, at the library's shape (kN = 8, PDL off:
    // detail::mla_shape); then rows a block at every size for the bf16, fp8 (D = 128, kN = 4), MLA and fused
    // kernels, PDL off (the lean node runs 256-thread blocks: n = 512 is 32 of them).
    const auto mla_rows = [&](auto kernel, int32_t per_block, auto... args) {
      const unsigned blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
      return [=](cudaStream_t s) {
        kernel<<<blocks, dim3(32, 2 * per_block), 0, s>>>(args...);
        CACHESTORE_CHECK_CUDA(cudaGetLastError());
      };
    };
    const int32_t lib_mla_rows = detail::mla_shape(rows, 2, false, false, arch).rows_per_block;
    // V3.2 amax: the same arguments, the kernel compiled for the rule (since session 10).
    const kernels::MlaArgs& v32_amax_mla = v32_mla;
    add("s9 V4 lib (2 lines)", mla_rows(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, mla));
    add("s9 V4 padded (3 lines)", mla_rows(padded_mla_kernel<MlaLayout::kV4>, lib_mla_rows, Pad48{}, guard, mla));
    add("s9 V3.2 lib (2 lines)", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, v32_mla));
    add("s9 V3.2 padded (3 lines)", mla_rows(padded_mla_kernel<MlaLayout::kV32>, lib_mla_rows, Pad48{}, guard, v32_mla));
    add("s9 V3.2 amax lib (2 lines)", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, int64_t, 8, false>, lib_mla_rows, guard, v32_amax_mla));
    add("s9 V3.2 amax padded (3)", mla_rows(padded_mla_kernel<MlaLayout::kV32, ScaleRule::kAmax>, lib_mla_rows, Pad48{}, guard, v32_amax_mla));
    add("s9 V4 (API)", [&, v4](cudaStream_t s) { check(fused_store_cache(v4, s)); });
    add("s9 V3.2 pow2 (API)", [&, v32](cudaStream_t s) { check(fused_store_cache(v32, s)); });
    add("s9 V4 + index (API)", [&, v4_index](cudaStream_t s) { check(fused_store_cache(v4_index, s)); });
    add("s9 bf16 (API)", [&, bf16](cudaStream_t s) { check(store_index_k_bf16(bf16, s)); });
    for (const int32_t per_block : {4, 8, 16}) {
      const unsigned blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
      add("s9 bf16 " + std::to_string(per_block) + " rows/block",
          no_pdl(kernels::index_k_bf16_kernel<int64_t, false>, blocks, dim3(16, per_block), bf16_args));
    }
    for (const int32_t per_block : {2, 4, 8, 16}) {
      add("s9 fp8 amax " + std::to_string(per_block) + " rows/block",
          fp8_lib(index_k_fp8_kernel<int64_t, 4, ScaleRule::kAmax, false, true, 128>, 4, false, per_block));
      add("s9 fp8 pow2 " + std::to_string(per_block) + " rows/block",
          fp8_lib(index_k_fp8_kernel<int64_t, 4, ScaleRule::kPow2, false, true, 128>, 4, false, per_block));
    }
    for (const int32_t per_block : {1, 2, 4}) {
      const std::string r = std::to_string(per_block);
      add("s9 V4 " + r + " rows/block", mla_rows(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, false>, per_block, guard, mla));
      add("s9 V3.2 " + r + " rows/block", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kPow2, int64_t, 8, false>, per_block, guard, v32_mla));
      const unsigned blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
      kernels::GuardArgs g = guard;
      g.rows_per_block = per_block;
      add("s9 fused V4 " + r + " rows/block", [=](cudaStream_t s) {
        launch(kernels::fused_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, IndexKFormat::kFp8, int64_t, 8, false, 128>,
               dim3(blocks), fused_block(per_block), s, false, g, mla,
               fp8_args);
      });
    }
    // Session 10: the MLA kernels' spare rows select row 0's input instead of exiting before the
    // row's addresses (the library now) against the exit first (before), PDL off at the library's
    // shape and PDL on at its PDL shape (NOTES.md, item 26).
    const int32_t pdl_mla_rows = detail::mla_shape(rows, 2, true, false, arch).rows_per_block;
    const auto mla_pdl = [&](auto kernel, const kernels::MlaArgs& args) {
      const unsigned blocks = static_cast<unsigned>((rows + pdl_mla_rows - 1) / pdl_mla_rows);
      return with_pdl(kernel, blocks, dim3(32, 2 * pdl_mla_rows), args);
    };
    add("s10 V4 select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, mla));
    add("s10 V4 exit first", mla_rows(exit_first_mla_kernel<MlaLayout::kV4, false>, lib_mla_rows, guard, mla));
    add("s10 V3.2 select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, v32_mla));
    add("s10 V3.2 exit first", mla_rows(exit_first_mla_kernel<MlaLayout::kV32, false>, lib_mla_rows, guard, v32_mla));
    add("s10 V3.2 amax select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, int64_t, 8, false>, lib_mla_rows, guard, v32_amax_mla));
    add("s10 V3.2 amax exit first", mla_rows(exit_first_mla_kernel<MlaLayout::kV32, false, ScaleRule::kAmax>, lib_mla_rows, guard, v32_amax_mla));
    add("s10b V3.2 select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, v32_mla));
    add("s10b V3.2 amax select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, int64_t, 8, false>, lib_mla_rows, guard, v32_amax_mla));
    // Fused V3.2 + index-K with PDL (n = 512 is its open cell): the library's 2 rows with the
    // trigger, against 1 and 4 rows, and 2 rows without the trigger.
    const auto fused_v32_pdl = fused_pdl(
        kernels::fused_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, IndexKFormat::kFp8, int64_t, 8, true, 128>,
        v32_amax_mla);
    add("s10b PDL fused V3.2 2 rows, trigger", pdl_rows(fused_v32_pdl, 2, true));
    add("s10b PDL fused V3.2 2 rows, no trigger", pdl_rows(fused_v32_pdl, 2, false));
    add("s10b PDL fused V3.2 1 row, trigger", pdl_rows(fused_v32_pdl, 1, true));
    add("s10b PDL fused V3.2 4 rows, trigger", pdl_rows(fused_v32_pdl, 4, true));
    add("s10b V4 select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, mla));
    add("s10 PDL V4 select", mla_pdl(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, true>, mla));
    add("s10 PDL V4 exit first", mla_pdl(exit_first_mla_kernel<MlaLayout::kV4, true>, mla));
    add("s10 PDL V3.2 amax select", mla_pdl(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, int64_t, 8, true>, v32_amax_mla));
    add("s10 PDL V3.2 amax exit first", mla_pdl(exit_first_mla_kernel<MlaLayout::kV32, true, ScaleRule::kAmax>, v32_amax_mla));
    // V4.1 and V4.1 FP4 (session 10's check of their PDL-on cells at n = 512, which read
    // 0.07-0.09x higher in the gpu-check of e96d26d than in the two runs before).
    const kernels::MlaArgs v41_mla{{slots64, -1, capacity, 0, 0},
                                   {v41_cache, layout::split_min_page_stride(layout::kV41Rows, page), 6,
                                    ScaleRule::kPow2},
                                   in, in + 448, 512, 512};
    kernels::MlaArgs v41_fp4_mla = v41_mla;
    v41_fp4_mla.cache.page_stride = layout::split_min_page_stride(layout::kV41Fp4Rows, page);
    add("s10d PDL V41 select", mla_pdl(kernels::mla_store_kernel<MlaLayout::kV41, ScaleRule::kPow2, int64_t, 8, true>, v41_mla));
    add("s10d PDL V41 exit first", mla_pdl(exit_first_mla_kernel<MlaLayout::kV41, true>, v41_mla));
    add("s10d PDL V41 FP4 select", mla_pdl(kernels::mla_store_kernel<MlaLayout::kV41Fp4, ScaleRule::kPow2, int64_t, 8, true>, v41_fp4_mla));
    add("s10d PDL V41 FP4 exit first", mla_pdl(exit_first_mla_kernel<MlaLayout::kV41Fp4, true>, v41_fp4_mla));
    add("s10d V41 FP4 select", mla_rows(kernels::mla_store_kernel<MlaLayout::kV41Fp4, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, v41_fp4_mla));
    add("s10d V41 FP4 exit first", mla_rows(exit_first_mla_kernel<MlaLayout::kV41Fp4, false>, lib_mla_rows, guard, v41_fp4_mla));
    add("s10d PDL V4 select", mla_pdl(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, true>, mla));
    add("s10d PDL V4 exit first", mla_pdl(exit_first_mla_kernel<MlaLayout::kV4, true>, mla));
    // With the select (item 26), rows a block for the MLA kernels again (item 25 chose 2 with the
    // exit first), PDL off, and the lean node at V4's 512-wide rows.
    add("s10e naive lean 512", lean(512));
    for (const int32_t per_block : {1, 2, 4}) {
      const std::string r = std::to_string(per_block) + (per_block == 1 ? " row" : " rows");
      add("s10e V4 " + r, mla_rows(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, false>, per_block, guard, mla));
      add("s10e V3.2 amax " + r, mla_rows(kernels::mla_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, int64_t, 8, false>, per_block, guard, v32_amax_mla));
      add("s10e V41 FP4 " + r, mla_rows(kernels::mla_store_kernel<MlaLayout::kV41Fp4, ScaleRule::kPow2, int64_t, 8, false>, per_block, guard, v41_fp4_mla));
    }
    // The library's paged K/V kernel (H = 8, D = 128, K and V, P = 16: the bench's NHD row; the
    // launcher's shape, one row of 256 vector threads a block), PDL off and on, against the same
    // row shape without its generality (lean_kv_kernel; session 11, NOTES.md item 27). The branch
    // paged-kv-linear has the kernel with a linear path and its A/B (s13).
    {
      constexpr int32_t kKvPage = 16;
      const int64_t kv_capacity = capacity;  // the slots' range: 4096 pages of 64
      static uint16_t* kv_cache = nullptr;
      if (kv_cache == nullptr) kv_cache = test::device_alloc<uint16_t>(2 * kv_capacity * 1024);
      const layout::KvStrides strides = layout::kv_nhd_strides(kKvPage, 8, 128);
      const kernels::KvSideArgs k_side{in, 2048, 128, reinterpret_cast<uint8_t*>(kv_cache), strides,
                                       nullptr, 0, kernels::FastDivmod::make(16)};
      kernels::KvSideArgs v_side = k_side;
      v_side.src = in + 1024;
      v_side.cache = reinterpret_cast<uint8_t*>(kv_cache + kv_capacity * 1024);
      const kernels::PagedKvArgs kv_args{{slots64, -1, kv_capacity, 0, 0}, k_side, v_side, 128, 256,
                                         4, kernels::FastDivmod::make(kKvPage)};
      const auto kv_launch = [&](auto kernel, bool pdl) {
        const kernels::GuardArgs g{rows, n_dev, nullptr, pdl && rows <= sm_count};
        return [=](cudaStream_t s) { launch(kernel, dim3(static_cast<unsigned>(rows)), dim3(256, 1), s, pdl, g, kv_args); };
      };
      using kernels::paged_kv_kernel;
      constexpr auto kAutoCache = KvCacheType::kAuto;
      constexpr auto kBf16In = KvDataType::kBf16;
      add("s11b paged K/V (lib kernel)", kv_launch(paged_kv_kernel<int64_t, kAutoCache, kBf16In, false>, false));
      const LeanKvArgs lean_kv{in, slots64, kv_cache, kv_cache + kv_capacity * 1024};
      const kernels::SlotArgs kv_slots{slots64, -1, kv_capacity, 0, 0};
      add("s11b lean K/V copy", [=](cudaStream_t s) {
        lean_kv_kernel<false><<<static_cast<unsigned>(rows), 256, 0, s>>>(guard, kv_slots, lean_kv);
      });
      add("s11b lean K/V guarded", [=](cudaStream_t s) {
        lean_kv_kernel<true><<<static_cast<unsigned>(rows), 256, 0, s>>>(guard, kv_slots, lean_kv);
      });
      add("s11b PDL paged K/V (lib kernel)", kv_launch(paged_kv_kernel<int64_t, kAutoCache, kBf16In, true>, true));
    }
    // Session 11: the index-K row in the KV warps (merged_fused_kernel) against the library's
    // fused kernel (index warps of their own) and each kind of row alone, PDL off, 2 rows a block
    // (the library's shape up to 4 x SMs rows).
    add("s12 V4 alone (lib)", mla_rows(kernels::mla_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, int64_t, 8, false>, lib_mla_rows, guard, mla));
    add("s12 fp8 amax alone (API)", [&, fp8](cudaStream_t s) { check(store_index_k_fp8(fp8, s)); });
    add("s12 fused lib (API)", [&, v4_index](cudaStream_t s) { check(fused_store_cache(v4_index, s)); });
    add("s12 merged", mla_rows(merged_fused_kernel<false>, lib_mla_rows, guard, mla, fp8_args));
    add("s12 merged, one slot load", mla_rows(merged_fused_kernel<true>, lib_mla_rows, guard, mla, fp8_args));
    add("s10 V4 + index (API)", [&, v4_index](cudaStream_t s) { check(fused_store_cache(v4_index, s)); });
    // The fused kernel with both rules compiled in (session 10): rows a block, PDL off and on
    // (the trigger at every size here: up to 512 rows every block of 1 or 2 rows is resident).
    FusedStoreParams v32_index = v4_index;
    v32_index.nope_row_stride = 576;
    v32_index.rope = in + 512;
    v32_index.rope_row_stride = 576;
    v32_index.kv_cache = v32.kv_cache;
    v32_index.kv_cache.scale_rule = ScaleRule::kAmax;
    add("s10c V4 + index (API)", [&, v4_index](cudaStream_t s) { check(fused_store_cache(v4_index, s)); });
    add("s10c V3.2 amax + index (API)", [&, v32_index](cudaStream_t s) { check(fused_store_cache(v32_index, s)); });
    add("s10c V3.2 amax (API)", [&, p = with(v32, [](auto& q) { q.kv_cache.scale_rule = ScaleRule::kAmax; })](cudaStream_t s) { check(fused_store_cache(p, s)); });
    add("s10c V3.2 pow2 (API)", [&, v32](cudaStream_t s) { check(fused_store_cache(v32, s)); });
    add("s10c V4 (API)", [&, v4](cudaStream_t s) { check(fused_store_cache(v4, s)); });
    const auto fused_rows = [&](auto kernel, const kernels::MlaArgs& kv_args, int32_t per_block,
                                bool pdl) {
      const unsigned blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
      kernels::GuardArgs g{rows, n_dev, nullptr, pdl};
      g.rows_per_block = per_block;
      return [=](cudaStream_t s) {
        launch(kernel, dim3(blocks), fused_block(per_block), s, pdl,
               g, kv_args, fp8_args);
      };
    };
    using kernels::fused_store_kernel;
    constexpr auto kFp8 = IndexKFormat::kFp8;
    for (const int32_t per_block : {1, 2}) {
      const std::string r = std::to_string(per_block) + (per_block == 1 ? " row" : " rows");
      add("s10c fused V4 " + r, fused_rows(fused_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, kFp8, int64_t, 8, false, 128>, mla, per_block, false));
      add("s10c fused V3.2 amax " + r, fused_rows(fused_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, kFp8, int64_t, 8, false, 128>, v32_amax_mla, per_block, false));
      add("s10c PDL fused V4 " + r, fused_rows(fused_store_kernel<MlaLayout::kV4, ScaleRule::kPow2, kFp8, int64_t, 8, true, 128>, mla, per_block, true));
      add("s10c PDL fused V3.2 amax " + r, fused_rows(fused_store_kernel<MlaLayout::kV32, ScaleRule::kAmax, kFp8, int64_t, 8, true, 128>, v32_amax_mla, per_block, true));
    }

    for (Variant& v : variants) {
      cudaGraph_t graph;
      CACHESTORE_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < 32; ++i) v.launch(stream);
      CACHESTORE_CHECK_CUDA(cudaGetLastError());
      CACHESTORE_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
      CACHESTORE_CHECK_CUDA(cudaGraphInstantiate(&v.exec, graph, 0));
      CACHESTORE_CHECK_CUDA(cudaGraphDestroy(graph));
    }
    cudaEvent_t start, stop;
    CACHESTORE_CHECK_CUDA(cudaEventCreate(&start));
    CACHESTORE_CHECK_CUDA(cudaEventCreate(&stop));
    for (int round = 0; round < 45; ++round) {
      if (dirty_l2) {
        CACHESTORE_CHECK_CUDA(cudaMemsetAsync(dirty, round & 0xff, dirty_bytes, stream));
        CACHESTORE_CHECK_CUDA(cudaStreamSynchronize(stream));
      }
      for (Variant& v : variants) {
        CACHESTORE_CHECK_CUDA(cudaEventRecord(start, stream));
        CACHESTORE_CHECK_CUDA(cudaGraphLaunch(v.exec, stream));
        CACHESTORE_CHECK_CUDA(cudaEventRecord(stop, stream));
        CACHESTORE_CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        CACHESTORE_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        if (round >= 5) v.us.push_back(ms * 1e3f / 32);
      }
    }
    const auto median = [](std::vector<float> x) {
      std::sort(x.begin(), x.end());
      return x[x.size() / 2];
    };
    const float reference = median(variants[0].us);
    std::printf("n = %lld: us per node (median of 40 rounds), over the lean naive 128\n",
                static_cast<long long>(rows));
    for (Variant& v : variants) {
      const float us = median(v.us);
      std::printf("  %-28s %.3f  %.3fx\n", v.name.c_str(), us, us / reference);
      CACHESTORE_CHECK_CUDA(cudaGraphExecDestroy(v.exec));
    }
    CACHESTORE_CHECK_CUDA(cudaEventDestroy(start));
    CACHESTORE_CHECK_CUDA(cudaEventDestroy(stop));
  }
  return 0;
}
