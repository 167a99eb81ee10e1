"""vLLM's cache-write ops (`vllm._custom_ops`) on cachestore's stores:

    from cachestore.compat import vllm as ops    # in place of: from vllm import _custom_ops as ops

- `reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
  k_scale, v_scale)`: caches `[num_blocks, block_size, num_heads, head_size]` of any strides
  (every stride is read from the view, none assumed): vLLM's HND views, and its standardized
  layout's per-layer views of one buffer in any of the six orders of [layers, blocks, heads,
  tokens, content], K and V side by side in the content dim or not;
- `reshape_and_cache(...)`, the same arguments: vLLM's paged-attention layout, key cache
  `[num_blocks, num_heads, head_size / x, block_size, x]`, value cache `[num_blocks, num_heads,
  head_size, block_size]`;
- `concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale)`: the
  576-wide MLA rows `[num_blocks, block_size, 576]`, or with `kv_cache_dtype="fp8_ds_mla"` the
  656-byte FlashMLA record (cachestore's `v32` layout, amax rule);
- `concat_and_cache_mla_rope_fused(positions, q_pe, k_pe, kv_c, cos_sin_cache, is_neox,
  slot_mapping, kv_cache, kv_cache_dtype, kv_cache_scale)`: q_pe and k_pe rotated in place, the
  rotated k_pe and kv_c stored in the same 576-wide rows, in one launch;
- `indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, kv_cache_dtype)`:
  DeepSeek V3.2's fp8 indexer cache (`"ue8m0"`: power-of-two scales), or a bf16 cache.

- `swap_blocks(src, dst, block_mapping)`: whole blocks between a GPU cache and a pinned host
  copy (or two GPU caches), one launch for the mapping;
- `copy_blocks(key_caches, value_caches, block_mapping)`, `copy_blocks_mla(kv_caches,
  block_mapping)`: blocks within each layer's caches, every layer in one launch.
- `cp_gather_cache(src_cache, dst, block_table, cu_seq_lens, batch_size, seq_starts=None)`,
  `gather_and_maybe_dequant_cache(src_cache, dst, block_table, cu_seq_lens, token_to_seq,
  num_tokens, kv_cache_dtype, scale, seq_starts=None)`: a batch of sequences' tokens out of
  their blocks into contiguous rows (prefix caching, context parallelism), fp8 dequantized.

- `triton_reshape_and_cache_flash_per_token_head_quant(key, value, key_cache, value_cache,
  k_scale_cache, v_scale_cache, slot_mapping)`: vLLM's fp8_per_token_head caches, a float32
  scale of each (token, head) computed from its amax and written to `k_scale_cache` /
  `v_scale_cache` `[num_blocks, block_size, num_heads]`; `reshape_and_cache_flash` with
  `kv_cache_dtype="fp8_per_token_head"` takes those scale caches as its k_scale / v_scale.

`kv_cache_dtype` is vLLM's string: "auto", "fp8" (e4m3 on CUDA), "fp8_e4m3", "fp8_e5m2",
"fp8_per_token_head"; fp8 caches may be uint8 (as vLLM allocates them) or float8 tensors; scales
are float32 tensors of 1 value (or one per head); per-token-head scale caches are written.
fp8_per_token_head takes head sizes that are powers of two in [8, 256] (vLLM's Triton kernel:
any), the scale max(amax / 448, 1e-6) by IEEE division and the values e4m3(x * RN(1 / s)) (the
formula of vLLM's tests; its Triton kernel's division may round differently), a NaN value
stored as NaN and left out of its head's amax. Inputs bf16, fp16 or fp32, any head size. As in vLLM, the rows stored
are the first `slot_mapping.shape[0]` of key / value, and a negative slot is skipped.
Differences: a slot past the cache is skipped (and counted with `diagnostics=`) where vLLM
writes out of bounds; `num_tokens_non_padded=` skips the rows of a padded graph batch at or past
the device count. The block copies (cachestore.move): `block_mapping` [n, 2] int64 on any
device (vLLM: CPU for swap_blocks, the caches' device for copy_blocks); a block id past the
cache is skipped and counted (`diagnostics=`, int64 [2]) where vLLM copies out of bounds; a
negative id is skipped; `num_entries_non_padded=` skips the pairs at or past a device count.
swap_blocks refuses pageable host memory (vLLM copies it synchronously); copy_blocks reads every
source block before it writes any destination (a gather into a staging buffer, then a scatter),
where vLLM copies the pairs concurrently, so that a chain (a -> b, b -> c) is well defined.
The sequence gathers take any entry width (vLLM: 320 or 576 for the dequantizing one) and caches
whose blocks' rows are one stride apart; a block id past the cache (or a position past the
block table) leaves its row unwritten and is counted (`diagnostics=`); cp_gather_cache reads the
row count cu_seq_lens[batch_size] on the device (graph-safe; vLLM launches by batch); the fp8
gather dequantizes in a scratch buffer (four device ops, not one kernel). Not provided:
`swap_blocks_batch(src_ptrs, dst_ptrs, sizes)` (raw addresses carry no bounds to guard; swap_blocks
moves the same blocks by ids in one launch, where cudaMemcpyBatchAsync moved 32 KiB blocks at
about 9 GB/s on the H200).
"""
import torch

