"""cachestore.move without a GPU: the staging layout, the Pages of each cache form, and the op's
refusals (CPU tensors reach the native op's checks; the Python ops backend has no move)."""
import pytest

from conftest import need_torch

torch = need_torch()
import cachestore.move as mv  # noqa: E402
import cachestore.torch as cst  # noqa: E402

NATIVE = cst.backend == "native"


def test_staging_layout_is_page_first_planes_in_order():
    k = torch.zeros(10, 16, 4, 64, dtype=torch.bfloat16)  # nhd: 2 KiB a token-head row
    cache = mv.paged_kv([k, k.clone()], [k.clone(), k.clone()])
    assert (cache.num_layers, cache.num_planes, cache.page_size, cache.num_pages) == (2, 2, 16, 10)
    assert cache.rows == [(4, 128), (4, 128)]
    buffer, pages = mv.staging(cache, 3, device="cpu")
    assert buffer.shape == (3, 2, 2 * 16 * 4 * 128)
    base = buffer.data_ptr()
    per_entry, per_layer, plane = 2 * 16 * 4 * 128 * 2, 2 * 16 * 4 * 128, 16 * 4 * 128
    for l in range(2):
        for j in range(2):
            v = pages.views[l][j]
            assert v.shape == (3, 16, 4, 128)
            assert v.stride() == (per_entry, 4 * 128, 128, 1)
            assert v.data_ptr() - base == l * per_layer + j * plane
    _, layer_first = mv.staging(cache, 3, device="cpu", order="layer_first")
    assert layer_first.views[1][0].data_ptr() - layer_first.views[0][0].data_ptr() == 3 * per_layer


def test_hnd_views_and_byte_pages():
    v = torch.zeros(6, 2, 8, 32, dtype=torch.float16)  # hnd [pages, H, P, D]
    pages = mv.paged_kv(v, layout="hnd")
    view = pages.views[0][0]
    assert view.shape == (6, 8, 2, 64) and view.stride() == (2 * 8 * 64, 64, 8 * 64, 1)
    mla = torch.zeros(5, 64 * 656, dtype=torch.uint8)
    b = mv.byte_pages([mla, torch.zeros_like(mla)])
    assert b.rows == [(1, 64 * 656)] and b.page_size == 1 and b.num_pages == 5
    # The one-token, one-head dims stride by the row (the op widens vectors by every stride).
    assert b.views[0][0].stride() == (64 * 656, 64 * 656, 64 * 656, 1)
    wide = mv.byte_pages(torch.zeros(5, 64, 576, dtype=torch.bfloat16)).views[0][0]
    assert wide.shape == (5, 1, 1, 64 * 576 * 2) and wide.stride() == (64 * 576 * 2,) * 3 + (1,)
    with pytest.raises(ValueError, match="layout = 'khn'"):
        mv.paged_kv(v, layout="khn")
    with pytest.raises(ValueError, match="v_caches has 1 layers, k_caches 2"):
        mv.paged_kv([v, v], [v])


