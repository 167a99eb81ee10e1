#!/usr/bin/env python3
"""An engine's use of cachestore from Python: PyTorch tensors, the C ABI through ctypes, the store
captured in a torch.cuda.graph padded to 32 rows and replayed with fewer real rows (padding rows:
stale slots, 0 or -1, NaN inputs). After each replay the caches equal a PyTorch reference of
the layouts: bf16 index-K, fp8 index-K (132-byte pages, amax rule), fused FlashMLA V4 + index-K.

usage: torch_graph_test.py libcachestore.so     (exit 77 = skipped: no PyTorch or no GPU)
"""
import ctypes
import os
import sys

REQUIRE_GPU = os.environ.get("CACHESTORE_REQUIRE_GPU") == "1"


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(1 if REQUIRE_GPU else 77)


try:
    import torch
except ImportError:
    skip("PyTorch is not installed")
if not torch.cuda.is_available():
    skip("no CUDA device")

B, P, PAGES, D = 32, 64, 8, 128
dev = torch.device("cuda")
lib = ctypes.CDLL(sys.argv[1])
i64, i32, vp = ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p
lib.cachestore_last_error_message.restype = ctypes.c_char_p
lib.cachestore_store_index_k_bf16.argtypes = [i64, vp, vp, vp, i32, i64, vp, i64, vp, i64, i64, i32, i32, vp]
lib.cachestore_store_index_k_fp8.argtypes = [i64, vp, vp, vp, i32, i64, vp, i64, vp, i64, i32, i64, i32, i32, i32, vp]
lib.cachestore_fused_store_cache.argtypes = [i64, vp, vp, vp, i32, i64, vp, i64, vp, i64, i32, vp, i64, i32, i64, i32,
                                             vp, i64, vp, i64, vp, i64, i32, i64, i32, i32, i32, vp]


def check(status):
    if status != 0:
        raise RuntimeError(f"cachestore status {status}: {lib.cachestore_last_error_message().decode()}")


# ---- PyTorch references of the layouts ----------------------------------------------------
def true_div(a, b):
    # Tensor by tensor: an IEEE division. PyTorch divides by a Python scalar as a product with
    # its reciprocal, which is 1 ulp off now and then.
    return a / torch.full_like(a, b)


def ref_index_fp8(cache, k, slots):
    x = k.float()
    s = true_div(torch.clamp(x.abs().amax(dim=1, keepdim=True), min=1e-4), 448.0)
    q = (x / s).to(torch.float8_e4m3fn).view(torch.uint8)
    page, off = slots // P, slots % P
    cache[:, : P * D].view(PAGES, P, D)[page, off] = q
    cache[:, P * D : P * (D + 4)].view(PAGES, P, 4)[page, off] = s.view(torch.uint8)


V4_STRIDE = (584 * P + 575) // 576 * 576


def ref_v4(cache, kv, slots):
    m = kv.shape[0]
    nope = kv[:, :448].float().view(m, 7, 64)
    f = true_div(torch.clamp(nope.abs().amax(-1), min=1e-4), 448.0)
    mant, exp = torch.frexp(f)
    e = torch.where(mant == 0.5, exp - 1, exp)  # ceil(log2 f), exactly
    inv = ((127 - e).to(torch.int32) << 23).view(torch.float32)  # 2^-e
    q = (nope * inv.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8).view(m, 448)
    rope = kv[:, 448:512].contiguous().view(torch.uint8)
    scale_row = torch.cat([(e + 127).to(torch.uint8), torch.zeros(m, 1, dtype=torch.uint8, device=dev)], 1)
    page, off = slots // P, slots % P
    cache[:, : 576 * P].view(PAGES, P, 576)[page, off] = torch.cat([q, rope], 1)
    cache[:, 576 * P : 584 * P].view(PAGES, P, 8)[page, off] = scale_row


def ref_bf16(cache, k, slots):
    cache[slots] = k


