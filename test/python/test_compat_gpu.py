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


def test_vllm_concat_and_cache_mla_rope_fused(env):
    # q_pe and k_pe rotated in place (vLLM's arithmetic: each operation in the input dtype), the
    # rotated k_pe after kv_c in the 576-wide rows; q_pe a slice of DeepSeek's q [T, H, 192].
    torch, vllm, dev = env
    rows, real, heads = 20, 15, 16
    positions = torch.randint(0, 4096, (rows,), device=dev)
    positions[3] = 4096  # past the cache: row 3 rotates and stores nothing, and is counted
    cos_sin = (torch.rand(4096, 64, device=dev) * 2 - 1).bfloat16()
    slots = slots_with_padding(torch, dev, rows, real)  # rows past `real`: slot -1
    scale = torch.tensor([0.04], device=dev)
    for kv_dtype, dtype, is_neox in (("auto", torch.bfloat16, False),
                                     ("fp8", torch.uint8, True)):
        q = torch.randn(rows, heads, 192, device=dev).bfloat16()
        q_pe = q[..., 128:]
        k_pe = torch.randn(rows, 64, device=dev).bfloat16()
        kv_c = torch.randn(rows, 512, device=dev).bfloat16()
        cache = torch.full((PAGES, P, 576), 0x5A, dtype=dtype, device=dev)
        expected, q_want, k_want = cache.clone(), q.clone(), k_pe.clone()
        ok = torch.tensor([r for r in range(rows) if r != 3], device=dev)
        k_rot = ref.ref_rope(k_pe[ok].unsqueeze(1), positions[ok], cos_sin, 64, is_neox,
                             "input_type")
        q_want[ok, :, 128:] = ref.ref_rope(q_pe[ok], positions[ok], cos_sin, 64, is_neox,
                                           "input_type")
        k_want[ok] = k_rot.squeeze(1)
        e = expected.view(torch.float8_e4m3fn) if dtype == torch.uint8 else expected
        s = scale if kv_dtype == "fp8" else None
        stored = torch.tensor([r for r in range(real) if r != 3], device=dev)
        ref.ref_paged_kv(e[..., :512].unsqueeze(2), "nhd", kv_c[stored].unsqueeze(1),
                         slots[stored], s)
        ref.ref_paged_kv(e[..., 512:].unsqueeze(2), "nhd", k_want[stored].unsqueeze(1),
                         slots[stored], s)
        diagnostics = torch.zeros(3, dtype=torch.int64, device=dev)
        vllm.concat_and_cache_mla_rope_fused(positions, q_pe, k_pe, kv_c, cos_sin, is_neox,
                                             slots, cache, kv_dtype, scale,
                                             diagnostics=diagnostics)
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), kv_dtype
        assert torch.equal(q.view(torch.int16), q_want.view(torch.int16)), kv_dtype
        assert torch.equal(k_pe.view(torch.int16), k_want.view(torch.int16)), kv_dtype
        assert diagnostics.tolist() == [0, 0, 1], kv_dtype


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