def test_op_refusals_name_the_argument():
    """Native ops: the op's checks, naming the argument. Python ops: move is refused as a
    whole (it has no Python implementation)."""
    k = torch.zeros(10, 16, 4, 64, dtype=torch.bfloat16)
    cache = mv.paged_kv(k)
    _, stage = mv.staging(cache, 4, device="cpu")
    ids = torch.tensor([0, 1, 2, 3])
    if not NATIVE:
        with pytest.raises(NotImplementedError, match="native torch ops"):
            mv.move_pages(cache, stage, src_page_ids=ids)
        return
    with pytest.raises(ValueError, match="src_page_ids is on cpu; it must be a CUDA tensor"):
        mv.move_pages(cache, stage, src_page_ids=ids)
    with pytest.raises(ValueError, match="give src_page_ids, dst_page_ids or both"):
        mv.move_pages(cache, stage)
    with pytest.raises(TypeError, match=r"src_page_ids.dtype is torch.float32"):
        mv.move_pages(cache, stage, src_page_ids=ids.float())
    with pytest.raises(ValueError, match=r"dst_page_ids holds 3 pages of 16 tokens; the 4 source"):
        mv.move_pages(cache, cache, src_page_ids=ids, dst_page_ids=ids[:3])
    other = mv.paged_kv(torch.zeros(10, 16, 2, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"plane 0: src rows are"):
        mv.move_pages(cache, other, src_page_ids=ids, dst_page_ids=ids)
    with pytest.raises(ValueError, match="src has 1 planes a layer, dst 2"):
        mv.move_pages(cache, mv.paged_kv(k, k), src_page_ids=ids)


def test_checksum_refusals_and_host_checksums():
    layers = torch.zeros(2, 10, 16, 4, 64, dtype=torch.bfloat16)  # one buffer: a layer stride
    cache = mv.paged_kv(list(layers))
    buffer, stage = mv.staging(cache, 3, device="cpu")
    buffer.view(-1)[:: 7] = 5
    sums = mv.host_checksums(stage)  # zlib.crc32 of each block, as the kernel computes them
    assert sums.shape == (3, 2, 1) and sums.dtype == torch.int32
    import zlib
    block = bytes(buffer[2, 1].tolist())
    assert int(sums[2, 1, 0]) & 0xFFFFFFFF == zlib.crc32(block)
    if not NATIVE:
        return
    ids = torch.tensor([0, 1, 2])
    with pytest.raises(TypeError, match=r"checksums.dtype is torch.int64"):
        mv.move_pages(cache, stage, src_page_ids=ids, checksums=sums.long())
    with pytest.raises(ValueError, match=r"expected_checksums must be a contiguous int32 tensor "
                       r"of 6 elements"):
        mv.move_pages(cache, stage, src_page_ids=ids, expected_checksums=sums[:2])
    with pytest.raises(ValueError, match=r"diagnostics must be a contiguous int64 tensor of at "
                       r"least 3 counters \(checksum_mismatches"):
        mv.move_pages(cache, stage, src_page_ids=ids, expected_checksums=sums,
                      diagnostics=torch.zeros(2, dtype=torch.int64))


def test_sglang_transfer_refusals():
    from cachestore.compat import sglang_kvcacheio as io
    k = [torch.zeros(8, 2, 64, dtype=torch.bfloat16) for _ in range(2)]
    idx = torch.tensor([0, 1])
    with pytest.raises(TypeError, match="src_k_layers: pass the layers' tensors as a list"):
        io.transfer_kv_all_layer(torch.tensor([1, 2]), k, k, k, idx, idx, 256, 2)
    with pytest.raises(ValueError, match="dst_k_layers has 2 layers; num_layers = 3"):
        io.transfer_kv_all_layer(k + [k[0]], k, k + [k[0]], k, idx, idx, 256, 3)
    with pytest.raises(TypeError, match=r"src_indices.dtype is torch.int32"):
        io.transfer_kv_per_layer(k[0], k[1], k[0], k[1], idx.int(), idx, 256)
    with pytest.raises(ValueError, match="src_k: layout_dim = 256 bytes a slot holds no layer 1"):
        io.transfer_kv_per_layer_pf_lf(k[0], k[1], k[0], k[1], idx, idx, 1, 256, 256)


def test_mla_and_index_k_pages_are_the_layout_tables_token_rows():
    """mla_pages / index_k_pages: each token's data row and scale row where the layout puts them
    ([P data rows][P scale rows] a page, docs/layouts.md), byte for byte against the page."""
    g = torch.Generator().manual_seed(3)
    cases = [(mv.mla_pages, "v4", 64, 576, 8, 37440),
             (mv.mla_pages, "v41", 64, 512, 16, 33792),
             (mv.mla_pages, "v41_fp4", 64, 256, 32, 18432),
             (mv.mla_pages, "v32", 64, 656, 0, 41984),
             (mv.index_k_pages, "fp8", 64, 128, 4, 8448),
             (mv.index_k_pages, "fp4", 64, 64, 4, 4352)]
    for make, name, P, data, scale, stride in cases:
        cache = torch.randint(0, 256, (3, stride + 64), dtype=torch.uint8, generator=g)  # padded
        pages = make([cache, cache], name, P)
        assert pages.page_size == P and pages.num_pages == 3 and pages.num_layers == 2
        assert pages.rows == [(1, data)] + ([(1, scale)] if scale else []), name
        d = pages.views[0][0]
        for p in (0, 2):
            for t in (0, 5, P - 1):
                assert torch.equal(d[p, t, 0], cache[p, t * data:(t + 1) * data]), (name, p, t)
                if scale:
                    at = P * data + t * scale
                    assert torch.equal(pages.views[0][1][p, t, 0], cache[p, at:at + scale])
        # A staging buffer for it holds P tokens of data + scale bytes an entry and layer.
        buffer, _ = mv.staging(pages, 4, device="cpu")
        assert buffer.shape == (4, 2, P * (data + scale))
    with pytest.raises(ValueError, match="layout = 'v5'"):
        mv.mla_pages(torch.zeros(2, 37440, dtype=torch.uint8), "v5", 64)
    with pytest.raises(ValueError, match=r"caches\[0\]: pages of 37440 bytes hold no 128 tokens"):
        mv.mla_pages(torch.zeros(2, 37440, dtype=torch.uint8), "v4", 128)
    with pytest.raises(ValueError, match="head_dim = 100: must be a positive multiple of 32"):
        mv.index_k_pages(torch.zeros(2, 4352, dtype=torch.uint8), "fp4", 64, head_dim=100)


def test_plane_base_tables_are_copied_once_per_set_of_addresses(monkeypatch):
    # CPU tensors take no table in a Pages (only separate CUDA allocations do), so the table
    # helper is driven directly: the same addresses give the same table, holding them; other
    # addresses another; past the bound the least recently used goes, except a table used
    # while a stream was capturing.
    monkeypatch.setattr(mv, "_BASE_TABLES", type(mv._BASE_TABLES)())
    monkeypatch.setattr(mv, "_BASE_TABLES_KEPT", {})
    monkeypatch.setattr(mv, "_BASE_TABLES_BOUND", 2)
    layers = [torch.zeros(4, 16, dtype=torch.uint8) for _ in range(3)]
    first = mv._base_table(layers)
    assert first.tolist() == [t.data_ptr() for t in layers] and first.dtype == torch.int64
    assert mv._base_table(list(layers)) is first
    other = mv._base_table(layers[::-1])
    assert other is not first and other.tolist() == [t.data_ptr() for t in layers[::-1]]
    monkeypatch.setattr(mv, "_capturing", lambda device: True)
    captured = mv._base_table(layers[1:])
    monkeypatch.setattr(mv, "_capturing", lambda device: False)
    for i in range(3):  # three more sets of addresses: past the bound of 2
        mv._base_table([layers[i]])
    assert mv._base_table(layers) is not first  # dropped, copied again
    assert mv._base_table(layers[1:]) is captured  # kept for the graph that may read it
