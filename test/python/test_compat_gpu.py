"""cachestore.compat on the GPU: each peer entry point against a PyTorch reference of the
peer's semantics (written from its documented behaviour and the contract's formulas,
torch_reference.py), whole caches compared byte for byte, padded slots, more input rows than
slots, and a padded CUDA-graph replay through num_tokens_non_padded."""
import pytest

from conftest import need_gpu

need_gpu()
import torch_reference as ref  # noqa: E402

P, PAGES, H, D = 16, 8, 8, 128
CAPACITY = P * PAGES


@pytest.fixture
def env():
    import torch

    from cachestore.compat import vllm
    torch.manual_seed(4321)
    return torch, vllm, torch.device("cuda")


def test_sglang_store_cache(env):
    torch, _, dev = env
    from cachestore.compat import sglang
    for dtype, index_dtype in ((torch.bfloat16, torch.int32), (torch.float32, torch.int64)):
        k = torch.randn(20, H * D, device=dev).to(dtype)
        v = torch.randn(20, H, D, device=dev).to(dtype)  # [T, H, D] rows too
        indices = torch.randperm(CAPACITY, device=dev)[:20].to(index_dtype)
        indices[18] = CAPACITY + 5  # past the cache: skipped, counted
        diagnostics = torch.zeros(2, dtype=torch.int64, device=dev)
        k_cache = torch.full((CAPACITY, H * D), 1.5, dtype=dtype, device=dev)
        v_cache = torch.full((CAPACITY, H * D), -2.5, dtype=dtype, device=dev)
        expected = [k_cache.clone(), v_cache.clone()]
        sglang.store_cache(k, v, k_cache, v_cache, indices, row_bytes=H * D * 2,
                           diagnostics=diagnostics)
        keep = torch.arange(20, device=dev) != 18
        expected[0][indices[keep].long()] = k[keep]
        expected[1][indices[keep].long()] = v.flatten(1)[keep]
        torch.cuda.synchronize()
        assert torch.equal(k_cache, expected[0]) and torch.equal(v_cache, expected[1]), dtype
        assert diagnostics.tolist()[0] >= 1  # the out-of-range index was counted


def slots_with_padding(torch, dev, rows, real):
    slots = torch.randperm(CAPACITY, device=dev)[:rows]
    slots[real:] = -1  # vLLM's padding
    return slots


def test_vllm_reshape_and_cache_flash(env):
    torch, vllm, dev = env
    for dtype, cache_dtype, kv_dtype in ((torch.bfloat16, torch.bfloat16, "auto"),
                                         (torch.float16, torch.uint8, "fp8"),
                                         (torch.bfloat16, torch.float8_e5m2, "fp8_e5m2"),
                                         (torch.float32, torch.float32, "auto")):
        key = torch.randn(24, H, D, device=dev).to(dtype)  # 24 rows, 20 slots: the first 20
        value = torch.randn(24, H, D, device=dev).to(dtype)
        slots = slots_with_padding(torch, dev, 20, 17)
        k_scale, v_scale = torch.tensor([0.05], device=dev), torch.tensor([0.02], device=dev)
        caches = [torch.full((PAGES, P, H, D), 0x5A, dtype=torch.uint8, device=dev).view(
            cache_dtype) if cache_dtype.itemsize == 1 else
            torch.full((PAGES, P, H, D), 1.5, dtype=cache_dtype, device=dev) for _ in range(2)]
        expected = [c.clone() for c in caches]
        vllm.reshape_and_cache_flash(key, value, caches[0], caches[1], slots, kv_dtype, k_scale,
                                     v_scale)
        real = slots[:17]
        view = (lambda t: t.view(torch.float8_e4m3fn)) if cache_dtype == torch.uint8 else \
            (lambda t: t)
        fp8 = kv_dtype != "auto"
        ref.ref_paged_kv(view(expected[0]), "nhd", key[:17], real, k_scale if fp8 else None)
        ref.ref_paged_kv(view(expected[1]), "nhd", value[:17], real, v_scale if fp8 else None)
        torch.cuda.synchronize()
        for got, want in zip(caches, expected):
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), kv_dtype


