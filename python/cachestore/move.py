"""cachestore.move: guarded page movement between caches, staging buffers and pinned host memory
(offload, prefix caching, prefill -> decode transfer).

A side of a move is a `Pages`: per layer, the byte views of its planes, each uint8
[num_pages, page_size, heads, row_bytes] (a paged K/V cache is a K and a V plane; nvfp4 adds its
block-scale planes; an MLA or index-K page is one plane of one row with byte_pages, or its data
and scale rows with mla_pages / index_k_pages, which can change page size). Build one from
caches with `paged_kv(...)`, `mla_pages(...)`, `index_k_pages(...)` or `byte_pages(...)`, and a
contiguous staging buffer for it with `staging(...)`.

`move_pages(src, dst, src_page_ids=, dst_page_ids=)` copies, in one launch for every layer and
plane, token t of the batch from source entry t // src.page_size to destination entry
t // dst.page_size (entry e is page page_ids[e], or page e without ids). The guard is the stores':
entries at or past `num_entries_non_padded` (a device int32 [1]) touch nothing, a negative id is
padding, an id >= num_pages is skipped and counted in `diagnostics` (int64 [2]:
out_of_range_pages, negative_entry_counts). The sides may differ in page size (one divides the
other), layout and strides: scatter relayouts byte for byte. Pinned host memory (staging on the
CPU, `pin_memory=True`) is read and written in place by the kernel; pageable memory is refused.
Source and destination must not overlap: `copy_pages` moves pages within one cache through a
staging buffer (every source read before any destination written).

Integrity: `checksums=` (int32 [entries, layers, planes], e.g. from `checksum_buffer`) receives
the CRC-32 of every real source block (an entry's plane of one layer, its rows in row order:
zlib's CRC-32, `zlib.crc32` of that block of a contiguous staging buffer, see `host_checksums`);
with `expected_checksums=` a source block whose CRC-32 differs is not written and is counted in
`diagnostics[2]` (checksum_mismatches; diagnostics then int64 [3]). A gather with `checksums=`
and the receiver's scatter with them as `expected_checksums=` never stores a page that changed
in transit. Nothing synchronizes or allocates, so a move can be captured in a CUDA graph. Layers
that are separate allocations take a device table of their addresses, copied once per set of
addresses and kept (`Pages`): build a `Pages` of them once before a capture (or call the move
once), and a Pages built again from the same tensors, during a capture too, reuses it.

The op is `torch.ops.cachestore.move_pages` (native ops only: torch >= 2.10 with the package's
extension).
"""
import collections
import ctypes
import zlib

import torch

from . import torch as _cachestore_torch
from .torch._store import reraise

_NATIVE = _cachestore_torch.backend == "native"
if _NATIVE:
    torch.library.register_fake("cachestore::move_pages")(lambda *args, **kwargs: None)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _byte_view(t, name):
    """t [pages, page_size, heads, elements] as uint8 [pages, page_size, heads, row_bytes]."""
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D here, got {tuple(t.shape)}")
    if t.shape[3] > 1 and t.stride(3) != 1:
        raise ValueError(f"{name}: each row (the last dim) must be contiguous, got strides "
                         f"{t.stride()}")
    if t.dtype == torch.uint8:
        return t
    if t.shape[3] == 1:  # a one-element row: any stride, give it the unit stride view() needs
        t = t.as_strided(t.shape, t.stride()[:3] + (1,))
    return t.view(torch.uint8)


# The device tables of plane addresses (Pages.plane_bases), by device and addresses: a table
# holds addresses only, so it is right for any tensors at those addresses, alive or not. An
# engine that builds its Pages per call (compat's per-layer lists) copies each table once.
# Least recently used tables beyond the bound are dropped, except one used while a stream was
# capturing, which a graph may still read: it is kept for the process.
_BASE_TABLES = collections.OrderedDict()
_BASE_TABLES_KEPT = {}
_BASE_TABLES_BOUND = 256


