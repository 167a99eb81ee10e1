"""SGLang's cache-write kernels (`sglang.jit_kernel`) on cachestore's stores:

    from cachestore.compat import sglang as kernels   # in place of: from sglang import jit_kernel

- `store_cache(k, v, k_cache, v_cache, indices, *, row_bytes=0, num_split=0)`: the row store of
  SGLang's token-to-KV pool, k / v `[num_tokens, H * D]` (or `[num_tokens, H, D]`) into
  `[num_slots, H * D]` caches at `indices` (int32 or int64), K and V in one launch.
  `row_bytes` and `num_split` are SGLang's tuning knobs and are accepted and ignored.
- `fused_store_index_k_cache(key, index_k_with_scale, out_cache_loc, extend_num_tokens,
  page_size=64)`: DeepSeek V3.2's (DSA) fp8 indexer cache, the 132-byte page
  `(num_pages, page_size * 132)`, scale `max(amax, 1e-4) / 448` (cachestore's `amax` rule);
  `extend_num_tokens` the int32 device count of real rows, as SGLang's (None: every row; an
  int in its place is the older signature's page_size).
- `store_fp4_index_k_cache(input, cache, loc, *, page_size, rne=False)`: the 68-byte fp4
  indexer page `(num_pages, page_size * 68)`; `rne=True` rounds ties to even, the default
  (SGLang's thresholds) toward zero.
- `fused_store_flashmla_cache(input, cache, indices, page_size)`: DeepSeek V4's FlashMLA
  "MODEL1" record from `input [num_tokens, 512]` (448 NoPE values, then 64 RoPE values).
- `fused_store_indexer_cache(input, cache, indices, page_size)`: V4's fp8 indexer cache (the
  132-byte page, `amax` rule) from `input [num_tokens, 128]`.
- `fused_store_flashmla_cache_v41(input, cache, indices, page_size, layout="V41", *,
  freqs_cis=None)`: the V4.1 records, `layout` "V41" (528 bytes, e4m3) or "V41_FP4" (288
  bytes, e2m1), from input `[num_tokens, 512]`; with `freqs_cis` (`[num_tokens, 64]` fp32, row
  i's (cos, sin) of each pair side by side) the RoPE tail is rotated in the store first, as
  SGLang's kernel does (GPT-J pairs, fp32, rounded to bf16: the same bytes).
- `fused_store_cache(input, cache, indices, *, page_size, type, layout=None, freqs_cis=None)`:
  SGLang's one DeepSeek-V4 store, `type="flashmla"` (layout V4 by default, V41 or V41_FP4, as
  SGLang's `KVLayout` or its name) or `type="indexer"`.
- `can_use_store_cache(k_row_bytes, v_row_bytes=0)`, `can_use_nsa_fused_store(key_dtype,
  indices_dtype, page_size)`: the gates engines call first; True where the store above serves
  the arguments (nothing is compiled at run time).

Differences: inputs are bf16 (the DeepSeek stores) or bf16 / fp16 / fp32 with caches of the same
dtype (`store_cache`); an index that is negative or past the cache is skipped (and counted with
`diagnostics=`) where SGLang writes it; `num_tokens_non_padded=` (SGLang's `extend_num_tokens`,
which only its DSA indexer store takes) skips the rows of a padded graph batch at or past the
device count. The fp8 indexer payload is `e4m3(x / s)` (vLLM's bytes); SGLang's CUDA indexer
kernels multiply by `1 / s`, which can round a value differently in its last bit. `freqs_cis`
may also be bf16 or fp16 and have more rows than the batch (SGLang: fp32, exactly one a row);
a padded row reads its row and stores nothing.
"""
import torch

from .. import capi as c
from ..torch import _store, ops as _ops

_store_paged_kv = _ops.store_paged_kv.default
_store_index_k_fp8 = _ops.store_index_k_fp8.default
_store_index_k_fp4 = _ops.store_index_k_fp4.default
_fused_store_cache = _ops.fused_store_cache.default
_V41_LAYOUTS = {"V41": c.MLA_V41, "V41_FP4": c.MLA_V41_FP4}
_V4_NOPE = 448


