#!/usr/bin/env python3
"""Host time of one eager store call on this machine's CPU, against anchors built and timed in
the same run: a C++ TORCH_LIBRARY op with vLLM-like checks (reshape_and_cache_flash's: dims,
dtypes, strides, a device guard, the current stream) that launches one kernel, compiled here
with torch.utils.cpp_extension.load_inline; and the two `index_put_` (K, then V) an engine
would otherwise compose. Each cachestore store is timed four ways: the torch op
(`torch.ops.cachestore.<store>`, choice ids), the user function (`cachestore.torch.<store>`),
`cachestore.torch.direct` (Python checks, the C call) and a `bind()` store; and vLLM's
`reshape_and_cache_flash` from `cachestore.compat.vllm` over the paged op. A one-row batch, so
the GPU work is far shorter than the host's; ways are timed in alternation, 20 rounds of 500
calls each, and the median per way is reported with its ratio to the C++ anchor.

Needs nvcc and ninja (pip install ninja) for the anchor; prints `cachestore.torch.backend`."""
import os
import statistics
import sys
import time

import torch
from torch.utils.cpp_extension import load_inline

import cachestore.torch as cst

ANCHOR_CPP = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAContext.h>

void launch_copy_rows(const void* key, const void* value, void* key_cache, void* value_cache,
                      const int64_t* slots, int64_t tokens, int64_t row_elems, int64_t key_stride,
                      int64_t value_stride, int64_t page_stride, int64_t entry_stride,
                      int64_t page_size, cudaStream_t stream);

