"""The C ABI (include/cachestore/cachestore_c.h) through ctypes: the versioned parameter structs
and the entry points. Plain Python: importing it needs no torch.

The structs mirror the header field for field; `struct_size` is set to their ctypes size, which
is the C size (same platform ABI), so the library reads them under its versioned-struct rule.
"""
import collections
import ctypes
import os

u32, i32, i64, vp = ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p

# Status codes and enum values of cachestore_c.h.
SUCCESS = 0
STATUS_NAMES = {
    0: "kSuccess", 1: "kErrorInvalidArgument", 2: "kErrorMisalignedOperand",
    3: "kErrorNotSupported", 4: "kErrorCapacityOverflow", 5: "kErrorArchMismatch",
    6: "kErrorCudaRuntime",
}
SLOT_INT32, SLOT_INT64, SLOT_PAGE_TABLE = 0, 1, 2
SCALE_AMAX, SCALE_POW2 = 0, 1
MLA_V4, MLA_V32, MLA_V41, MLA_V41_FP4 = 0, 1, 2, 3
FP4_TIES_TO_EVEN, FP4_TIES_TOWARD_ZERO = 0, 1
INDEX_K_FP8, INDEX_K_FP4 = 0, 1
KV_BF16, KV_FP16, KV_FP32 = 0, 1, 2
KV_CACHE_AUTO, KV_CACHE_FP8_E4M3, KV_CACHE_FP8_E5M2, KV_CACHE_NVFP4 = 0, 1, 2, 3
KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD = 4
ROPE_NEOX, ROPE_GPTJ = 0, 1
ROPE_ROUND_INPUT_TYPE, ROPE_ROUND_FP32 = 0, 1
ROPE_COS_SIN_BY_POSITION, ROPE_COS_SIN_BY_ROW = 0, 1
ROPE_COS_SIN_HALVES, ROPE_COS_SIN_INTERLEAVED = 0, 1


class Slots(ctypes.Structure):
    _fields_ = [("data", vp), ("slot_type", i32), ("owner_rank", i32), ("reserved_slot", i64),
                ("owner_size", i32), ("pad0", i32)]


class PageTable(ctypes.Structure):
    """The page-table slot source (slot_type SLOT_PAGE_TABLE; Slots.data: int32 batch_indices)."""
    _fields_ = [("positions", vp), ("indptr", vp), ("indices", vp), ("batch_size", i32),
                ("pad0", i32)]


_BATCH = [("struct_size", u32), ("enable_pdl", i32), ("num_tokens", i64),
          ("num_tokens_non_padded", vp), ("diagnostics", vp)]


class _Params(ctypes.Structure):
    def __init__(self, **fields):
        super().__init__(**fields)
        self.struct_size = ctypes.sizeof(self)


class IndexKBf16Params(_Params):
    _fields_ = _BATCH + [("slots", Slots), ("k", vp), ("k_row_stride", i64), ("cache", vp),
                         ("cache_row_stride", i64), ("num_slots", i64), ("head_dim", i32),
                         ("pad0", i32)]


class IndexKFp8Cache(ctypes.Structure):
    _fields_ = [("data", vp), ("num_pages", i64), ("page_stride_bytes", i64), ("page_size", i32),
                ("head_dim", i32), ("scale_rule", i32), ("pad0", i32)]


class IndexKFp4Cache(ctypes.Structure):
    _fields_ = [("data", vp), ("num_pages", i64), ("page_stride_bytes", i64), ("page_size", i32),
                ("head_dim", i32), ("ties", i32), ("pad0", i32)]


class IndexKFp8Params(_Params):
    _fields_ = _BATCH + [("slots", Slots), ("k", vp), ("k_row_stride", i64),
                         ("cache", IndexKFp8Cache), ("page_table", PageTable)]


class IndexKFp4Params(_Params):
    _fields_ = _BATCH + [("slots", Slots), ("k", vp), ("k_row_stride", i64),
                         ("cache", IndexKFp4Cache), ("page_table", PageTable)]


