#!/usr/bin/env python3
"""Host time of one eager cachestore.torch call on this machine's CPU, three ways: the torch op
(checks, dispatcher, C call, launch), `cachestore.torch.direct` (validation, C
call, launch) and a `cachestore.torch.bind` store (the C call and launch only). A one-row batch,
so the GPU work is far shorter than the host's; the median of 20 batches of 500 calls."""
import statistics
import time

import torch

import cachestore.torch as cst

dev = torch.device("cuda")
P = 64
k = torch.randn(1, 128, device=dev).bfloat16()
slots = torch.zeros(1, dtype=torch.int64, device=dev)
n = torch.ones(1, dtype=torch.int32, device=dev)
fp8 = torch.zeros(64, P * 132, dtype=torch.uint8, device=dev)
nope, rope = torch.randn(1, 448, device=dev).bfloat16(), torch.randn(1, 64, device=dev).bfloat16()
v4 = torch.zeros(64, (584 * P + 575) // 576 * 576, dtype=torch.uint8, device=dev)
kv = torch.randn(1, 8, 128, device=dev).bfloat16()
kc, vc = (torch.zeros(64, 16, 8, 128, dtype=torch.bfloat16, device=dev) for _ in range(2))

calls = {
    "store_index_k_fp8": ("store_index_k_fp8", (k, slots, fp8), {"num_tokens_non_padded": n}),
    "fused_store_cache (V4 + index-K)": (
        "fused_store_cache", (nope, rope, slots, v4),
        {"index_k": k, "index_cache": fp8, "num_tokens_non_padded": n}),
    "store_paged_kv (NHD)": ("store_paged_kv", (kv, kv, slots, kc, vc),
                             {"num_tokens_non_padded": n}),
}
print(f"{'call':36s} {'torch op (us)':>15s} {'direct (us)':>12s} {'bound (us)':>11s}")
for name, (fn, args, kwargs) in calls.items():
    row = []
    bound = cst.bind(fn, *args, **kwargs)
    ways = (lambda: getattr(cst, fn)(*args, **kwargs),
            lambda: getattr(cst.direct, fn)(*args, **kwargs), bound)
    for call in ways:
        for _ in range(200):
            call()
        torch.cuda.synchronize()
        samples = []
        for _ in range(20):
            start = time.perf_counter()
            for _ in range(500):
                call()
            samples.append((time.perf_counter() - start) / 500 * 1e6)
            torch.cuda.synchronize()
        row.append(statistics.median(samples))
    print(f"{name:36s} {row[0]:15.1f} {row[1]:12.1f} {row[2]:11.1f}")
