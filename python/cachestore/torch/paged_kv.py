"""store_paged_kv: K/V of MHA / GQA / MQA models into paged caches of any strides (NHD, HND,
FlashInfer's stacked 5-D cache as two views, vLLM's 576-wide MLA rows as two views, vLLM's
paged-attention layout)."""
import torch

from .. import capi as c
from . import _checks as k_
from ._store import Arg, Store, batch_options

CACHE_TYPES = {name: info.cache_type for name, info in c.KV_CACHE_TYPES.items()}
_CACHE_TYPE_NAMES = {info.cache_type: name for name, info in c.KV_CACHE_TYPES.items()}
_SCALED = {info.cache_type: bool(info.scaled) for info in c.KV_CACHE_TYPES.values()}
# Values a cache element holds (nvfp4: two codes a byte) and a block scale's values (0: none).
_PER_ELEMENT = {info.cache_type: info.values_per_element for info in c.KV_CACHE_TYPES.values()}
_BLOCK = {info.cache_type: info.block for info in c.KV_CACHE_TYPES.values()}
_TOKEN_HEAD = c.KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD  # an fp32 scale per (slot, head), written
_FP8_DTYPES = {torch.float8_e4m3fn: c.KV_CACHE_FP8_E4M3, torch.float8_e5m2: c.KV_CACHE_FP8_E5M2}
# op-level `layout`: NHD [pages, P, H, D], HND [pages, H, P, D], vLLM's paged attention (K
# [pages, H, D / x, P, x], V [pages, H, D, P]).
LAYOUTS = {"nhd": 0, "hnd": 1, "paged_attention": 2}
_NHD, _PAGED_ATTENTION = LAYOUTS["nhd"], LAYOUTS["paged_attention"]
_INPUT_TYPES = {torch.bfloat16: c.KV_BF16, torch.float16: c.KV_FP16, torch.float32: c.KV_FP32}
_AUTO_DTYPES = tuple(_INPUT_TYPES)
_LAYOUT_NAMES = {v: k for k, v in LAYOUTS.items()}
# RoPE in the store: which peer's rounding the rotation reproduces (docs/layouts.md): vLLM's
# rotary_embedding (each operation in the input type) or FlashInfer's (fp32 arithmetic).
ROPE_ROUNDINGS = k_.ROPE_ROUNDINGS
_ROPE_ONLY = ("rope_positions", "rotary_dim", "query", "query_out", "key_out")


def _side_cache_type(a, cache_name, cache, x_name, x, block_scales):
    """The cache type a side's cache tensor holds (checked against kv_cache_dtype); uint8 with
    block scales: nvfp4."""
    if a.kv_cache_dtype == _TOKEN_HEAD:
        if cache.dtype not in (torch.float8_e4m3fn, torch.uint8):
            raise TypeError(f"{cache_name}.dtype {cache.dtype}: an "
                            f"{_CACHE_TYPE_NAMES[_TOKEN_HEAD]} cache is float8_e4m3fn (or uint8)")
        return _TOKEN_HEAD
    if block_scales and cache.dtype != torch.uint8:
        raise TypeError(f"{cache_name}.dtype {cache.dtype}: an nvfp4 cache (block scales given) "
                        f"is uint8")
    if cache.dtype in _AUTO_DTYPES:
        if cache.dtype != x.dtype:
            raise TypeError(f"{cache_name}.dtype {cache.dtype}: an auto cache holds the input "
                            f"type {x.dtype}")
        side = c.KV_CACHE_AUTO
    elif cache.dtype in _FP8_DTYPES:
        side = _FP8_DTYPES[cache.dtype]
    elif block_scales:
        side = c.KV_CACHE_NVFP4
    else:
        if a.kv_cache_dtype not in (c.KV_CACHE_FP8_E4M3, c.KV_CACHE_FP8_E5M2, c.KV_CACHE_NVFP4):
            raise ValueError(f"{cache_name} is uint8: pass kv_cache_dtype="
                             f"{_CACHE_TYPE_NAMES[c.KV_CACHE_FP8_E4M3]!r}, "
                             f"{_CACHE_TYPE_NAMES[c.KV_CACHE_FP8_E5M2]!r} or "
                             f"{_CACHE_TYPE_NAMES[c.KV_CACHE_NVFP4]!r}")
        side = a.kv_cache_dtype
    if a.kv_cache_dtype not in (None, c.KV_CACHE_AUTO) and side != a.kv_cache_dtype:
        raise ValueError(f"kv_cache_dtype = {_CACHE_TYPE_NAMES[a.kv_cache_dtype]!r} does not "
                         f"match {cache_name}.dtype {cache.dtype}")
    return side