# ---- one store kind: capture once, replay with fewer real rows ----------------------------
def run(name, make_caches, store, reference, width):
    torch.manual_seed(0)
    x = torch.randn(B, width, device=dev, dtype=torch.bfloat16)
    index_k = torch.randn(B, D, device=dev, dtype=torch.bfloat16)
    slots = torch.zeros(B, dtype=torch.int64, device=dev)
    n = torch.full((1,), B, dtype=torch.int32, device=dev)
    caches = make_caches()
    expected = [c.clone() for c in caches]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        store(x, index_k, slots, n, caches, torch.cuda.current_stream().cuda_stream)
    capacity = PAGES * P
    free = torch.randperm(capacity, device=dev)
    used = 0
    for step, real in enumerate([32, 17, 5, 0, 1, 32, 9]):
        padding = ["stale", "zero", "minus_one"][step % 3]
        new = free[used : used + real]
        used = (used + real) % (capacity - B)
        pad = {"stale": slots[real:].clone(), "zero": torch.zeros(B - real, dtype=torch.int64, device=dev),
               "minus_one": torch.full((B - real,), -1, dtype=torch.int64, device=dev)}[padding]
        slots.copy_(torch.cat([new, pad]))
        x.copy_(torch.randn(B, width, device=dev, dtype=torch.bfloat16) * 2.0 ** (step - 3))
        x[real:] = float("nan")
        index_k.copy_(torch.randn(B, D, device=dev, dtype=torch.bfloat16))
        index_k[real:] = float("nan")
        n.fill_(real)
        graph.replay()
        torch.cuda.synchronize()
        reference(expected, x[:real], index_k[:real], slots[:real])
        for got, want in zip(caches, expected):
            if not torch.equal(got, want):
                diff = (got != want).nonzero()
                raise AssertionError(f"{name}: replay {step} (n={real}, padding {padding}): "
                                     f"{diff.shape[0]} cache elements differ, first at {diff[0].tolist()}")
    print(f"{name}: 7 padded replays of a B={B} torch.cuda.graph match the PyTorch reference")


def bf16_store(x, index_k, slots, n, caches, stream):
    check(lib.cachestore_store_index_k_bf16(B, n.data_ptr(), None, slots.data_ptr(), 1, -1, x.data_ptr(), D,
                                            caches[0].data_ptr(), D, PAGES * P, D, 0, stream))


def fp8_store(x, index_k, slots, n, caches, stream):
    check(lib.cachestore_store_index_k_fp8(B, n.data_ptr(), None, slots.data_ptr(), 1, -1, x.data_ptr(), D,
                                           caches[0].data_ptr(), PAGES, P, P * (D + 4), D, 0, 0, stream))


def fused_store(x, index_k, slots, n, caches, stream):
    check(lib.cachestore_fused_store_cache(B, n.data_ptr(), None, slots.data_ptr(), 1, -1,
                                           x.data_ptr(), 512, x[:, 448:].data_ptr(), 512, 0,
                                           caches[0].data_ptr(), PAGES, P, V4_STRIDE, 1,
                                           index_k.data_ptr(), D, slots.data_ptr(), -1, caches[1].data_ptr(),
                                           PAGES, P, P * (D + 4), D, 0, 1, stream))


poison = lambda shape: torch.full(shape, 0xAB, dtype=torch.uint8, device=dev)
run("store_index_k_bf16", lambda: [torch.full((PAGES * P, D), 1.5, dtype=torch.bfloat16, device=dev)],
    bf16_store, lambda e, x, ik, s: ref_bf16(e[0], x, s), D)
run("store_index_k_fp8", lambda: [poison((PAGES, P * (D + 4)))], fp8_store,
    lambda e, x, ik, s: ref_index_fp8(e[0], x, s), D)
run("fused_store_cache V4 + index-K (PDL)", lambda: [poison((PAGES, V4_STRIDE)), poison((PAGES, P * (D + 4)))],
    fused_store, lambda e, x, ik, s: (ref_v4(e[0], x, s), ref_index_fp8(e[1], ik, s)), 512)
print("torch_graph_test: OK")
