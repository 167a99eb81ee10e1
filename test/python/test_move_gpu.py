"""cachestore.move on the GPU: gather -> scatter into another page size and layout (device and
pinned host staging), every layout and cache type's planes, the whole destination cache against
a PyTorch reference; padded-graph replay; out-of-range and padding ids counted exactly; copies
within a cache in a defined order."""
import pytest

from conftest import need_gpu

torch = need_gpu()
import cachestore.move as mv  # noqa: E402
import cachestore.torch as cst  # noqa: E402

pytestmark = pytest.mark.skipif(cst.backend != "native", reason="move: native ops only")
DEV = torch.device("cuda")


def rand_bytes(*shape, dtype=torch.uint8):
    """Random bytes as a `dtype` tensor of `shape` (NaN patterns included: compare bytes)."""
    size = dtype.itemsize
    t = torch.randint(0, 256, (*shape[:-1], shape[-1] * size), dtype=torch.uint8, device=DEV)
    return t if dtype == torch.uint8 else t.view(dtype)


def same_bytes(a, b):
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def tokens_of(cache, ids, layout):
    """[tokens, H, D] of pages `ids` in order (nhd [pages, P, H, D] / hnd [pages, H, P, D])."""
    pages = cache[ids]
    if layout == "hnd":
        pages = pages.permute(0, 2, 1, 3)
    return pages.reshape(-1, *pages.shape[2:])


def put_tokens(cache, ids, tokens, layout):
    P = cache.shape[1] if layout == "nhd" else cache.shape[2]
    for d, page in enumerate(ids.tolist()):
        chunk = tokens[d * P:(d + 1) * P]
        if page < 0 or page >= cache.shape[0]:
            continue
        cache[page] = chunk if layout == "nhd" else chunk.permute(1, 0, 2)


@pytest.mark.parametrize("host", [False, True], ids=["device_staging", "pinned_host_staging"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float32])
def test_round_trip_into_another_page_size_and_layout(host, dtype):
    layers, pages, P, H, D = 3, 24, 16, 4, 64
    # One allocation a layer (SGLang's and vLLM's per-layer tensors): plane_bases.
    k = [rand_bytes(pages, P, H, D, dtype=dtype) for _ in range(layers)]
    v = [rand_bytes(pages, P, H, D, dtype=dtype) for _ in range(layers)]
    src = mv.paged_kv(k, v)
    ids = torch.tensor([5, 0, 17, 3, 9, 22], device=DEV)
    buf, stage = mv.staging(src, len(ids), pin_memory=host)
    mv.gather_pages(src, ids, stage)
    # The decode engine: hnd, P = 8, its own page ids (two a source page), one buffer for all
    # layers (a layer stride).
    Pd, pages_d = 8, 30
    shape = (layers, pages_d, H, Pd, D * dtype.itemsize)
    k_d = torch.full(shape, 0xAB, dtype=torch.uint8, device=DEV).view(dtype)
    v_d = torch.full(shape, 0xCD, dtype=torch.uint8, device=DEV).view(dtype)
    dst = mv.paged_kv(list(k_d), list(v_d), layout="hnd")
    assert dst.plane_bases is None  # one buffer: one stride apart
    dst_ids = torch.randperm(pages_d, device=DEV)[:2 * len(ids)]
    dst_ids[3] = -1  # padding: that page stays as it was
    diag = torch.zeros(2, dtype=torch.int64, device=DEV)
    mv.scatter_pages(stage, dst, dst_ids, diagnostics=diag)
    torch.cuda.synchronize()
    for l in range(layers):
        for got, cache, fill in ((k_d[l], k[l], 0xAB), (v_d[l], v[l], 0xCD)):
            want = torch.full_like(got.view(torch.uint8), fill)
            put_tokens(want, dst_ids.cpu(), tokens_of(cache.view(torch.uint8), ids, "nhd"), "hnd")
            assert torch.equal(got.view(torch.uint8), want), f"layer {l}"
    assert diag.tolist() == [0, 0]


