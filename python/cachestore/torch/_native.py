"""Loading the native ops: libcachestore_torch.so (src/torch/, PyTorch's stable ABI for torch
>= 2.10), installed next to libcachestore.so. Its ops check and launch in C++; without it (torch
older than 2.10, a build without the extension, or CACHESTORE_TORCH_BACKEND=python) the same
ops are defined in Python over the C ABI."""
import os

import torch

from .. import capi as c

MIN_TORCH = (2, 10)


def library_path():
    """$CACHESTORE_TORCH_OPS if set, else libcachestore_torch.so beside libcachestore.so."""
    return os.environ.get("CACHESTORE_TORCH_OPS") or os.path.join(
        os.path.dirname(c.library_path()), "libcachestore_torch.so")


def _torch_version():
    parts = torch.__version__.split("+")[0].split(".")
    return tuple(int(p) for p in parts[:2] if p.isdigit())


def load():
    """('native', the library loaded) or ('python', why not). CACHESTORE_TORCH_BACKEND=native
    makes 'why not' an ImportError; =python skips the native ops."""
    wanted = os.environ.get("CACHESTORE_TORCH_BACKEND", "")
    if wanted not in ("", "native", "python"):
        raise ImportError(f"CACHESTORE_TORCH_BACKEND = {wanted!r}: expected 'native' or 'python'")
    if wanted == "python":
        return "python", "CACHESTORE_TORCH_BACKEND=python"
    path = library_path()
    if _torch_version() < MIN_TORCH:
        why = f"torch {torch.__version__} is older than 2.10 (the stable ABI the native ops use)"
    elif not os.path.isfile(path):
        why = f"no native ops library at {path} (built without torch >= 2.10 at build time)"
    else:
        try:
            torch.ops.load_library(path)
            return "native", path
        except OSError as e:  # e.g. a torch without libtorch_cuda (CPU-only builds)
            why = f"{path} did not load: {e}"
    if wanted == "native":
        raise ImportError(f"CACHESTORE_TORCH_BACKEND=native: {why}")
    return "python", why


def build_info():
    """What the loaded native ops were built with: {'torch_headers': '2.10.0',
    'stable_abi_target': '2.10', 'cachestore': '0.6.0'}."""
    info = torch.ops.cachestore.native_info()
    v = info[5]
    return {"torch_headers": f"{info[0]}.{info[1]}.{info[2]}",
            "stable_abi_target": f"{info[3]}.{info[4]}",
            "cachestore": f"{v // 10000}.{v // 100 % 100}.{v % 100}"}