class Rope(ctypes.Structure):
    """RoPE fused into a store (cachestore_rope_t); positions NULL: no rotation."""
    _fields_ = [("positions", vp), ("positions_type", i32), ("cos_sin_type", i32),
                ("cos_sin_cache", vp), ("cos_sin_stride", i64), ("max_position", i64),
                ("rotary_dim", i32), ("style", i32), ("rounding", i32), ("num_query_heads", i32),
                ("query", vp), ("query_token_stride", i64), ("query_head_stride", i64),
                ("query_out", vp), ("query_out_token_stride", i64),
                ("query_out_head_stride", i64), ("key_out", vp), ("key_out_token_stride", i64),
                ("key_out_head_stride", i64), ("cos_sin_rows", i32), ("cos_sin_layout", i32)]


class FusedStoreParams(_Params):
    _fields_ = _BATCH + [
        ("kv_slots", Slots), ("nope", vp), ("nope_row_stride", i64), ("rope", vp),
        ("rope_row_stride", i64), ("layout", i32), ("kv_scale_rule", i32), ("kv_cache", vp),
        ("kv_num_pages", i64), ("kv_page_stride_bytes", i64), ("kv_page_size", i32),
        ("pad0", i32), ("index_k", vp), ("index_k_row_stride", i64), ("index_slots", Slots),
        ("index_cache", IndexKFp8Cache), ("index_format", i32), ("pad1", i32),
        ("index_fp4_cache", IndexKFp4Cache), ("kv_page_table", PageTable),
        ("index_page_table", PageTable), ("rotary", Rope)]


class KvSide(ctypes.Structure):
    _fields_ = [("data", vp), ("token_stride", i64), ("head_stride", i64), ("head_dim", i32),
                ("pad0", i32), ("cache", vp), ("page_stride", i64), ("entry_stride", i64),
                ("cache_head_stride", i64), ("scale", vp), ("scale_stride", i32), ("pad1", i32)]


class BlockScales(ctypes.Structure):
    _fields_ = [("data", vp), ("page_stride", i64), ("entry_stride", i64), ("head_stride", i64)]


class PagedKvParams(_Params):
    _fields_ = _BATCH + [("slots", Slots), ("num_heads", i32), ("input_type", i32),
                         ("cache_type", i32), ("page_size", i32), ("num_pages", i64),
                         ("k", KvSide), ("v", KvSide), ("k_chunk", i32), ("v_chunk", i32),
                         ("k_chunk_stride", i64), ("v_chunk_stride", i64),
                         ("k_dim_stride", i64), ("v_dim_stride", i64),
                         ("page_table", PageTable), ("k_block_scales", BlockScales),
                         ("v_block_scales", BlockScales), ("rope", Rope)]


MAX_PAGE_PLANES = 4


class PlaneStrides(ctypes.Structure):
    _fields_ = [("offset", i64), ("page_stride", i64), ("token_stride", i64),
                ("head_stride", i64)]


class PageSide(ctypes.Structure):
    _fields_ = [("data", vp), ("layer_stride", i64), ("plane_bases", vp), ("num_pages", i64),
                ("page_size", i32), ("page_ids_type", i32), ("page_ids", vp),
                ("planes", PlaneStrides * MAX_PAGE_PLANES)]


class MovePagesParams(_Params):
    _fields_ = [("struct_size", u32), ("enable_pdl", i32), ("num_entries", i64),
                ("num_entries_non_padded", vp), ("diagnostics", vp), ("num_layers", i32),
                ("num_planes", i32), ("num_heads", i32 * MAX_PAGE_PLANES),
                ("row_bytes", i32 * MAX_PAGE_PLANES), ("src", PageSide), ("dst", PageSide),
                ("checksums", vp), ("expected_checksums", vp)]


class MlaLayoutInfo(_Params):
    _fields_ = [("struct_size", u32), ("layout", i32), ("name", ctypes.c_char_p),
                ("nope_dim", i32), ("rope_dim", i32), ("quantized_values", i32), ("tile", i32),
                ("value_encoding", i32), ("scale_encoding", i32), ("rope_quantized", i32),
                ("scale_rule_use", i32), ("data_row_bytes", i64), ("scale_row_bytes", i64),
                ("page_round_bytes", i64)]