def _capturing(device):
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _base_table(flat):
    key = (flat[0].device, tuple(v.data_ptr() for v in flat))
    table = _BASE_TABLES_KEPT.get(key)
    if table is None:
        table = _BASE_TABLES.pop(key, None)
        if table is None:
            table = torch.tensor(key[1], dtype=torch.int64, device=key[0])
        if _capturing(key[0]):
            _BASE_TABLES_KEPT[key] = table
        else:
            _BASE_TABLES[key] = table
            while len(_BASE_TABLES) > _BASE_TABLES_BOUND:
                _BASE_TABLES.popitem(last=False)
    return table


class Pages:
    """One side of a move: `views[layer][plane]`, uint8 [num_pages, page_size, heads, row_bytes]
    byte views, every layer's planes alike. Layers that are not one stride apart in memory (one
    allocation a layer) take a device table of their addresses (`plane_bases`), copied the first
    time a Pages has those addresses and reused after (_base_table): build one before a graph
    capture, and a capture may then build Pages of the same tensors again."""

    def __init__(self, views):
        self.views = [list(layer) for layer in views]
        if not self.views or not self.views[0]:
            raise ValueError("Pages: no views")
        self.flat = flat = [v for layer in self.views for v in layer]  # the op's argument
        self.num_planes = len(self.views[0])
        self.plane_bases = None
        if len(self.views) > 1 and flat[0].is_cuda and not _one_stride(self.views):
            self.plane_bases = _base_table(flat)

    @property
    def num_layers(self):
        return len(self.views)

    @property
    def num_pages(self):
        return self.views[0][0].shape[0]

    @property
    def page_size(self):
        return self.views[0][0].shape[1]

    @property
    def rows(self):
        """(heads, row_bytes) of each plane."""
        return [(v.shape[2], v.shape[3]) for v in self.views[0]]

    @property
    def token_bytes(self):
        """Bytes of one token of one layer, every plane."""
        return sum(h * r for h, r in self.rows)


def _one_stride(views):
    stride = views[1][0].data_ptr() - views[0][0].data_ptr()
    return stride > 0 and all(views[l][j].data_ptr() - views[0][j].data_ptr() == l * stride
               for l in range(len(views)) for j in range(len(views[0])))


_KV_LAYOUTS = ("nhd", "hnd")


def _kv_view(t, layout, name):
    if t.dim() == 3:  # [pages, page_size, row]: one head (MLA rows)
        t = t.unsqueeze(2)
    elif t.dim() != 4:
        raise ValueError(f"{name} must be [num_pages, page_size, heads, head_dim] (nhd), "
                         f"[num_pages, heads, page_size, head_dim] (hnd) or [num_pages, "
                         f"page_size, row], got {tuple(t.shape)}")
    elif layout == "hnd":
        t = t.permute(0, 2, 1, 3)
    return _byte_view(t, name)


def paged_kv(k_caches, v_caches=None, *, layout="nhd", k_block_scales=None,
             v_block_scales=None):
    """The Pages of paged K/V caches: each argument one tensor or a list of one per layer;
    layout 'nhd' ([num_pages, page_size, heads, head_dim]) or 'hnd' ([num_pages, heads,
    page_size, head_dim]), 3-D [num_pages, page_size, row] for one head; any dtype (fp8, nvfp4
    bytes); the nvfp4 block scales as planes in the same layout. A vLLM [2, num_pages, ...]
    cache is k_caches=kv[0], v_caches=kv[1]."""
    if layout not in _KV_LAYOUTS:
        raise ValueError(f"layout = {layout!r}: expected one of {list(_KV_LAYOUTS)}")
    groups = [("k_caches", k_caches), ("v_caches", v_caches), ("k_block_scales", k_block_scales),
              ("v_block_scales", v_block_scales)]
    planes = [(name, _as_list(x)) for name, x in groups if x is not None]
    layers = len(planes[0][1])
    for name, tensors in planes:
        if len(tensors) != layers:
            raise ValueError(f"{name} has {len(tensors)} layers, k_caches {layers}")
    return Pages([[_kv_view(tensors[l], layout, f"{name}[{l}]") for name, tensors in planes]
                  for l in range(layers)])


