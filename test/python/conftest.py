"""Python tests of the cachestore package. They import `cachestore` as installed, or from the
source tree with CACHESTORE_LIBRARY naming a built libcachestore.so (the CTest entries set both).
A module that needs PyTorch or a GPU skips as a whole, once, with the reason (no PyTorch, no
NVIDIA driver, no CUDA device); CACHESTORE_REQUIRE_GPU=1 turns that skip into a failure."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
REQUIRE_GPU = os.environ.get("CACHESTORE_REQUIRE_GPU") == "1"


def need(condition, reason):
    """Skips (or, under CACHESTORE_REQUIRE_GPU=1, fails) the calling module unless `condition`."""
    if condition:
        return
    if REQUIRE_GPU:
        pytest.fail(f"{reason} (CACHESTORE_REQUIRE_GPU=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def need_torch():
    try:
        import torch
    except ImportError:
        torch = None
    need(torch is not None, "PyTorch is not installed")
    return torch


def gpu_absence(torch):
    """Empty when torch sees a CUDA device; else why not, naming the cause."""
    if torch.cuda.is_available():
        return ""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver here (libcuda.so.1 is not installed)"
    return "no CUDA device here"


def need_gpu():
    torch = need_torch()
    absent = gpu_absence(torch)
    need(not absent, absent)
    return torch