class IndexKFormatInfo(_Params):
    _fields_ = [("struct_size", u32), ("format", i32), ("name", ctypes.c_char_p), ("group", i32),
                ("max_head_dim", i32), ("value_encoding", i32), ("scale_encoding", i32),
                ("scale_bytes", i32), ("values_per_byte", i32)]


class KvCacheTypeInfo(_Params):
    _fields_ = [("struct_size", u32), ("cache_type", i32), ("name", ctypes.c_char_p),
                ("element_bytes", i32), ("scaled", i32), ("head_dim_multiple", i32),
                ("values_per_element", i32), ("block", i32), ("values_per_thread", i32)]


class CachestoreError(ValueError):
    """The library refused a call (bad argument, unsupported shape, misalignment, overflow):
    nothing was launched, nothing written. `status` is the C status name."""

    def __init__(self, status, message):
        super().__init__(f"{message} [{STATUS_NAMES.get(status, status)}]")
        self.status = STATUS_NAMES.get(status, status)


class CachestoreCudaError(RuntimeError):
    """A CUDA runtime call or kernel launch failed, or no kernel image fits the device."""

    def __init__(self, status, message):
        super().__init__(f"{message} [{STATUS_NAMES.get(status, status)}]")
        self.status = STATUS_NAMES.get(status, status)


def library_path():
    """libcachestore.so: $CACHESTORE_LIBRARY if set, else the one installed with this package
    (next to this file; for an editable install, where the distribution recorded it)."""
    if os.environ.get("CACHESTORE_LIBRARY"):
        return os.environ["CACHESTORE_LIBRARY"]
    here = os.path.join(os.path.dirname(__file__), "libcachestore.so")
    if os.path.isfile(here):
        return here
    try:
        from importlib import metadata
        for f in metadata.files("cachestore") or []:
            if f.name == "libcachestore.so":
                return str(f.locate())
    except metadata.PackageNotFoundError:
        pass
    return here


def _load():
    lib = ctypes.CDLL(library_path())
    lib.cachestore_version.restype = i32
    lib.cachestore_last_error_message.restype = ctypes.c_char_p
    lib.cachestore_status_string.restype = ctypes.c_char_p
    lib.cachestore_status_string.argtypes = [i32]
    lib.cachestore_query_device.argtypes = [i32, ctypes.POINTER(i32), ctypes.POINTER(i32),
                                            ctypes.POINTER(i32)]
    for name, params in (("store_index_k_bf16_v2", IndexKBf16Params),
                         ("store_index_k_fp8_v2", IndexKFp8Params),
                         ("store_index_k_fp4", IndexKFp4Params),
                         ("fused_store_cache_v2", FusedStoreParams),
                         ("store_paged_kv", PagedKvParams),
                         ("move_pages", MovePagesParams)):
        fn = getattr(lib, "cachestore_" + name)
        fn.restype = i32
        fn.argtypes = [ctypes.POINTER(params), vp]
    for name, params in (("index_k_bf16", IndexKBf16Params), ("index_k_fp8", IndexKFp8Params),
                         ("index_k_fp4", IndexKFp4Params), ("fused_store_cache", FusedStoreParams),
                         ("paged_kv", PagedKvParams), ("move_pages", MovePagesParams)):
        fn = getattr(lib, "cachestore_check_" + name)
        fn.restype = i32
        fn.argtypes = [ctypes.POINTER(params)]
    for name, info in (("mla_layout_info", MlaLayoutInfo),
                       ("index_k_format_info", IndexKFormatInfo),
                       ("kv_cache_type_info", KvCacheTypeInfo)):
        fn = getattr(lib, "cachestore_" + name)
        fn.restype = i32
        fn.argtypes = [i32, ctypes.POINTER(info)]
    lib.cachestore_mla_min_page_stride.restype = i32
    lib.cachestore_mla_min_page_stride.argtypes = [i32, i32, ctypes.POINTER(i64)]
    lib.cachestore_index_k_min_page_stride.restype = i32
    lib.cachestore_index_k_min_page_stride.argtypes = [i32, i32, i32, ctypes.POINTER(i64)]
    return lib


