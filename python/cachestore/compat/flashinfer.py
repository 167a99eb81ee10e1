"""FlashInfer's page appends (`flashinfer.page`) on cachestore's guarded store:

    from cachestore.compat import flashinfer as page   # in place of: from flashinfer import page

- `append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache,
  kv_indices, kv_indptr, kv_last_page_len, kv_layout="NHD")`: K/V `[nnz, H, D]` into a paged
  cache given as a tuple `(k_cache, v_cache)` of 4-D tensors (`[pages, P, H, D]` NHD or
  `[pages, H, P, D]` HND) or one 5-D tensor (`[pages, 2, P, H, D]` / `[pages, 2, H, P, D]`,
  `[:, 0]` the keys); row i goes to page `kv_indices[kv_indptr[b] + pos // P]`, entry
  `pos % P`, with `b = batch_indices[i]` and `pos = positions[i]`;
- `append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache,
  kpe_cache, kv_indices, kv_indptr, kv_last_page_len)`: the MLA caches `[pages, P, 512]` and
  `[pages, P, 64]` (either may be None);
- `nvfp4_quantize_append_paged_kv_cache(append_key, append_value, batch_indices, positions,
  paged_kv_cache, kv_cache_sf, kv_indices, kv_indptr, kv_last_page_len, k_scale, v_scale,
  kv_layout="NHD")` and `nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(append_key,
  append_value, slot_mapping, paged_kv_cache, kv_cache_sf, k_scale, v_scale, kv_layout="NHD")`:
  NVFP4 caches (uint8 codes `[.., D / 2]`, float8_e4m3fn block scales `[.., D / 16]`, tuple or
  5-D forms). `k_scale` / `v_scale`, the global decode scales, may be floats (copied to the
  device, so not while a graph is captured) or float32 tensors of one value, read by the kernel
  at run time, so that a captured graph follows a changed scale (FlashInfer's page-table form
  takes floats only and freezes them in a graph). A scale that is zero, negative or not finite
  is refused with ValueError, as FlashInfer refuses it: a float, a host tensor, or a CUDA tensor
  outside graph capture (its value read, as FlashInfer reads it); during capture the scale
  must be a contiguous float32 CUDA tensor on the append's device, and its value, read when the
  graph runs, follows the contract's zero-scale rule.

The page table is read on the device in the store's own launch (no slot-mapping kernel). The
indices may be int32 or int64, as FlashInfer casts them (an int64 index tensor costs a cast).
`kv_last_page_len` is accepted and not read: FlashInfer's append does not read it either. Inputs
bf16, fp16 or fp32 with caches of the same dtype, any head dim.

Differences: a row whose batch index is outside the batch, whose position is negative or past
its request's pages, or whose page id is negative or past the cache is skipped and counted
(`diagnostics=`) where FlashInfer writes wherever the table points; a padded row
(`num_tokens_non_padded=`) reads no part of kv_indptr or kv_indices, where FlashInfer's append
reads `kv_indptr[-1]` for it.
"""
import math

import torch

from .. import capi as _capi
from ..torch import _store, ops as _ops
from ..torch.paged_kv import LAYOUTS as _OP_LAYOUTS

_store_paged_kv = _ops.store_paged_kv.default
_LAYOUTS = {"NHD": _OP_LAYOUTS["nhd"], "HND": _OP_LAYOUTS["hnd"]}


def _int32(t):
    return t if t.dtype == torch.int32 else t.int()


def _layout(kv_layout):
    try:
        return _LAYOUTS[kv_layout]
    except (KeyError, TypeError):
        raise ValueError(f"kv_layout = {kv_layout!r}: expected 'NHD' or 'HND'") from None


