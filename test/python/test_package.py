"""The package without torch: it imports, loads its library, and the raw C ABI refuses a bad call
with the library's message."""
import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cachestore
from cachestore import capi


def test_imports_without_torch():
    # A fresh interpreter: importing cachestore must not import torch.
    code = "import sys, cachestore; print(cachestore.version()); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env=os.environ).stdout.split()
    assert out == [cachestore.__version__, "False"]


def test_library_is_the_packaged_one():
    assert os.path.isfile(cachestore.library_path())
    assert cachestore.version() == cachestore.__version__


def test_raw_call_refused_with_the_library_message():
    p = capi.IndexKBf16Params(num_tokens=4)  # no slots, no inputs
    assert p.struct_size == ctypes.sizeof(p)
    with pytest.raises(cachestore.CachestoreError, match="slots.data is null") as e:
        capi.store_index_k_bf16(p)
    assert e.value.status == "kErrorInvalidArgument"


def test_raw_fused_call_names_the_fp4_cache():
    p = capi.FusedStoreParams(num_tokens=4)
    p.kv_slots = capi.Slots(0x1000, capi.SLOT_INT64, 0, -1, 1, 0)
    p.nope, p.nope_row_stride, p.rope, p.rope_row_stride = 0x2000, 512, 0x2000 + 896, 512
    p.layout, p.kv_cache, p.kv_num_pages, p.kv_page_size = capi.MLA_V41, 0x8000, 4, 64
    p.kv_page_stride_bytes = 33792
    p.index_k, p.index_k_row_stride = 0x2000, 512
    p.index_slots = p.kv_slots
    p.index_format = capi.INDEX_K_FP4
    p.index_fp4_cache = capi.IndexKFp4Cache(0x10000, 4, 4352, 64, 100, 0, 0)  # head_dim 100
    with pytest.raises(cachestore.CachestoreError, match="index_fp4_cache.head_dim"):
        capi.fused_store_cache(p)


def test_query_device_answers_or_says_why():
    try:
        path, binary, cc = cachestore.query_device(0)
        assert path in ("portable", "hopper", "blackwell") and cc > 0
    except cachestore.CachestoreCudaError as e:  # no GPU, or no image for it
        assert e.status in ("kErrorCudaRuntime", "kErrorArchMismatch")


def test_layout_table_from_the_library():
    # The package computes no byte math of its own: the layouts and their page strides come
    # from the library's table (the contract's figures, docs/layouts.md).
    assert sorted(capi.MLA_LAYOUTS) == ["v32", "v4", "v41", "v41_fp4"]
    v4 = capi.MLA_LAYOUTS["v4"]
    assert (v4.layout, v4.nope_dim, v4.data_row_bytes + v4.scale_row_bytes) == (capi.MLA_V4, 448, 584)
    assert capi.mla_min_page_stride(capi.MLA_V4, 64) == 37440
    assert capi.mla_min_page_stride(capi.MLA_V41_FP4, 64) == 18432
    assert capi.index_k_min_page_stride(capi.INDEX_K_FP8, 64, 128) == 8448
    assert capi.index_k_min_page_stride(capi.INDEX_K_FP4, 64, 128) == 4352
    assert sorted(capi.INDEX_K_FORMATS) == ["fp4", "fp8"]
    assert sorted(capi.KV_CACHE_TYPES) == ["auto", "fp8_e4m3", "fp8_e4m3_per_token_head",
                                          "fp8_e5m2", "nvfp4"]
    token_head = capi.KV_CACHE_TYPES["fp8_e4m3_per_token_head"]
    assert token_head.cache_type == capi.KV_CACHE_FP8_E4M3_PER_TOKEN_HEAD and not token_head.scaled
    nvfp4 = capi.KV_CACHE_TYPES["nvfp4"]
    assert (nvfp4.values_per_element, nvfp4.block, nvfp4.values_per_thread) == (2, 16, 16)
    assert capi.KV_CACHE_TYPES["fp8_e4m3"].values_per_thread == 8
    with pytest.raises(cachestore.CachestoreError, match="layout = 9"):
        capi.mla_min_page_stride(9, 64)


def test_library_check_without_a_store():
    p = capi.IndexKBf16Params(num_tokens=4)
    with pytest.raises(cachestore.CachestoreError, match="slots.data is null"):
        capi.check_params(p)
    p = capi.IndexKBf16Params(num_tokens=0, head_dim=128, k_row_stride=128, cache_row_stride=128)
    assert capi.check_params(p) is None


def test_struct_sizes_are_the_headers():
    """The ctypes mirrors have the C structs' current sizes (c_api.cpp's ReleasedSizes end)."""
    sizes = {capi.IndexKBf16Params: 112, capi.IndexKFp8Params: 152, capi.IndexKFp4Params: 152,
             capi.FusedStoreParams: 472, capi.PagedKvParams: 520, capi.Rope: 136,
             capi.PageTable: 32, capi.BlockScales: 32, capi.KvCacheTypeInfo: 40}
    for struct, size in sizes.items():
        assert ctypes.sizeof(struct) == size, struct.__name__