from .. import capi as c
from .. import move as _move
from ..torch import _store, ops as _ops
from ..torch.paged_kv import LAYOUTS as _LAYOUTS

_reraise = _store.reraise
_KV_CACHE_DTYPES = {"auto": None, "fp8": c.KV_CACHE_FP8_E4M3, "fp8_e4m3": c.KV_CACHE_FP8_E4M3,
                    "fp8_e5m2": c.KV_CACHE_FP8_E5M2,
                    "fp8_per_token_head": c.KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD}
_NHD, _PAGED_ATTENTION = _LAYOUTS["nhd"], _LAYOUTS["paged_attention"]
_store_paged_kv = _ops.store_paged_kv.default
_fused_store_cache = _ops.fused_store_cache.default
_store_index_k_fp8 = _ops.store_index_k_fp8.default
_store_index_k_bf16 = _ops.store_index_k_bf16.default


def _cache_type(kv_cache_dtype):
    try:
        return _KV_CACHE_DTYPES[kv_cache_dtype]
    except (KeyError, TypeError):
        raise ValueError(f"kv_cache_dtype = {kv_cache_dtype!r}: expected one of "
                         f"{sorted(_KV_CACHE_DTYPES)}") from None


def _paged(layout, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
           v_scale, num_tokens_non_padded, diagnostics):
    cache_type = _cache_type(kv_cache_dtype)
    rows = slot_mapping.shape[0]
    if key.shape[0] != rows:  # vLLM stores the first slot_mapping.shape[0] rows
        key, value = key[:rows], value[:rows]
    scales = {}
    if cache_type is None:  # "auto": the scales are not read
        k_scale = v_scale = None
    elif cache_type == c.KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD:  # the scales are written
        scales = dict(key_block_scale=k_scale, value_block_scale=v_scale)
        k_scale = v_scale = None
    try:
        _store_paged_kv(key, value, slot_mapping, key_cache, value_cache, layout=layout,
                        kv_cache_dtype=cache_type, k_scale=k_scale, v_scale=v_scale,
                        num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics,
                        **scales)
    except (ValueError, RuntimeError) as e:
        _reraise(e)


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                            k_scale, v_scale, *, num_tokens_non_padded=None, diagnostics=None):
    """vLLM `reshape_and_cache_flash`: key / value [num_tokens, num_heads, head_size] into
    [num_blocks, block_size, num_heads, head_size] caches at slot_mapping."""
    _paged(_NHD, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
           v_scale, num_tokens_non_padded, diagnostics)


