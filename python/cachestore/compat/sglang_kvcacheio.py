"""SGLang's HiCache transfer kernels (`sgl_kernel.kvcacheio`) on cachestore.move:

    from cachestore.compat import sglang_kvcacheio as kvcacheio  # from sgl_kernel import kvcacheio

Each copies token slots `src_indices[i]` -> `dst_indices[i]` (int64 device tensors) of K and V
(the `_mla` forms: one buffer), `item_size` bytes a token and layer, in one launch:
- `transfer_kv_per_layer(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, item_size)`:
  one layer's buffers (layer-first: slot i at byte i * item_size).
- `transfer_kv_per_layer_pf_lf(..., layer_id, item_size, src_layout_dim)`: from a page-first
  buffer (slot i of layer l at i * src_layout_dim + l * item_size; SGLang's host pool) into a
  layer's buffer.
- `transfer_kv_all_layer(src_k_layers, dst_k_layers, src_v_layers, dst_v_layers, src_indices,
  dst_indices, item_size, num_layers)`: every layer at once.
- `transfer_kv_all_layer_lf_pf(src_k_layers, dst_k, src_v_layers, dst_v, ..., item_size,
  dst_layout_dim, num_layers)`: every layer into a page-first buffer.
- `transfer_kv_per_layer_mla`, `transfer_kv_per_layer_mla_pf_lf`, `transfer_kv_all_layer_mla`,
  `transfer_kv_all_layer_mla_lf_pf`: the same with one buffer a layer.

Buffers are CUDA tensors or pinned host tensors (read and written in place: one launch moves a
batch to or from the host); `block_quota` and `num_warps_per_block` are SGLang's launch knobs,
accepted and ignored.

Differences: `*_layers` are the lists of the layers' tensors (SGLang: a tensor of their
addresses, built from those lists), because the bounds and strides come from the tensors; an
address table is refused with TypeError. An index that is negative is skipped (as SGLang's
kernel does), one past its buffer is skipped where SGLang writes it, and counted with
`diagnostics=` (int64 [2]); `num_tokens_non_padded=` (an int32 device count) skips the indices at
or past it, for a padded graph batch. Source and destination must not overlap (SGLang's kernel
races there). `item_size` need not be a multiple of 8. Not provided: the page-head layouts
(`_ph_lf`, `_lf_ph`) and the `io_backend="direct"` copies (`transfer_kv_direct` and its forms).
"""
import torch

from .. import move as _move


def _bytes(t, name):
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {t.stride()}")
    return t.reshape(-1).view(torch.uint8)


def _check_item(item_size):
    if item_size < 1:
        raise ValueError(f"item_size = {item_size}: must be >= 1 (bytes a slot)")


def _layer_first(t, item_size, name):
    """Slot i of a layer's buffer at byte i * item_size: uint8 [slots, 1, 1, item_size]."""
    _check_item(item_size)
    flat = _bytes(t, name)
    slots = flat.numel() // item_size
    return flat[:slots * item_size].view(slots, 1, 1, item_size)


def _page_first(t, item_size, layout_dim, layer, name):
    """Slot i of layer `layer` at byte i * layout_dim + layer * item_size."""
    _check_item(item_size)
    if layout_dim < item_size * (layer + 1):
        raise ValueError(f"{name}: layout_dim = {layout_dim} bytes a slot holds no layer "
                         f"{layer} of {item_size} bytes")
    flat = _bytes(t, name)
    slots = (flat.numel() - layer * item_size - item_size) // layout_dim + 1
    return flat.as_strided((slots, 1, 1, item_size), (layout_dim, item_size, item_size, 1),
                           flat.storage_offset() + layer * item_size)


def _layer_lists(num_layers, **lists):
    """Each `*_layers` argument as a list of num_layers tensors (its name in the refusals)."""
    out = {}
    for name, x in lists.items():
        if isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: pass the layers' tensors as a list (cachestore takes the "
                            "bounds and strides from them), not a tensor of their addresses")
        out[name] = list(x)
        if len(out[name]) != num_layers:
            raise ValueError(f"{name} has {len(out[name])} layers; num_layers = {num_layers}")
    return out


