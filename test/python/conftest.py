"""Python tests of the cachestore package. They import `cachestore` as installed, or from the
source tree with CACHESTORE_LIBRARY naming a built libcachestore.so (the CTest entries set both).
A module that needs PyTorch or a GPU skips as a whole, once, with the reason (no PyTorch, no
NVIDIA driver, no CUDA device); CACHESTORE_REQUIRE_GPU=1 turns that skip into a failure."""
import os
import subprocess
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


def run_under_python_ops(test_file, this_test):
    """Runs `test_file` (but `this_test`) in a fresh interpreter with CACHESTORE_TORCH_BACKEND=
    python: the ops defined in Python (one process holds one definition of
    torch.ops.cachestore). Asserts that everything passed and nothing skipped."""
    env = dict(os.environ, CACHESTORE_TORCH_BACKEND="python")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-k", f"not {this_test}", os.path.abspath(test_file)],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " skipped" not in run.stdout, run.stdout[-2000:]