def _header_structs():
    """Each struct of cachestore_c.h: [(field, C type)] in order (comments dropped, the batch
    macro expanded, one declaration per `;`)."""
    text = (Path(__file__).resolve().parents[2] / "include/cachestore/cachestore_c.h").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    macro = re.search(r"#define CACHESTORE_BATCH_FIELDS((?:[^\n]*\\\n)*[^\n]*)", text).group(1)
    text = text.replace("CACHESTORE_BATCH_FIELDS;", macro.replace("\\\n", " ") + ";")
    structs = {}
    for name, body in re.findall(r"typedef struct (\w+) \{(.*?)\} \1;", text, re.S):
        fields = []
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            decl = " ".join(decl.split())
            m = re.fullmatch(r"(.*?)(\**)\s*(\w+)(?:\[(\w+)\])?", decl.replace("* ", " *"))
            ctype, star, field = m.group(1).replace("const ", "").strip(), m.group(2), m.group(3)
            count = m.group(4)  # an array: its length, a number or a CACHESTORE_ constant
            if count is not None and not count.isdigit():
                count = getattr(capi, count.removeprefix("CACHESTORE_"))
            fields.append((field, ctype + star if count is None else (ctype + star, int(count))))
        structs[name] = fields
    return structs


def test_ctypes_mirrors_are_the_header_field_for_field():
    """Every ctypes mirror has its C struct's fields, in order, of the same types."""
    mirrors = {"cachestore_slots_t": capi.Slots, "cachestore_page_table_t": capi.PageTable,
               "cachestore_index_k_bf16_params_t": capi.IndexKBf16Params,
               "cachestore_index_k_fp8_cache_t": capi.IndexKFp8Cache,
               "cachestore_index_k_fp8_params_t": capi.IndexKFp8Params,
               "cachestore_index_k_fp4_cache_t": capi.IndexKFp4Cache,
               "cachestore_index_k_fp4_params_t": capi.IndexKFp4Params,
               "cachestore_rope_t": capi.Rope,
               "cachestore_fused_store_params_t": capi.FusedStoreParams,
               "cachestore_kv_side_t": capi.KvSide, "cachestore_block_scales_t": capi.BlockScales,
               "cachestore_paged_kv_params_t": capi.PagedKvParams,
               "cachestore_mla_layout_info_t": capi.MlaLayoutInfo,
               "cachestore_index_k_format_info_t": capi.IndexKFormatInfo,
               "cachestore_kv_cache_type_info_t": capi.KvCacheTypeInfo,
               "cachestore_plane_strides_t": capi.PlaneStrides,
               "cachestore_page_side_t": capi.PageSide,
               "cachestore_move_pages_params_t": capi.MovePagesParams}
    scalars = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64,
               "char*": ctypes.c_char_p}
    structs = _header_structs()
    assert set(structs) == set(mirrors), "a struct of the header without a mirror, or the reverse"
    for c_name, mirror in mirrors.items():
        want = []
        for field, ctype in structs[c_name]:
            if isinstance(ctype, tuple):  # an array of a mirror or a scalar
                element, count = ctype
                want.append((field, (mirrors.get(element) or scalars[element]) * count))
                continue
            if ctype in mirrors:
                want.append((field, mirrors[ctype]))
            elif ctype in scalars:
                want.append((field, scalars[ctype]))
            else:
                assert ctype.endswith("*"), (c_name, field, ctype)
                want.append((field, ctypes.c_void_p))
        assert list(mirror._fields_) == want, c_name


def test_constants_are_the_headers():
    """Each constant capi.py spells after a CACHESTORE_ enumerator of cachestore_c.h (SLOT_INT32,
    MLA_V41, KV_CACHE_NVFP4, ...) has that enumerator's value."""
    text = (Path(__file__).resolve().parents[2] / "include/cachestore/cachestore_c.h").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    header = {}
    for block in re.finditer(r"enum\s*\{([^}]*)\}", text):
        for item in filter(None, (i.strip() for i in block.group(1).split(","))):
            name, _, value = item.partition("=")
            header[name.strip().removeprefix("CACHESTORE_")] = int(value.strip(), 0)
    spelled = {name: getattr(capi, name) for name in dir(capi)
               if name.isupper() and isinstance(getattr(capi, name), int) and name in header}
    assert len(spelled) >= 25, sorted(spelled)  # the slot, layout, format and type ids at least
    assert {name: header[name] for name in spelled} == spelled
    assert capi.SUCCESS == header["SUCCESS"] and capi.MAX_PAGE_PLANES == 4
