"""cachestore for PyTorch: one function per store, torch tensors in.

Every store checks its tensors' metadata (dtype, shape, the contiguity a layout needs, one CUDA
device) and raises TypeError / ValueError naming the argument; the library then checks the rest
(alignment, page strides, capacities) and refuses with `cachestore.CachestoreError` and its own
message. Nothing is written when either refuses.

The ops `torch.ops.cachestore.<store>` are native when the package has its compiled extension
and torch is 2.10 or newer: registered from C++ through PyTorch's stable ABI, they check and
launch in C++ (`backend == "native"`). Otherwise the same ops, with the same schemas, checks and
messages, are defined in Python over the C ABI (`backend == "python"`; `backend_detail` says
why). CACHESTORE_TORCH_BACKEND=native or =python forces one.

Sizes, strides, page sizes, capacities and the slot type come from the tensors. Launches go to
the current torch stream of the tensors' device; nothing synchronizes, allocates or reads a
device value on the host, so every call can be captured in `torch.cuda.graph`.

Three ways to call a store:
  - `cachestore.torch.<store>(...)`: the torch op `torch.ops.cachestore.<store>` with named
    choices ('nhd', 'v41', ...) converted to the op's ids (caches marked mutated, fakes
    registered): `torch.compile(fullgraph=True)` traces through it;
  - `cachestore.torch.direct.<store>(...)`: the Python checks and the C call, no dispatcher;
  - `cachestore.torch.bind("<store>", ...)`: checked once, then each call only launches.

The families: `index_k` (store_index_k_bf16 / _fp8 / _fp4), `mla` (fused_store_cache),
`paged_kv` (store_paged_kv).
"""
import types

import torch

from . import _native, index_k, mla, paged_kv
from ._store import launch

backend, backend_detail = _native.load()
_LIBRARY = None if backend == "native" else torch.library.Library("cachestore", "DEF")
_STORES = {s.name: s.register(_LIBRARY) for family in (index_k, mla, paged_kv)
           for s in family.STORES}

ops = types.SimpleNamespace(**{name: s.op for name, s in _STORES.items()})
direct = types.SimpleNamespace(**{name: s.function("direct") for name, s in _STORES.items()})

store_index_k_bf16 = _STORES["store_index_k_bf16"].function("op")
store_index_k_fp8 = _STORES["store_index_k_fp8"].function("op")
store_index_k_fp4 = _STORES["store_index_k_fp4"].function("op")
fused_store_cache = _STORES["fused_store_cache"].function("op")
store_paged_kv = _STORES["store_paged_kv"].function("op")


class BoundStore:
    """One store with its tensors checked and its C parameters built once (bind()); calling it
    launches on the current stream with the least host time. The tensors are kept alive and read
    at each call: rebind after reallocating any of them."""

    def __init__(self, store, args, kwargs):
        self._fn, self._params, self._tensor = store.build(store.resolve(*args, **kwargs))
        self._keep = (args, kwargs)

    def __call__(self):
        launch(self._fn, self._params, self._tensor)


def bind(store, *args, **kwargs):
    """bind('fused_store_cache', nope, rope, ...) -> a BoundStore: the same arguments as the
    function of that name, checked now; each call of the result stores again. For eager engines
    whose step buffers are fixed (under CUDA graphs host time does not matter)."""
    if store not in _STORES:
        raise ValueError(f"bind: unknown store {store!r}; expected one of {sorted(_STORES)}")
    return BoundStore(_STORES[store], args, kwargs)


__all__ = ["backend", "backend_detail", "store_index_k_bf16", "store_index_k_fp8",
           "store_index_k_fp4", "fused_store_cache", "store_paged_kv", "direct", "ops", "bind",
           "BoundStore"]
