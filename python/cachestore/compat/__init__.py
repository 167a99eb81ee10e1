"""Drop-in entry points with the peers' names, signatures and argument conventions, on
cachestore's guarded stores: swap the import and keep the engine's calls.

    from cachestore.compat import vllm as ops    # for: from vllm import _custom_ops as ops
    from cachestore.compat import sglang as kernels   # for: from sglang import jit_kernel
    from cachestore.compat import flashinfer as page  # for: from flashinfer import page
    from cachestore.compat import sglang_kvcacheio as kvcacheio  # from sgl_kernel import kvcacheio

Each function takes the peer's arguments as the peer does, plus an optional keyword the peer
lacks, `num_tokens_non_padded` (a device int32 [1], the real row count of a padded CUDA-graph
batch). What cachestore does differently is said per function: a slot at or past the cache's
capacity is skipped and counted (`diagnostics=`) where the peer writes out of bounds or traps.
"""
from . import flashinfer, sglang, sglang_kvcacheio, vllm

__all__ = ["flashinfer", "sglang", "sglang_kvcacheio", "vllm"]
