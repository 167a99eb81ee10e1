"""cachestore: guarded KV-cache and index-K cache stores for LLM serving engines.

`cachestore.capi` is the C ABI with raw device pointers (ctypes; no torch needed).
`cachestore.torch` takes torch tensors and registers torch custom ops (imports torch).
Every store writes row i only if i < n (a device count read at run time), slot >= 0,
slot != reserved slot and slot < capacity; see docs/layouts.md.
"""
from . import capi
from .capi import CachestoreCudaError, CachestoreError, library_path, query_device

__version__ = "0.8.0"


def version():
    """The loaded library's version string (MAJOR.MINOR.PATCH)."""
    return capi.version()


__all__ = ["capi", "CachestoreError", "CachestoreCudaError", "library_path", "query_device",
           "version", "__version__"]