def _heads_and_dim(cache, layout, is_key):
    """(heads, head dim) a cache tensor holds in `layout`, or None where its rank does not fit:
    [pages, P, D] (one head, any layout); NHD / HND 4-D; paged attention K [pages, H, D / x, P,
    x], V [pages, H, D, P]."""
    shape = cache.shape
    if cache.dim() == 3:
        return (1, shape[2])
    if layout == _PAGED_ATTENTION:
        if is_key:
            return (shape[1], shape[2] * shape[4]) if cache.dim() == 5 else None
        return (shape[1], shape[2]) if cache.dim() == 4 else None
    if cache.dim() != 4:
        return None
    return (shape[2], shape[3]) if layout == _NHD else (shape[1], shape[3])


def _prepare(a):
    k_.check_id("layout", a.layout, len(LAYOUTS))
    if a.kv_cache_dtype is not None:
        k_.check_id("kv_cache_dtype", a.kv_cache_dtype, len(CACHE_TYPES))
    sides = [("key", a.key, "key_cache", a.key_cache, "k_scale", a.k_scale, "key_block_scale",
              a.key_block_scale)]
    if a.value is not None:
        sides.append(("value", a.value, "value_cache", a.value_cache, "v_scale", a.v_scale,
                      "value_block_scale", a.value_block_scale))
    elif a.value_cache is not None:
        raise ValueError("value_cache given without value")
    elif a.value_block_scale is not None:
        raise ValueError("value_block_scale given without value")
    cache_type = None
    for x_name, x, cache_name, cache, scale_name, scale, bs_name, bs in sides:
        k_.check_tensor(x_name, x, _AUTO_DTYPES, (2, 3))
        if x.dtype != a.key.dtype:
            raise TypeError(f"{x_name}.dtype {x.dtype} differs from key.dtype {a.key.dtype}")
        if x.stride(-1) != 1:
            raise ValueError(f"{x_name}: the last dimension must be contiguous")
        if x.shape[0] != a.key.shape[0]:
            raise ValueError(f"{x_name} has {x.shape[0]} rows, key {a.key.shape[0]}")
        if cache is None:
            raise ValueError(f"{cache_name} is required with {x_name}")
        k_.check_tensor(cache_name, cache, (*_AUTO_DTYPES, torch.uint8, torch.float8_e4m3fn,
                                            torch.float8_e5m2), (3, 4, 5))
        heads = x.shape[1] if x.dim() == 3 else 1
        side = _side_cache_type(a, cache_name, cache, x_name, x, bs is not None)
        # nvfp4: the cache holds D / 2 bytes an entry (two codes a byte), a block scale per 16.
        per, block = _PER_ELEMENT[side], _BLOCK[side]
        if block and a.layout == _PAGED_ATTENTION:
            raise ValueError(f"{cache_name}: an nvfp4 cache takes layout 'nhd' or 'hnd'")
        if block and x.shape[-1] % block != 0:
            raise ValueError(f"{x_name}: an nvfp4 cache needs a head dim that is a multiple of "
                             f"{block}, got {x.shape[-1]}")
        got = _heads_and_dim(cache, a.layout, x_name == "key")
        want, got = (heads, x.shape[-1]), None if got is None else (got[0], got[1] * per)
        if cache.dim() == 3 and heads != 1:
            raise ValueError(f"{cache_name} is [pages, P, D] (one head) but {x_name} has "
                             f"{heads} heads")
        if got != want:
            raise ValueError(f"{cache_name} {tuple(cache.shape)} does not hold {x_name}'s "
                             f"{heads} heads of {x.shape[-1]} in layout "
                             f"{_LAYOUT_NAMES[a.layout]!r}")
        if (cache.dim() == 3 or a.layout != _PAGED_ATTENTION) and cache.stride(-1) != 1:
            raise ValueError(f"{cache_name}: the last dimension must be contiguous")
        if side == _TOKEN_HEAD:  # the fp32 scale of each (slot, head): the cache's shape
            name = _CACHE_TYPE_NAMES[side]  # without its head dim
            if a.layout == _PAGED_ATTENTION:
                raise ValueError(f"{cache_name}: an {name} cache takes layout 'nhd' or 'hnd'")
            if bs is None:
                raise ValueError(f"{bs_name} is required for an {name} cache (its fp32 scale "
                                 f"of each slot and head)")
            k_.check_tensor(bs_name, bs, (torch.float32,), (2, 3))
            if bs.shape != cache.shape[:-1]:
                raise ValueError(f"{bs_name} {tuple(bs.shape)} must be {cache_name}'s shape "
                                 f"without its head dim, float32")
        if block:
            if bs is None:
                raise ValueError(f"{bs_name} is required for an nvfp4 cache")
            k_.check_tensor(bs_name, bs, (torch.uint8, torch.float8_e4m3fn), (3, 4))
            # the cache's shape with head_dim / block in place of head_dim / per
            if (bs.shape[:-1] != cache.shape[:-1] or bs.shape[-1] * block != x.shape[-1] or
                    bs.stride(-1) != 1):
                raise ValueError(f"{bs_name} {tuple(bs.shape)} must be {cache_name}'s pages "
                                 f"with head dim / {block} = {x.shape[-1] // block} e4m3 bytes, "
                                 f"the last dimension contiguous")
        if cache_type is not None and side != cache_type:
            raise TypeError("key_cache and value_cache must have the same cache type")
        cache_type = side
        if _SCALED[side]:
            if scale is None:
                raise ValueError(f"{scale_name} is required for an fp8 or nvfp4 cache")
            k_.check_tensor(scale_name, scale, (torch.float32,), (0, 1))
            if scale.numel() not in (1, heads) or not scale.is_contiguous():
                raise ValueError(f"{scale_name} must hold 1 or {heads} (one per head) float32")
    k_.check_slots("slot_mapping", a.slot_mapping, a.key.shape[0])
    k_.check_page_table(a, a.key.shape[0])
    _prepare_rope(a)
    k_.check_options(a, 2 if a.cos_sin_cache is None else 3)
    k_.same_device(("key", a.key), ("value", a.value), ("slot_mapping", a.slot_mapping),
                   ("positions", a.positions), ("kv_indptr", a.kv_indptr),
                   ("kv_indices", a.kv_indices),
                   ("key_cache", a.key_cache), ("value_cache", a.value_cache),
                   ("k_scale", a.k_scale), ("v_scale", a.v_scale),
                   ("key_block_scale", a.key_block_scale),
                   ("value_block_scale", a.value_block_scale),
                   ("num_tokens_non_padded", a.num_tokens_non_padded),
                   ("diagnostics", a.diagnostics), ("cos_sin_cache", a.cos_sin_cache),
                   ("rope_positions", a.rope_positions), ("query", a.query),
                   ("query_out", a.query_out), ("key_out", a.key_out))
    a.kv_cache_dtype = cache_type


