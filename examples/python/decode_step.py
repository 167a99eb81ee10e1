#!/usr/bin/env python3
"""An engine's decode step with cachestore: the KV stores of one layer captured once in a CUDA
graph at the largest batch B and replayed every step with however many real tokens the step has.
The padding rows of the slot mapping hold -1, 0 or last step's slots, and their activations are
garbage; the device count tells the stores which rows are real, so none of it reaches a cache.

  pip install .            # from the repository root
  python examples/python/decode_step.py

Two models' layers: DeepSeek-V4 (FlashMLA "MODEL1" KV + fp8 index-K, one fused store) and
Llama-3-8B (8 KV heads x 128, paged K/V in vLLM's NHD layout, 16-slot pages).
"""
import torch

import cachestore.torch as cst

B = 64          # the captured decode batch
dev = torch.device("cuda")


def run(model, store, caches, width):
    hidden = torch.zeros(B, width, dtype=torch.bfloat16, device=dev)  # the projection's output
    slots = torch.full((B,), -1, dtype=torch.int64, device=dev)       # engine-owned buffers
    n = torch.zeros(1, dtype=torch.int32, device=dev)
    store(hidden, slots, n)                                           # warm-up, then capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        store(hidden, slots, n)

    capacity = caches[0].shape[0] * 16 if model == "llama" else caches[0].shape[0] * 64
    next_slot = 0
    for step, real in enumerate([64, 37, 5, 1, 50]):
        # The scheduler's step: real rows first, then padding (stale slots from the last step).
        new = torch.arange(next_slot, next_slot + real, device=dev) % capacity
        next_slot += real
        slots[:real] = new
        hidden.normal_()
        hidden[real:] = float("nan")      # whatever the padded rows computed
        n.fill_(real)                     # a device value: the graph reads it at replay
        graph.replay()
        before = [c.clone() for c in caches]
        graph.replay()                    # replaying the same step rewrites the same bytes
        torch.cuda.synchronize()
        same = all(torch.equal(a, b) for a, b in zip(before, caches))
        nan_free = all(not torch.isnan(c.view(torch.bfloat16)).any().item()
                       for c in caches if c.dtype == torch.bfloat16)
        print(f"{model}: step {step}: {real:2d} real rows of {B}; replay idempotent: {same}; "
              f"no padding NaN in the cache: {nan_free}")


# DeepSeek-V4: NoPE 448 + RoPE 64 of the KV, and the 128-wide index-K, from one projection.
P = 64
v4 = torch.zeros(32, (584 * P + 575) // 576 * 576, dtype=torch.uint8, device=dev)
index = torch.zeros(32, P * 132, dtype=torch.uint8, device=dev)


def deepseek_store(hidden, slots, n):
    cst.fused_store_cache(hidden[:, :448], hidden[:, 448:512], slots, v4, layout="v4",
                          index_k=hidden[:, 512:640], index_cache=index,
                          num_tokens_non_padded=n, enable_pdl=True)


run("deepseek-v4", deepseek_store, [v4, index], 640)

# Llama-3-8B: K and V of 8 heads x 128 sliced out of the qkv projection; NHD pages of 16 slots.
key_cache = torch.zeros(64, 16, 8, 128, dtype=torch.bfloat16, device=dev)
value_cache = torch.zeros_like(key_cache)


def llama_store(hidden, slots, n):
    qkv = hidden.view(B, -1, 128)                 # [B, 32 q + 8 k + 8 v heads, 128]
    cst.store_paged_kv(qkv[:, 32:40], qkv[:, 40:48], slots, key_cache, value_cache,
                       num_tokens_non_padded=n)


run("llama", llama_store, [key_cache, value_cache], 48 * 128)
