"""cachestore.torch on the GPU: every function against the PyTorch reference (torch_reference.py)
under padded torch.cuda.graph replay, whole caches compared byte for byte; torch.compile
(fullgraph) through the custom ops; torch.library.opcheck; streams, pointers and graphs shared
with torch in one process; a refused call writes nothing."""
import os

import pytest

from conftest import need_gpu, run_under_python_ops

need_gpu()  # the whole module skips once without a GPU (fails under CACHESTORE_REQUIRE_GPU=1)
import torch_reference as ref  # noqa: E402

B, P, PAGES = 32, 16, 8  # captured rows, page size, pages: 128 slots
CAPACITY = P * PAGES


@pytest.fixture
def env():
    import torch

    import cachestore.torch as cst
    torch.manual_seed(1234)
    return torch, cst, torch.device("cuda")


def poison(torch, dev, *shape):
    return torch.full(shape, 0xAB, dtype=torch.uint8, device=dev)


class Case:
    """One store: its inputs (name -> (width or shape tail, dtype)), caches, the call and the
    reference."""

    def __init__(self, name, inputs, caches, store, reference, slot_dtype="int64"):
        self.name, self.inputs, self.caches = name, inputs, caches
        self.store, self.reference, self.slot_dtype = store, reference, slot_dtype