def store_cache(k, v, k_cache, v_cache, indices, *, row_bytes=0, num_split=0,
                num_tokens_non_padded=None, diagnostics=None):
    """SGLang `store_cache`: rows k[i], v[i] into k_cache[indices[i]], v_cache[indices[i]]."""
    del row_bytes, num_split  # SGLang's kernel tuning: cachestore picks its own shape
    if k.dim() != 2:  # [num_tokens, H, D]: its rows
        k = k.flatten(1)
    if v.dim() != 2:
        v = v.flatten(1)
    try:  # the caches as one-head paged caches of one slot a page: [num_slots, 1, H * D]
        _store_paged_kv(k, v, indices, k_cache.unsqueeze(1), v_cache.unsqueeze(1),
                        num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics)
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


def _rows(x, width):
    """x as [num_tokens, width] rows (SGLang reshapes its inputs the same way)."""
    return x if x.dim() == 2 else x.reshape(-1, width)


def _one_count(extend_num_tokens, num_tokens_non_padded):
    """The device count of real rows under either name (SGLang's extend_num_tokens)."""
    if extend_num_tokens is not None and num_tokens_non_padded is not None:
        raise TypeError("extend_num_tokens and num_tokens_non_padded name the same count; "
                        "pass one")
    return num_tokens_non_padded if extend_num_tokens is None else extend_num_tokens


def _index_k_fp8(key, cache, loc, page_size, num_tokens_non_padded, diagnostics):
    try:
        _store_index_k_fp8(_rows(key, 128), loc, cache, page_size=page_size,
                           scale_rule=c.SCALE_AMAX, num_tokens_non_padded=num_tokens_non_padded,
                           diagnostics=diagnostics)
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


def fused_store_index_k_cache(key, index_k_with_scale, out_cache_loc, extend_num_tokens=None,
                              page_size=64, *, num_tokens_non_padded=None, diagnostics=None):
    """SGLang `fused_store_index_k_cache` (DSA): the fp8 indexer key of each row.
    `extend_num_tokens` is SGLang's name for the device count of real rows
    (`num_tokens_non_padded`); an int in its place is the older signature's page_size."""
    if isinstance(extend_num_tokens, int):  # (key, cache, loc, page_size): the older form
        extend_num_tokens, page_size = None, extend_num_tokens
    count = _one_count(extend_num_tokens, num_tokens_non_padded)
    _index_k_fp8(key, index_k_with_scale, out_cache_loc, page_size, count, diagnostics)


def fused_store_indexer_cache(input, cache, indices, page_size, *,  # noqa: A002 - SGLang's name
                              num_tokens_non_padded=None, diagnostics=None):
    """SGLang DeepSeek-V4 `fused_store_indexer_cache`: the fp8 indexer key of each row."""
    _index_k_fp8(input, cache, indices, page_size, num_tokens_non_padded, diagnostics)


def store_fp4_index_k_cache(input, cache, loc, *, page_size, rne=False,  # noqa: A002
                            num_tokens_non_padded=None, diagnostics=None):
    """SGLang `store_fp4_index_k_cache`: the fp4 indexer key of each row."""
    ties = c.FP4_TIES_TO_EVEN if rne else c.FP4_TIES_TOWARD_ZERO
    try:
        _store_index_k_fp4(_rows(input, 128), loc, cache, page_size=page_size, ties=ties,
                           num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics)
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


def _flashmla(input, cache, indices, page_size, layout, num_tokens_non_padded, diagnostics,
              freqs_cis=None):
    """The FlashMLA record of each row; with `freqs_cis` (V4.1) the RoPE tail rotated first as
    SGLang's kernel does: GPT-J pairs by row i's (cos, sin) pairs, in fp32, rounded to bf16."""
    rows = _rows(input, 512)
    rope = {}
    if freqs_cis is not None:
        rope = dict(cos_sin_cache=freqs_cis, cos_sin_rows=c.ROPE_COS_SIN_BY_ROW,
                    cos_sin_layout=c.ROPE_COS_SIN_INTERLEAVED, is_neox=False,
                    rope_rounding=c.ROPE_ROUND_FP32)
    try:
        _fused_store_cache(rows[:, :_V4_NOPE], rows[:, _V4_NOPE:], indices, cache, layout=layout,
                           page_size=page_size, num_tokens_non_padded=num_tokens_non_padded,
                           diagnostics=diagnostics, **rope)
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