def _layer_first_side(item_size, lists):
    """Pages of per-layer buffers: {name: [a tensor a layer]}, a plane each."""
    layers = len(next(iter(lists.values())))
    return [[_layer_first(ts[l], item_size, f"{name}[{l}]") for name, ts in lists.items()]
            for l in range(layers)]


def _one_layer_side(item_size, buffers):
    """Pages of one layer's buffers: {name: tensor}, a plane each."""
    return [[_layer_first(t, item_size, name) for name, t in buffers.items()]]


def _page_first_side(item_size, layout_dim, layers, buffers):
    """Pages of page-first buffers ({name: tensor}, a plane each) for the layers `layers`."""
    return [[_page_first(t, item_size, layout_dim, l, name) for name, t in buffers.items()]
            for l in layers]


def _move_slots(src_planes, dst_planes, src_indices, dst_indices, num_tokens_non_padded,
                diagnostics):
    """src_planes / dst_planes: per layer, the planes' [slots, 1, 1, item] views."""
    if src_indices.shape != dst_indices.shape:
        raise ValueError(f"src_indices is {tuple(src_indices.shape)} and dst_indices "
                         f"{tuple(dst_indices.shape)}: one slot each")
    for name, ids in (("src_indices", src_indices), ("dst_indices", dst_indices)):
        if ids.dtype != torch.int64:
            raise TypeError(f"{name}.dtype is {ids.dtype}; expected torch.int64 (SGLang's)")
    _move.move_pages(_move.Pages(src_planes), _move.Pages(dst_planes), src_page_ids=src_indices,
                     dst_page_ids=dst_indices, num_entries_non_padded=num_tokens_non_padded,
                     diagnostics=diagnostics)


def transfer_kv_per_layer(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, item_size,
                          block_quota=2, num_warps_per_block=32, *, num_tokens_non_padded=None,
                          diagnostics=None):
    """SGLang `transfer_kv_per_layer`: one layer's K and V slots."""
    del block_quota, num_warps_per_block  # SGLang's launch shape: cachestore picks its own
    _move_slots(_one_layer_side(item_size, {"src_k": src_k, "src_v": src_v}),
                _one_layer_side(item_size, {"dst_k": dst_k, "dst_v": dst_v}), src_indices,
                dst_indices, num_tokens_non_padded, diagnostics)


def transfer_kv_per_layer_pf_lf(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, layer_id,
                                item_size, src_layout_dim, block_quota=2, num_warps_per_block=32,
                                *, num_tokens_non_padded=None, diagnostics=None):
    """SGLang `transfer_kv_per_layer_pf_lf`: layer layer_id of page-first buffers into a layer's
    buffers."""
    del block_quota, num_warps_per_block
    _move_slots(_page_first_side(item_size, src_layout_dim, [layer_id],
                                 {"src_k": src_k, "src_v": src_v}),
                _one_layer_side(item_size, {"dst_k": dst_k, "dst_v": dst_v}), src_indices,
                dst_indices, num_tokens_non_padded, diagnostics)


def transfer_kv_all_layer(src_k_layers, dst_k_layers, src_v_layers, dst_v_layers, src_indices,
                          dst_indices, item_size, num_layers, block_quota=2,
                          num_warps_per_block=32, *, num_tokens_non_padded=None,
                          diagnostics=None):
    """SGLang `transfer_kv_all_layer`: every layer's K and V slots in one launch."""
    del block_quota, num_warps_per_block
    lists = _layer_lists(num_layers, src_k_layers=src_k_layers, dst_k_layers=dst_k_layers,
                         src_v_layers=src_v_layers, dst_v_layers=dst_v_layers)
    src = {n: lists[n] for n in ("src_k_layers", "src_v_layers")}
    dst = {n: lists[n] for n in ("dst_k_layers", "dst_v_layers")}
    _move_slots(_layer_first_side(item_size, src), _layer_first_side(item_size, dst),
                src_indices, dst_indices, num_tokens_non_padded, diagnostics)