def triton_reshape_and_cache_flash_per_token_head_quant(key, value, key_cache, value_cache,
                                                        k_scale_cache, v_scale_cache,
                                                        slot_mapping, kv_quant_mode=None, *,
                                                        num_tokens_non_padded=None,
                                                        diagnostics=None):
    """vLLM's fp8_per_token_head store (`vllm.v1.attention.ops.triton_reshape_and_cache_flash`):
    key / value [num_tokens, num_heads, head_size] into fp8 caches [num_blocks, block_size,
    num_heads, head_size], each (token, head)'s scale max(amax / 448, 1e-6) into k_scale_cache /
    v_scale_cache [num_blocks, block_size, num_heads] float32. `kv_quant_mode`: None or vLLM's
    FP8_PER_TOKEN_HEAD (its name or its value's `name`); the int8 and int4 modes are refused."""
    mode = getattr(kv_quant_mode, "name", kv_quant_mode)
    if mode not in (None, "FP8_PER_TOKEN_HEAD"):
        raise ValueError(f"kv_quant_mode = {kv_quant_mode!r}: cachestore stores "
                         f"FP8_PER_TOKEN_HEAD only (the int8 and int4 modes are not provided)")
    _paged(_NHD, key, value, key_cache, value_cache, slot_mapping, "fp8_per_token_head",
           k_scale_cache, v_scale_cache, num_tokens_non_padded, diagnostics)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
                      v_scale, *, num_tokens_non_padded=None, diagnostics=None):
    """vLLM `reshape_and_cache`: key / value [num_tokens, num_heads, head_size] into the
    paged-attention caches (key [num_blocks, num_heads, head_size / x, block_size, x], value
    [num_blocks, num_heads, head_size, block_size])."""
    _paged(_PAGED_ATTENTION, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
           k_scale, v_scale, num_tokens_non_padded, diagnostics)


def concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale, *,
                         num_tokens_non_padded=None, diagnostics=None):
    """vLLM `concat_and_cache_mla`: kv_c [num_tokens, 512] and k_pe [num_tokens, 64] into
    kv_cache [num_blocks, block_size, 576] (auto or fp8 under `scale`), or with "fp8_ds_mla"
    into [num_blocks, block_size, 656] uint8 records (per-tile scales; `scale` unused)."""
    rows = slot_mapping.shape[0]
    if kv_c.shape[0] != rows:
        kv_c, k_pe = kv_c[:rows], k_pe[:rows]
    try:
        if kv_cache_dtype == "fp8_ds_mla":
            _fused_store_cache(kv_c, k_pe, slot_mapping, kv_cache, layout=c.MLA_V32,
                               page_size=kv_cache.shape[1], scale_rule=c.SCALE_AMAX,
                               num_tokens_non_padded=num_tokens_non_padded,
                               diagnostics=diagnostics)
            return
        cache_type = _cache_type(kv_cache_dtype)
        split = kv_cache.shape[-1] - k_pe.shape[-1]
        scale = None if cache_type is None else scale
        _store_paged_kv(kv_c, k_pe, slot_mapping, kv_cache[..., :split], kv_cache[..., split:],
                        layout=_NHD, kv_cache_dtype=cache_type, k_scale=scale, v_scale=scale,
                        num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics)
    except (ValueError, RuntimeError) as e:
        _reraise(e)