def _unpack(paged_kv_cache):
    """(k_cache, v_cache) of FlashInfer's tuple or 5-D cache."""
    if isinstance(paged_kv_cache, (tuple, list)):
        if len(paged_kv_cache) != 2:
            raise ValueError(f"paged_kv_cache: a tuple (k_cache, v_cache), got "
                             f"{len(paged_kv_cache)} tensors")
        return paged_kv_cache[0], paged_kv_cache[1]
    if not isinstance(paged_kv_cache, torch.Tensor):
        raise TypeError(f"paged_kv_cache must be a torch.Tensor or a tuple of two, got "
                        f"{type(paged_kv_cache).__name__}")
    if paged_kv_cache.dim() != 5 or paged_kv_cache.shape[1] != 2:
        raise ValueError(f"paged_kv_cache {tuple(paged_kv_cache.shape)}: a 5-D tensor [pages, "
                         f"2, ...] or a tuple (k_cache, v_cache)")
    return paged_kv_cache[:, 0], paged_kv_cache[:, 1]


def _append(key, value, batch_indices, positions, key_cache, value_cache, kv_indices,
            kv_indptr, layout, num_tokens_non_padded, diagnostics, enable_pdl):
    try:
        _store_paged_kv(key, value, _int32(batch_indices), key_cache, value_cache, layout=layout,
                        num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics,
                        enable_pdl=enable_pdl, positions=_int32(positions),
                        kv_indptr=_int32(kv_indptr), kv_indices=_int32(kv_indices))
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


def append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache,
                          kv_indices, kv_indptr, kv_last_page_len, kv_layout="NHD", *,
                          num_tokens_non_padded=None, diagnostics=None, enable_pdl=False):
    """FlashInfer `append_paged_kv_cache`: K/V rows into the pages of their requests."""
    del kv_last_page_len  # not read by the append (FlashInfer's neither)
    layout = _layout(kv_layout)
    k_cache, v_cache = _unpack(paged_kv_cache)
    _append(append_key, append_value, batch_indices, positions, k_cache, v_cache, kv_indices,
            kv_indptr, layout, num_tokens_non_padded, diagnostics, enable_pdl)


def append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache,
                              kpe_cache, kv_indices, kv_indptr, kv_last_page_len, *,
                              num_tokens_non_padded=None, diagnostics=None, enable_pdl=False):
    """FlashInfer `append_paged_mla_kv_cache`: the compressed KV and the RoPE key of each row
    into `[pages, P, 512]` and `[pages, P, 64]` caches, in one launch."""
    del kv_last_page_len
    if ckv_cache is None and kpe_cache is None:
        return
    if ckv_cache is None:  # only the RoPE keys
        key, key_cache, value, value_cache = append_kpe, kpe_cache, None, None
    else:
        key, key_cache = append_ckv, ckv_cache
        value, value_cache = (None, None) if kpe_cache is None else (append_kpe, kpe_cache)
    _append(key, value, batch_indices, positions, key_cache, value_cache, kv_indices, kv_indptr,
            0, num_tokens_non_padded, diagnostics, enable_pdl)


def _global_scale(name, value, device):
    """A global decode scale as the float32 device tensor the kernel reads, refused as
    FlashInfer refuses it: a value that is zero, negative or not finite (read from a host
    tensor, or from a CUDA tensor outside graph capture); during capture, a float or a tensor
    that is not a contiguous float32 CUDA tensor on the append's device (its value is read
    when the graph runs: a bad one there stores with the contract's zero-scale rule)."""
    capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    if isinstance(value, torch.Tensor):
        if value.dtype != torch.float32:
            raise ValueError(f"{name} must be torch.float32, got {value.dtype}")
        if value.numel() != 1:
            raise ValueError(f"{name} must have exactly one element, got {value.numel()}")
        if capturing:
            if value.device != device or not value.is_contiguous():
                raise ValueError(f"{name} must be a contiguous float32 CUDA tensor on {device} "
                                 f"during CUDA graph capture, got {value.device}")
            return value.reshape(1)
        scalar = float(value.reshape(()).item())  # FlashInfer reads it too (outside capture)
    else:
        scalar = float(value)
    if not math.isfinite(scalar) or scalar <= 0.0:
        raise ValueError(f"{name} must be a positive finite global decode scale")
    if isinstance(value, torch.Tensor):
        return value.reshape(1).to(device=device)
    if capturing:
        raise ValueError(f"{name} must be a float32 CUDA tensor during CUDA graph capture (a "
                         f"float would be frozen into the graph)")
    return torch.tensor([scalar], dtype=torch.float32, device=device)