lib = _load()


def check(status):
    """Raises the library's refusal (CachestoreError) or CUDA failure (CachestoreCudaError)."""
    if status != SUCCESS:
        message = lib.cachestore_last_error_message().decode()
        if status in (5, 6):
            raise CachestoreCudaError(status, message)
        raise CachestoreError(status, message)


def store_index_k_bf16(params, stream=0):
    check(lib.cachestore_store_index_k_bf16_v2(ctypes.byref(params), stream))


def store_index_k_fp8(params, stream=0):
    check(lib.cachestore_store_index_k_fp8_v2(ctypes.byref(params), stream))


def store_index_k_fp4(params, stream=0):
    check(lib.cachestore_store_index_k_fp4(ctypes.byref(params), stream))


def fused_store_cache(params, stream=0):
    check(lib.cachestore_fused_store_cache_v2(ctypes.byref(params), stream))


def store_paged_kv(params, stream=0):
    check(lib.cachestore_store_paged_kv(ctypes.byref(params), stream))


def check_params(params):
    """The library's check of a params struct (the refusal the store would give, without
    launching): raises CachestoreError, else returns None."""
    fn = {IndexKBf16Params: lib.cachestore_check_index_k_bf16,
          IndexKFp8Params: lib.cachestore_check_index_k_fp8,
          IndexKFp4Params: lib.cachestore_check_index_k_fp4,
          FusedStoreParams: lib.cachestore_check_fused_store_cache,
          PagedKvParams: lib.cachestore_check_paged_kv,
          MovePagesParams: lib.cachestore_check_move_pages}[type(params)]
    check(fn(ctypes.byref(params)))


# ---- the layout table, as the library describes it (include/cachestore/layout.h) -------------
def _table(query, info_type):
    """Every entry of one of the library's layout tables (ids 0, 1, ... until it refuses one),
    as plain named tuples keyed by name (no ctypes objects: torch.compile reads them)."""
    fields = [f for f, _ in info_type._fields_ if f not in ("struct_size", "pad0")]
    entry = collections.namedtuple(info_type.__name__, fields)
    entries = {}
    while True:
        info = info_type()
        if query(len(entries), ctypes.byref(info)) != SUCCESS:
            return entries
        values = {f: getattr(info, f) for f in fields}
        values["name"] = values["name"].decode()
        entries[values["name"]] = entry(**values)


MLA_LAYOUTS = _table(lib.cachestore_mla_layout_info, MlaLayoutInfo)
INDEX_K_FORMATS = _table(lib.cachestore_index_k_format_info, IndexKFormatInfo)
KV_CACHE_TYPES = _table(lib.cachestore_kv_cache_type_info, KvCacheTypeInfo)


def mla_min_page_stride(layout, page_size):
    """The smallest page stride in bytes of MLA layout id `layout` for `page_size` slots."""
    out = i64()
    check(lib.cachestore_mla_min_page_stride(layout, page_size, ctypes.byref(out)))
    return out.value


def index_k_min_page_stride(index_format, page_size, head_dim):
    """The smallest page stride in bytes of index-K format id `index_format` at `head_dim`."""
    out = i64()
    check(lib.cachestore_index_k_min_page_stride(index_format, page_size, head_dim,
                                                 ctypes.byref(out)))
    return out.value


def version():
    v = lib.cachestore_version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def query_device(device=0):
    """(kernel path name, binary version, compute capability) the library runs on `device`."""
    path, binary, cc = i32(), i32(), i32()
    check(lib.cachestore_query_device(device, ctypes.byref(path), ctypes.byref(binary),
                                      ctypes.byref(cc)))
    return ({0: "portable", 1: "hopper", 2: "blackwell"}.get(path.value, path.value), binary.value,
            cc.value)