def test_vllm_reshape_and_cache_paged_attention(env):
    torch, vllm, dev = env
    for kv_dtype, cache_dtype, x in (("auto", torch.bfloat16, 8), ("fp8", torch.uint8, 16)):
        key = torch.randn(20, H, D, device=dev).bfloat16()
        value = torch.randn(20, H, D, device=dev).bfloat16()
        slots = slots_with_padding(torch, dev, 20, 13)
        k_cache = torch.zeros((PAGES, H, D // x, P, x), dtype=cache_dtype, device=dev)
        v_cache = torch.zeros((PAGES, H, D, P), dtype=cache_dtype, device=dev)
        scale = torch.tensor([0.03], device=dev)
        expected = [k_cache.clone(), v_cache.clone()]
        vllm.reshape_and_cache(key, value, k_cache, v_cache, slots, kv_dtype, scale, scale)
        as_fp8 = (lambda t: t.view(torch.float8_e4m3fn)) if kv_dtype == "fp8" else (lambda t: t)
        s = scale if kv_dtype == "fp8" else None
        ref.ref_paged_kv(as_fp8(expected[0]), "paged_attention", key[:13], slots[:13], s)
        ref.ref_paged_kv(as_fp8(expected[1]), "paged_attention", value[:13], slots[:13], s,
                         is_key=False)
        torch.cuda.synchronize()
        assert torch.equal(k_cache, expected[0]) and torch.equal(v_cache, expected[1]), kv_dtype


def test_vllm_concat_and_cache_mla(env):
    torch, vllm, dev = env
    kv_c = torch.randn(20, 512, device=dev).bfloat16()
    k_pe = torch.randn(20, 64, device=dev).bfloat16()
    slots = slots_with_padding(torch, dev, 20, 15)
    scale = torch.tensor([0.04], device=dev)
    # auto: bf16 rows; fp8: e4m3 rows under one scale.
    for kv_dtype, dtype in (("auto", torch.bfloat16), ("fp8", torch.uint8)):
        cache = torch.zeros((PAGES, P, 576), dtype=dtype, device=dev)
        expected = cache.clone()
        vllm.concat_and_cache_mla(kv_c, k_pe, cache, slots, kv_dtype, scale)
        e = expected.view(torch.float8_e4m3fn) if dtype == torch.uint8 else expected
        s = scale if kv_dtype == "fp8" else None
        ref.ref_paged_kv(e[..., :512].unsqueeze(2), "nhd", kv_c[:15].unsqueeze(1), slots[:15], s)
        ref.ref_paged_kv(e[..., 512:].unsqueeze(2), "nhd", k_pe[:15].unsqueeze(1), slots[:15], s)
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), kv_dtype
    # fp8_ds_mla: the 656-byte record (cachestore's v32, amax rule).
    cache = torch.full((PAGES, P, 656), 0xAB, dtype=torch.uint8, device=dev)
    expected = cache.clone()
    vllm.concat_and_cache_mla(kv_c, k_pe, cache, slots, "fp8_ds_mla", scale)
    ref.ref_mla(expected.view(PAGES, -1), P, "v32", kv_c[:15], k_pe[:15], slots[:15], "amax")
    torch.cuda.synchronize()
    assert torch.equal(cache, expected)


def test_vllm_indexer_k_quant_and_cache(env):
    torch, vllm, dev = env
    k = torch.randn(20, 128, device=dev).bfloat16()
    slots = slots_with_padding(torch, dev, 20, 18)
    for fmt, rule in (("ue8m0", "pow2"), ("fp8", "amax")):
        cache = torch.full((PAGES, P, 132), 0xAB, dtype=torch.uint8, device=dev)
        expected = cache.clone()
        vllm.indexer_k_quant_and_cache(k, cache, slots, 128, fmt)
        ref.ref_index_k_fp8(expected.view(PAGES, -1), P, k[:18], slots[:18], rule)
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), fmt
    cache = torch.zeros((PAGES, P, 128), dtype=torch.bfloat16, device=dev)
    expected = cache.clone()
    vllm.indexer_k_quant_and_cache(k, cache, slots, 128, "auto")
    ref.ref_index_k_bf16(expected.view(-1, 128), k[:18], slots[:18])
    torch.cuda.synchronize()
    assert torch.equal(cache, expected)


def test_vllm_padded_graph_replay(env):
    # The peer's call in a CUDA graph captured at 32 rows; each replay stores only the first n
    # (num_tokens_non_padded), whatever the padding slots hold.
    torch, vllm, dev = env
    B = 32
    key = torch.randn(B, H, D, device=dev).bfloat16()
    value = torch.randn(B, H, D, device=dev).bfloat16()
    slots = torch.randperm(CAPACITY, device=dev)[:B]
    n = torch.tensor([B], dtype=torch.int32, device=dev)
    k_cache = torch.zeros((PAGES, P, H, D), dtype=torch.bfloat16, device=dev)
    v_cache = torch.zeros_like(k_cache)
    scale = torch.ones(1, device=dev)
    vllm.reshape_and_cache_flash(key, value, k_cache, v_cache, slots, "auto", scale, scale,
                                 num_tokens_non_padded=n)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        vllm.reshape_and_cache_flash(key, value, k_cache, v_cache, slots, "auto", scale, scale,
                                     num_tokens_non_padded=n)
    for real in (5, 0, 32, 17):
        expected = [k_cache.clone(), v_cache.clone()]
        fresh = torch.randperm(CAPACITY, device=dev)[:B]
        fresh[real:] = fresh[0]  # padding rows aim at a live slot: must not be written
        slots.copy_(fresh)
        key.copy_(torch.randn(B, H, D, device=dev))
        value.copy_(torch.randn(B, H, D, device=dev))
        key[real:] = float("nan")
        n.fill_(real)
        graph.replay()
        ref.ref_paged_kv(expected[0], "nhd", key[:real], fresh[:real])
        ref.ref_paged_kv(expected[1], "nhd", value[:real], fresh[:real])
        torch.cuda.synchronize()
        assert torch.equal(k_cache, expected[0]) and torch.equal(v_cache, expected[1]), real
