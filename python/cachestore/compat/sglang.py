"""SGLang's cache-write kernels (`sglang.jit_kernel`) on cachestore's stores:

    from cachestore.compat import sglang as kernels   # in place of: from sglang import jit_kernel

- `store_cache(k, v, k_cache, v_cache, indices, *, row_bytes=0, num_split=0)`: the row store of
  SGLang's token-to-KV pool, k / v `[num_tokens, H * D]` (or `[num_tokens, H, D]`) into
  `[num_slots, H * D]` caches at `indices` (int32 or int64), K and V in one launch.
  `row_bytes` and `num_split` are SGLang's tuning knobs and are accepted and ignored.

Differences: inputs are bf16, fp16 or fp32 with caches of the same dtype (SGLang copies any
element type's bytes); an index that is negative or past the cache is skipped (and counted with
`diagnostics=`) where SGLang writes it; `num_tokens_non_padded=` skips the rows of a padded
graph batch at or past the device count.
"""
from ..torch import _store, ops as _ops

_store_paged_kv = _ops.store_paged_kv.default


def store_cache(k, v, k_cache, v_cache, indices, *, row_bytes=0, num_split=0,
                num_tokens_non_padded=None, diagnostics=None):
    """SGLang `store_cache`: rows k[i], v[i] into k_cache[indices[i]], v_cache[indices[i]]."""
    del row_bytes, num_split  # SGLang's kernel tuning: cachestore picks its own shape
    if k.dim() != 2:  # [num_tokens, H, D]: its rows
        k = k.flatten(1)
    if v.dim() != 2:
        v = v.flatten(1)
    try:  # the caches as one-head paged caches of one slot a page: [num_slots, 1, H * D]
        _store_paged_kv(k, v, indices, k_cache.unsqueeze(1), v_cache.unsqueeze(1), 0, None,
                        None, None, None, None, None, num_tokens_non_padded, -1, 0, 1,
                        diagnostics)
    except (ValueError, RuntimeError) as e:
        _store.reraise(e)


__all__ = ["store_cache"]