def fused_store_flashmla_cache(input, cache, indices, page_size, *,  # noqa: A002
                               num_tokens_non_padded=None, diagnostics=None):
    """SGLang DeepSeek-V4 `fused_store_flashmla_cache`: the MODEL1 record of each row."""
    _flashmla(input, cache, indices, page_size, c.MLA_V4, num_tokens_non_padded, diagnostics)


def fused_store_flashmla_cache_v41(input, cache, indices, page_size, layout="V41", *,  # noqa: A002
                                   freqs_cis=None, num_tokens_non_padded=None, diagnostics=None):
    """SGLang's DeepSeek-V4.1 FlashMLA store: the V41 or V41_FP4 record of each row, its RoPE
    tail rotated by `freqs_cis` ([num_tokens, 64] fp32, each pair's (cos, sin)) when given."""
    if layout not in _V41_LAYOUTS:
        raise ValueError(f"layout = {layout!r}: expected 'V41' or 'V41_FP4'")
    _flashmla(input, cache, indices, page_size, _V41_LAYOUTS[layout], num_tokens_non_padded,
              diagnostics, freqs_cis)


_FUSED_TYPES = ("flashmla", "indexer")
_FLASHMLA_LAYOUTS = {"V4": c.MLA_V4, **_V41_LAYOUTS}


def _layout_name(layout):
    """SGLang's KVLayout member (or its name) as "V4" | "V41" | "V41_FP4"."""
    name = getattr(layout, "name", layout)
    if name not in _FLASHMLA_LAYOUTS:
        raise ValueError(f"layout = {layout!r}: expected KVLayout V4, V41 or V41_FP4")
    return name


def fused_store_cache(input, cache, indices, *, page_size, type,  # noqa: A002 - SGLang's names
                      layout=None, freqs_cis=None, num_tokens_non_padded=None,
                      diagnostics=None):
    """SGLang DeepSeek-V4 `fused_store_cache`: `type="flashmla"` the FlashMLA record of each
    row (`layout` V4, the default, V41 or V41_FP4: SGLang's KVLayout or its name),
    `type="indexer"` the fp8 indexer key of each row."""
    if type not in _FUSED_TYPES:
        raise ValueError(f"unknown fused_store_cache type {type!r}; expected 'flashmla' or "
                         f"'indexer'")
    if type == "indexer":
        if layout is not None or freqs_cis is not None:
            raise ValueError("layout and freqs_cis belong to type='flashmla'")
        _index_k_fp8(input, cache, indices, page_size, num_tokens_non_padded, diagnostics)
        return
    name = "V4" if layout is None else _layout_name(layout)
    if freqs_cis is not None and name == "V4":
        raise ValueError("freqs_cis: the V4 layout keeps its RoPE dims in bf16 and has no "
                         "in-kernel RoPE")
    _flashmla(input, cache, indices, page_size, _FLASHMLA_LAYOUTS[name], num_tokens_non_padded,
              diagnostics, freqs_cis)


def can_use_store_cache(k_row_bytes, v_row_bytes=0):
    """SGLang `can_use_store_cache`: whether `store_cache` serves K / V rows of these byte
    widths (v_row_bytes 0: the same as k_row_bytes). cachestore's store takes any row of
    16-bit or 32-bit values, K and V of one width."""
    v_row_bytes = v_row_bytes or k_row_bytes
    return k_row_bytes > 0 and k_row_bytes % 2 == 0 and v_row_bytes == k_row_bytes


def can_use_nsa_fused_store(key_dtype, indices_dtype, page_size):
    """SGLang `can_use_nsa_fused_store`: whether `fused_store_index_k_cache` serves these
    (bf16 keys, int32 or int64 indices, any positive page size)."""
    return (key_dtype == torch.bfloat16 and indices_dtype in (torch.int32, torch.int64)
            and isinstance(page_size, int) and page_size > 0)


__all__ = ["can_use_nsa_fused_store", "can_use_store_cache", "fused_store_cache",
           "fused_store_flashmla_cache", "fused_store_flashmla_cache_v41",
           "fused_store_index_k_cache", "fused_store_indexer_cache", "store_cache",
           "store_fp4_index_k_cache"]