// What vLLM's reshape_and_cache_flash checks and does on the host, for a bf16 cache.
void anchor_store(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                  at::Tensor& value_cache, const at::Tensor& slot_mapping,
                  const std::string& kv_cache_dtype, const at::Tensor& k_scale,
                  const at::Tensor& v_scale) {
  TORCH_CHECK(key.dim() == 3 && value.dim() == 3, "key, value: [T, H, D]");
  TORCH_CHECK(key_cache.dim() == 4 && value_cache.dim() == 4, "caches: [pages, P, H, D]");
  TORCH_CHECK(slot_mapping.scalar_type() == at::kLong, "slot_mapping: int64");
  TORCH_CHECK(key.scalar_type() == at::kBFloat16 && key_cache.scalar_type() == at::kBFloat16,
              "bf16");
  TORCH_CHECK(kv_cache_dtype == "auto", "auto cache only");
  TORCH_CHECK(key_cache.stride(3) == 1 && value_cache.stride(3) == 1, "contiguous heads");
  TORCH_CHECK(key_cache.stride(0) == value_cache.stride(0), "same page stride");
  const int64_t tokens = slot_mapping.size(0), heads = key.size(1), dim = key.size(2);
  TORCH_CHECK(key.size(0) >= tokens && value.size(0) >= tokens, "rows");
  const at::cuda::OptionalCUDAGuard device_guard(device_of(key));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  launch_copy_rows(key.data_ptr(), value.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(),
                   slot_mapping.data_ptr<int64_t>(), tokens, heads * dim, key.stride(0),
                   value.stride(0), key_cache.stride(0), key_cache.stride(1), key_cache.size(1),
                   stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

TORCH_LIBRARY(overhead_anchor, m) {
  m.def("store(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
        "Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()");
}
TORCH_LIBRARY_IMPL(overhead_anchor, CUDA, m) { m.impl("store", &anchor_store); }
"""

ANCHOR_CU = r"""
#include <cuda_runtime.h>
#include <cstdint>
__global__ void copy_rows(const uint16_t* key, const uint16_t* value, uint16_t* key_cache,
                          uint16_t* value_cache, const int64_t* slots, int64_t row_elems,
                          int64_t key_stride, int64_t value_stride, int64_t page_stride,
                          int64_t entry_stride, int64_t page_size) {
  const int64_t t = blockIdx.x, slot = slots[t];
  if (slot < 0) return;
  const int64_t at = slot / page_size * page_stride + slot % page_size * entry_stride;
  for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) {
    key_cache[at + i] = key[t * key_stride + i];
    value_cache[at + i] = value[t * value_stride + i];
  }
}
void launch_copy_rows(const void* key, const void* value, void* key_cache, void* value_cache,
                      const int64_t* slots, int64_t tokens, int64_t row_elems, int64_t key_stride,
                      int64_t value_stride, int64_t page_stride, int64_t entry_stride,
                      int64_t page_size, cudaStream_t stream) {
  if (tokens == 0) return;
  copy_rows<<<tokens, 128, 0, stream>>>(
      static_cast<const uint16_t*>(key), static_cast<const uint16_t*>(value),
      static_cast<uint16_t*>(key_cache), static_cast<uint16_t*>(value_cache), slots, row_elems,
      key_stride, value_stride, page_stride, entry_stride, page_size);
}
"""


def build_anchor():
    start = time.perf_counter()
    load_inline("overhead_anchor", cpp_sources=[ANCHOR_CPP], cuda_sources=[ANCHOR_CU],
                is_python_module=False, extra_cuda_cflags=["-O2"], verbose=False)
    return time.perf_counter() - start


def time_ways(ways, rounds=20, calls=500):
    """The median µs per call of each way, the ways timed in alternation, after one whole
    untimed round of them (the first calls a process times read slow, whatever comes first)."""
    for call in ways.values():
        for _ in range(200):
            call()
    torch.cuda.synchronize()
    for call in ways.values():
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    samples = {name: [] for name in ways}
    for _ in range(rounds):
        for name, call in ways.items():
            start = time.perf_counter()
            for _ in range(calls):
                call()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(s) for name, s in samples.items()}


def main():
    dev = torch.device("cuda")
    print(f"cachestore.torch backend: {cst.backend} ({cst.backend_detail}); torch "
          f"{torch.__version__}; {os.cpu_count()} CPUs")
    print(f"anchor built in {build_anchor():.0f} s (load_inline)")
    P = 64
    k = torch.randn(1, 128, device=dev).bfloat16()
    slots = torch.zeros(1, dtype=torch.int64, device=dev)
    n = torch.ones(1, dtype=torch.int32, device=dev)
    fp8 = torch.zeros(64, P * 132, dtype=torch.uint8, device=dev)
    nope = torch.randn(1, 448, device=dev).bfloat16()
    rope = torch.randn(1, 64, device=dev).bfloat16()
    v4 = torch.zeros(64, (584 * P + 575) // 576 * 576, dtype=torch.uint8, device=dev)
    kv = torch.randn(1, 8, 128, device=dev).bfloat16()
    kc, vc = (torch.zeros(64, 16, 8, 128, dtype=torch.bfloat16, device=dev) for _ in range(2))
    scale = torch.ones(1, device=dev)
    anchor_op = torch.ops.overhead_anchor.store.default
    kc_rows, vc_rows = kc.view(-1, 8, 128), vc.view(-1, 8, 128)

    def index_put():
        kc_rows.index_put_((slots,), kv)
        vc_rows.index_put_((slots,), kv)

    anchors = {"C++ TORCH_LIBRARY op (anchor)":
               lambda: anchor_op(kv, kv, kc, vc, slots, "auto", scale, scale),
               "index_put_ K + V": index_put}
    ops = torch.ops.cachestore
    stores = {
        "store_index_k_fp8": (
            lambda: ops.store_index_k_fp8.default(k, slots, fp8, None, 0, n),
            "store_index_k_fp8", (k, slots, fp8), {"num_tokens_non_padded": n}),
        "fused_store_cache (V4 + index-K)": (
            lambda: ops.fused_store_cache.default(nope, rope, slots, v4, 0, None, None, k, None,
                                                  fp8, 0, None, None, n),
            "fused_store_cache", (nope, rope, slots, v4),
            {"index_k": k, "index_cache": fp8, "num_tokens_non_padded": n}),
        "store_paged_kv (NHD)": (
            lambda: ops.store_paged_kv.default(kv, kv, slots, kc, vc, 0, None, None, None, n),
            "store_paged_kv", (kv, kv, slots, kc, vc), {"num_tokens_non_padded": n}),
    }
    ways = dict(anchors)
    for label, (op_call, fn, args, kwargs) in stores.items():
        ways[f"{label}: torch op"] = op_call
        ways[f"{label}: cachestore.torch"] = (
            lambda fn=fn, args=args, kwargs=kwargs: getattr(cst, fn)(*args, **kwargs))
        ways[f"{label}: direct"] = (
            lambda fn=fn, args=args, kwargs=kwargs: getattr(cst.direct, fn)(*args, **kwargs))
        ways[f"{label}: bind"] = cst.bind(fn, *args, **kwargs)
    # The drop-in entry points over the same op (cachestore.compat): vLLM's slot mapping, and
    # FlashInfer's page table (one request of one page) beside the op called with that table.
    from cachestore.compat import flashinfer, vllm
    ways["store_paged_kv (NHD): compat.vllm.reshape_and_cache_flash"] = (
        lambda: vllm.reshape_and_cache_flash(kv, kv, kc, vc, slots, "auto", scale, scale,
                                             num_tokens_non_padded=n))
    batch = torch.zeros(1, dtype=torch.int32, device=dev)
    indptr = torch.tensor([0, 1], dtype=torch.int32, device=dev)
    ways["store_paged_kv (NHD, page table): torch op"] = (
        lambda: ops.store_paged_kv.default(kv, kv, batch, kc, vc, 0, None, None, None, n, -1, 0,
                                           1, None, False, batch, indptr, batch))
    ways["store_paged_kv (NHD, page table): compat.flashinfer.append_paged_kv_cache"] = (
        lambda: flashinfer.append_paged_kv_cache(kv, kv, batch, batch, (kc, vc), batch, indptr,
                                                 None, num_tokens_non_padded=n))
    times = time_ways(ways)
    base = times["C++ TORCH_LIBRARY op (anchor)"]
    print("\n| call | µs | x C++ anchor |\n|---|---|---|")
    for name, us in times.items():
        print(f"| {name} | {us:.2f} | {us / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
