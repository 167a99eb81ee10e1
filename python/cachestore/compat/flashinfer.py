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
  `[pages, P, 64]` (either may be None).

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
import torch

from ..torch import _store, ops as _ops

_store_paged_kv = _ops.store_paged_kv.default
_LAYOUTS = {"NHD": 0, "HND": 1}


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
        _store_paged_kv(key, value, _int32(batch_indices), key_cache, value_cache, layout, None,
                        None, None, num_tokens_non_padded, -1, 0, 1, diagnostics, enable_pdl,
                        _int32(positions), _int32(kv_indptr), _int32(kv_indices))
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


__all__ = ["append_paged_kv_cache", "append_paged_mla_kv_cache"]