def make_cases(torch, cst, dev):
    bf = torch.bfloat16
    fp8_page, fp4_page = P * 132, P * 68
    v4_page, v32_page = (584 * P + 575) // 576 * 576, 656 * P
    v41_page, v41_fp4_page = (528 * P + 511) // 512 * 512, (288 * P + 255) // 256 * 256
    cases = [
        Case("index_k_bf16", {"k": ((128,), bf)},
             lambda: [torch.full((CAPACITY, 128), 1.5, dtype=bf, device=dev)],
             lambda x, s, n, c: cst.store_index_k_bf16(x["k"], s, c[0], num_tokens_non_padded=n),
             lambda e, x, s: ref.ref_index_k_bf16(e[0], x["k"], s)),
    ]
    for rule in ("amax", "pow2"):
        cases.append(Case(
            f"index_k_fp8_{rule}", {"k": ((128,), bf)}, lambda: [poison(torch, dev, PAGES, fp8_page)],
            lambda x, s, n, c, rule=rule: cst.store_index_k_fp8(
                x["k"], s, c[0], scale_rule=rule, num_tokens_non_padded=n),
            lambda e, x, s, rule=rule: ref.ref_index_k_fp8(e[0], P, x["k"], s, rule),
            "int32" if rule == "pow2" else "int64"))
    for ties in ("even", "toward_zero"):
        cases.append(Case(
            f"index_k_fp4_{ties}", {"k": ((128,), bf)}, lambda: [poison(torch, dev, PAGES, fp4_page)],
            lambda x, s, n, c, ties=ties: cst.store_index_k_fp4(
                x["k"], s, c[0], ties=ties, num_tokens_non_padded=n),
            lambda e, x, s, ties=ties: ref.ref_index_k_fp4(e[0], P, x["k"], s, ties == "even")))
    mla = {"nope": ((448,), bf), "rope": ((64,), bf), "idx": ((128,), bf)}
    cases += [
        Case("fused_v4_index_fp8", mla,
             lambda: [poison(torch, dev, PAGES, v4_page), poison(torch, dev, PAGES, fp8_page)],
             lambda x, s, n, c: cst.fused_store_cache(
                 x["nope"], x["rope"], s, c[0], layout="v4", index_k=x["idx"], index_cache=c[1],
                 num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_mla(e[0], P, "v4", x["nope"], x["rope"], s),
                              ref.ref_index_k_fp8(e[1], P, x["idx"], s))),
        Case("mla_v32_amax", {"nope": ((512,), bf), "rope": ((64,), bf)},
             lambda: [poison(torch, dev, PAGES, v32_page)],
             lambda x, s, n, c: cst.fused_store_cache(
                 x["nope"], x["rope"], s, c[0], layout="v32", scale_rule="amax",
                 num_tokens_non_padded=n),
             lambda e, x, s: ref.ref_mla(e[0], P, "v32", x["nope"], x["rope"], s, "amax"),
             "int32"),
        Case("fused_v41_index_fp4", mla,
             lambda: [poison(torch, dev, PAGES, v41_page), poison(torch, dev, PAGES, fp4_page)],
             lambda x, s, n, c: cst.fused_store_cache(
                 x["nope"], x["rope"], s, c[0], layout="v41", index_k=x["idx"], index_cache=c[1],
                 index_format="fp4", index_rule="toward_zero", num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_mla(e[0], P, "v41", x["nope"], x["rope"], s),
                              ref.ref_index_k_fp4(e[1], P, x["idx"], s, False))),
        Case("mla_v41_fp4", {"nope": ((448,), bf), "rope": ((64,), bf)},
             lambda: [poison(torch, dev, PAGES, v41_fp4_page)],
             lambda x, s, n, c: cst.fused_store_cache(
                 x["nope"], x["rope"], s, c[0], layout="v41_fp4", num_tokens_non_padded=n),
             lambda e, x, s: ref.ref_mla(e[0], P, "v41_fp4", x["nope"], x["rope"], s)),
    ]
    H, D = 8, 128
    kv = {"k": ((H, D), bf), "v": ((H, D), bf)}
    head_scales = (torch.rand(H, device=dev) * 0.05 + 0.01, torch.rand(H, device=dev) * 0.05 + 0.01)
    cases += [
        Case("paged_kv_nhd_bf16", kv,
             lambda: [torch.full((PAGES, P, H, D), 1.5, dtype=bf, device=dev) for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(x["k"], x["v"], s, c[0], c[1],
                                                   num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0], "nhd", x["k"], s),
                              ref.ref_paged_kv(e[1], "nhd", x["v"], s))),
        Case("paged_kv_hnd_fp8_e4m3_per_head", kv,
             lambda: [torch.zeros((PAGES, H, P, D), dtype=torch.float8_e4m3fn, device=dev)
                      for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(
                 x["k"], x["v"], s, c[0], c[1], layout="hnd", k_scale=head_scales[0],
                 v_scale=head_scales[1], num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0], "hnd", x["k"], s, head_scales[0]),
                              ref.ref_paged_kv(e[1], "hnd", x["v"], s, head_scales[1])),
             "int32"),
        Case("paged_kv_nhd_fp16_e5m2_uint8", {"k": ((H, D), torch.float16), "v": ((H, D), torch.float16)},
             lambda: [torch.zeros((PAGES, P, H, D), dtype=torch.uint8, device=dev)
                      for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(
                 x["k"], x["v"], s, c[0], c[1], kv_cache_dtype="fp8_e5m2",
                 k_scale=head_scales[0][:1], v_scale=head_scales[1][:1], num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0].view(torch.float8_e5m2), "nhd", x["k"], s,
                                               head_scales[0][:1]),
                              ref.ref_paged_kv(e[1].view(torch.float8_e5m2), "nhd", x["v"], s,
                                               head_scales[1][:1]))),
        # FlashInfer's stacked [pages, 2, P, H, D]: K and V are views with the page stride.
        Case("paged_kv_flashinfer_stacked", kv,
             lambda: [torch.full((PAGES, 2, P, H, D), 1.5, dtype=bf, device=dev)],
             lambda x, s, n, c: cst.store_paged_kv(x["k"], x["v"], s, c[0][:, 0], c[0][:, 1],
                                                   num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0][:, 0], "nhd", x["k"], s),
                              ref.ref_paged_kv(e[0][:, 1], "nhd", x["v"], s))),
        # vLLM's MLA rows [pages, P, 576]: kv_c (512) then k_pe (64), one head.
        Case("paged_kv_mla576", {"k": ((512,), bf), "v": ((64,), bf)},
             lambda: [torch.full((PAGES, P, 576), 1.5, dtype=bf, device=dev)],
             lambda x, s, n, c: cst.store_paged_kv(x["k"], x["v"], s, c[0][..., :512],
                                                   c[0][..., 512:], num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0][..., :512].unsqueeze(2), "nhd",
                                               x["k"].unsqueeze(1), s),
                              ref.ref_paged_kv(e[0][..., 512:].unsqueeze(2), "nhd",
                                               x["v"].unsqueeze(1), s))),
        # fp32 inputs into fp32 caches; vLLM's paged-attention layout (K chunked by 16 bytes,
        # V d-major); fp32 into fp8 at a head dim that is not a multiple of 8.
        Case("paged_kv_nhd_fp32", {"k": ((H, D), torch.float32), "v": ((H, D), torch.float32)},
             lambda: [torch.full((PAGES, P, H, D), 1.5, device=dev) for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(x["k"], x["v"], s, c[0], c[1],
                                                   num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0], "nhd", x["k"], s),
                              ref.ref_paged_kv(e[1], "nhd", x["v"], s))),
        Case("paged_kv_paged_attention_bf16", kv,
             lambda: [torch.full((PAGES, H, D // 8, P, 8), 1.5, dtype=bf, device=dev),
                      torch.full((PAGES, H, D, P), 1.5, dtype=bf, device=dev)],
             lambda x, s, n, c: cst.store_paged_kv(x["k"], x["v"], s, c[0], c[1],
                                                   layout="paged_attention",
                                                   num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0], "paged_attention", x["k"], s),
                              ref.ref_paged_kv(e[1], "paged_attention", x["v"], s,
                                               is_key=False))),
        Case("paged_kv_d100_fp32_e4m3", {"k": ((H, 100), torch.float32),
                                         "v": ((H, 100), torch.float32)},
             lambda: [torch.zeros((PAGES, P, H, 100), dtype=torch.float8_e4m3fn, device=dev)
                      for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(
                 x["k"], x["v"], s, c[0], c[1], k_scale=head_scales[0], v_scale=head_scales[1],
                 num_tokens_non_padded=n),
             lambda e, x, s: (ref.ref_paged_kv(e[0], "nhd", x["k"], s, head_scales[0]),
                              ref.ref_paged_kv(e[1], "nhd", x["v"], s, head_scales[1]))),
        # NVFP4: uint8 codes [.., D / 2] and e4m3 block scales [.., D / 16] in the same layout,
        # under device global scales (per head; per tensor).
        Case("paged_kv_nhd_nvfp4_per_head", kv,
             lambda: [poison(torch, dev, PAGES, P, H, D // 2) for _ in range(2)] +
                     [poison(torch, dev, PAGES, P, H, D // 16).view(torch.float8_e4m3fn)
                      for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(
                 x["k"], x["v"], s, c[0], c[1], k_scale=head_scales[0], v_scale=head_scales[1],
                 num_tokens_non_padded=n, key_block_scale=c[2], value_block_scale=c[3]),
             lambda e, x, s: (ref.ref_paged_kv_nvfp4(e[0], e[2], "nhd", x["k"], s,
                                                     head_scales[0]),
                              ref.ref_paged_kv_nvfp4(e[1], e[3], "nhd", x["v"], s,
                                                     head_scales[1]))),
        Case("paged_kv_hnd_nvfp4_fp32", {"k": ((H, D), torch.float32),
                                         "v": ((H, D), torch.float32)},
             lambda: [poison(torch, dev, PAGES, H, P, D // 2) for _ in range(2)] +
                     [poison(torch, dev, PAGES, H, P, D // 16) for _ in range(2)],
             lambda x, s, n, c: cst.store_paged_kv(
                 x["k"], x["v"], s, c[0], c[1], layout="hnd", kv_cache_dtype="nvfp4",
                 k_scale=head_scales[0][:1], v_scale=head_scales[1][:1], num_tokens_non_padded=n,
                 key_block_scale=c[2], value_block_scale=c[3]),
             lambda e, x, s: (ref.ref_paged_kv_nvfp4(e[0], e[2], "hnd", x["k"], s,
                                                     head_scales[0][:1]),
                              ref.ref_paged_kv_nvfp4(e[1], e[3], "hnd", x["v"], s,
                                                     head_scales[1][:1])),
             "int32"),
    ]
    return cases


CASE_NAMES = ["index_k_bf16", "index_k_fp8_amax", "index_k_fp8_pow2", "index_k_fp4_even",
              "index_k_fp4_toward_zero", "fused_v4_index_fp8", "mla_v32_amax",
              "fused_v41_index_fp4", "mla_v41_fp4", "paged_kv_nhd_bf16",
              "paged_kv_hnd_fp8_e4m3_per_head", "paged_kv_nhd_fp16_e5m2_uint8",
              "paged_kv_flashinfer_stacked", "paged_kv_mla576", "paged_kv_nhd_fp32",
              "paged_kv_paged_attention_bf16", "paged_kv_d100_fp32_e4m3",
              "paged_kv_nhd_nvfp4_per_head", "paged_kv_hnd_nvfp4_fp32"]


def bytes_of(t):
    return t.contiguous().view(-1).view(__import__("torch").uint8)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_padded_graph_replay_matches_reference(env, name):
    torch, cst, dev = env
    case = next(c for c in make_cases(torch, cst, dev) if c.name == name)
    slot_dtype = getattr(torch, case.slot_dtype)
    inputs = {k: torch.randn((B,) + shape, device=dev).to(dtype)
              for k, (shape, dtype) in case.inputs.items()}
    slots = torch.arange(B, dtype=slot_dtype, device=dev)
    n = torch.full((1,), B, dtype=torch.int32, device=dev)
    caches = case.caches()
    case.store(inputs, slots, n, caches)  # warm-up (eager), then capture once at B rows
    torch.cuda.synchronize()
    expected = [c.clone() for c in caches]
    case.reference(expected, inputs, slots.long())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        case.store(inputs, slots, n, caches)
    for step, real in enumerate([32, 17, 5, 0, 1, 9, 32]):
        padding = ("stale", "zero", "minus_one")[step % 3]
        fresh = torch.randperm(CAPACITY, device=dev)[:real].to(slot_dtype)
        pad = {"stale": slots[real:].clone(), "zero": torch.zeros(B - real, dtype=slot_dtype, device=dev),
               "minus_one": torch.full((B - real,), -1, dtype=slot_dtype, device=dev)}[padding]
        slots.copy_(torch.cat([fresh, pad]))
        for t in inputs.values():
            t.copy_(torch.randn(t.shape, device=dev) * 2.0 ** (step - 3))
            t[real:] = float("nan")
        n.fill_(real)
        graph.replay()
        torch.cuda.synchronize()
        case.reference(expected, {k: v[:real] for k, v in inputs.items()}, slots[:real].long())
        for i, (got, want) in enumerate(zip(caches, expected)):
            g, w = bytes_of(got), bytes_of(want)
            bad = (g != w).nonzero()
            assert bad.numel() == 0, (f"{name} cache {i}, replay {step} (n={real}, padding "
                                      f"{padding}): {bad.shape[0]} bytes differ, first at byte "
                                      f"{bad[0].item()}")


def test_direct_and_bound_paths_match_op_path(env):
    torch, cst, dev = env
    k = torch.randn(40, 128, device=dev).bfloat16()
    slots = torch.randperm(CAPACITY, device=dev)[:40]
    a, b, d = (poison(torch, dev, PAGES, P * 68) for _ in range(3))
    cst.store_index_k_fp4(k, slots, a, ties="toward_zero")
    cst.direct.store_index_k_fp4(k, slots, b, ties="toward_zero")
    bound = cst.bind("store_index_k_fp4", k, slots, d, ties="toward_zero")
    bound()
    expected = poison(torch, dev, PAGES, P * 68)
    ref.ref_index_k_fp4(expected, P, k, slots, False)
    assert torch.equal(a, expected) and torch.equal(b, expected) and torch.equal(d, expected)
    k.copy_(torch.randn(40, 128, device=dev).bfloat16())  # new values in the bound buffers
    bound()
    ref.ref_index_k_fp4(expected, P, k, slots, False)
    assert torch.equal(d, expected)


def test_torch_compile_fullgraph(env):
    torch, cst, dev = env
    v4_page = (584 * P + 575) // 576 * 576

    def decode_step(hidden, slots, n, kv_cache, index_cache, key_cache, value_cache):
        nope = hidden[:, :448] * 2.0
        rope = hidden[:, 448:512]
        cst.fused_store_cache(nope, rope, slots, kv_cache, index_k=hidden[:, 512:640],
                              index_cache=index_cache, num_tokens_non_padded=n)
        kv = hidden[:, :1024].view(-1, 8, 128)
        cst.store_paged_kv(kv[:, :4], kv[:, 4:], slots, key_cache, value_cache,
                           num_tokens_non_padded=n)
        return hidden.float().sum()

    compiled = torch.compile(decode_step, fullgraph=True)
    hidden = torch.randn(B, 1024, device=dev).bfloat16()
    slots = torch.randperm(CAPACITY, device=dev)[:B]
    slots[20:] = -1
    n = torch.tensor([24], dtype=torch.int32, device=dev)

    def caches():
        return [poison(torch, dev, PAGES, v4_page), poison(torch, dev, PAGES, P * 132),
                torch.zeros(PAGES, P, 4, 128, dtype=torch.bfloat16, device=dev),
                torch.zeros(PAGES, P, 4, 128, dtype=torch.bfloat16, device=dev)]

    eager, traced = caches(), caches()
    s_eager = decode_step(hidden, slots, n, *eager)
    s_traced = compiled(hidden, slots, n, *traced)
    torch.cuda.synchronize()
    assert torch.allclose(s_eager, s_traced)  # a reduction: the compiled order may differ
    for a, b in zip(eager, traced):
        assert torch.equal(a, b)
    assert not torch.equal(traced[0], poison(torch, dev, PAGES, v4_page))  # it did store


def test_opcheck(env):
    torch, cst, dev = env
    k = torch.randn(8, 128, device=dev).bfloat16()
    slots = torch.randperm(CAPACITY, device=dev)[:8]
    n = torch.tensor([6], dtype=torch.int32, device=dev)
    diag = torch.zeros(2, dtype=torch.int64, device=dev)
    nope, rope = torch.randn(8, 448, device=dev).bfloat16(), torch.randn(8, 64, device=dev).bfloat16()
    v41_page = (528 * P + 511) // 512 * 512
    kk = torch.randn(8, 4, 128, device=dev).bfloat16()
    # The ops' arguments in schema order (cachestore/torch's argument tables).
    samples = [
        (cst.ops.store_index_k_bf16,
         (k, slots, torch.zeros(CAPACITY, 128, dtype=torch.bfloat16, device=dev), n, -1, diag,
          False)),
        (cst.ops.store_index_k_fp4,
         (k, slots, poison(torch, dev, PAGES, P * 68), P, 1, n, -1, 0, 1, None, False)),
        (cst.ops.store_index_k_fp8,
         (k, slots, poison(torch, dev, PAGES, P * 132), P, 0, n, -1, 0, 1, diag, False)),
        (cst.ops.fused_store_cache,
         (nope, rope, slots, poison(torch, dev, PAGES, v41_page), 2, P, 1, k, slots,
          poison(torch, dev, PAGES, P * 68), 1, P, 0, n, -1, -1, 0, 1, diag, False)),
        (cst.ops.store_paged_kv,
         (kk, kk, slots, torch.zeros(PAGES, P, 4, 128, dtype=torch.bfloat16, device=dev),
          torch.zeros(PAGES, P, 4, 128, dtype=torch.bfloat16, device=dev), 0, None, None, None,
          n, -1, 0, 1, diag, False)),
        (cst.ops.store_paged_kv,  # RoPE: Q rotated in place, the rotated K into key_out
         (kk, kk, slots, torch.zeros(PAGES, P, 4, 128, dtype=torch.bfloat16, device=dev),
          torch.zeros(PAGES, P, 4, 128, dtype=torch.bfloat16, device=dev), 0, None, None, None,
          n, -1, 0, 1, torch.zeros(3, dtype=torch.int64, device=dev), False, None, None, None,
          None, None, torch.randn(8, 16, 128, device=dev).bfloat16(),
          torch.rand(64, 128, device=dev), torch.randint(0, 64, (8,), device=dev), 64, True, 1,
          None, torch.zeros_like(kk))),
    ]
    for op, args in samples:
        torch.library.opcheck(op, args)
    # CPU tensors are checked, then refused naming the first one: no kernel sees a host pointer.
    with pytest.raises(ValueError, match="^k is on cpu"):
        cst.ops.store_index_k_bf16(k.cpu(), slots.cpu(), torch.zeros(CAPACITY, 128, dtype=torch.bfloat16),
                                   None, -1, None, False)


def test_shares_streams_pointers_and_graphs_with_torch(env):
    torch, cst, dev = env
    import cachestore
    assert cachestore.query_device(dev.index or 0)[0] in ("hopper", "blackwell", "portable")
    side = torch.cuda.Stream()
    k = torch.empty(64, 128, device=dev, dtype=torch.bfloat16)
    slots = torch.empty(64, dtype=torch.int64, device=dev)
    cache = torch.zeros(CAPACITY, 128, dtype=torch.bfloat16, device=dev)
    with torch.cuda.stream(side):
        # torch writes the inputs, cachestore stores them, torch reads the cache: all queued on
        # one non-default stream, no synchronization between them.
        k.copy_(torch.arange(64 * 128, device=dev).view(64, 128).bfloat16())
        slots.copy_(torch.randperm(CAPACITY, device=dev)[:64])
        cst.store_index_k_bf16(k, slots, cache)
        gathered = cache[slots].clone()
    side.synchronize()
    assert torch.equal(gathered, k)
    # A graph mixing torch kernels and the store, replayed on the side stream.
    g = torch.cuda.CUDAGraph()
    n = torch.tensor([64], dtype=torch.int32, device=dev)
    with torch.cuda.graph(g, stream=side):
        k.mul_(2)
        cst.store_index_k_bf16(k, slots, cache, num_tokens_non_padded=n)
        out = cache[slots] + 0
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, k)


def test_native_ops_on_this_gpu(env):
    # gpu-check runs these tests with CACHESTORE_TORCH_BACKEND=native: the ops are the C++ ones.
    torch, cst, dev = env
    if os.environ.get("CACHESTORE_TORCH_BACKEND") == "native":
        assert cst.backend == "native", cst.backend_detail


@pytest.mark.skipif(os.environ.get("CACHESTORE_TORCH_BACKEND") == "python",
                    reason="this is the run under the Python ops")
def test_python_ops_pass_the_same_gpu_tests():
    # The fallback path on the GPU: this module again in a fresh interpreter with the ops
    # defined in Python (one process holds one definition of torch.ops.cachestore).
    run_under_python_ops(__file__, "test_python_ops_pass_the_same_gpu_tests")


def test_refused_call_writes_nothing(env):
    torch, cst, dev = env
    import cachestore
    k = torch.randn(8, 128, device=dev).bfloat16()
    slots = torch.randperm(CAPACITY, device=dev)[:8]
    # Page strides (stride(0)) the layouts cannot use: the library refuses, nothing is written.
    big = poison(torch, dev, PAGES, P * 132 + 2)
    view = big[:, : P * 132]
    before = big.clone()
    with pytest.raises(cachestore.CachestoreError, match="page_stride_bytes"):
        cst.store_index_k_fp8(k, slots, view, page_size=P)  # 2114 bytes: the fp8 layout needs a multiple of 4
    with pytest.raises(cachestore.CachestoreError, match="kv_cache.page_stride_bytes"):
        cst.fused_store_cache(torch.randn(8, 448, device=dev).bfloat16(),
                              torch.randn(8, 64, device=dev).bfloat16(), slots,
                              poison(torch, dev, PAGES, 37440 + 8)[:, :37440], page_size=64)
    torch.cuda.synchronize()
    assert torch.equal(big, before)


def page_table_rows(torch, dev, indptr, pages, rows, real):
    """A page table of requests indptr over a random order of `pages` pages, and `rows` distinct
    (request, position) pairs of it (distinct slots: duplicates land in either order); rows from
    `real` on are padding (batch index -1). Returns the batch indices, positions, page ids and the
    slot mapping the table describes (-1 for padding)."""
    order = torch.randperm(pages, device=dev).int()
    entry = torch.randperm(int(indptr[-1]) * P, device=dev)[:rows]
    table_page = entry // P
    batch = (torch.searchsorted(indptr, table_page.int(), right=True) - 1).int()
    positions = ((table_page - indptr[batch.long()]) * P + entry % P).int()
    slots = order[table_page].long() * P + (entry % P).long()
    batch[real:], slots[real:] = -1, -1
    return batch, positions, order, slots


def test_store_paged_kv_page_table_matches_its_slot_mapping(env):
    """The page-table slot source writes what the slot mapping it describes writes, with a real
    row whose lookup fails skipped and counted and padded rows past the count untouched."""
    torch, cst, dev = env
    pages, rows, real = 32, 24, 20
    for layout, cache_dtype in (("nhd", torch.bfloat16), ("hnd", torch.float8_e4m3fn)):
        indptr = torch.tensor([0, 5, 9, 16, 30], dtype=torch.int32, device=dev)
        # Padding has batch index -1, where FlashInfer would read indptr[-1].
        batch, positions, order, slots = page_table_rows(torch, dev, indptr, pages, rows, real)
        batch[7] = 4  # past the batch: skipped, counted
        slots[7] = -1
        key = torch.randn(rows, 8, 128, device=dev).bfloat16()
        value = torch.randn(rows, 8, 128, device=dev).bfloat16()
        shape = (pages, P, 8, 128) if layout == "nhd" else (pages, 8, P, 128)
        scale = torch.tensor([0.02], device=dev) if cache_dtype != torch.bfloat16 else None
        n = torch.tensor([real], dtype=torch.int32, device=dev)
        out = []
        for table in (True, False):
            bytes_shape = (*shape[:-1], shape[-1] * cache_dtype.itemsize)
            caches = [torch.full(bytes_shape, 0x5A, dtype=torch.uint8, device=dev).view(
                cache_dtype) for _ in range(2)]
            diagnostics = torch.zeros(2, dtype=torch.int64, device=dev)
            extra = {"positions": positions, "kv_indptr": indptr, "kv_indices": order} \
                if table else {}
            cst.store_paged_kv(key, value, batch if table else slots, *caches, layout=layout,
                               k_scale=scale, v_scale=scale, num_tokens_non_padded=n,
                               diagnostics=diagnostics, **extra)
            out.append((caches, diagnostics))
        torch.cuda.synchronize()
        (t_caches, t_diag), (s_caches, s_diag) = out
        for a, b in zip(t_caches, s_caches):
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), layout
        assert t_diag.tolist() == [1, 0] and s_diag.tolist() == [0, 0], layout


def test_deepseek_stores_page_table_matches_its_slot_mapping(env):
    """The index-K and MLA stores through a page table write what the slot mapping it describes
    writes (the fused store: one table for both caches)."""
    torch, cst, dev = env
    rows, real = 24, 21
    indptr = torch.tensor([0, 2, 3, 6, 8], dtype=torch.int32, device=dev)  # PAGES pages
    batch, positions, order, slots = page_table_rows(torch, dev, indptr, PAGES, rows, real)
    table = {"positions": positions, "kv_indptr": indptr, "kv_indices": order}
    n = torch.tensor([real], dtype=torch.int32, device=dev)
    k = torch.randn(rows, 128, device=dev).bfloat16()
    nope = torch.randn(rows, 448, device=dev).bfloat16()
    rope = torch.randn(rows, 64, device=dev).bfloat16()
    v4_page = (584 * P + 575) // 576 * 576
    stores = {
        "index_k_fp8": ([P * 132], lambda s, c, extra: cst.store_index_k_fp8(
            k, s, c[0], num_tokens_non_padded=n, **extra)),
        "index_k_fp4": ([P * 68], lambda s, c, extra: cst.store_index_k_fp4(
            k, s, c[0], ties="toward_zero", num_tokens_non_padded=n, **extra)),
        "fused_v4_fp8": ([v4_page, P * 132], lambda s, c, extra: cst.fused_store_cache(
            nope, rope, s, c[0], index_k=k, index_cache=c[1], num_tokens_non_padded=n,
            **extra)),
    }
    for name, (page_bytes, store) in stores.items():
        out = []
        for with_table in (True, False):
            caches = [poison(torch, dev, PAGES, b) for b in page_bytes]
            store(batch if with_table else slots, caches, table if with_table else {})
            out.append(caches)
        torch.cuda.synchronize()
        for a, b in zip(*out):
            assert torch.equal(a, b), name
        assert not torch.equal(out[0][0], poison(torch, dev, PAGES, page_bytes[0])), name


# (input dtype, cache: 'auto' | 'fp8_e4m3' | 'nvfp4', layout, is_neox, rope_rounding, cos/sin
# dtype, rotary_dim, positions dtype, where Q and the rotated K go)
ROPE_CASES = {
    "bf16_auto_nhd_neox_input_type": (
        "bfloat16", "auto", "nhd", True, "input_type", "float32", 128, "int64", "in_place"),
    "fp16_fp8_hnd_gptj_fp32_partial": (
        "float16", "fp8_e4m3", "hnd", False, "fp32", "float16", 64, "int32", "out"),
    "bf16_nvfp4_nhd_neox_fp32": (
        "bfloat16", "nvfp4", "nhd", True, "fp32", "bfloat16", 128, "int64", "key_in_place"),
    "fp32_auto_hnd_gptj_input_type_partial": (
        "float32", "auto", "hnd", False, "input_type", "float32", 32, "int32", "in_place"),
}


@pytest.mark.parametrize("name", sorted(ROPE_CASES))
def test_store_paged_kv_rope_padded_replay_matches_reference(env, name):
    """RoPE in the store under padded graph replay: caches, Q and the rotated K compared byte for
    byte with the reference; a real row whose position is outside the cos/sin cache writes
    nothing and is counted; padded rows (NaN junk, any position) rotate and write nothing."""
    torch, cst, dev = env
    dtype_name, cache, layout, is_neox, rounding, cs_name, rot, pos_name, out = ROPE_CASES[name]
    dtype, cs_dtype, pos_dtype = (getattr(torch, n) for n in (dtype_name, cs_name, pos_name))
    H, HQ, D, MAX_POS = 8, 32, 128, 4096
    cos_sin = (torch.rand(MAX_POS, rot, device=dev) * 2 - 1).to(cs_dtype)
    key, value = (torch.randn(B, H, D, device=dev).to(dtype) for _ in range(2))
    query = torch.randn(B, HQ, D, device=dev).to(dtype)
    query_out = torch.full_like(query, 7.0) if out == "out" else None
    key_out = key if out == "key_in_place" else torch.full_like(key, -3.0)
    slots = torch.randperm(CAPACITY, device=dev)[:B]
    positions = torch.randint(0, MAX_POS, (B,), device=dev).to(pos_dtype)
    n = torch.full((1,), B, dtype=torch.int32, device=dev)
    diagnostics = torch.zeros(3, dtype=torch.int64, device=dev)
    shape = (PAGES, P, H, D) if layout == "nhd" else (PAGES, H, P, D)
    scale = {} if cache == "auto" else {
        "k_scale": torch.rand(H, device=dev) * 0.05 + 0.01,
        "v_scale": torch.rand(H, device=dev) * 0.05 + 0.01}
    if cache == "nvfp4":
        caches = [poison(torch, dev, *shape[:-1], D // 2) for _ in range(2)]
        block = [poison(torch, dev, *shape[:-1], D // 16) for _ in range(2)]
        scale.update(key_block_scale=block[0], value_block_scale=block[1])
    elif cache == "fp8_e4m3":
        caches = [poison(torch, dev, *shape).view(torch.float8_e4m3fn) for _ in range(2)]
    else:
        caches = [poison(torch, dev, *shape[:-1], D * dtype.itemsize).view(dtype)
                  for _ in range(2)]
    tracked = caches + (block if cache == "nvfp4" else [])

    def store():
        cst.store_paged_kv(key, value, slots, caches[0], caches[1], layout=layout,
                           num_tokens_non_padded=n, diagnostics=diagnostics, query=query,
                           cos_sin_cache=cos_sin, rope_positions=positions, rotary_dim=rot,
                           is_neox=is_neox, rope_rounding=rounding, query_out=query_out,
                           key_out=key_out, **scale)

    store()  # warm-up (eager), then capture once at B rows
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        store()
    for step, real in enumerate([32, 17, 5, 0, 1, 9, 32]):
        padding = ("stale", "zero", "minus_one")[step % 3]
        fresh = torch.randperm(CAPACITY, device=dev)[:real]
        pad = {"stale": slots[real:].clone(), "zero": torch.zeros(B - real, dtype=slots.dtype, device=dev),
               "minus_one": torch.full((B - real,), -1, dtype=slots.dtype, device=dev)}[padding]
        slots.copy_(torch.cat([fresh, pad]))
        positions.copy_(torch.randint(0, MAX_POS, (B,), device=dev))
        positions[real:] = torch.randint(-5, 2 * MAX_POS, (B - real,), device=dev)
        skipped = sorted({0, real - 1}) if step % 2 and real > 0 else []
        for r, p in zip(skipped, (MAX_POS, -1)):  # real rows past either end of the cache
            positions[r] = p
        for t in (key, value, query):
            t.copy_(torch.randn(t.shape, device=dev) * 2.0 ** (step - 3))
            t[real:] = float("nan")
        if key_out is not key:
            key_out.fill_(-3.0)
        if query_out is not None:
            query_out.fill_(7.0)
        diagnostics.zero_()
        n.fill_(real)
        expected = [t.clone() for t in tracked]
        q_expected = (query if query_out is None else query_out).clone()
        k_expected = key_out.clone()
        rows = torch.tensor([r for r in range(real) if r not in skipped], dtype=torch.long,
                            device=dev)
        k_rot = ref.ref_rope(key[rows], positions[rows], cos_sin, rot, is_neox, rounding)
        q_expected[rows] = ref.ref_rope(query[rows], positions[rows], cos_sin, rot, is_neox,
                                        rounding)
        k_expected[rows] = k_rot
        if cache == "nvfp4":
            for i, x in enumerate((k_rot, value[rows])):
                ref.ref_paged_kv_nvfp4(expected[i], expected[2 + i], layout, x, slots[rows],
                                       scale["k_scale" if i == 0 else "v_scale"])
        else:
            for i, x in enumerate((k_rot, value[rows])):
                ref.ref_paged_kv(expected[i], layout, x, slots[rows],
                                 scale.get("k_scale" if i == 0 else "v_scale"), True)
        graph.replay()
        torch.cuda.synchronize()
        where = f"{name}, replay {step} (n={real}, padding {padding})"
        for i, (got, want) in enumerate(zip(tracked, expected)):
            assert torch.equal(bytes_of(got), bytes_of(want)), f"{where}: cache {i}"
        assert torch.equal(bytes_of(query if query_out is None else query_out),
                           bytes_of(q_expected)), f"{where}: Q"
        assert torch.equal(bytes_of(key_out), bytes_of(k_expected)), f"{where}: key_out"
        assert diagnostics.tolist() == [0, 0, len(skipped)], where


@pytest.mark.parametrize("layout,is_neox,rounding,index", [
    ("v4", False, "input_type", "fp8"), ("v32", False, "fp32", None),
    ("v41", True, "fp32", "fp4"), ("v41_fp4", False, "input_type", None)])
def test_fused_store_cache_rope_matches_reference(env, layout, is_neox, rounding, index):
    """fused_store_cache with RoPE: the rows' RoPE part rotated before the layout stores it,
    DeepSeek's q_pe (q[..., 128:]) rotated in place, the rotated RoPE part into key_out; a real
    row past the cos/sin cache stores no record (its index-K is stored) and is counted; rows past
    the count write nothing."""
    torch, cst, dev = env
    rows, real, heads, max_pos = 24, 20, 16, 2048
    nope_dim = 512 if layout == "v32" else 448
    nope = torch.randn(rows, nope_dim, device=dev).bfloat16()
    rope = torch.randn(rows, 64, device=dev).bfloat16()
    k = torch.randn(rows, 128, device=dev).bfloat16()
    q = torch.randn(rows, heads, 192, device=dev).bfloat16()
    cos_sin = (torch.rand(max_pos, 64, device=dev) * 2 - 1)
    positions = torch.randint(0, max_pos, (rows,), device=dev)
    positions[2] = max_pos  # a real row past the cache
    slots = torch.randperm(CAPACITY, device=dev)[:rows]
    page = {"v4": (584 * P + 575) // 576 * 576, "v32": 656 * P,
            "v41": (528 * P + 511) // 512 * 512, "v41_fp4": (288 * P + 255) // 256 * 256}[layout]
    cache = poison(torch, dev, PAGES, page)
    index_cache = poison(torch, dev, PAGES, P * (68 if index == "fp4" else 132))
    key_out = torch.full((rows, 64), 3.0, dtype=torch.bfloat16, device=dev)
    n = torch.tensor([real], dtype=torch.int32, device=dev)
    diagnostics = torch.zeros(3, dtype=torch.int64, device=dev)
    expected, q_want, k_want = cache.clone(), q.clone(), key_out.clone()
    index_want = index_cache.clone()
    ok = torch.tensor([r for r in range(real) if r != 2], device=dev)
    rotated = ref.ref_rope(rope[ok].unsqueeze(1), positions[ok], cos_sin, 64, is_neox,
                           rounding).squeeze(1)
    ref.ref_mla(expected, P, layout, nope[ok], rotated, slots[ok])
    q_want[ok, :, 128:] = ref.ref_rope(q[ok, :, 128:], positions[ok], cos_sin, 64, is_neox,
                                       rounding)
    k_want[ok] = rotated
    extra = {}
    if index is not None:
        extra = dict(index_k=k, index_cache=index_cache, index_format=index)
        if index == "fp4":
            ref.ref_index_k_fp4(index_want, P, k[:real], slots[:real])
        else:
            ref.ref_index_k_fp8(index_want, P, k[:real], slots[:real])
    cst.fused_store_cache(nope, rope, slots, cache, layout=layout, num_tokens_non_padded=n,
                          diagnostics=diagnostics, query=q[..., 128:], cos_sin_cache=cos_sin,
                          rope_positions=positions, is_neox=is_neox, rope_rounding=rounding,
                          key_out=key_out, **extra)
    torch.cuda.synchronize()
    assert torch.equal(cache, expected), layout
    assert torch.equal(index_cache, index_want), layout
    assert torch.equal(q.view(torch.int16), q_want.view(torch.int16)), layout
    assert torch.equal(key_out.view(torch.int16), k_want.view(torch.int16)), layout
    assert diagnostics.tolist() == [0, 0, 1], layout