def concat_and_cache_mla_rope_fused(positions, q_pe, k_pe, kv_c, cos_sin_cache, is_neox,
                                    slot_mapping, kv_cache, kv_cache_dtype, kv_cache_scale, *,
                                    num_tokens_non_padded=None, diagnostics=None):
    """vLLM `concat_and_cache_mla_rope_fused`: q_pe [num_tokens, num_heads, rot_dim] and k_pe
    [num_tokens, rot_dim] rotated in place at positions by cos_sin_cache [max_position, rot_dim]
    (NeoX halves if is_neox, else GPT-J pairs; each operation rounded to the input dtype, as
    vLLM computes), then the rotated k_pe after kv_c [num_tokens, kv_lora_rank] into kv_cache
    [num_blocks, block_size, kv_lora_rank + rot_dim] (auto, or fp8 under kv_cache_scale).
    Differences: every real row's k_pe is rotated, also where its slot is negative (vLLM
    rotates those rows' q_pe only); a position outside cos_sin_cache skips its row (nothing
    rotated or stored; counted in `diagnostics=`, then 3 counters) where vLLM reads past the
    cache."""
    rows = slot_mapping.shape[0]
    if kv_c.shape[0] != rows:
        kv_c, k_pe, q_pe = kv_c[:rows], k_pe[:rows], q_pe[:rows]
    try:
        cache_type = _cache_type(kv_cache_dtype)
        scale = None if cache_type is None else kv_cache_scale
        split = kv_cache.shape[-1] - k_pe.shape[-1]
        key = k_pe.unsqueeze(1)  # one head, rotated in place (key_out is key)
        _store_paged_kv(key, kv_c, slot_mapping, kv_cache[..., split:], kv_cache[..., :split],
                        layout=_NHD, kv_cache_dtype=cache_type, k_scale=scale, v_scale=scale,
                        num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics,
                        query=q_pe, cos_sin_cache=cos_sin_cache,
                        rope_positions=positions[:rows], is_neox=is_neox,
                        rope_rounding=c.ROPE_ROUND_INPUT_TYPE, key_out=key)
    except (ValueError, RuntimeError) as e:
        _reraise(e)


def indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, kv_cache_dtype, *,
                              num_tokens_non_padded=None, diagnostics=None):
    """vLLM `indexer_k_quant_and_cache`: k [num_tokens, head_dim] bf16 into the fp8 indexer cache
    [num_blocks, block_size, head_dim + 4 * head_dim / quant_block_size] uint8 (quant block
    128; `kv_cache_dtype` "ue8m0": power-of-two scales, else fp32 amax scales), or into a bf16
    cache [num_blocks, block_size, head_dim] (vLLM's `indexer_k_cache`)."""
    rows = slot_mapping.shape[0]
    if k.dim() != 2:
        k = k.reshape(-1, k.shape[-1])
    if k.shape[0] != rows:
        k = k[:rows]
    try:
        if kv_cache.dtype == torch.bfloat16:
            _store_index_k_bf16(k, slot_mapping, kv_cache.reshape(-1, kv_cache.shape[-1]),
                                num_tokens_non_padded=num_tokens_non_padded,
                                diagnostics=diagnostics)
            return
        if quant_block_size != 128:
            raise ValueError(f"quant_block_size = {quant_block_size}: the fp8 indexer cache "
                             "quantizes blocks of 128 values")
        rule = c.SCALE_POW2 if kv_cache_dtype == "ue8m0" else c.SCALE_AMAX
        page_size = kv_cache.shape[1] if kv_cache.dim() == 3 else None
        _store_index_k_fp8(k, slot_mapping, kv_cache, page_size=page_size, scale_rule=rule,
                           num_tokens_non_padded=num_tokens_non_padded, diagnostics=diagnostics)
    except (ValueError, RuntimeError) as e:
        _reraise(e)


def _pairs(block_mapping, device):
    if block_mapping.dim() != 2 or block_mapping.shape[1] != 2:
        raise ValueError(f"block_mapping must be [num_pairs, 2], got {tuple(block_mapping.shape)}")
    m = block_mapping.to(device=device, dtype=torch.int64, non_blocking=True)
    return m[:, 0].contiguous(), m[:, 1].contiguous()