def byte_pages(caches, *more_planes):
    """The Pages of byte-page caches (MLA, index-K, or any [num_pages, ...] tensor whose pages
    are each contiguous), each argument one tensor or a list of one per layer, each argument a
    plane (e.g. a layer's K and V caches): a page is one row of its bytes. Whole pages move (the
    layouts' page size stays)."""
    groups = [_as_list(caches)] + [_as_list(m) for m in more_planes]
    for g in groups[1:]:
        if len(g) != len(groups[0]):
            raise ValueError(f"byte_pages: {len(g)} layers in one argument, {len(groups[0])} "
                             "in the first")
    return Pages([[_page_row(g[l], f"caches[{l}]") for g in groups]
                  for l in range(len(groups[0]))])


def mla_pages(caches, layout, page_size):
    """The Pages of DeepSeek MLA caches ([num_pages, ...] uint8 (or any dtype) with each page
    contiguous; one tensor or a list of one per layer) in `layout` ("v4", "v32", "v41",
    "v41_fp4": the layout table's names) at `page_size` tokens a page: each token's data row, and
    in a split layout its scale row, as planes (docs/layouts.md), so that a move may change the
    page size (P = 64 -> 256) byte for byte. byte_pages moves such pages whole instead."""
    from . import capi
    if layout not in capi.MLA_LAYOUTS:
        raise ValueError(f"layout = {layout!r}: expected one of {list(capi.MLA_LAYOUTS)}")
    info = capi.MLA_LAYOUTS[layout]
    return _token_row_pages(caches, page_size, info.data_row_bytes, info.scale_row_bytes)