def transfer_kv_all_layer_lf_pf(src_k_layers, dst_k, src_v_layers, dst_v, src_indices,
                                dst_indices, item_size, dst_layout_dim, num_layers,
                                block_quota=2, num_warps_per_block=32, *,
                                num_tokens_non_padded=None, diagnostics=None):
    """SGLang `transfer_kv_all_layer_lf_pf`: every layer into page-first buffers."""
    del block_quota, num_warps_per_block
    lists = _layer_lists(num_layers, src_k_layers=src_k_layers, src_v_layers=src_v_layers)
    _move_slots(_layer_first_side(item_size, lists),
                _page_first_side(item_size, dst_layout_dim, range(num_layers),
                                 {"dst_k": dst_k, "dst_v": dst_v}),
                src_indices, dst_indices, num_tokens_non_padded, diagnostics)


def transfer_kv_per_layer_mla(src, dst, src_indices, dst_indices, item_size, block_quota=2,
                              num_warps_per_block=32, *, num_tokens_non_padded=None,
                              diagnostics=None):
    """SGLang `transfer_kv_per_layer_mla`: one layer's slots of one buffer."""
    del block_quota, num_warps_per_block
    _move_slots(_one_layer_side(item_size, {"src": src}),
                _one_layer_side(item_size, {"dst": dst}), src_indices, dst_indices,
                num_tokens_non_padded, diagnostics)


def transfer_kv_per_layer_mla_pf_lf(src, dst, src_indices, dst_indices, layer_id, item_size,
                                    src_layout_dim, block_quota=2, num_warps_per_block=32, *,
                                    num_tokens_non_padded=None, diagnostics=None):
    """SGLang `transfer_kv_per_layer_mla_pf_lf`."""
    del block_quota, num_warps_per_block
    _move_slots(_page_first_side(item_size, src_layout_dim, [layer_id], {"src": src}),
                _one_layer_side(item_size, {"dst": dst}), src_indices, dst_indices,
                num_tokens_non_padded, diagnostics)


def transfer_kv_all_layer_mla(src_layers, dst_layers, src_indices, dst_indices, item_size,
                              num_layers, block_quota=2, num_warps_per_block=32, *,
                              num_tokens_non_padded=None, diagnostics=None):
    """SGLang `transfer_kv_all_layer_mla`."""
    del block_quota, num_warps_per_block
    lists = _layer_lists(num_layers, src_layers=src_layers, dst_layers=dst_layers)
    _move_slots(_layer_first_side(item_size, {"src_layers": lists["src_layers"]}),
                _layer_first_side(item_size, {"dst_layers": lists["dst_layers"]}),
                src_indices, dst_indices, num_tokens_non_padded, diagnostics)


def transfer_kv_all_layer_mla_lf_pf(src_layers, dst, src_indices, dst_indices, item_size,
                                    dst_layout_dim, num_layers, block_quota=2,
                                    num_warps_per_block=32, *, num_tokens_non_padded=None,
                                    diagnostics=None):
    """SGLang `transfer_kv_all_layer_mla_lf_pf`."""
    del block_quota, num_warps_per_block
    lists = _layer_lists(num_layers, src_layers=src_layers)
    _move_slots(_layer_first_side(item_size, lists),
                _page_first_side(item_size, dst_layout_dim, range(num_layers), {"dst": dst}),
                src_indices, dst_indices, num_tokens_non_padded, diagnostics)


__all__ = ["transfer_kv_per_layer", "transfer_kv_per_layer_pf_lf", "transfer_kv_all_layer",
           "transfer_kv_all_layer_lf_pf", "transfer_kv_per_layer_mla",
           "transfer_kv_per_layer_mla_pf_lf", "transfer_kv_all_layer_mla",
           "transfer_kv_all_layer_mla_lf_pf"]
