"""cachestore.torch's checks before any call: a TypeError / ValueError naming the argument. CPU
tensors are enough (the device is checked after dtype and shape), so these run wherever PyTorch
is installed."""
import pytest

from conftest import need_torch

torch_module = need_torch()


@pytest.fixture
def t():
    import cachestore.torch as cst
    return torch_module, cst


def bf16(torch, *shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


def test_index_k_bf16_checks(t):
    torch, cst = t
    k, slots, cache = bf16(torch, 4, 128), torch.zeros(4, dtype=torch.int64), bf16(torch, 64, 128)
    with pytest.raises(TypeError, match=r"k\.dtype"):
        cst.store_index_k_bf16(k.float(), slots, cache)
    with pytest.raises(TypeError, match=r"slot_mapping\.dtype"):
        cst.store_index_k_bf16(k, slots.float(), cache)
    with pytest.raises(ValueError, match="slot_mapping has 3 entries"):
        cst.store_index_k_bf16(k, slots[:3], cache)
    with pytest.raises(ValueError, match="cache must be"):
        cst.store_index_k_bf16(k, slots, bf16(torch, 64, 64))
    with pytest.raises(ValueError, match="contiguous rows"):
        cst.store_index_k_bf16(bf16(torch, 128, 4).t(), slots, cache)
    with pytest.raises(ValueError, match="num_tokens_non_padded"):
        cst.store_index_k_bf16(k, slots, cache,
                               num_tokens_non_padded=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="diagnostics"):
        cst.store_index_k_bf16(k, slots, cache, diagnostics=torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="k is on cpu"):
        cst.store_index_k_bf16(k, slots, cache)


def test_index_k_fp8_and_fp4_checks(t):
    torch, cst = t
    k, slots = bf16(torch, 4, 128), torch.zeros(4, dtype=torch.int32)
    fp8 = torch.zeros(8, 64 * 132, dtype=torch.uint8)
    fp4 = torch.zeros(8, 64 * 68, dtype=torch.uint8)
    with pytest.raises(TypeError, match=r"cache\.dtype"):
        cst.store_index_k_fp8(k, slots, fp8.float())
    with pytest.raises(ValueError, match="scale_rule"):
        cst.store_index_k_fp8(k, slots, fp8, scale_rule="max")
    with pytest.raises(ValueError, match="pass page_size"):
        cst.store_index_k_fp8(k, slots, torch.zeros(8, 1000, dtype=torch.uint8))
    with pytest.raises(ValueError, match="ties"):
        cst.store_index_k_fp4(k, slots, fp4, ties="up")
    with pytest.raises(ValueError, match="owner_rank"):
        cst.store_index_k_fp4(k, slots, fp4, owner_rank=2, owner_size=2)
    with pytest.raises(ValueError, match="owner_size"):
        cst.store_index_k_fp4(k, slots, fp4, owner_size=3)
    with pytest.raises(ValueError, match="on cpu"):
        cst.store_index_k_fp4(k, slots, fp4)  # well-formed: only the device is wrong


def test_fused_checks(t):
    torch, cst = t
    nope, rope, slots = bf16(torch, 4, 448), bf16(torch, 4, 64), torch.zeros(4, dtype=torch.int64)
    v4 = torch.zeros(8, 37440, dtype=torch.uint8)
    with pytest.raises(ValueError, match="layout"):
        cst.fused_store_cache(nope, rope, slots, v4, layout="v5")
    with pytest.raises(ValueError, match="nope has 448 columns; the layout needs 512"):
        cst.fused_store_cache(nope, rope, slots, v4, layout="v32")
    with pytest.raises(ValueError, match="rope has 2 rows"):
        cst.fused_store_cache(nope, rope[:2], slots, v4)
    with pytest.raises(ValueError, match="index_cache is required"):
        cst.fused_store_cache(nope, rope, slots, v4, index_k=bf16(torch, 4, 128))
    with pytest.raises(TypeError, match="index_slot_mapping.dtype"):
        cst.fused_store_cache(nope, rope, slots, v4, index_k=bf16(torch, 4, 128),
                              index_slot_mapping=slots.int(),
                              index_cache=torch.zeros(8, 64 * 132, dtype=torch.uint8))
    with pytest.raises(ValueError, match="index_format"):
        cst.fused_store_cache(nope, rope, slots, v4, index_k=bf16(torch, 4, 128),
                              index_cache=torch.zeros(8, 64 * 132, dtype=torch.uint8),
                              index_format="fp6")
    with pytest.raises(ValueError, match="kv_cache: no page size"):
        cst.fused_store_cache(nope, rope, slots, v4, layout="v41")
    with pytest.raises(ValueError, match="nope is on cpu"):
        cst.fused_store_cache(nope, rope, slots, torch.zeros(8, 33792, dtype=torch.uint8),
                              layout="v41")


def test_paged_kv_checks(t):
    torch, cst = t
    k, v = bf16(torch, 4, 8, 128), bf16(torch, 4, 8, 128)
    slots = torch.zeros(4, dtype=torch.int64)
    kc, vc = bf16(torch, 10, 16, 8, 128), bf16(torch, 10, 16, 8, 128)
    with pytest.raises(ValueError, match="layout"):
        cst.store_paged_kv(k, v, slots, kc, vc, layout="xyz")
    with pytest.raises(ValueError, match="does not hold value's 4 heads"):
        cst.store_paged_kv(k, bf16(torch, 4, 4, 128), slots, kc, vc)
    with pytest.raises(TypeError, match="value.dtype"):
        cst.store_paged_kv(k, v.half(), slots, kc, vc)
    with pytest.raises(TypeError, match="holds the input type"):
        cst.store_paged_kv(k, v, slots, kc.half(), vc.half())
    fp8 = torch.zeros(10, 16, 8, 128, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="k_scale is required"):
        cst.store_paged_kv(k, v, slots, fp8, fp8.clone())
    with pytest.raises(ValueError, match="v_scale must hold 1 or 8"):
        cst.store_paged_kv(k, v, slots, fp8, fp8.clone(), k_scale=torch.ones(1),
                           v_scale=torch.ones(3))
    u8 = torch.zeros(10, 16, 8, 128, dtype=torch.uint8)
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        cst.store_paged_kv(k, v, slots, u8, u8.clone(), k_scale=torch.ones(1),
                           v_scale=torch.ones(1))
    with pytest.raises(ValueError, match="value_cache given without value"):
        cst.store_paged_kv(k, None, slots, kc, vc)
    with pytest.raises(ValueError, match="key is on cpu"):
        cst.store_paged_kv(k, v, slots, kc, vc)


def test_decode_step_traces_on_fake_cuda_tensors(t):
    # No GPU needed: make_fx and torch.compile(fullgraph=True) trace the stores as the torch ops
    # (metadata checks and fake implementations only; nothing launches).
    torch, cst = t
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(hidden, slots, n, kv_cache, index_cache, key_cache, value_cache):
        cst.fused_store_cache(hidden[:, :448], hidden[:, 448:512], slots, kv_cache,
                              index_k=hidden[:, 512:640], index_cache=index_cache,
                              num_tokens_non_padded=n)
        kv = hidden[:, :1024].view(-1, 8, 128)
        cst.store_paged_kv(kv[:, :4], kv[:, 4:], slots, key_cache, value_cache,
                           num_tokens_non_padded=n)
        cst.store_index_k_fp4(hidden[:, :128], slots, index_cache[:, :64 * 68], ties="toward_zero")
        return hidden.float().sum()

    with FakeTensorMode():
        args = (torch.empty(32, 1024, dtype=torch.bfloat16, device="cuda"),
                torch.empty(32, dtype=torch.int64, device="cuda"),
                torch.empty(1, dtype=torch.int32, device="cuda"),
                torch.empty(8, 37440, dtype=torch.uint8, device="cuda"),
                torch.empty(8, 64 * 132, dtype=torch.uint8, device="cuda"),
                torch.empty(8, 16, 4, 128, dtype=torch.bfloat16, device="cuda"),
                torch.empty(8, 16, 4, 128, dtype=torch.bfloat16, device="cuda"))
        gm = make_fx(step, tracing_mode="fake")(*args)
        ops = [str(n.target) for n in gm.graph.nodes if "cachestore" in str(n.target)]
        assert ops == ["cachestore.fused_store_cache.default", "cachestore.store_paged_kv.default",
                       "cachestore.store_index_k_fp4.default"]
        assert torch.compile(step, fullgraph=True, backend="eager")(*args).shape == ()
        # The checks run while tracing too: a wrong layout is refused before any graph exists.
        with pytest.raises(ValueError, match="nope has 448 columns; the layout needs 512"):
            make_fx(lambda h, s, c: cst.fused_store_cache(h[:, :448], h[:, 448:512], s, c,
                                                          layout="v32"),
                    tracing_mode="fake")(args[0], args[1], args[3])


def test_op_schemas_mark_the_caches_mutated(t):
    torch, cst = t
    schemas = {name: str(getattr(torch.ops.cachestore, name).default._schema)
               for name in ("store_index_k_bf16", "store_index_k_fp8", "store_index_k_fp4",
                            "fused_store_cache", "store_paged_kv")}
    assert "Tensor(a!) cache" in schemas["store_index_k_fp8"]
    assert "Tensor(b!)? diagnostics" in schemas["store_index_k_fp8"]
    assert "Tensor(a!) kv_cache" in schemas["fused_store_cache"]
    assert "Tensor(b!)? index_cache" in schemas["fused_store_cache"]
    assert "Tensor(a!) key_cache, Tensor(b!)? value_cache" in schemas["store_paged_kv"]
    assert all(s.endswith("-> ()") for s in schemas.values())