# ---- vLLM's fp8_per_token_head: a scale of each (token, head) computed and written ---------
def test_vllm_fp8_per_token_head(env):
    torch, vllm, dev = env
    from cachestore import torch as cst
    for dtype, cache_dtype, heads, d in ((torch.bfloat16, torch.float8_e4m3fn, H, D),
                                         (torch.float16, torch.uint8, 2, 64),
                                         (torch.float32, torch.float8_e4m3fn, 4, 256)):
        key = (torch.randn(24, heads, d, device=dev) * 3).to(dtype)  # 24 rows, 20 slots
        value = (torch.randn(24, heads, d, device=dev) / 7).to(dtype)
        key[3, 1] *= 1e-3  # heads of very different magnitudes
        value[5, 0] = 0  # an all-zero head: the scale's floor
        slots = slots_with_padding(torch, dev, 20, 17)
        for entry in ("triton", "reshape_and_cache_flash"):
            caches = [torch.full((PAGES, P, heads, d), 0x5A, dtype=torch.uint8,
                                 device=dev).view(cache_dtype) for _ in range(2)]
            scales = [torch.full((PAGES, P, heads), 7.0, device=dev) for _ in range(2)]
            expected = [t.clone() for t in caches + scales]
            if entry == "triton":
                vllm.triton_reshape_and_cache_flash_per_token_head_quant(
                    key, value, caches[0], caches[1], scales[0], scales[1], slots)
            else:
                vllm.reshape_and_cache_flash(key, value, caches[0], caches[1], slots,
                                             "fp8_per_token_head", scales[0], scales[1])
            ref.ref_paged_kv_token_head(expected[0], expected[2], "nhd", key[:17], slots[:17])
            ref.ref_paged_kv_token_head(expected[1], expected[3], "nhd", value[:17], slots[:17])
            torch.cuda.synchronize()
            for got, want in zip(caches + scales, expected):
                assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), (dtype, entry)
    # HND caches through cachestore.torch (vLLM's Triton kernel takes NHD).
    key = torch.randn(20, H, D, device=dev).bfloat16()
    slots = slots_with_padding(torch, dev, 20, 11)
    cache = torch.full((PAGES, H, P, D), 0x5A, dtype=torch.uint8, device=dev)
    scales = torch.full((PAGES, H, P), 7.0, device=dev)
    expected = [cache.clone(), scales.clone()]
    cst.store_paged_kv(key, None, slots, cache, None, layout="hnd",
                       kv_cache_dtype="fp8_e4m3_per_token_head", key_block_scale=scales)
    ref.ref_paged_kv_token_head(expected[0], expected[1], "hnd", key[:11], slots[:11])
    torch.cuda.synchronize()
    assert torch.equal(cache, expected[0]) and torch.equal(scales.view(torch.uint8),
                                                           expected[1].view(torch.uint8))


def test_vllm_fp8_per_token_head_padded_graph_replay(env):
    # Captured at 32 rows; each replay stores the first n rows' values and scales, and neither
    # a padding row's values nor its scale lands anywhere, though its slot aims at a live one.
    torch, vllm, dev = env
    B = 32
    key = torch.randn(B, H, D, device=dev).bfloat16()
    value = torch.randn(B, H, D, device=dev).bfloat16()
    slots = torch.randperm(CAPACITY, device=dev)[:B]
    n = torch.tensor([B], dtype=torch.int32, device=dev)
    caches = [torch.zeros((PAGES, P, H, D), dtype=torch.float8_e4m3fn, device=dev)
              for _ in range(2)]
    scales = [torch.zeros((PAGES, P, H), device=dev) for _ in range(2)]

    def store():
        vllm.triton_reshape_and_cache_flash_per_token_head_quant(
            key, value, caches[0], caches[1], scales[0], scales[1], slots,
            num_tokens_non_padded=n)
    store()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        store()
    for real in (5, 0, 32, 17):
        expected = [t.clone() for t in caches + scales]
        fresh = torch.randperm(CAPACITY, device=dev)[:B]
        fresh[real:] = fresh[0]  # padding rows aim at a live slot: must not be written
        slots.copy_(fresh)
        key.copy_(torch.randn(B, H, D, device=dev) * 5)
        value.copy_(torch.randn(B, H, D, device=dev))
        key[real:] = float("nan")
        value[real:] = 1e4  # a padding row's scale would differ from any real one's
        n.fill_(real)
        graph.replay()
        ref.ref_paged_kv_token_head(expected[0], expected[2], "nhd", key[:real], fresh[:real])
        ref.ref_paged_kv_token_head(expected[1], expected[3], "nhd", value[:real], fresh[:real])
        torch.cuda.synchronize()
        for got, want in zip(caches + scales, expected):
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), real


# ---- FlashInfer: the page table (batch_indices, positions, kv_indptr, kv_indices) ----------
def page_table(torch, dev, requests, rows_per_request, pages):
    """A FlashInfer-form table: request b owns a random run of pages and appends its last
    rows_per_request[b] positions (as get_batch_indices_positions gives them)."""
    order = torch.randperm(pages)
    indptr, indices, batch, positions, start = [0], [], [], [], 0
    for b in range(requests):
        seq = int(torch.randint(1, 3 * P, ()).item()) + rows_per_request[b]
        n_pages = (seq + P - 1) // P
        indices += order[start:start + n_pages].tolist()
        start += n_pages
        indptr.append(len(indices))
        batch += [b] * rows_per_request[b]
        positions += list(range(seq - rows_per_request[b], seq))
    as_i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=dev)  # noqa: E731
    return as_i32(batch), as_i32(positions), as_i32(indptr), as_i32(indices)