def _prepare_rope(a):
    """RoPE in the store (cos_sin_cache given): K rotated before it is stored, Q (query) in place
    or into query_out, the rotated K into key_out. Resolves rotary_dim (default: the cache's
    width)."""
    rows, head_dim = a.key.shape[0], a.key.shape[-1]
    if not k_.check_rope_inputs(a, rows, _ROPE_ONLY):
        return
    width = a.cos_sin_cache.shape[1]
    if a.rotary_dim is None:
        a.rotary_dim = width
    if not 0 < a.rotary_dim <= min(width, head_dim) or a.rotary_dim % 2:
        raise ValueError(f"rotary_dim = {a.rotary_dim}: must be even, at most cos_sin_cache's "
                         f"width {width} and the head dim {head_dim}")
    k_.check_rope_outputs(a, rows, head_dim, a.key.dtype, (2, 3), "key", a.key)


def _entry_and_head(cache, layout):
    """(entry, head) strides of a cache tensor in `layout`: [pages, P, D] (one head), NHD, HND,
    or vLLM's paged attention (entries at dim 3, heads at dim 1)."""
    if cache.dim() == 3:
        return cache.stride(1), cache.shape[-1]
    if layout == _PAGED_ATTENTION:
        return cache.stride(3), cache.stride(1)
    return (cache.stride(1), cache.stride(2)) if layout == _NHD else \
        (cache.stride(2), cache.stride(1))


