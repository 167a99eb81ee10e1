#!/usr/bin/env python3
"""libcachestore.so loads with ctypes and answers: version, status strings, a refused call."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.cachestore_version.restype = ctypes.c_int32
lib.cachestore_status_string.restype = ctypes.c_char_p
lib.cachestore_status_string.argtypes = [ctypes.c_int32]
lib.cachestore_last_error_message.restype = ctypes.c_char_p
version = lib.cachestore_version()
print(f"cachestore version {version // 10000}.{version // 100 % 100}.{version % 100}")
assert version >= 100, version
assert lib.cachestore_status_string(3) == b"kErrorNotSupported"
i64, vp, i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32
lib.cachestore_store_index_k_bf16.argtypes = [i64, vp, vp, vp, i32, i64, vp, i64, vp, i64, i64, i32, i32, vp]
status = lib.cachestore_store_index_k_bf16(4, None, None, None, 1, -1, 0x2000, 128, 0x4000, 128, 64, 128, 0, None)
message = lib.cachestore_last_error_message().decode()
print(f"refused call: status {status}: {message}")
assert status == 1 and "slots.data" in message, (status, message)
print("ctypes: OK")
