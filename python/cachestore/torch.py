"""cachestore for PyTorch: one function per store, torch tensors in.

Every function validates its tensors in Python (dtype, shape, the contiguity a layout needs, one
CUDA device) and raises TypeError / ValueError naming the argument; the library then checks the
rest (alignment, page strides, capacities) and refuses with `cachestore.CachestoreError` and its
own message. Nothing is written when either refuses.

Sizes, strides, page sizes, capacities and the slot type come from the tensors. Launches go to
the current torch stream of the tensors' device; nothing synchronizes, allocates or reads a
device value on the host, so every call can be captured in `torch.cuda.graph`.

The functions call torch custom ops (namespace `cachestore`, caches marked as mutated, fake
implementations registered), so `torch.compile(fullgraph=True)` traces through them.
`cachestore.torch.direct` has the same functions without the dispatcher (least host time).
"""
import types
from typing import Optional

import torch

from . import capi as c

Tensor = torch.Tensor

# ---- the layouts' page sizes ---------------------------------------------------------------
_POW2_PAGES = [1 << i for i in range(11)]  # 1 .. 1024


def _round_up(x, m):
    return (x + m - 1) // m * m


def _index_fp8_page_bytes(p, d):
    return p * (d + 4 * (d // 128))


def _index_fp4_page_bytes(p, d):
    return p * (d // 2 + d // 32)


_MLA_LAYOUTS = {  # name: (C enum, nope width, minimum page bytes for page size p)
    "v4": (c.MLA_V4, 448, lambda p: _round_up(584 * p, 576)),
    "v32": (c.MLA_V32, 512, lambda p: 656 * p),
    "v41": (c.MLA_V41, 448, lambda p: _round_up(528 * p, 512)),
    "v41_fp4": (c.MLA_V41_FP4, 448, lambda p: _round_up(288 * p, 256)),
}
_SCALE_RULES = {"amax": c.SCALE_AMAX, "pow2": c.SCALE_POW2}
_TIES = {"even": c.FP4_TIES_TO_EVEN, "toward_zero": c.FP4_TIES_TOWARD_ZERO}


# ---- validation (metadata only: also runs on fake tensors under torch.compile) -------------
def _check_tensor(name, t, dtypes, ndims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"{name}.dtype is {t.dtype}; expected " +
                        " or ".join(str(d) for d in dtypes))
    if t.dim() not in ndims:
        raise ValueError(f"{name} has {t.dim()} dimensions {tuple(t.shape)}; expected " +
                         " or ".join(str(n) for n in ndims))


def _check_rows(name, t, width=None):
    """A [rows, width] bf16 matrix with contiguous rows (any row stride)."""
    _check_tensor(name, t, (torch.bfloat16,), (2,))
    if width is not None and t.shape[1] != width:
        raise ValueError(f"{name} has {t.shape[1]} columns; the layout needs {width}")
    if t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{name} must have contiguous rows (stride(1) == 1), got {t.stride()}")


def _check_slots(name, t, rows):
    _check_tensor(name, t, (torch.int32, torch.int64), (1,))
    if t.shape[0] != rows:
        raise ValueError(f"{name} has {t.shape[0]} entries; the batch has {rows} rows")
    if t.shape[0] > 1 and t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous")


def _check_options(num_tokens_non_padded, diagnostics, owner_rank, owner_size):
    if num_tokens_non_padded is not None:
        _check_tensor("num_tokens_non_padded", num_tokens_non_padded, (torch.int32,), (0, 1))
        if num_tokens_non_padded.numel() != 1:
            raise ValueError("num_tokens_non_padded must hold one int32 (the real row count)")
    if diagnostics is not None:
        _check_tensor("diagnostics", diagnostics, (torch.int64, torch.uint64), (1,))
        if diagnostics.numel() != 2 or not diagnostics.is_contiguous():
            raise ValueError("diagnostics must be a contiguous int64 tensor of 2 counters")
    if owner_size < 1 or owner_size & (owner_size - 1):
        raise ValueError(f"owner_size = {owner_size}: must be a power of two >= 1")
    if not 0 <= owner_rank < owner_size:
        raise ValueError(f"owner_rank = {owner_rank}: must be in [0, owner_size = {owner_size})")


def _check_paged_bytes(name, t):
    """A byte cache: uint8 [num_pages, ...], each page's bytes contiguous (any page stride)."""
    _check_tensor(name, t, (torch.uint8,), (2, 3, 4))
    shape, stride = t.shape, t.stride()
    expected = 1
    for i in range(len(shape) - 1, 0, -1):
        if shape[i] != 1 and stride[i] != expected:
            raise ValueError(f"{name}: each page (dimensions 1..) must be contiguous, got "
                             f"strides {stride}")
        expected *= shape[i]


def _page_bytes(t):
    size = 1
    for n in t.shape[1:]:
        size *= n
    return size


_PAGE_SIZES = {}  # (layout key, page bytes) -> the page size whose minimum page is that size


def _infer_page_size(name, page_size, page_bytes, key, min_bytes):
    if page_size is not None:
        return int(page_size)
    found = _PAGE_SIZES.get((key, page_bytes))
    if found is None:
        found = next((p for p in _POW2_PAGES if min_bytes(p) == page_bytes), 0)
        _PAGE_SIZES[(key, page_bytes)] = found
    if found == 0:
        raise ValueError(f"{name}: no page size has exactly {page_bytes} bytes per page in this "
                         f"layout; pass page_size= (the page may be padded)")
    return found


def _same_device(*named):
    index = None
    for name, t in named:
        if t is None:
            continue
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; cachestore stores run on CUDA tensors")
        if index is None:
            index, first = t.get_device(), t
        elif t.get_device() != index:
            raise ValueError(f"{name} is on {t.device}, the other tensors on {first.device}")


# ---- the C calls (real tensors only) --------------------------------------------------------
def _ptr(t):
    return None if t is None else t.data_ptr()


try:  # the raw handle without a Stream object (what torch's own compiled kernels use)
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _current_device = torch._C._cuda_getDevice
except AttributeError:  # pragma: no cover - other torch builds
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream

    _current_device = torch.cuda.current_device


def _launch(fn, params, tensor):
    """On the tensors' device and its current torch stream."""
    index = tensor.get_device()
    if index != _current_device():
        with torch.cuda.device(index):
            fn(params, _raw_stream(index))
    else:
        fn(params, _raw_stream(index))


def _batch(params, rows, count, diagnostics, enable_pdl):
    params.num_tokens = rows
    params.num_tokens_non_padded = _ptr(count)
    params.diagnostics = _ptr(diagnostics)
    params.enable_pdl = int(enable_pdl)


def _slots(t, reserved_slot, owner_rank=0, owner_size=1):
    return c.Slots(t.data_ptr(), c.SLOT_INT32 if t.dtype == torch.int32 else c.SLOT_INT64,
                   owner_rank, reserved_slot, owner_size, 0)


def _build_index_k_bf16(k, slot_mapping, cache, count, diagnostics, reserved_slot, enable_pdl):
    p = c.IndexKBf16Params()
    _batch(p, k.shape[0], count, diagnostics, enable_pdl)
    p.slots = _slots(slot_mapping, reserved_slot)
    p.k, p.k_row_stride = k.data_ptr(), k.stride(0)
    p.cache, p.cache_row_stride = cache.data_ptr(), cache.stride(0)
    p.num_slots, p.head_dim = cache.shape[0], k.shape[1]
    return c.store_index_k_bf16, p, k


def _index_cache(struct, cache, page_size, head_dim, rule):
    return struct(cache.data_ptr(), cache.shape[0], cache.stride(0), page_size, head_dim, rule, 0)


def _build_index_k_quantized(fp4, k, slot_mapping, cache, page_size, rule, count, diagnostics,
                           reserved_slot, owner_rank, owner_size, enable_pdl):
    p = c.IndexKFp4Params() if fp4 else c.IndexKFp8Params()
    _batch(p, k.shape[0], count, diagnostics, enable_pdl)
    p.slots = _slots(slot_mapping, reserved_slot, owner_rank, owner_size)
    p.k, p.k_row_stride = k.data_ptr(), k.stride(0)
    p.cache = _index_cache(c.IndexKFp4Cache if fp4 else c.IndexKFp8Cache, cache, page_size,
                           k.shape[1], rule)
    return c.store_index_k_fp4 if fp4 else c.store_index_k_fp8, p, k


def _build_fused(nope, rope, slot_mapping, kv_cache, layout, page_size, scale_rule, index_k,
               index_slot_mapping, index_cache, index_format, index_page_size, index_rule, count,
               diagnostics, reserved_slot, index_reserved_slot, owner_rank, owner_size,
               enable_pdl):
    p = c.FusedStoreParams()
    _batch(p, nope.shape[0], count, diagnostics, enable_pdl)
    p.kv_slots = _slots(slot_mapping, reserved_slot, owner_rank, owner_size)
    p.nope, p.nope_row_stride = nope.data_ptr(), nope.stride(0)
    p.rope, p.rope_row_stride = rope.data_ptr(), rope.stride(0)
    p.layout, p.kv_scale_rule = layout, scale_rule
    p.kv_cache, p.kv_num_pages = kv_cache.data_ptr(), kv_cache.shape[0]
    p.kv_page_stride_bytes, p.kv_page_size = kv_cache.stride(0), page_size
    if index_k is not None:
        p.index_k, p.index_k_row_stride = index_k.data_ptr(), index_k.stride(0)
        p.index_slots = _slots(index_slot_mapping, index_reserved_slot, owner_rank, owner_size)
        p.index_format = index_format
        if index_format == c.INDEX_K_FP4:
            p.index_fp4_cache = _index_cache(c.IndexKFp4Cache, index_cache, index_page_size,
                                             index_k.shape[1], index_rule)
        else:
            p.index_cache = _index_cache(c.IndexKFp8Cache, index_cache, index_page_size,
                                         index_k.shape[1], index_rule)
    return c.fused_store_cache, p, nope


def _kv_side(x, cache, layout, scale):
    """One side of store_paged_kv: input [T, H, D] or [T, D]; cache NHD [pages, P, H, D], HND
    [pages, H, P, D] or [pages, P, D] (one head)."""
    side = c.KvSide()
    side.data, side.token_stride = x.data_ptr(), x.stride(0)
    side.head_dim = x.shape[-1]
    side.head_stride = x.stride(1) if x.dim() == 3 else x.shape[-1]
    side.cache, side.page_stride = cache.data_ptr(), cache.stride(0)
    if cache.dim() == 3:
        side.entry_stride, side.cache_head_stride = cache.stride(1), cache.shape[-1]
    elif layout == "nhd":
        side.entry_stride, side.cache_head_stride = cache.stride(1), cache.stride(2)
    else:
        side.entry_stride, side.cache_head_stride = cache.stride(2), cache.stride(1)
    if scale is not None:
        side.scale, side.scale_stride = scale.data_ptr(), 0 if scale.numel() == 1 else 1
    return side


def _build_paged_kv(key, value, slot_mapping, key_cache, value_cache, layout, cache_type, k_scale,
                  v_scale, count, diagnostics, reserved_slot, owner_rank, owner_size,
                  enable_pdl):
    p = c.PagedKvParams()
    _batch(p, key.shape[0], count, diagnostics, enable_pdl)
    p.slots = _slots(slot_mapping, reserved_slot, owner_rank, owner_size)
    p.num_heads = key.shape[1] if key.dim() == 3 else 1
    p.input_type = c.KV_BF16 if key.dtype == torch.bfloat16 else c.KV_FP16
    p.cache_type = cache_type
    p.num_pages = key_cache.shape[0]
    p.page_size = key_cache.shape[1] if (key_cache.dim() == 3 or layout == "nhd") else key_cache.shape[2]
    p.k = _kv_side(key, key_cache, layout, k_scale)
    if value is not None:
        p.v = _kv_side(value, value_cache, layout, v_scale)
    return c.store_paged_kv, p, key


def _runner(build):
    def run(*args):
        _launch(*build(*args))
    return run


_run_index_k_bf16 = _runner(_build_index_k_bf16)
_run_index_k_quantized = _runner(_build_index_k_quantized)
_run_fused = _runner(_build_fused)
_run_paged_kv = _runner(_build_paged_kv)


# ---- torch custom ops: the caches (and diagnostics) mutated, nothing returned ---------------
_LIB = "cachestore"


def _op(name, mutates, fn):
    # CUDA only: a direct call of torch.ops.cachestore.* with CPU tensors is refused by the
    # dispatcher instead of passing host pointers to a kernel.
    op = torch.library.custom_op(f"{_LIB}::{name}", fn, mutates_args=mutates, device_types="cuda")

    @op.register_fake
    def _fake(*args, **kwargs):
        return None

    return op


def _op_index_k_bf16(k: Tensor, slot_mapping: Tensor, cache: Tensor,
                     num_tokens_non_padded: Optional[Tensor], diagnostics: Optional[Tensor],
                     reserved_slot: int, enable_pdl: bool) -> None:
    _run_index_k_bf16(k, slot_mapping, cache, num_tokens_non_padded, diagnostics, reserved_slot,
                      enable_pdl)


def _op_index_k_quantized(fp4: bool, k: Tensor, slot_mapping: Tensor, cache: Tensor,
                          page_size: int, rule: int, num_tokens_non_padded: Optional[Tensor],
                          diagnostics: Optional[Tensor], reserved_slot: int, owner_rank: int,
                          owner_size: int, enable_pdl: bool) -> None:
    _run_index_k_quantized(fp4, k, slot_mapping, cache, page_size, rule, num_tokens_non_padded,
                           diagnostics, reserved_slot, owner_rank, owner_size, enable_pdl)


def _op_fused(nope: Tensor, rope: Tensor, slot_mapping: Tensor, kv_cache: Tensor, layout: int,
              page_size: int, scale_rule: int, index_k: Optional[Tensor],
              index_slot_mapping: Optional[Tensor], index_cache: Optional[Tensor],
              index_format: int, index_page_size: int, index_rule: int,
              num_tokens_non_padded: Optional[Tensor], diagnostics: Optional[Tensor],
              reserved_slot: int, index_reserved_slot: int, owner_rank: int, owner_size: int,
              enable_pdl: bool) -> None:
    _run_fused(nope, rope, slot_mapping, kv_cache, layout, page_size, scale_rule, index_k,
               index_slot_mapping, index_cache, index_format, index_page_size, index_rule,
               num_tokens_non_padded, diagnostics, reserved_slot, index_reserved_slot,
               owner_rank, owner_size, enable_pdl)


def _op_paged_kv(key: Tensor, value: Optional[Tensor], slot_mapping: Tensor, key_cache: Tensor,
                 value_cache: Optional[Tensor], layout: str, cache_type: int,
                 k_scale: Optional[Tensor], v_scale: Optional[Tensor],
                 num_tokens_non_padded: Optional[Tensor], diagnostics: Optional[Tensor],
                 reserved_slot: int, owner_rank: int, owner_size: int, enable_pdl: bool) -> None:
    _run_paged_kv(key, value, slot_mapping, key_cache, value_cache, layout, cache_type, k_scale,
                  v_scale, num_tokens_non_padded, diagnostics, reserved_slot, owner_rank,
                  owner_size, enable_pdl)


ops = types.SimpleNamespace(
    store_index_k_bf16=_op("store_index_k_bf16", ("cache", "diagnostics"), _op_index_k_bf16),
    store_index_k_quantized=_op("store_index_k_quantized", ("cache", "diagnostics"),
                                _op_index_k_quantized),
    fused_store_cache=_op("fused_store_cache", ("kv_cache", "index_cache", "diagnostics"),
                          _op_fused),
    store_paged_kv=_op("store_paged_kv", ("key_cache", "value_cache", "diagnostics"),
                       _op_paged_kv),
)


# ---- the public functions: validate, then the op (or, in `direct`, the C call) ----------------
def _prepare_index_k_bf16(k, slot_mapping, cache, num_tokens_non_padded, diagnostics):
    _check_rows("k", k)
    _check_slots("slot_mapping", slot_mapping, k.shape[0])
    _check_tensor("cache", cache, (torch.bfloat16,), (2,))
    if cache.shape[1] != k.shape[1] or (cache.shape[1] > 1 and cache.stride(1) != 1):
        raise ValueError(f"cache must be [num_slots, {k.shape[1]}] with contiguous rows, got "
                         f"{tuple(cache.shape)} strides {cache.stride()}")
    _check_options(num_tokens_non_padded, diagnostics, 0, 1)
    _same_device(("k", k), ("slot_mapping", slot_mapping), ("cache", cache),
                 ("num_tokens_non_padded", num_tokens_non_padded), ("diagnostics", diagnostics))


def _index_rule_and_page_size(fp4, k, cache_name, cache, page_size, rule_arg, rule):
    """An fp8 (fp4) index-K cache's scale rule (ties), checked, and its page size, given or
    inferred from the cache's bytes per page and k's width: (page size, rule id)."""
    rules = _TIES if fp4 else _SCALE_RULES
    if rule not in rules:
        raise ValueError(f"{rule_arg} = {rule!r}: expected one of {sorted(rules)}")
    d = k.shape[1]
    page_bytes = _index_fp4_page_bytes if fp4 else _index_fp8_page_bytes
    page_size = _infer_page_size(cache_name, page_size, _page_bytes(cache), (fp4, d),
                                 lambda p: page_bytes(p, d))
    return page_size, rules[rule]


def _prepare_index_k_quantized(fp4, k, slot_mapping, cache, page_size, rule_name,
                               num_tokens_non_padded, diagnostics, owner_rank, owner_size):
    _check_rows("k", k)
    _check_slots("slot_mapping", slot_mapping, k.shape[0])
    _check_paged_bytes("cache", cache)
    _check_options(num_tokens_non_padded, diagnostics, owner_rank, owner_size)
    page_size, rule = _index_rule_and_page_size(fp4, k, "cache", cache, page_size,
                                                "ties" if fp4 else "scale_rule", rule_name)
    _same_device(("k", k), ("slot_mapping", slot_mapping), ("cache", cache),
                 ("num_tokens_non_padded", num_tokens_non_padded), ("diagnostics", diagnostics))
    return page_size, rule


def _prepare_fused(nope, rope, slot_mapping, kv_cache, layout, page_size, scale_rule, index_k,
                   index_slot_mapping, index_cache, index_format, index_page_size, index_rule,
                   num_tokens_non_padded, diagnostics, owner_rank, owner_size):
    if layout not in _MLA_LAYOUTS:
        raise ValueError(f"layout = {layout!r}: expected one of {sorted(_MLA_LAYOUTS)}")
    layout_id, nope_width, min_bytes = _MLA_LAYOUTS[layout]
    _check_rows("nope", nope, nope_width)
    _check_rows("rope", rope, 64)
    if rope.shape[0] != nope.shape[0]:
        raise ValueError(f"rope has {rope.shape[0]} rows, nope {nope.shape[0]}")
    _check_slots("slot_mapping", slot_mapping, nope.shape[0])
    _check_paged_bytes("kv_cache", kv_cache)
    _check_options(num_tokens_non_padded, diagnostics, owner_rank, owner_size)
    if scale_rule is None:
        scale_rule = "pow2"
    if scale_rule not in _SCALE_RULES:
        raise ValueError(f"scale_rule = {scale_rule!r}: expected 'amax' or 'pow2'")
    page_size = _infer_page_size("kv_cache", page_size, _page_bytes(kv_cache), layout, min_bytes)
    index = (0, 0, 0)
    if index_k is not None:
        if index_cache is None:
            raise ValueError("index_cache is required with index_k")
        _check_rows("index_k", index_k)
        if index_k.shape[0] != nope.shape[0]:
            raise ValueError(f"index_k has {index_k.shape[0]} rows, nope {nope.shape[0]}")
        if index_slot_mapping is None:
            index_slot_mapping = slot_mapping
        _check_slots("index_slot_mapping", index_slot_mapping, nope.shape[0])
        if index_slot_mapping.dtype != slot_mapping.dtype:
            raise TypeError("index_slot_mapping.dtype must equal slot_mapping.dtype")
        _check_paged_bytes("index_cache", index_cache)
        if index_format not in ("fp8", "fp4"):
            raise ValueError(f"index_format = {index_format!r}: expected 'fp8' or 'fp4'")
        fp4 = index_format == "fp4"
        if index_rule is None:
            index_rule = "even" if fp4 else "amax"
        index_page_size, rule = _index_rule_and_page_size(fp4, index_k, "index_cache", index_cache,
                                                          index_page_size, "index_rule", index_rule)
        index = (c.INDEX_K_FP4 if fp4 else c.INDEX_K_FP8, index_page_size, rule)
    _same_device(("nope", nope), ("rope", rope), ("slot_mapping", slot_mapping),
                 ("kv_cache", kv_cache), ("index_k", index_k),
                 ("index_slot_mapping", index_slot_mapping), ("index_cache", index_cache),
                 ("num_tokens_non_padded", num_tokens_non_padded), ("diagnostics", diagnostics))
    return layout_id, page_size, _SCALE_RULES[scale_rule], index_slot_mapping, index


_FP8_CACHE_TYPES = {"fp8_e4m3": c.KV_CACHE_FP8_E4M3, "fp8_e5m2": c.KV_CACHE_FP8_E5M2}


def _prepare_paged_kv(key, value, slot_mapping, key_cache, value_cache, layout, kv_cache_dtype,
                      k_scale, v_scale, num_tokens_non_padded, diagnostics, owner_rank,
                      owner_size):
    if layout not in ("nhd", "hnd"):
        raise ValueError(f"layout = {layout!r}: expected 'nhd' or 'hnd'")
    sides = [("key", key, "key_cache", key_cache, "k_scale", k_scale)]
    if value is not None:
        sides.append(("value", value, "value_cache", value_cache, "v_scale", v_scale))
    elif value_cache is not None:
        raise ValueError("value_cache given without value")
    cache_type = None
    for x_name, x, cache_name, cache, scale_name, scale in sides:
        _check_tensor(x_name, x, (torch.bfloat16, torch.float16), (2, 3))
        if x.dtype != key.dtype:
            raise TypeError(f"{x_name}.dtype {x.dtype} differs from key.dtype {key.dtype}")
        if x.stride(-1) != 1:
            raise ValueError(f"{x_name}: the last dimension must be contiguous")
        if x.shape[0] != key.shape[0]:
            raise ValueError(f"{x_name} has {x.shape[0]} rows, key {key.shape[0]}")
        if cache is None:
            raise ValueError(f"{cache_name} is required with {x_name}")
        _check_tensor(cache_name, cache,
                      (torch.bfloat16, torch.float16, torch.uint8, torch.float8_e4m3fn,
                       torch.float8_e5m2), (3, 4))
        heads = x.shape[1] if x.dim() == 3 else 1
        if cache.dim() == 3:
            if heads != 1:
                raise ValueError(f"{cache_name} is [pages, P, D] (one head) but {x_name} has "
                                 f"{heads} heads")
            want = (cache.shape[1], x.shape[-1])
            got = (cache.shape[1], cache.shape[2])
        else:
            want = (heads, x.shape[-1])
            got = ((cache.shape[2], cache.shape[3]) if layout == "nhd"
                   else (cache.shape[1], cache.shape[3]))
        if got != want:
            raise ValueError(f"{cache_name} {tuple(cache.shape)} does not hold {x_name}'s "
                             f"{heads} heads of {x.shape[-1]} in layout {layout!r}")
        if cache.stride(-1) != 1:
            raise ValueError(f"{cache_name}: the last dimension must be contiguous")
        if cache.dtype in (torch.bfloat16, torch.float16):
            side_type = c.KV_CACHE_AUTO
            if cache.dtype != x.dtype:
                raise TypeError(f"{cache_name}.dtype {cache.dtype}: a 16-bit cache holds the "
                                f"input type {x.dtype}")
        elif cache.dtype == torch.float8_e4m3fn:
            side_type = c.KV_CACHE_FP8_E4M3
        elif cache.dtype == torch.float8_e5m2:
            side_type = c.KV_CACHE_FP8_E5M2
        else:
            if kv_cache_dtype not in _FP8_CACHE_TYPES:
                raise ValueError(f"{cache_name} is uint8: pass kv_cache_dtype='fp8_e4m3' or "
                                 f"'fp8_e5m2'")
            side_type = _FP8_CACHE_TYPES[kv_cache_dtype]
        if kv_cache_dtype not in (None, "auto") and side_type != _FP8_CACHE_TYPES.get(kv_cache_dtype):
            raise ValueError(f"kv_cache_dtype = {kv_cache_dtype!r} does not match "
                             f"{cache_name}.dtype {cache.dtype}")
        if cache_type is not None and side_type != cache_type:
            raise TypeError("key_cache and value_cache must have the same cache type")
        cache_type = side_type
        if side_type != c.KV_CACHE_AUTO:
            if scale is None:
                raise ValueError(f"{scale_name} is required for an fp8 cache")
            _check_tensor(scale_name, scale, (torch.float32,), (0, 1))
            if scale.numel() not in (1, heads) or not scale.is_contiguous():
                raise ValueError(f"{scale_name} must hold 1 or {heads} (one per head) float32")
    _check_slots("slot_mapping", slot_mapping, key.shape[0])
    _check_options(num_tokens_non_padded, diagnostics, owner_rank, owner_size)
    _same_device(("key", key), ("value", value), ("slot_mapping", slot_mapping),
                 ("key_cache", key_cache), ("value_cache", value_cache), ("k_scale", k_scale),
                 ("v_scale", v_scale), ("num_tokens_non_padded", num_tokens_non_padded),
                 ("diagnostics", diagnostics))
    return cache_type


class _Api:
    """The public functions, over either the custom ops or the direct C calls."""

    def __init__(self, index_k_bf16, index_k_quantized, fused, paged_kv):
        self._bf16, self._quantized, self._fused, self._paged_kv = (index_k_bf16,
                                                                   index_k_quantized, fused,
                                                                   paged_kv)

    def store_index_k_bf16(self, k, slot_mapping, cache, *, num_tokens_non_padded=None,
                           reserved_slot=-1, diagnostics=None, enable_pdl=False):
        """k [T, D] bf16 into cache [num_slots, D] bf16 (row per slot)."""
        _prepare_index_k_bf16(k, slot_mapping, cache, num_tokens_non_padded, diagnostics)
        return self._bf16(k, slot_mapping, cache, num_tokens_non_padded, diagnostics, reserved_slot,
                   enable_pdl)

    def store_index_k_fp8(self, k, slot_mapping, cache, *, page_size=None, scale_rule="amax",
                          num_tokens_non_padded=None, reserved_slot=-1, owner_rank=0,
                          owner_size=1, diagnostics=None, enable_pdl=False):
        """k [T, D] bf16 into the 132-byte indexer cache, uint8 [num_pages, page_bytes]."""
        page_size, rule = _prepare_index_k_quantized(False, k, slot_mapping, cache, page_size,
                                                     scale_rule, num_tokens_non_padded,
                                                     diagnostics, owner_rank, owner_size)
        return self._quantized(False, k, slot_mapping, cache, page_size, rule, num_tokens_non_padded,
                        diagnostics, reserved_slot, owner_rank, owner_size, enable_pdl)

    def store_index_k_fp4(self, k, slot_mapping, cache, *, page_size=None, ties="even",
                          num_tokens_non_padded=None, reserved_slot=-1, owner_rank=0,
                          owner_size=1, diagnostics=None, enable_pdl=False):
        """k [T, D] bf16 into the 68-byte fp4 indexer cache, uint8 [num_pages, page_bytes];
        ties 'even' (DeepSeek, hardware) or 'toward_zero' (SGLang's default)."""
        page_size, rule = _prepare_index_k_quantized(True, k, slot_mapping, cache, page_size,
                                                     ties, num_tokens_non_padded, diagnostics,
                                                     owner_rank, owner_size)
        return self._quantized(True, k, slot_mapping, cache, page_size, rule, num_tokens_non_padded,
                        diagnostics, reserved_slot, owner_rank, owner_size, enable_pdl)

    def fused_store_cache(self, nope, rope, slot_mapping, kv_cache, *, layout="v4",
                          page_size=None, scale_rule=None, index_k=None, index_slot_mapping=None,
                          index_cache=None, index_format="fp8", index_page_size=None,
                          index_rule=None, num_tokens_non_padded=None, reserved_slot=-1,
                          index_reserved_slot=-1, owner_rank=0, owner_size=1, diagnostics=None,
                          enable_pdl=False):
        """DeepSeek MLA KV (layout 'v4', 'v32', 'v41', 'v41_fp4') from nope [T, 448 | 512] and
        rope [T, 64] bf16 into kv_cache uint8 [num_pages, page_bytes]; with index_k, the fp8
        (index_rule 'amax' | 'pow2') or fp4 (index_rule 'even' | 'toward_zero') index-K of the
        same rows in the same launch (index_slot_mapping defaults to slot_mapping)."""
        layout_id, page_size, rule, index_slots, index = _prepare_fused(
            nope, rope, slot_mapping, kv_cache, layout, page_size, scale_rule, index_k,
            index_slot_mapping, index_cache, index_format, index_page_size, index_rule,
            num_tokens_non_padded, diagnostics, owner_rank, owner_size)
        return self._fused(nope, rope, slot_mapping, kv_cache, layout_id, page_size, rule, index_k,
                    index_slots, index_cache, index[0], index[1], index[2],
                    num_tokens_non_padded, diagnostics, reserved_slot, index_reserved_slot,
                    owner_rank, owner_size, enable_pdl)

    def store_paged_kv(self, key, value, slot_mapping, key_cache, value_cache, *, layout="nhd",
                       kv_cache_dtype=None, k_scale=None, v_scale=None,
                       num_tokens_non_padded=None, reserved_slot=-1, owner_rank=0, owner_size=1,
                       diagnostics=None, enable_pdl=False):
        """K/V [T, H, D] (or [T, D], one head) bf16 / fp16 into paged caches: NHD
        [pages, P, H, D] or HND [pages, H, P, D] (layout), or [pages, P, D]; strides from the
        tensors (FlashInfer's [pages, 2, P, H, D]: pass cache[:, 0] and cache[:, 1]). A 16-bit
        cache copies; float8_e4m3fn / float8_e5m2 (or uint8 with kv_cache_dtype) store
        fp8(x / scale) with k_scale / v_scale float32 tensors of 1 or H values. value None: K
        only."""
        cache_type = _prepare_paged_kv(key, value, slot_mapping, key_cache, value_cache, layout,
                                       kv_cache_dtype, k_scale, v_scale, num_tokens_non_padded,
                                       diagnostics, owner_rank, owner_size)
        return self._paged_kv(key, value, slot_mapping, key_cache, value_cache, layout, cache_type,
                       k_scale, v_scale, num_tokens_non_padded, diagnostics, reserved_slot,
                       owner_rank, owner_size, enable_pdl)


_ops_api = _Api(ops.store_index_k_bf16, ops.store_index_k_quantized, ops.fused_store_cache,
                ops.store_paged_kv)
# Without the dispatcher: the least host time per call, for eager engines; not traceable by
# torch.compile (it calls data_ptr()).
direct = _Api(_run_index_k_bf16, _run_index_k_quantized, _run_fused, _run_paged_kv)

_binder = _Api(_build_index_k_bf16, _build_index_k_quantized, _build_fused, _build_paged_kv)


class BoundStore:
    """One store with its tensors validated and its C parameters built once (bind()); calling
    it launches on the current stream with the least host time. The tensors are kept alive and
    read at each call: rebind after reallocating any of them."""

    def __init__(self, name, args, kwargs):
        self._fn, self._params, self._tensor = getattr(_binder, name)(*args, **kwargs)
        self._keep = (args, kwargs)

    def __call__(self):
        _launch(self._fn, self._params, self._tensor)


def bind(store, *args, **kwargs):
    """bind('fused_store_cache', nope, rope, ...) -> a BoundStore: the same arguments as the
    function of that name, validated now; each call of the result stores again. For eager
    engines whose step buffers are fixed (under CUDA graphs host time does not matter)."""
    if store not in ("store_index_k_bf16", "store_index_k_fp8", "store_index_k_fp4",
                     "fused_store_cache", "store_paged_kv"):
        raise ValueError(f"bind: unknown store {store!r}")
    return BoundStore(store, args, kwargs)


store_index_k_bf16 = _ops_api.store_index_k_bf16
store_index_k_fp8 = _ops_api.store_index_k_fp8
store_index_k_fp4 = _ops_api.store_index_k_fp4
fused_store_cache = _ops_api.fused_store_cache
store_paged_kv = _ops_api.store_paged_kv

__all__ = ["store_index_k_bf16", "store_index_k_fp8", "store_index_k_fp4", "fused_store_cache",
           "store_paged_kv", "direct", "ops", "bind", "BoundStore"]