def _side(x, cache, layout, scale, is_key):
    """One side of store_paged_kv: input [T, H, D] or [T, D]; cache NHD [pages, P, H, D], HND
    [pages, H, P, D], [pages, P, D] (one head) or paged attention (K [pages, H, D / x, P, x], V
    [pages, H, D, P]). Returns the C side and its head-dim layout (chunk, chunk stride, d
    stride)."""
    side = c.KvSide()
    side.data, side.token_stride = x.data_ptr(), x.stride(0)
    side.head_dim = x.shape[-1]
    side.head_stride = x.stride(1) if x.dim() == 3 else x.shape[-1]
    side.cache, side.page_stride = cache.data_ptr(), cache.stride(0)
    side.entry_stride, side.cache_head_stride = _entry_and_head(cache, layout)
    dim = (0, 0, 1)
    if cache.dim() != 3 and layout == _PAGED_ATTENTION:
        dim = (cache.shape[4], cache.stride(2), cache.stride(4)) if is_key else \
            (0, 0, cache.stride(2))
    if scale is not None:
        side.scale, side.scale_stride = scale.data_ptr(), 0 if scale.numel() == 1 else 1
    return side, dim


def _block_scales(bs, layout):
    """An nvfp4 side's block-scale view: its tensor's strides in the cache's layout (bytes)."""
    out = c.BlockScales()
    out.data, out.page_stride = bs.data_ptr(), bs.stride(0)
    out.entry_stride, out.head_stride = _entry_and_head(bs, layout)
    return out


def _token_head_scales(bs, layout):
    """An fp8_e4m3_per_token_head side's scale view: [pages, P, H] (NHD), [pages, H, P] (HND) or
    [pages, P] (one head), strides in fp32 elements."""
    out = c.BlockScales()
    out.data, out.page_stride = bs.data_ptr(), bs.stride(0)
    if bs.dim() == 2:
        out.entry_stride, out.head_stride = bs.stride(1), 0
    elif layout == _NHD:
        out.entry_stride, out.head_stride = bs.stride(1), bs.stride(2)
    else:
        out.entry_stride, out.head_stride = bs.stride(2), bs.stride(1)
    return out


def _build(a):
    p = c.PagedKvParams()
    k_.batch_fields(p, a.key.shape[0], a)
    p.slots = k_.slots_of(a.slot_mapping, a.reserved_slot, a.owner_rank, a.owner_size,
                          a.positions is not None)
    p.page_table = k_.page_table_of(a)
    p.num_heads = a.key.shape[1] if a.key.dim() == 3 else 1
    p.input_type = _INPUT_TYPES[a.key.dtype]
    p.cache_type = a.kv_cache_dtype
    p.num_pages = a.key_cache.shape[0]
    kc = a.key_cache
    p.page_size = (kc.shape[1] if kc.dim() == 3 or a.layout == _NHD else
                   kc.shape[3] if a.layout == _PAGED_ATTENTION else kc.shape[2])
    p.k, (p.k_chunk, p.k_chunk_stride, p.k_dim_stride) = _side(a.key, kc, a.layout, a.k_scale,
                                                               True)
    if a.value is not None:
        p.v, (p.v_chunk, p.v_chunk_stride, p.v_dim_stride) = _side(
            a.value, a.value_cache, a.layout, a.v_scale, False)
    scales = _token_head_scales if a.kv_cache_dtype == _TOKEN_HEAD else _block_scales
    if a.key_block_scale is not None:
        p.k_block_scales = scales(a.key_block_scale, a.layout)
    if a.value_block_scale is not None:
        p.v_block_scales = scales(a.value_block_scale, a.layout)
    p.rope = k_.rope_struct(a, a.rotary_dim, a.is_neox)
    return c.store_paged_kv, p, a.key