def test_nvfp4_planes_and_fp8_scales_move_with_their_pages():
    pages, P, H, D = 12, 16, 8, 128
    codes_k, codes_v = rand_bytes(pages, P, H, D // 2), rand_bytes(pages, P, H, D // 2)
    sf_k, sf_v = rand_bytes(pages, P, H, D // 16), rand_bytes(pages, P, H, D // 16)
    src = mv.paged_kv(codes_k, codes_v, k_block_scales=sf_k, v_block_scales=sf_v)
    assert src.num_planes == 4
    ids = torch.tensor([7, 2, 11], device=DEV)
    _, stage = mv.staging(src, 3, order="layer_first")
    mv.gather_pages(src, ids, stage)
    out = [torch.zeros_like(t) for t in (codes_k, codes_v, sf_k, sf_v)]
    dst = mv.paged_kv(out[0], out[1], k_block_scales=out[2], v_block_scales=out[3])
    back = torch.tensor([0, 5, 9], device=DEV)
    mv.scatter_pages(stage, dst, back)
    torch.cuda.synchronize()
    for got, t in zip(out, (codes_k, codes_v, sf_k, sf_v)):
        want = torch.zeros_like(t)
        want[back] = t[ids]
        assert torch.equal(got, want)


def test_mla_and_index_k_byte_pages_through_pinned_host():
    pages, layers = 20, 2
    mla = [rand_bytes(pages, 64 * 656) for _ in range(layers)]  # V3.2 pages
    index = [rand_bytes(pages, 64 * 132) for _ in range(layers)]  # fp8 indexer pages
    for caches in (mla, index):
        src = mv.byte_pages(caches)
        ids = torch.tensor([3, 19, 0, -1, 8], device=DEV)
        buf, stage = mv.staging(src, 5, pin_memory=True)
        mv.gather_pages(src, ids, stage)
        torch.cuda.synchronize()
        assert buf.is_pinned()
        for l in range(layers):
            for e, page in enumerate(ids.tolist()):
                if page >= 0:
                    assert torch.equal(buf[e, l].to(DEV), caches[l][page].reshape(-1))
            assert torch.count_nonzero(buf[3, l]) == 0  # padding: never written
        out = [torch.zeros_like(c) for c in caches]
        back = torch.tensor([1, 2, 3, 4, 5], device=DEV)
        mv.scatter_pages(stage, mv.byte_pages(out), back)
        torch.cuda.synchronize()
        for l in range(layers):
            want = torch.zeros_like(caches[l])
            for e, page in enumerate(ids.tolist()):
                want[back[e]] = caches[l][page] if page >= 0 else 0
            assert torch.equal(out[l], want)


def test_padded_graph_replay_and_out_of_range_ids_counted():
    pages, P, H, D = 16, 16, 2, 128
    k = rand_bytes(pages, P, H, D, dtype=torch.bfloat16)
    src = mv.paged_kv(k)
    B = 6
    ids = torch.tensor([4, 1, 40, -1, 7, 9], device=DEV)  # 40: out of range
    n = torch.tensor([B], dtype=torch.int32, device=DEV)
    diag = torch.zeros(2, dtype=torch.int64, device=DEV)
    buf, stage = mv.staging(src, B)
    mv.gather_pages(src, ids, stage, num_entries_non_padded=n, diagnostics=diag)  # warm-up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mv.gather_pages(src, ids, stage, num_entries_non_padded=n, diagnostics=diag)
    for real in (6, 5, 3, 2, 0):
        buf.fill_(0xAB)
        diag.zero_()
        n.fill_(real)
        graph.replay()
        torch.cuda.synchronize()
        want = torch.full_like(buf, 0xAB)
        for e in range(real):
            page = int(ids[e])
            if 0 <= page < pages:
                want[e, 0] = k[page].reshape(-1).view(torch.uint8)
        assert torch.equal(buf, want), real
        assert diag.tolist() == [1 if real > 2 else 0, 0], real


def test_checksums_are_zlib_crc32_and_a_corrupted_page_is_never_scattered():
    layers, pages, P, H, D = 2, 20, 16, 4, 64
    k = [rand_bytes(pages, P, H, D, dtype=torch.bfloat16) for _ in range(layers)]
    v = [rand_bytes(pages, P, H, D, dtype=torch.bfloat16) for _ in range(layers)]
    src = mv.paged_kv(k, v)
    ids = torch.tensor([7, 2, -1, 19, 11], device=DEV)  # -1: padding
    n = torch.tensor([4], dtype=torch.int32, device=DEV)  # the last entry is past the count
    buf, stage = mv.staging(src, len(ids), pin_memory=True)
    sums = mv.checksum_buffer(src, len(ids))
    sums.fill_(0x5A5A5A5A)
    mv.gather_pages(src, ids, stage, num_entries_non_padded=n, checksums=sums)
    torch.cuda.synchronize()
    on_host = mv.host_checksums(stage)  # zlib.crc32 of each staging block
    for e in range(len(ids)):
        real = e < 4 and int(ids[e]) >= 0
        assert torch.equal(sums[e].cpu(), on_host[e] if real else torch.full_like(on_host[e],
                           0x5A5A5A5A)), e
    # In transit, one byte of entry 3's layer 1 V plane changes.
    plane_bytes = P * H * D * 2
    buf[3, 1, plane_bytes + 100] ^= 0x10
    out_k = [torch.full_like(t, 0).view(torch.uint8).fill_(0xEE).view(t.dtype) for t in k]
    out_v = [torch.full_like(t, 0).view(torch.uint8).fill_(0xEE).view(t.dtype) for t in v]
    dst = mv.paged_kv(out_k, out_v, layout="nhd")
    back = torch.tensor([0, 1, 2, 3, 4], device=DEV)
    diag = torch.zeros(3, dtype=torch.int64, device=DEV)
    mv.scatter_pages(stage, dst, back, num_entries_non_padded=n, diagnostics=diag,
                     expected_checksums=sums)
    torch.cuda.synchronize()
    # Refused: the corrupted block, and entry 2's four blocks (the gather skipped its padding
    # id, so its staging holds no page and its checksums were never written).
    assert diag.tolist() == [0, 0, 5]
    for l in range(layers):
        for got, cache, plane in ((out_k[l], k[l], 0), (out_v[l], v[l], 1)):
            want = torch.full_like(got.view(torch.uint8), 0xEE)
            for e in range(4):
                page = int(ids[e])
                if page >= 0 and not (e == 3 and l == 1 and plane == 1):
                    want[e] = cache[page].view(torch.uint8)
            assert torch.equal(got.view(torch.uint8), want), (l, plane)


def test_two_process_transfer_through_torch_distributed():
    """examples/python/pd_transfer.py: a prefill process gathers a request's pages with checksums
    into pinned host staging, sends them over gloo; the decode process scatters them into a cache
    of another page size and layout, verified; one page corrupted in transit is refused."""
    import os
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                          "pd_transfer.py")
    r = subprocess.run([sys.executable, script, "--backend", "gloo", "--corrupt"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "decode cache equals the reference" in r.stdout, r.stdout + r.stderr


def test_copy_pages_reads_every_source_before_writing():
    pages, P, H, D = 10, 16, 2, 64
    k = rand_bytes(pages, P, H, D, dtype=torch.bfloat16)
    before = k.clone()
    cache = mv.paged_kv(k)
    src_ids = torch.tensor([1, 2, 3, 12], device=DEV)  # a chain 1->2->3->4; 12 out of range
    dst_ids = torch.tensor([2, 3, 4, 5], device=DEV)
    diag = torch.zeros(2, dtype=torch.int64, device=DEV)
    mv.copy_pages(cache, src_ids, dst_ids, diagnostics=diag)
    torch.cuda.synchronize()
    want = before.clone()
    want[torch.tensor([2, 3, 4])] = before[torch.tensor([1, 2, 3])]
    assert same_bytes(k, want)  # page 5 untouched: its source was out of range
    assert diag.tolist() == [1, 0]


def test_overlap_and_pageable_memory_refused_nothing_written():
    k = rand_bytes(8, 16, 2, 64, dtype=torch.bfloat16)
    before = k.clone()
    cache = mv.paged_kv(k)
    ids = torch.tensor([0, 1], device=DEV)
    with pytest.raises(Exception, match="src and dst overlap"):
        mv.move_pages(cache, cache, src_page_ids=ids, dst_page_ids=ids.flip(0))
    host = torch.zeros(2, 1, cache.page_size * cache.token_bytes, dtype=torch.uint8)  # pageable
    with pytest.raises(Exception, match="dst.data is pageable host memory"):
        mv.gather_pages(cache, ids, mv.staging_pages(host, cache))
    torch.cuda.synchronize()
    assert same_bytes(k, before) and torch.count_nonzero(host) == 0


def test_vllm_swap_blocks_to_pinned_host_and_back():
    from cachestore.compat import vllm
    gpu = rand_bytes(12, 16, 8, 128, dtype=torch.bfloat16)  # [num_blocks, P, H, D]
    host = torch.zeros(6, 16, 8, 128, dtype=torch.bfloat16, pin_memory=True)
    mapping = torch.tensor([[3, 0], [11, 5], [7, 2], [20, 1]])  # 20: past the GPU cache
    diag = torch.zeros(2, dtype=torch.int64, device=DEV)
    vllm.swap_blocks(gpu, host, mapping, diagnostics=diag)
    torch.cuda.synchronize()
    want = torch.zeros_like(host)
    for s, d in mapping.tolist()[:3]:
        want[d] = gpu[s].cpu()
    assert same_bytes(host, want) and diag.tolist() == [1, 0]
    back = torch.full_like(gpu, 0).view(torch.uint8).fill_(0xAB).view(torch.bfloat16)
    vllm.swap_blocks(host, back, torch.tensor([[0, 9], [5, 4]]))
    torch.cuda.synchronize()
    want_back = torch.full_like(back.view(torch.uint8), 0xAB)
    want_back[9] = gpu[3].view(torch.uint8)
    want_back[4] = gpu[11].view(torch.uint8)
    assert torch.equal(back.view(torch.uint8), want_back)


@pytest.mark.parametrize("mla", [False, True], ids=["copy_blocks", "copy_blocks_mla"])
def test_vllm_copy_blocks_every_layer_in_a_defined_order(mla):
    from cachestore.compat import vllm
    layers = 3
    shape = (10, 16, 576) if mla else (10, 16, 4, 64)
    keys = [rand_bytes(*shape, dtype=torch.bfloat16) for _ in range(layers)]
    values = [rand_bytes(*shape, dtype=torch.bfloat16) for _ in range(layers)]
    before = [t.clone() for t in keys + values]
    mapping = torch.tensor([[1, 2], [2, 3], [3, 4], [8, 0]], device=DEV)  # a chain
    if mla:
        vllm.copy_blocks_mla(keys, mapping)
    else:
        vllm.copy_blocks(keys, values, mapping)
    torch.cuda.synchronize()
    for i, t in enumerate(keys + ([] if mla else values)):
        want = before[i].clone()
        want[torch.tensor([2, 3, 4, 0])] = before[i][torch.tensor([1, 2, 3, 8])]
        assert same_bytes(t, want), i
    if mla:
        for i, t in enumerate(values):
            assert same_bytes(t, before[layers + i])


def test_sglang_hicache_transfers_device_to_page_first_host_and_back():
    """compat.sglang_kvcacheio against SGLang's addressing (slot i of layer l at i * item_size in
    a layer's buffer, at i * layout_dim + l * item_size in a page-first buffer), the whole
    destination compared; a slot past its buffer skipped and counted, -1 skipped."""
    from cachestore.compat import sglang_kvcacheio as io
    layers, slots, host_slots, H, D = 3, 64, 40, 2, 64
    item = H * D * 2
    k = [rand_bytes(slots, H, D, dtype=torch.bfloat16) for _ in range(layers)]
    v = [rand_bytes(slots, H, D, dtype=torch.bfloat16) for _ in range(layers)]
    host_k = torch.zeros(host_slots, layers, H, D, dtype=torch.bfloat16, pin_memory=True)
    host_v = torch.zeros_like(host_k).pin_memory()
    src_idx = torch.tensor([5, 63, 0, 17, 70, 9], device=DEV)   # 70: past the device buffers
    dst_idx = torch.tensor([0, 39, -1, 12, 3, 20], device=DEV)  # -1: skipped
    diag = torch.zeros(2, dtype=torch.int64, device=DEV)
    io.transfer_kv_all_layer_lf_pf(k, host_k, v, host_v, src_idx, dst_idx, item,
                                   layers * item, layers, diagnostics=diag)
    torch.cuda.synchronize()
    want_k, want_v = torch.zeros_like(host_k), torch.zeros_like(host_v)
    for s, d in zip(src_idx.tolist(), dst_idx.tolist()):
        if 0 <= s < slots and d >= 0:
            for l in range(layers):
                want_k[d, l], want_v[d, l] = k[l][s].cpu(), v[l][s].cpu()
    assert same_bytes(host_k, want_k) and same_bytes(host_v, want_v)
    assert diag.tolist() == [1, 0]
    # Back, one layer from the page-first host buffer into fresh device buffers, then all layers
    # device to device, and the MLA forms (one buffer).
    back_k = [torch.zeros_like(t) for t in k]
    back_v = [torch.zeros_like(t) for t in v]
    idx_h = torch.tensor([0, 39, 12, 20], device=DEV)
    idx_d = torch.tensor([1, 2, 3, 4], device=DEV)
    io.transfer_kv_per_layer_pf_lf(host_k, back_k[1], host_v, back_v[1], idx_h, idx_d, 1, item,
                                   layers * item)
    torch.cuda.synchronize()
    want = torch.zeros_like(back_k[1])
    want[idx_d.cpu()] = host_k[idx_h.cpu(), 1].to(DEV)
    assert same_bytes(back_k[1], want)
    assert same_bytes(back_v[1][idx_d], host_v[idx_h.cpu(), 1].to(DEV))
    assert torch.count_nonzero(back_k[0].view(torch.uint8)) == 0
    io.transfer_kv_all_layer(k, back_k, v, back_v, idx_d, idx_h, item, layers)
    torch.cuda.synchronize()
    for l in range(layers):
        assert same_bytes(back_k[l][idx_h], k[l][idx_d]) and same_bytes(back_v[l][idx_h],
                                                                         v[l][idx_d])
    mla = [rand_bytes(slots, 576, dtype=torch.bfloat16) for _ in range(layers)]
    host = torch.zeros(host_slots, layers, 576, dtype=torch.bfloat16, pin_memory=True)
    io.transfer_kv_all_layer_mla_lf_pf(mla, host, idx_d, idx_h, 1152, layers * 1152, layers)
    out = torch.zeros_like(mla[2])
    io.transfer_kv_per_layer_mla_pf_lf(host, out, idx_h, idx_d, 2, 1152, layers * 1152)
    torch.cuda.synchronize()
    assert same_bytes(out[idx_d], mla[2][idx_d])
    assert torch.count_nonzero(out.view(torch.uint8)) == \
        torch.count_nonzero(mla[2][idx_d].view(torch.uint8))
    with pytest.raises(TypeError, match="src_k_layers: pass the layers' tensors as a list"):
        ptrs = torch.tensor([t.data_ptr() for t in k], dtype=torch.int64, device=DEV)
        io.transfer_kv_all_layer(ptrs, ptrs, ptrs, ptrs, idx_d, idx_h, item, layers)


def _vllm_sequence_reference(src, block_table, cu, seqs, starts, tokens):
    """vLLM's kernels' rule on the host: token t of sequence seqs[t] at position t - cu[seq]
    (+ starts[seq]) in its blocks; None where it has no cache row."""
    bs = src.shape[1]
    out = []
    for t in range(tokens):
        b = int(seqs[t])
        pos = t - int(cu[b]) + (int(starts[b]) if starts is not None else 0)
        if t >= int(cu[b + 1]):
            out.append(None)
            continue
        block = int(block_table[b, pos // bs])
        out.append(src[block, pos % bs] if 0 <= block < src.shape[0] else None)
    return out


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8", "fp8_e5m2"])
def test_vllm_gather_and_maybe_dequant_cache_and_cp_gather_cache(kv_cache_dtype):
    from cachestore.compat import vllm
    blocks, bs, E = 24, 16, 576
    cache_dtype = torch.bfloat16 if kv_cache_dtype == "auto" else torch.uint8
    src = rand_bytes(blocks, bs, E, dtype=cache_dtype)
    block_table = torch.tensor([[3, 7, 1, 0], [5, 30, 2, 0], [9, 11, 4, 6]], dtype=torch.int32,
                               device=DEV)  # 30: past the cache
    lens = [20, 35, 9]
    cu = torch.tensor([0, 20, 55, 64], dtype=torch.int32, device=DEV)
    starts = torch.tensor([4, 0, 17], dtype=torch.int32, device=DEV)
    tokens = 64
    seqs = torch.repeat_interleave(torch.arange(3, device=DEV, dtype=torch.int32),
                                   torch.tensor(lens, device=DEV))
    scale = torch.tensor([0.37], dtype=torch.float32, device=DEV)
    dst = torch.full((tokens + 6, E), -7.0, dtype=torch.bfloat16, device=DEV)
    diag = torch.zeros(2, dtype=torch.int64, device=DEV)
    vllm.gather_and_maybe_dequant_cache(src, dst, block_table, cu, seqs, tokens, kv_cache_dtype,
                                        scale, starts, diagnostics=diag)
    torch.cuda.synchronize()
    want = torch.full_like(dst, -7.0)
    ref = _vllm_sequence_reference(src, block_table.cpu(), cu.cpu(), seqs.cpu(), starts.cpu(),
                                   tokens)
    fp8 = {"fp8": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}.get(kv_cache_dtype)
    for t, row in enumerate(ref):
        if row is not None:
            want[t] = row if fp8 is None else (row.view(fp8).float() * 0.37).to(torch.bfloat16)
    if fp8 is None:
        assert same_bytes(dst, want)
    else:  # a NaN code's payload is the conversion's: NaN where expected, the bytes elsewhere
        nan = torch.isnan(want)
        assert torch.equal(torch.isnan(dst), nan)
        assert torch.equal(dst.view(torch.int16)[~nan], want.view(torch.int16)[~nan])
    missing = sum(r is None for r in ref)
    assert missing == 16 and diag.tolist() == [16, 0]  # sequence 1's block 30: 16 tokens
    if kv_cache_dtype != "auto":
        return
    # cp_gather_cache: the rows at or past cu_seq_lens[batch_size] (a device value) untouched.
    out = torch.full((tokens + 6, E), -7.0, dtype=torch.bfloat16, device=DEV)
    vllm.cp_gather_cache(src, out, block_table, cu, 3, starts)
    torch.cuda.synchronize()
    assert same_bytes(out, want)


@pytest.mark.parametrize("make,name,data,scale", [
    (mv.mla_pages, "v4", 576, 8), (mv.mla_pages, "v41", 512, 16),
    (mv.mla_pages, "v32", 656, 0), (mv.index_k_pages, "fp8", 128, 4)])
def test_deepseek_pages_into_another_page_size(make, name, data, scale):
    """mla_pages / index_k_pages: P = 64 pages gathered into staging, scattered into P = 256
    pages (four source entries a destination page); the whole destination cache against the
    layout's byte positions ([P data rows][P scale rows] a page)."""
    from cachestore import capi
    table = capi.mla_min_page_stride if make is mv.mla_pages else None
    s64 = (table(capi.MLA_LAYOUTS[name].layout, 64) if table else
           capi.index_k_min_page_stride(capi.INDEX_K_FORMATS[name].format, 64, 128))
    s256 = (table(capi.MLA_LAYOUTS[name].layout, 256) if table else
            capi.index_k_min_page_stride(capi.INDEX_K_FORMATS[name].format, 256, 128))
    src_cache = rand_bytes(12, s64)
    dst_cache = torch.full((5, s256), 0xEE, dtype=torch.uint8, device=DEV)
    src, dst = make(src_cache, name, 64), make(dst_cache, name, 256)
    ids = torch.tensor([7, 0, 11, 3, 5, 9, 2, 8], device=DEV)  # 8 entries: two P = 256 pages
    buf, stage = mv.staging(src, len(ids))
    mv.gather_pages(src, ids, stage)
    back = torch.tensor([3, 1], device=DEV)
    mv.scatter_pages(stage, dst, back)
    torch.cuda.synchronize()
    want = torch.full_like(dst_cache, 0xEE)
    for e, page in enumerate(ids.tolist()):
        for t in range(64):
            d, pos = divmod(e * 64 + t, 256)
            out = int(back[d])
            want[out, pos * data:(pos + 1) * data] = src_cache[page, t * data:(t + 1) * data]
            if scale:
                at_src, at_dst = 64 * data + t * scale, 256 * data + pos * scale
                want[out, at_dst:at_dst + scale] = src_cache[page, at_src:at_src + scale]
    assert torch.equal(dst_cache, want)
