"""Python tests of the cachestore package. They import `cachestore` as installed, or from the
source tree with CACHESTORE_LIBRARY naming a built libcachestore.so (the CTest entries set both).
GPU tests skip without PyTorch or a CUDA device; CACHESTORE_REQUIRE_GPU=1 turns a skip into a
failure."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
REQUIRE_GPU = os.environ.get("CACHESTORE_REQUIRE_GPU") == "1"


def need(condition, reason):
    if condition:
        return
    if REQUIRE_GPU:
        pytest.fail(f"{reason} (CACHESTORE_REQUIRE_GPU=1)")
    pytest.skip(reason)


@pytest.fixture
def torch_module():
    try:
        import torch
    except ImportError:
        torch = None
    need(torch is not None, "PyTorch is not installed")
    return torch


@pytest.fixture
def cuda(torch_module):
    need(torch_module.cuda.is_available(), "no CUDA device")
    return torch_module.device("cuda")