def flashinfer_reference(k_cache, v_cache, layout, key, value, batch, positions, indptr, indices):
    """FlashInfer's append, row by row: page kv_indices[kv_indptr[b] + pos // P], entry pos % P."""
    for i in range(key.shape[0]):
        b, pos = int(batch[i]), int(positions[i])
        page = int(indices[int(indptr[b]) + pos // P])
        for cache, x in ((k_cache, key), (v_cache, value)):
            if cache is None:
                continue
            if layout == "NHD":
                cache[page, pos % P] = x[i]
            else:
                cache[page, :, pos % P] = x[i]


def test_flashinfer_append_paged_kv_cache(env):
    torch, _, dev = env
    from cachestore.compat import flashinfer
    pages = 64
    for layout, form, dtype in (("NHD", "tuple", torch.bfloat16), ("HND", "tuple", torch.float16),
                                ("NHD", "5d", torch.float32), ("HND", "5d", torch.bfloat16)):
        rows = [5, 1, 9, 3]
        batch, positions, indptr, indices = page_table(torch, dev, len(rows), rows, pages)
        nnz = sum(rows)
        key = torch.randn(nnz, H, D, device=dev).to(dtype)
        value = torch.randn(nnz, H, D, device=dev).to(dtype)
        shape = (pages, P, H, D) if layout == "NHD" else (pages, H, P, D)
        if form == "5d":
            cache = torch.full((pages, 2, *shape[1:]), 7.0, dtype=dtype, device=dev)
            expected = cache.clone()
            paged, want = cache, (expected[:, 0], expected[:, 1])
        else:
            paged = (torch.full(shape, 7.0, dtype=dtype, device=dev),
                     torch.full(shape, -3.0, dtype=dtype, device=dev))
            want = tuple(c.clone() for c in paged)
        last_page_len = torch.ones(len(rows), dtype=torch.int32, device=dev)  # not read
        flashinfer.append_paged_kv_cache(key, value, batch, positions, paged, indices, indptr,
                                         last_page_len, kv_layout=layout)
        flashinfer_reference(*want, layout, key, value, batch, positions, indptr, indices)
        torch.cuda.synchronize()
        got = (paged[:, 0], paged[:, 1]) if form == "5d" else paged
        for g, w in zip(got, want):
            assert torch.equal(g, w), (layout, form, dtype)


def test_flashinfer_int64_tables_and_faults_are_skipped_and_counted(env):
    torch, _, dev = env
    from cachestore.compat import flashinfer
    pages = 32
    rows = [4, 4]
    batch, positions, indptr, indices = page_table(torch, dev, 2, rows, pages)
    key = torch.randn(8, H, D, device=dev).bfloat16()
    value = torch.randn(8, H, D, device=dev).bfloat16()
    good = torch.ones(8, dtype=torch.bool)
    batch[1], good[1] = 2, False           # a batch index past the batch
    positions[2], good[2] = -4, False      # a negative position
    positions[5], good[5] = 4096, False    # a position past its request's pages
    caches = (torch.zeros(pages, P, H, D, dtype=torch.bfloat16, device=dev),
              torch.zeros(pages, P, H, D, dtype=torch.bfloat16, device=dev))
    want = tuple(c.clone() for c in caches)
    diagnostics = torch.zeros(2, dtype=torch.int64, device=dev)
    flashinfer.append_paged_kv_cache(key, value, batch.long(), positions.long(), caches,
                                     indices.long(), indptr.long(), None, diagnostics=diagnostics)
    keep = good.nonzero().flatten().tolist()
    flashinfer_reference(*want, "NHD", key[keep], value[keep], batch[keep], positions[keep],
                         indptr, indices)
    torch.cuda.synchronize()
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])
    assert diagnostics.tolist() == [3, 0]


def test_flashinfer_append_paged_mla_kv_cache(env):
    torch, _, dev = env
    from cachestore.compat import flashinfer
    pages = 48
    rows = [3, 7, 2]
    batch, positions, indptr, indices = page_table(torch, dev, 3, rows, pages)
    ckv = torch.randn(12, 512, device=dev).bfloat16()
    kpe = torch.randn(12, 64, device=dev).bfloat16()
    ckv_cache = torch.full((pages, P, 512), 2.0, dtype=torch.bfloat16, device=dev)
    kpe_cache = torch.full((pages, P, 64), -2.0, dtype=torch.bfloat16, device=dev)
    want = (ckv_cache.clone(), kpe_cache.clone())
    flashinfer.append_paged_mla_kv_cache(ckv, kpe, batch, positions, ckv_cache, kpe_cache,
                                         indices, indptr, None)
    flashinfer_reference(*want, "NHD", ckv, kpe, batch, positions, indptr, indices)
    torch.cuda.synchronize()
    assert torch.equal(ckv_cache, want[0]) and torch.equal(kpe_cache, want[1])