def swap_blocks(src, dst, block_mapping, *, num_entries_non_padded=None, diagnostics=None):
    """Blocks block_mapping[i, 0] of `src` into block_mapping[i, 1] of `dst` ([num_blocks, ...]
    caches of the same block bytes; one of them may be pinned host memory)."""
    device = src.device if src.is_cuda else dst.device
    s, d = _pairs(block_mapping, device)
    _move.move_pages(_move.byte_pages(src), _move.byte_pages(dst), src_page_ids=s,
                     dst_page_ids=d, num_entries_non_padded=num_entries_non_padded,
                     diagnostics=diagnostics)


def copy_blocks(key_caches, value_caches, block_mapping, *, num_entries_non_padded=None,
                diagnostics=None):
    """In every layer, blocks block_mapping[i, 0] into block_mapping[i, 1] of its key and value
    caches (lists of one tensor a layer), all layers in one launch each way."""
    s, d = _pairs(block_mapping, key_caches[0].device)
    _move.copy_pages(_move.byte_pages(list(key_caches), list(value_caches)), s, d,
                     num_entries_non_padded=num_entries_non_padded, diagnostics=diagnostics)


def copy_blocks_mla(kv_caches, block_mapping, *, num_entries_non_padded=None, diagnostics=None):
    """copy_blocks for MLA caches: one cache a layer."""
    s, d = _pairs(block_mapping, kv_caches[0].device)
    _move.copy_pages(_move.byte_pages(list(kv_caches)), s, d,
                     num_entries_non_padded=num_entries_non_padded, diagnostics=diagnostics)


def _token_rows(cache, name):
    """A [num_blocks, block_size, entries...] cache as its token rows, uint8 [slots, 1, 1, bytes]
    (slot = block * block_size + position)."""
    if cache.dim() < 3:
        raise ValueError(f"{name} must be [num_blocks, block_size, entries...], got "
                         f"{tuple(cache.shape)}")
    entries = cache[0, 0].numel()
    row = cache.stride(1) if cache.shape[1] > 1 else cache.stride(0)
    if not cache[0, 0].is_contiguous() or cache.stride(0) != cache.shape[1] * row:
        raise ValueError(f"{name}: each token's entries must be contiguous and the blocks' rows "
                         f"one stride apart, got strides {cache.stride()}")
    rows = cache.as_strided((cache.shape[0] * cache.shape[1], 1, 1, entries),
                            (row, entries, entries, 1))
    return rows if cache.dtype == torch.uint8 else rows.view(torch.uint8)


def _sequence_slots(cache, block_table, cu_seq_lens, seqs, seq_starts, tokens):
    """Each output token's cache slot (-1: none), from its sequence `seqs`: position t -
    cu_seq_lens[seq] (+ seq_starts[seq]) through block_table, device ops only."""
    for name, t in (("block_table", block_table), ("cu_seq_lens", cu_seq_lens),
                    ("seq_starts", seq_starts)):
        if t is not None and t.dtype != torch.int32:
            raise TypeError(f"{name}.dtype is {t.dtype}; expected torch.int32 (vLLM's)")
    block_size = cache.shape[1]
    t = torch.arange(tokens, device=cache.device, dtype=torch.int64)
    seqs = seqs.long().clamp(0, block_table.shape[0] - 1)
    start, end = cu_seq_lens[seqs].long(), cu_seq_lens[seqs + 1].long()
    pos = t - start + (seq_starts[seqs].long() if seq_starts is not None else 0)
    column = torch.div(pos, block_size, rounding_mode="floor")
    real = (t < end) & (pos >= 0) & (column < block_table.shape[1])
    block = block_table[seqs, column.clamp(0, block_table.shape[1] - 1)].long()
    return torch.where(real & (block >= 0), block * block_size + pos % block_size, -1)


def _gather_rows(cache, dst, slots, count, diagnostics):
    _move.move_pages(_move.Pages([[_token_rows(cache, "src_cache")]]),
                     _move.Pages([[_token_rows(dst.unsqueeze(1), "dst")]]), src_page_ids=slots,
                     num_entries_non_padded=count, diagnostics=diagnostics)