STORES = [
    Store("store_paged_kv",
          [Arg("key", "Tensor"), Arg("value", "Tensor?"), Arg("slot_mapping", "Tensor"),
           Arg("key_cache", "Tensor", mutated=True),
           Arg("value_cache", "Tensor?", mutated=True),
           Arg("layout", "int", "nhd", choices=LAYOUTS, keyword=True),
           Arg("kv_cache_dtype", "int?", None, choices=CACHE_TYPES, keyword=True),
           Arg("k_scale", "Tensor?", None, keyword=True),
           Arg("v_scale", "Tensor?", None, keyword=True),
           *batch_options(),
           Arg("key_block_scale", "Tensor?", None, mutated=True, keyword=True),
           Arg("value_block_scale", "Tensor?", None, mutated=True, keyword=True),
           Arg("query", "Tensor?", None, mutated=True, keyword=True),
           Arg("cos_sin_cache", "Tensor?", None, keyword=True),
           Arg("rope_positions", "Tensor?", None, keyword=True),
           Arg("rotary_dim", "int?", None, keyword=True),
           Arg("is_neox", "bool", True, keyword=True),
           Arg("rope_rounding", "int", "input_type", choices=ROPE_ROUNDINGS, keyword=True),
           Arg("query_out", "Tensor?", None, mutated=True, keyword=True),
           Arg("key_out", "Tensor?", None, mutated=True, keyword=True)],
          _prepare, _build,
          doc="K/V [T, H, D] (or [T, D], one head) bf16 / fp16 / fp32, any D, into paged "
              "caches: NHD [pages, P, H, D], HND [pages, H, P, D] or vLLM's paged attention (K "
              "[pages, H, D / x, P, x], V [pages, H, D, P]) (layout 'nhd' | 'hnd' | "
              "'paged_attention'), or [pages, P, D]; strides from the tensors (FlashInfer's "
              "[pages, 2, P, H, D]: pass cache[:, 0] and cache[:, 1]). A cache of the input's "
              "dtype copies; float8_e4m3fn / float8_e5m2 (or uint8 with kv_cache_dtype) store "
              "fp8(x / scale) with k_scale / v_scale float32 tensors of 1 or H values. value "
              "None: K only. positions, kv_indptr, kv_indices (int32): the page-table slot "
              "source, FlashInfer's form; slot_mapping then holds the int32 batch indices and "
              "row i goes to kv_indices[kv_indptr[b] + pos // P] * P + pos % P. nvfp4 "
              "(kv_cache_dtype 'nvfp4', or uint8 caches with key_block_scale / "
              "value_block_scale): caches of D / 2 bytes an entry (two e2m1 codes a byte), "
              "block scales uint8 / float8_e4m3fn of D / 16 an entry in the same layout, and "
              "k_scale / v_scale the global decode scales. fp8_e4m3_per_token_head "
              "(kv_cache_dtype 'fp8_e4m3_per_token_head'; float8_e4m3fn or uint8 caches, NHD or "
              "HND, D a power of two in [8, 256]): vLLM's fp8_per_token_head, the scale of each "
              "(token, head) max(amax / 448, 1e-6) written as float32 into key_block_scale / "
              "value_block_scale (the cache's shape without its head dim), the values "
              "e4m3(x * (1 / scale)); no k_scale / v_scale, no RoPE. RoPE in the same launch "
              "(cos_sin_cache given): K rotated before it is stored (and quantized) at "
              "rope_positions (int32 / int64 [T]) by cos_sin_cache [max_position, >= rotary_dim] "
              "(cos in the first half; bf16 / fp16 / fp32), NeoX halves (is_neox) or GPT-J "
              "pairs, the first rotary_dim values (default: its width); query [T, H_q, D] "
              "rotated in place or into query_out; the rotated K into key_out (key itself: in "
              "place); rope_rounding 'input_type' (vLLM rotary_embedding) or 'fp32' "
              "(FlashInfer). A real row whose position is outside the cache writes nothing and "
              "is counted: diagnostics then holds 3 counters."),
]