def test_flashinfer_padded_graph_replay_reads_no_table_for_padding(env):
    """A graph captured at 16 rows, replayed with n real rows: the padded rows' batch indices are
    -1 (FlashInfer would read kv_indptr[-1]) or name live pages; nothing but the real rows is
    written."""
    torch, _, dev = env
    from cachestore.compat import flashinfer
    pages, rows = 64, 16
    batch = torch.zeros(rows, dtype=torch.int32, device=dev)
    positions = torch.zeros(rows, dtype=torch.int32, device=dev)
    indptr = torch.zeros(rows + 1, dtype=torch.int32, device=dev)
    indices = torch.zeros(3 * rows, dtype=torch.int32, device=dev)
    key = torch.zeros(rows, H, D, dtype=torch.bfloat16, device=dev)
    value = torch.zeros(rows, H, D, dtype=torch.bfloat16, device=dev)
    n = torch.zeros(1, dtype=torch.int32, device=dev)
    caches = (torch.zeros(pages, P, H, D, dtype=torch.bfloat16, device=dev),
              torch.zeros(pages, P, H, D, dtype=torch.bfloat16, device=dev))
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        flashinfer.append_paged_kv_cache(key, value, batch, positions, caches, indices, indptr,
                                         None, num_tokens_non_padded=n)
    want = tuple(c.clone() for c in caches)
    for real in (0, 5, 16, 9):
        b, p, ip, ix = page_table(torch, dev, real, [1] * real, pages)
        batch.fill_(-1)
        positions.fill_(3)
        batch[:real], positions[:real] = b, p
        batch[real:real + 2] = 0 if real > 0 else -1  # padded rows naming a live page
        indptr.zero_()
        indptr[:real + 1] = ip
        indptr[real + 1:] = ip[-1]
        indices.zero_()
        indices[:ix.numel()] = ix
        key.normal_()
        value.normal_()
        n.fill_(real)
        graph.replay()
        flashinfer_reference(*want, "NHD", key[:real], value[:real], batch[:real],
                             positions[:real], indptr, indices)
        torch.cuda.synchronize()
        assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1]), real