def cp_gather_cache(src_cache, dst, block_table, cu_seq_lens, batch_size, seq_starts=None, *,
                    diagnostics=None):
    """vLLM `cp_gather_cache`: sequence b's tokens (from seq_starts[b] within its blocks of
    block_table[b]) into dst rows cu_seq_lens[b] .. cu_seq_lens[b + 1], one launch; the rows at
    or past cu_seq_lens[batch_size] (read on the device) are not written."""
    if src_cache.dtype != dst.dtype:
        raise TypeError(f"src_cache is {src_cache.dtype} and dst {dst.dtype}; they must agree")
    t = torch.arange(dst.shape[0], device=dst.device, dtype=torch.int32)
    seqs = torch.searchsorted(cu_seq_lens[1:batch_size + 1], t, right=True)
    slots = _sequence_slots(src_cache, block_table, cu_seq_lens, seqs, seq_starts, dst.shape[0])
    _gather_rows(src_cache, dst, slots, cu_seq_lens[batch_size:batch_size + 1], diagnostics)


_FP8 = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn,
        "fp8_e5m2": torch.float8_e5m2}


def gather_and_maybe_dequant_cache(src_cache, dst, block_table, cu_seq_lens, token_to_seq,
                                   num_tokens, kv_cache_dtype, scale, seq_starts=None, *,
                                   diagnostics=None):
    """vLLM `gather_and_maybe_dequant_cache`: output token t < num_tokens of sequence
    token_to_seq[t] from the cache (as cp_gather_cache); kv_cache_dtype "auto" copies, "fp8" /
    "fp8_e4m3" / "fp8_e5m2" dequantize: fp32(x) * scale[0] rounded to dst's dtype."""
    if kv_cache_dtype != "auto" and kv_cache_dtype not in _FP8:
        raise ValueError(f"kv_cache_dtype = {kv_cache_dtype!r}: expected 'auto', 'fp8', "
                         "'fp8_e4m3' or 'fp8_e5m2'")
    if kv_cache_dtype == "auto" and src_cache.dtype != dst.dtype:
        raise TypeError(f"kv_cache_dtype 'auto': src_cache is {src_cache.dtype} and dst "
                        f"{dst.dtype}; they must agree")
    slots = _sequence_slots(src_cache, block_table, cu_seq_lens, token_to_seq[:num_tokens],
                            seq_starts, num_tokens)
    if kv_cache_dtype == "auto":
        return _gather_rows(src_cache, dst[:num_tokens], slots, None, diagnostics)
    # The fp8 rows gathered, dequantized in a scratch buffer, then moved into the rows that had
    # a slot (a skipped token's row is not written).
    codes = torch.empty((num_tokens,) + tuple(dst.shape[1:]), dtype=torch.uint8,
                        device=dst.device)
    _gather_rows(src_cache, codes, slots, None, diagnostics)
    values = (codes.view(_FP8[kv_cache_dtype]).float() * scale.float().reshape(-1)[0]).to(
        dst.dtype)
    t = torch.arange(num_tokens, device=dst.device, dtype=torch.int64)
    gathered = (slots >= 0) & (slots < src_cache.shape[0] * src_cache.shape[1])
    _move.move_pages(_move.Pages([[_token_rows(values.unsqueeze(1), "values")]]),
                     _move.Pages([[_token_rows(dst[:num_tokens].unsqueeze(1), "dst")]]),
                     src_page_ids=torch.where(gathered, t, -1))


__all__ = ["swap_blocks", "copy_blocks", "copy_blocks_mla", "cp_gather_cache",
           "gather_and_maybe_dequant_cache", "reshape_and_cache_flash",
           "reshape_and_cache", "concat_and_cache_mla", "concat_and_cache_mla_rope_fused",
           "indexer_k_quant_and_cache",
           "triton_reshape_and_cache_flash_per_token_head_quant"]
