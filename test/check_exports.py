#!/usr/bin/env python3
"""The shared library exports exactly the API: C functions cachestore_* and C++ symbols in
namespace cachestore (not cachestore::detail / ::kernels), nothing from CUDA or the C++ runtime.

usage: check_exports.py libcachestore.so
"""
import subprocess
import sys

lib = sys.argv[1]
names = subprocess.run(["nm", "-D", "--defined-only", "--format=posix", lib], check=True,
                       capture_output=True, text=True).stdout.split("\n")
symbols = [line.split()[0] for line in names if line.strip()]
demangled = subprocess.run(["c++filt"], input="\n".join(symbols), check=True, capture_output=True,
                           text=True).stdout.split("\n")
bad, api = [], []
for mangled, name in zip(symbols, demangled):
    if mangled.startswith("cachestore_"):
        api.append(name)
    elif name.startswith("cachestore::") and not name.startswith(("cachestore::detail", "cachestore::kernels")):
        api.append(name)
    else:
        bad.append(name)
print(f"{len(api)} exported API symbols:")
for name in sorted(api):
    print("  " + name)
required = ["cachestore_store_index_k_bf16", "cachestore_store_index_k_fp8",
            "cachestore_fused_store_cache", "cachestore_status_string", "cachestore_version",
            "cachestore_last_error_message", "cachestore_query_device",
            "cachestore_store_index_k_bf16_v2", "cachestore_store_index_k_fp8_v2",
            "cachestore_fused_store_cache_v2", "cachestore_store_paged_kv",
            "cachestore_store_index_k_fp4", "cachestore_check_index_k_bf16",
            "cachestore_check_index_k_fp8", "cachestore_check_index_k_fp4",
            "cachestore_check_fused_store_cache", "cachestore_check_paged_kv",
            "cachestore_mla_layout_info", "cachestore_index_k_format_info",
            "cachestore_kv_cache_type_info", "cachestore_mla_min_page_stride",
            "cachestore_index_k_min_page_stride", "cachestore_move_pages",
            "cachestore_check_move_pages"]
missing = [r for r in required if r not in api]
missing += [f for f in ("store_index_k_bf16", "store_index_k_fp8", "store_index_k_fp4",
                                      "fused_store_cache", "store_paged_kv")
            if not any(a.startswith(f"cachestore::{f}(") for a in api)]
missing += [f"cachestore::check({p} const&)" for p in ("cachestore::IndexKBf16Params",
            "cachestore::IndexKFp8Params", "cachestore::IndexKFp4Params",
            "cachestore::FusedStoreParams", "cachestore::PagedKvParams")
            if f"cachestore::check({p} const&)" not in api]
if bad or missing:
    print(f"FAILED: {len(bad)} symbols outside the API: {bad[:20]}; missing: {missing}")
    sys.exit(1)
print("exports: OK")