def index_k_pages(caches, index_format, page_size, head_dim=128):
    """The Pages of index-K caches in `index_format` ("fp8": the 132-byte page at D = 128,
    "fp4": the 68-byte one) at `page_size` tokens a page: the data rows and the scale rows as
    planes (as mla_pages)."""
    from . import capi
    if index_format not in capi.INDEX_K_FORMATS:
        raise ValueError(f"index_format = {index_format!r}: expected one of "
                         f"{list(capi.INDEX_K_FORMATS)}")
    info = capi.INDEX_K_FORMATS[index_format]
    if head_dim < 1 or head_dim % info.group != 0:
        raise ValueError(f"head_dim = {head_dim}: must be a positive multiple of {info.group}")
    return _token_row_pages(caches, page_size, head_dim // info.values_per_byte,
                            info.scale_bytes * (head_dim // info.group))


def _token_row_pages(caches, page_size, data_row, scale_row):
    """Pages of pages laid out [page_size data rows][page_size scale rows] (scale_row 0: one
    record a token), a plane each."""
    if page_size < 1:
        raise ValueError(f"page_size = {page_size}: must be >= 1")
    layers = []
    for l, t in enumerate(_as_list(caches)):
        name = f"caches[{l}]"
        if t.dim() < 2 or not t[0].is_contiguous():
            raise ValueError(f"{name} must be [num_pages, ...] with each page contiguous, got "
                             f"{tuple(t.shape)} strides {t.stride()}")
        b = t if t.dtype == torch.uint8 else t.view(torch.uint8)
        page_stride, page_bytes = t.stride(0) * t.element_size(), t[0].numel() * t.element_size()
        if page_size * (data_row + scale_row) > page_bytes:
            raise ValueError(f"{name}: pages of {page_bytes} bytes hold no {page_size} tokens of "
                             f"{data_row} + {scale_row} bytes")
        planes = [(0, data_row)] + ([(page_size * data_row, scale_row)] if scale_row else [])
        layers.append([b.as_strided((t.shape[0], page_size, 1, row), (page_stride, row, row, 1),
                                    b.storage_offset() + offset) for offset, row in planes])
    return Pages(layers)


def _page_row(t, name):
    if t.dim() < 1 or t.shape[0] < 1 or not t[0].is_contiguous():
        raise ValueError(f"{name} must be [num_pages, ...] with each page contiguous, got "
                         f"{tuple(t.shape)} strides {t.stride()}")
    # The one-token, one-head dims get the row's own stride: the library widens its vectors to
    # what every stride allows, and a 1-byte stride there would make it copy byte by byte.
    row = t[0].numel()
    b = t.as_strided((t.shape[0], 1, 1, row), (t.stride(0), row, row, 1))
    return b if t.dtype == torch.uint8 else b.view(torch.uint8)


def staging(like, entries, *, device=None, pin_memory=False, order="page_first"):
    """A zeroed contiguous staging buffer for `entries` pages of `like` and its Pages:
    order 'page_first' ([entries, layers, bytes]: a page's layers together, one contiguous
    block an entry) or 'layer_first' ([layers, entries, bytes]); within an entry and layer, each
    plane's [page_size, heads, row_bytes] after the one before (docs/layouts.md, "Staging
    buffers"). `device` default: like's; pin_memory=True: pinned host memory."""
    if order not in ("page_first", "layer_first"):
        raise ValueError(f"order = {order!r}: expected 'page_first' or 'layer_first'")
    per_layer = like.page_size * like.token_bytes
    shape = ((entries, like.num_layers, per_layer) if order == "page_first"
             else (like.num_layers, entries, per_layer))
    if pin_memory:
        buffer = torch.zeros(shape, dtype=torch.uint8, pin_memory=True)
    else:
        buffer = torch.zeros(shape, dtype=torch.uint8,
                             device=device if device is not None else like.flat[0].device)
    return buffer, staging_pages(buffer, like, order=order)


def staging_pages(buffer, like, *, order="page_first"):
    """The Pages of an existing staging buffer laid out as `staging` lays it out (e.g. one
    received from another process)."""
    if buffer.dtype != torch.uint8 or buffer.dim() != 3 or not buffer.is_contiguous():
        raise ValueError(f"buffer must be a contiguous uint8 [entries, layers, bytes] or "
                         f"[layers, entries, bytes] tensor, got {buffer.dtype} "
                         f"{tuple(buffer.shape)}")
    layer_dim = 1 if order == "page_first" else 0
    if buffer.shape[layer_dim] != like.num_layers or \
            buffer.shape[2] != like.page_size * like.token_bytes:
        raise ValueError(f"buffer {tuple(buffer.shape)} does not hold {like.num_layers} layers "
                         f"of {like.page_size * like.token_bytes} bytes an entry ({order})")
    entries = buffer.shape[1 - layer_dim]
    views = []
    for l in range(like.num_layers):
        block = buffer[:, l] if order == "page_first" else buffer[l]
        offset, layer = 0, []
        for heads, row in like.rows:
            size = like.page_size * heads * row
            layer.append(block[:, offset:offset + size].unflatten(1, (like.page_size, heads, row)))
            offset += size
        views.append(layer)
    pages = Pages(views)
    assert pages.num_pages == entries
    return pages


def _ids(page_ids, device):
    if page_ids is None or isinstance(page_ids, torch.Tensor):
        return page_ids
    return torch.tensor(list(page_ids), dtype=torch.int64, device=device)


def move_pages(src, dst, *, src_page_ids=None, dst_page_ids=None, num_entries_non_padded=None,
               diagnostics=None, enable_pdl=False, checksums=None, expected_checksums=None):
    """Copies the entries of `src` (Pages) into `dst` (Pages): see the module's docstring.
    src_page_ids / dst_page_ids: device int32 or int64 [entries] (a list is copied to the
    device first: not inside a graph capture), at least one of them; dst's holds
    entries * src.page_size / dst.page_size ids. checksums / expected_checksums: CUDA int32
    [entries, layers, planes] (the module's docstring)."""
    if not _NATIVE:
        raise NotImplementedError(
            "cachestore.move needs the native torch ops (torch >= 2.10 and the package's "
            f"extension); here: {_cachestore_torch.backend_detail}")
    if src.num_planes != dst.num_planes:
        raise ValueError(f"src has {src.num_planes} planes a layer, dst {dst.num_planes}")
    device = next((v.device for v in src.flat + dst.flat if v.is_cuda), None)
    try:
        torch.ops.cachestore.move_pages(
            src.flat, dst.flat, src.num_planes, _ids(src_page_ids, device),
            _ids(dst_page_ids, device), num_entries_non_padded, diagnostics, enable_pdl,
            src.plane_bases, dst.plane_bases, checksums, expected_checksums)
    except (ValueError, RuntimeError) as e:
        reraise(e)


def checksum_buffer(pages, entries, *, device=None):
    """A zeroed int32 [entries, layers, planes] for move_pages' checksums (on pages' device)."""
    if device is None:
        device = next((v.device for v in pages.flat if v.is_cuda), None)
    return torch.zeros((entries, pages.num_layers, pages.num_planes), dtype=torch.int32,
                       device=device)


def host_checksums(pages, entries=None):
    """The CRC-32 (zlib.crc32) of each block of the first `entries` entries of `pages` (a side on
    the CPU, e.g. a staging buffer received from another process), computed on the host: int32
    [entries, layers, planes], comparable with move_pages' checksums."""
    entries = pages.num_pages if entries is None else entries
    out = torch.empty((entries, pages.num_layers, pages.num_planes), dtype=torch.int64)
    for e in range(entries):
        for l, layer in enumerate(pages.views):
            for j, view in enumerate(layer):
                block = view[e].cpu().contiguous()
                out[e, l, j] = zlib.crc32(ctypes.string_at(block.data_ptr(), block.numel()))
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


def gather_pages(cache, page_ids, staging_pages_, **options):
    """Pages page_ids of `cache` into staging entries 0, 1, ... (move_pages' options)."""
    move_pages(cache, staging_pages_, src_page_ids=page_ids, **options)


def scatter_pages(staging_pages_, cache, page_ids, **options):
    """Staging entries into pages page_ids of `cache` (of any page size that divides or is a
    multiple of the staging's: page_ids then holds entries * staging P / cache P ids)."""
    move_pages(staging_pages_, cache, dst_page_ids=page_ids, **options)


def copy_pages(cache, src_page_ids, dst_page_ids, *, buffer=None, **options):
    """Pages src_page_ids[i] of `cache` into dst_page_ids[i] of the same cache, every source
    read before any destination is written (a gather into `buffer`, the Pages of a staging
    buffer of at least len(src_page_ids) entries, allocated here when None, then a scatter)."""
    device = next((v.device for v in cache.flat if v.is_cuda), None)
    src_page_ids, dst_page_ids = _ids(src_page_ids, device), _ids(dst_page_ids, device)
    n = src_page_ids.shape[0]
    if dst_page_ids.shape[0] != n:
        raise ValueError(f"src_page_ids has {n} ids, dst_page_ids {dst_page_ids.shape[0]}")
    if buffer is None:
        _, buffer = staging(cache, max(n, 1))
    if buffer.num_pages < n:
        raise ValueError(f"buffer holds {buffer.num_pages} entries; {n} pages are copied")
    move_pages(cache, buffer, src_page_ids=src_page_ids, **options)
    # A source the gather skipped (padding, out of range) writes no destination: its id is
    # padding in the scatter (device ops, no synchronization).
    valid = (src_page_ids >= 0) & (src_page_ids < cache.num_pages)
    dst_page_ids = torch.where(valid, dst_page_ids, torch.full_like(dst_page_ids, -1))
    move_pages(buffer, cache, dst_page_ids=dst_page_ids, **options)


__all__ = ["Pages", "paged_kv", "byte_pages", "mla_pages", "index_k_pages", "staging",
           "staging_pages", "move_pages", "gather_pages", "scatter_pages", "copy_pages",
           "checksum_buffer", "host_checksums"]