def _nvfp4_caches(paged_kv_cache, kv_cache_sf):
    k_cache, v_cache = _unpack(paged_kv_cache)
    k_sf, v_sf = _unpack(kv_cache_sf)
    if k_cache.dtype != torch.uint8 or v_cache.dtype != torch.uint8:
        raise ValueError("NVFP4 paged K/V cache tensors must have dtype torch.uint8")
    if k_sf.dtype != torch.float8_e4m3fn or v_sf.dtype != torch.float8_e4m3fn:
        raise ValueError("NVFP4 scale cache tensors must have dtype torch.float8_e4m3fn")
    return k_cache, v_cache, k_sf, v_sf


def _nvfp4_inputs(key, value):
    if key.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"append_key must be float16 or bfloat16, got {key.dtype}")
    if value.dtype != key.dtype:
        raise ValueError(f"append_key and append_value must have the same dtype, got "
                         f"{key.dtype} and {value.dtype}")


def _store_nvfp4(key, value, slots, caches, k_scale, v_scale, layout, positions, kv_indptr,
                 kv_indices, num_tokens_non_padded, diagnostics, enable_pdl):
    k_cache, v_cache, k_sf, v_sf = caches
    k_scale = _global_scale("k_scale", k_scale, key.device)
    v_scale = _global_scale("v_scale", v_scale, key.device)
    try:
        _store_paged_kv(key, value, slots, k_cache, v_cache, layout=layout,
                        kv_cache_dtype=_capi.KV_CACHE_NVFP4, k_scale=k_scale, v_scale=v_scale,
                        num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics,
                        enable_pdl=enable_pdl, positions=positions, kv_indptr=kv_indptr,
                        kv_indices=kv_indices, key_block_scale=k_sf, value_block_scale=v_sf)
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


def nvfp4_quantize_append_paged_kv_cache(append_key, append_value, batch_indices, positions,
                                         paged_kv_cache, kv_cache_sf, kv_indices, kv_indptr,
                                         kv_last_page_len, k_scale, v_scale, kv_layout="NHD", *,
                                         num_tokens_non_padded=None, diagnostics=None,
                                         enable_pdl=False):
    """FlashInfer `nvfp4_quantize_append_paged_kv_cache`: K/V rows quantized to NVFP4 into the
    pages of their requests (the page table read in the store's launch)."""
    del kv_last_page_len  # not read by the append (FlashInfer's neither)
    layout = _layout(kv_layout)
    _nvfp4_inputs(append_key, append_value)  # FlashInfer's order of checks
    caches = _nvfp4_caches(paged_kv_cache, kv_cache_sf)
    _store_nvfp4(append_key, append_value, _int32(batch_indices), caches, k_scale, v_scale,
                 layout, _int32(positions), _int32(kv_indptr), _int32(kv_indices),
                 num_tokens_non_padded, diagnostics, enable_pdl)


def nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(append_key, append_value,
                                                           slot_mapping, paged_kv_cache,
                                                           kv_cache_sf, k_scale, v_scale,
                                                           kv_layout="NHD", *,
                                                           num_tokens_non_padded=None,
                                                           diagnostics=None, enable_pdl=False):
    """FlashInfer `nvfp4_quantize_append_paged_kv_cache_with_slot_mapping`: the first
    slot_mapping.shape[0] rows into flat slots (page * P + entry); negative slots are padding."""
    layout = _layout(kv_layout)
    _nvfp4_inputs(append_key, append_value)
    if slot_mapping.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"slot_mapping must be int32 or int64, got {slot_mapping.dtype}")
    nnz = slot_mapping.shape[0]
    if append_key.shape[0] < nnz or append_value.shape[0] < nnz:
        raise ValueError("append_key and append_value must have at least slot_mapping.shape[0] "
                         "rows")
    caches = _nvfp4_caches(paged_kv_cache, kv_cache_sf)
    _store_nvfp4(append_key[:nnz], append_value[:nnz], slot_mapping, caches, k_scale, v_scale,
                 layout, None, None, None, num_tokens_non_padded, diagnostics, enable_pdl)


__all__ = ["append_paged_kv_cache", "append_paged_mla_kv_cache",
           "nvfp4_quantize_append_paged_kv_cache",
           "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping"]