def nvfp4_caches(torch, dev, pages, layout, form):
    """FlashInfer's NVFP4 caches, poisoned: (paged_kv_cache, kv_cache_sf, [k, v, k_sf, v_sf]
    views)."""
    shape = (pages, P, H) if layout == "NHD" else (pages, H, P)
    if form == "5d":
        data = torch.full((pages, 2, *shape[1:], D // 2), 0xAB, dtype=torch.uint8, device=dev)
        sf = torch.full((pages, 2, *shape[1:], D // 16), 0xAB, dtype=torch.uint8,
                        device=dev).view(torch.float8_e4m3fn)
        return data, sf, [data[:, 0], data[:, 1], sf[:, 0], sf[:, 1]]
    data = tuple(torch.full((*shape, D // 2), 0xAB, dtype=torch.uint8, device=dev)
                 for _ in range(2))
    sf = tuple(torch.full((*shape, D // 16), 0xAB, dtype=torch.uint8, device=dev).view(
        torch.float8_e4m3fn) for _ in range(2))
    return data, sf, [*data, *sf]


def test_flashinfer_nvfp4_append_paged_kv_cache(env):
    torch, _, dev = env
    from cachestore.compat import flashinfer
    pages = 64
    for layout, form, dtype in (("NHD", "tuple", torch.bfloat16), ("HND", "5d", torch.float16)):
        rows = [5, 1, 9, 3]
        batch, positions, indptr, indices = page_table(torch, dev, len(rows), rows, pages)
        nnz = sum(rows)
        key = torch.randn(nnz, H, D, device=dev).to(dtype)
        value = (torch.randn(nnz, H, D, device=dev) * 40).to(dtype)
        key[3, 2, :16] = 0  # an all-zero block
        value[4, 0, 5] = float("nan")
        paged, sf, views = nvfp4_caches(torch, dev, pages, layout, form)
        want = [v.clone() for v in views]
        k_scale, v_scale = 0.002, 0.05
        flashinfer.nvfp4_quantize_append_paged_kv_cache(
            key, value, batch, positions, paged, sf, indices, indptr, None, k_scale, v_scale,
            kv_layout=layout)
        slots = torch.stack([indices[indptr[b] + p // P] * P + p % P
                             for b, p in zip(batch.tolist(), positions.tolist())]).long()
        lay = layout.lower()
        ref.ref_paged_kv_nvfp4(want[0], want[2], lay, key, slots, torch.tensor([k_scale]).to(dev))
        ref.ref_paged_kv_nvfp4(want[1], want[3], lay, value, slots, torch.tensor([v_scale]).to(dev))
        torch.cuda.synchronize()
        for g, w in zip(views, want):
            assert torch.equal(g.view(torch.uint8), w.view(torch.uint8)), (layout, form)


def test_flashinfer_nvfp4_with_slot_mapping_follows_a_changed_scale_in_a_graph(env):
    """The slot-mapping form captured once with device scales: each replay reads the current
    scale and count; negative slots and padded rows write nothing."""
    torch, _, dev = env
    from cachestore.compat import flashinfer
    pages, rows = 16, 24
    key = torch.zeros(rows + 4, H, D, dtype=torch.bfloat16, device=dev)  # more rows than slots
    value = torch.zeros(rows + 4, H, D, dtype=torch.bfloat16, device=dev)
    slots = torch.full((rows,), -1, dtype=torch.int64, device=dev)
    k_scale = torch.ones(1, device=dev)
    v_scale = torch.ones(1, device=dev)
    n = torch.zeros(1, dtype=torch.int32, device=dev)
    paged, sf, views = nvfp4_caches(torch, dev, pages, "NHD", "tuple")
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        flashinfer.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(
            key, value, slots, paged, sf, k_scale, v_scale, num_tokens_non_padded=n)
    want = [v.clone() for v in views]
    for real, ks, vs in ((24, 0.01, 0.2), (7, 0.5, 0.003), (0, 1.0, 1.0), (13, 2e-4, 0.07)):
        fresh = torch.randperm(pages * P, device=dev)[:real]
        slots.copy_(torch.cat([fresh, torch.full((rows - real,), -1, device=dev)]))
        if real > 2:
            slots[1] = -1  # a negative slot on a real row: padding, skipped
        key.normal_()
        value.normal_()
        key[real:] = float("nan")
        value[real:] = float("nan")
        k_scale.fill_(ks)
        v_scale.fill_(vs)
        n.fill_(real)
        graph.replay()
        keep = (slots[:real] >= 0).nonzero().flatten()
        ref.ref_paged_kv_nvfp4(want[0], want[2], "nhd", key[keep], slots[keep], k_scale)
        ref.ref_paged_kv_nvfp4(want[1], want[3], "nhd", value[keep], slots[keep], v_scale)
        torch.cuda.synchronize()
        for g, w in zip(views, want):
            assert torch.equal(g.view(torch.uint8), w.view(torch.uint8)), real


def test_flashinfer_nvfp4_global_scale_refusals_inside_and_outside_capture(env):
    """FlashInfer's refusals of a global scale: a bad value read outside capture (a CUDA tensor
    too); during capture, anything but a float32 CUDA tensor on the append's device."""
    torch, _, dev = env
    from cachestore.compat import flashinfer
    by_slot = flashinfer.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping
    key = torch.randn(4, H, D, device=dev).bfloat16()
    slots = torch.arange(4, device=dev)
    paged, sf, views = nvfp4_caches(torch, dev, 4, "NHD", "tuple")
    before = [v.clone() for v in views]
    ok = torch.ones(1, device=dev)
    for bad in (0.0, -2.0, float("inf")):
        with pytest.raises(ValueError, match="^k_scale must be a positive finite global decode "
                                             "scale$"):
            by_slot(key, key, slots, paged, sf, torch.tensor([bad], device=dev), ok)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        with pytest.raises(ValueError, match=r"^v_scale must be a contiguous float32 CUDA tensor "
                                             r"on cuda:\d during CUDA graph capture, got cpu$"):
            by_slot(key, key, slots, paged, sf, ok, torch.ones(1))
        with pytest.raises(ValueError, match="^k_scale must be a float32 CUDA tensor during CUDA "
                                             "graph capture"):
            by_slot(key, key, slots, paged, sf, 1.0, ok)
        by_slot(key, key, slots, paged, sf, ok, ok)  # the graph's one append
    torch.cuda.synchronize()
    for g, w in zip(views, before):  # nothing written by a refused call
        assert torch.equal(g.view(torch.uint8), w.view(torch.uint8))
    graph.replay()
    ref.ref_paged_kv_nvfp4(before[0], before[2], "nhd", key, slots, ok)
    ref.ref_paged_kv_nvfp4(before[1], before[3], "nhd", key, slots, ok)
    torch.cuda.synchronize()
    for g, w in zip(views, before):
        assert torch.equal(g.view(torch.uint8), w.view(torch.uint8))


# ---- SGLang's DeepSeek stores ---------------------------------------------------------------
def test_sglang_deepseek_index_k_stores(env):
    torch, _, dev = env
    from cachestore.compat import sglang
    page = 64
    k = torch.randn(20, 128, device=dev).bfloat16()
    loc = torch.randperm(PAGES * page, device=dev)[:20]
    loc[17:] = -1  # padding rows
    for store in (lambda cache: sglang.fused_store_index_k_cache(k, cache, loc, page),
                  lambda cache: sglang.fused_store_indexer_cache(k, cache, loc.int(), page)):
        cache = torch.full((PAGES, page * 132), 0xAB, dtype=torch.uint8, device=dev)
        expected = cache.clone()
        store(cache)
        ref.ref_index_k_fp8(expected, page, k[:17], loc[:17], "amax")
        torch.cuda.synchronize()
        assert torch.equal(cache, expected)
    for rne in (False, True):
        cache = torch.full((PAGES, page * 68), 0xAB, dtype=torch.uint8, device=dev)
        expected = cache.clone()
        sglang.store_fp4_index_k_cache(k.view(20, 1, 128), cache, loc, page_size=page, rne=rne)
        ref.ref_index_k_fp4(expected, page, k[:17], loc[:17], ties_to_even=rne)
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), rne


def test_sglang_deepseek_flashmla_stores(env):
    torch, _, dev = env
    from cachestore.compat import sglang
    page = 64
    x = torch.randn(20, 512, device=dev).bfloat16()
    loc = torch.randperm(PAGES * page, device=dev)[:20]
    loc[15:] = -1
    page_bytes = {"v4": (584 * page + 575) // 576 * 576, "v41": (528 * page + 511) // 512 * 512,
                  "v41_fp4": (288 * page + 255) // 256 * 256}
    for name, store in (("v4", lambda cache: sglang.fused_store_flashmla_cache(x, cache, loc, page)),
                        ("v41", lambda cache: sglang.fused_store_flashmla_cache_v41(
                            x, cache, loc, page)),
                        ("v41_fp4", lambda cache: sglang.fused_store_flashmla_cache_v41(
                            x, cache, loc, page, "V41_FP4"))):
        cache = torch.full((PAGES, page_bytes[name]), 0xAB, dtype=torch.uint8, device=dev)
        expected = cache.clone()
        store(cache)
        ref.ref_mla(expected, page, name, x[:15, :448], x[:15, 448:], loc[:15])
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), name


def sglang_rope_tail(torch, rope, freqs_cis):
    """SGLang's in-kernel RoPE of the V4.1 store: pair i of each row, (x, y) = rope[:, 2i:2i+2],
    by (c, s) = freqs_cis[:, 2i:2i+2]: x c - y s and y c + x s in fp32, then bf16. nvcc contracts
    its two expressions to fma(x, c, -(y s)) and fma(y, c, x s) (its PTX and SASS), which is
    ref_rope's fp32 rule on the cos | sin halves of the same row."""
    halves = torch.cat([freqs_cis[:, 0::2], freqs_cis[:, 1::2]], 1)
    positions = torch.arange(rope.shape[0], device=rope.device)
    return ref.ref_rope(rope.unsqueeze(1), positions, halves, 64, False, "fp32").squeeze(1)


def test_sglang_v41_store_with_freqs_cis(env):
    """SGLang's V4.1 stores with their in-kernel RoPE (freqs_cis, row i's (cos, sin) pairs):
    the record of the rotated row, the input untouched, index -1 rows skipped; then a padded
    graph through fused_store_cache's num_tokens_non_padded."""
    torch, _, dev = env
    from cachestore.compat import sglang
    page = 64
    x = torch.randn(20, 512, device=dev).bfloat16()
    angle = torch.rand(20, 32, device=dev) * 100.0
    freqs = torch.stack([angle.cos(), angle.sin()], -1).view(20, 64)
    loc = torch.randperm(PAGES * page, device=dev)[:20]
    loc[15:] = -1
    page_bytes = {"v41": (528 * page + 511) // 512 * 512, "v41_fp4": (288 * page + 255) // 256 * 256}
    before = x.clone()
    for name, layout in (("v41", "V41"), ("v41_fp4", "V41_FP4")):
        cache = torch.full((PAGES, page_bytes[name]), 0xAB, dtype=torch.uint8, device=dev)
        expected = cache.clone()
        sglang.fused_store_flashmla_cache_v41(x, cache, loc, page, layout, freqs_cis=freqs)
        rotated = sglang_rope_tail(torch, x[:, 448:], freqs)
        ref.ref_mla(expected, page, name, x[:15, :448], rotated[:15], loc[:15])
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), name
        assert torch.equal(x, before), name  # SGLang's kernel writes no input either

    loc = torch.randperm(PAGES * page, device=dev)[:20]
    n = torch.zeros(1, dtype=torch.int32, device=dev)
    cache = torch.full((PAGES, page_bytes["v41"]), 0xAB, dtype=torch.uint8, device=dev)
    expected = cache.clone()
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        sglang.fused_store_cache(x, cache, loc, page_size=page, type="flashmla", layout="V41",
                                 freqs_cis=freqs, num_tokens_non_padded=n)
    for real in (20, 3, 0, 11):
        x.normal_()
        angle.uniform_(0.0, 100.0)
        freqs.copy_(torch.stack([angle.cos(), angle.sin()], -1).view(20, 64))
        x[real:] = float("nan")  # padded rows: never stored
        freqs[real:] = float("nan")
        loc.copy_(torch.randperm(PAGES * page, device=dev)[:20])
        n.fill_(real)
        graph.replay()
        rotated = sglang_rope_tail(torch, x[:real, 448:], freqs[:real])
        ref.ref_mla(expected, page, "v41", x[:real, :448], rotated, loc[:real])
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), real


def test_sglang_fused_store_cache_and_extend_num_tokens(env):
    """SGLang's one DeepSeek-V4 store by type= and layout=, and the DSA indexer store's
    extend_num_tokens (the device count: rows past it write nothing), in a padded graph."""
    torch, _, dev = env
    from cachestore.compat import sglang
    page = 64
    x = torch.randn(20, 512, device=dev).bfloat16()
    loc = torch.randperm(PAGES * page, device=dev)[:20]
    page_bytes = {"v4": (584 * page + 575) // 576 * 576, "v41": (528 * page + 511) // 512 * 512,
                  "v41_fp4": (288 * page + 255) // 256 * 256}
    for name, layout in (("v4", None), ("v41", "V41"), ("v41_fp4", "V41_FP4")):
        cache = torch.full((PAGES, page_bytes[name]), 0xAB, dtype=torch.uint8, device=dev)
        expected = cache.clone()
        sglang.fused_store_cache(x, cache, loc, page_size=page, type="flashmla", layout=layout)
        ref.ref_mla(expected, page, name, x[:, :448], x[:, 448:], loc)
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), name
    k = x[:, :128].contiguous()
    cache = torch.full((PAGES, page * 132), 0xAB, dtype=torch.uint8, device=dev)
    expected = cache.clone()
    sglang.fused_store_cache(k, cache, loc, page_size=page, type="indexer")
    ref.ref_index_k_fp8(expected, page, k, loc, "amax")
    torch.cuda.synchronize()
    assert torch.equal(cache, expected)

    n = torch.zeros(1, dtype=torch.int32, device=dev)
    cache = torch.full((PAGES, page * 132), 0xAB, dtype=torch.uint8, device=dev)
    expected = cache.clone()
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        sglang.fused_store_index_k_cache(k, cache, loc, n, page)
    for real in (20, 3, 0, 11):
        k.normal_()
        k[real:] = float("nan")  # padded rows: never stored
        loc.copy_(torch.randperm(PAGES * page, device=dev)[:20])
        n.fill_(real)
        graph.replay()
        ref.ref_index_k_fp8(expected, page, k[:real], loc[:real], "amax")
        torch.cuda.synchronize()
        assert torch.equal(cache, expected), real
    sglang.fused_store_index_k_cache(k[:5], cache, loc[:5], page)  # the older signature
    ref.ref_index_k_fp8(expected, page, k[:5], loc[:5], "amax")
    torch.cuda.synchronize()
    assert torch.equal(cache, expected)


# vLLM's standardized KV layout (vllm-project/vllm#51718): every layer's K and V are strided
# views into one buffer per KV group, in one of six orders of [layers, blocks, heads, tokens,
# content], K and V side by side in the content dim (fused) or split by a leading dim of 2. A
# store that took only the block stride from such a view would write another layer's or
# another head's bytes (ROCm/aiter#4531); every byte of the buffer is compared here.
STANDARDIZED_ORDERS = ("LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC")


def standardized_views(buf, order, fused, d):
    """Per layer, the (K, V) views [blocks, tokens, heads, D] (vLLM's reshape_and_cache_flash
    form) of a buffer in `order` ([2, ...] first unless fused, where C is 2 D)."""
    perm = [order.index(ch) for ch in "LBNHC"]
    if fused:
        logical = buf.permute(perm)
        k, v = logical[..., :d], logical[..., d:]
    else:
        k, v = buf[0].permute(perm), buf[1].permute(perm)
    return [(k[layer], v[layer]) for layer in range(k.shape[0])]


@pytest.mark.parametrize("order", STANDARDIZED_ORDERS)
def test_vllm_standardized_kv_layouts(env, order):
    torch, vllm, dev = env
    import cachestore.torch as cst
    layers, blocks, heads, tokens, d = 3, 6, 4, 16, 64
    rows, real = 24, 19
    sizes = {"L": layers, "B": blocks, "H": heads, "N": tokens}
    for fused in (True, False):
        for kv_dtype, cache_dtype in (("auto", torch.bfloat16), ("fp8", torch.uint8)):
            for api in ("compat", "core"):
                shape = [sizes.get(ch, 2 * d if fused else d) for ch in order]
                if not fused:
                    shape = [2, *shape]
                if cache_dtype == torch.uint8:
                    buf = torch.full(shape, 0x5A, dtype=torch.uint8, device=dev)
                else:
                    buf = torch.randn(shape, device=dev).to(cache_dtype)
                want = buf.clone()
                n = torch.tensor([real], dtype=torch.int32, device=dev)
                scales = [(torch.tensor([0.03 + 0.01 * layer], device=dev),
                           torch.tensor([0.02 + 0.01 * layer], device=dev))
                          for layer in range(layers)]
                got_views = standardized_views(buf, order, fused, d)
                want_views = standardized_views(want, order, fused, d)
                for layer in range(layers):
                    key = torch.randn(rows, heads, d, device=dev).bfloat16()
                    value = torch.randn(rows, heads, d, device=dev).bfloat16()
                    slots = torch.randperm(blocks * tokens, device=dev)[:rows]
                    slots[real - 3] = -1  # vLLM's padding inside the real rows: skipped
                    k_scale, v_scale = scales[layer]
                    kc, vc = got_views[layer]
                    if api == "compat":
                        vllm.reshape_and_cache_flash(key, value, kc, vc, slots, kv_dtype, k_scale,
                                                     v_scale, num_tokens_non_padded=n)
                    else:
                        fp8 = kv_dtype == "fp8"
                        cst.store_paged_kv(key, value, slots, kc, vc, layout="nhd",
                                           kv_cache_dtype="fp8_e4m3" if fp8 else None,
                                           k_scale=k_scale if fp8 else None,
                                           v_scale=v_scale if fp8 else None,
                                           num_tokens_non_padded=n)
                    keep = slots[:real] >= 0
                    as_cache = (lambda t: t.view(torch.float8_e4m3fn)) \
                        if cache_dtype == torch.uint8 else (lambda t: t)
                    fp8 = kv_dtype != "auto"
                    wk, wv = want_views[layer]
                    ref.ref_paged_kv(as_cache(wk), "nhd", key[:real][keep], slots[:real][keep],
                                     k_scale if fp8 else None)
                    ref.ref_paged_kv(as_cache(wv), "nhd", value[:real][keep],
                                     slots[:real][keep], v_scale if fp8 else None)
                torch.cuda.synchronize()
                assert torch.equal(buf.view(torch.uint8), want.view(torch.uint8)), \
                    (order, fused, kv_dtype, api)
