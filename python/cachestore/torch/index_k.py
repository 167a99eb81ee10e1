"""The index-K stores: bf16 rows, and the paged fp8 (132-byte) and fp4 (68-byte) indexer
layouts of DeepSeek V3.2 / V4."""
import torch

from .. import capi as c
from . import _checks as k_
from ._store import Arg, Store, batch_options

SCALE_RULES = {"amax": c.SCALE_AMAX, "pow2": c.SCALE_POW2}
TIES = {"even": c.FP4_TIES_TO_EVEN, "toward_zero": c.FP4_TIES_TOWARD_ZERO}


def _prepare_bf16(a):
    k_.check_rows("k", a.k)
    k_.check_slots("slot_mapping", a.slot_mapping, a.k.shape[0])
    k_.check_tensor("cache", a.cache, (torch.bfloat16,), (2,))
    if a.cache.shape[1] != a.k.shape[1] or (a.cache.shape[1] > 1 and a.cache.stride(1) != 1):
        raise ValueError(f"cache must be [num_slots, {a.k.shape[1]}] with contiguous rows, got "
                         f"{tuple(a.cache.shape)} strides {a.cache.stride()}")
    k_.check_options(a)
    k_.same_device(("k", a.k), ("slot_mapping", a.slot_mapping), ("cache", a.cache),
                   ("num_tokens_non_padded", a.num_tokens_non_padded),
                   ("diagnostics", a.diagnostics))


def _build_bf16(a):
    p = c.IndexKBf16Params()
    k_.batch_fields(p, a.k.shape[0], a)
    p.slots = k_.slots_of(a.slot_mapping, a.reserved_slot)
    p.k, p.k_row_stride = a.k.data_ptr(), a.k.stride(0)
    p.cache, p.cache_row_stride = a.cache.data_ptr(), a.cache.stride(0)
    p.num_slots, p.head_dim = a.cache.shape[0], a.k.shape[1]
    return c.store_index_k_bf16, p, a.k


def index_page_size(index_format, name, cache, page_size, head_dim):
    """The page size of an index-K cache: given, or inferred from its bytes per page."""
    return k_.infer_page_size(name, page_size, cache, ("index", index_format, head_dim),
                              lambda p: c.index_k_min_page_stride(index_format, p, head_dim))


def _paged(index_format):
    def prepare(a):
        k_.check_rows("k", a.k)
        k_.check_slots("slot_mapping", a.slot_mapping, a.k.shape[0])
        k_.check_page_table(a, a.k.shape[0])
        k_.check_paged_bytes("cache", a.cache)
        k_.check_options(a)
        a.page_size = index_page_size(index_format, "cache", a.cache, a.page_size, a.k.shape[1])
        k_.same_device(("k", a.k), ("slot_mapping", a.slot_mapping), ("positions", a.positions),
                       ("kv_indptr", a.kv_indptr), ("kv_indices", a.kv_indices),
                       ("cache", a.cache),
                       ("num_tokens_non_padded", a.num_tokens_non_padded),
                       ("diagnostics", a.diagnostics))

    def build(a):
        fp4 = index_format == c.INDEX_K_FP4
        p = c.IndexKFp4Params() if fp4 else c.IndexKFp8Params()
        k_.batch_fields(p, a.k.shape[0], a)
        p.slots = k_.slots_of(a.slot_mapping, a.reserved_slot, a.owner_rank, a.owner_size,
                              a.positions is not None)
        p.page_table = k_.page_table_of(a)
        p.k, p.k_row_stride = a.k.data_ptr(), a.k.stride(0)
        p.cache = index_cache_struct(index_format, a.cache, a.page_size, a.k.shape[1],
                                     a.ties if fp4 else a.scale_rule)
        return (c.store_index_k_fp4 if fp4 else c.store_index_k_fp8), p, a.k

    return prepare, build


def index_cache_struct(index_format, cache, page_size, head_dim, rule):
    struct = c.IndexKFp4Cache if index_format == c.INDEX_K_FP4 else c.IndexKFp8Cache
    return struct(cache.data_ptr(), cache.shape[0], cache.stride(0), page_size, head_dim, rule, 0)


STORES = [
    Store("store_index_k_bf16",
          [Arg("k", "Tensor"), Arg("slot_mapping", "Tensor"), Arg("cache", "Tensor", mutated=True),
           *batch_options(sharded=False)],
          _prepare_bf16, _build_bf16,
          doc="k [T, D] bf16 into cache [num_slots, D] bf16 (row per slot)."),
    Store("store_index_k_fp8",
          [Arg("k", "Tensor"), Arg("slot_mapping", "Tensor"), Arg("cache", "Tensor", mutated=True),
           Arg("page_size", "int?", None, keyword=True),
           Arg("scale_rule", "int", "amax", choices=SCALE_RULES, keyword=True),
           *batch_options()],
          *_paged(c.INDEX_K_FP8),
          doc="k [T, D] bf16 into the 132-byte indexer cache, uint8 [num_pages, page_bytes]; "
              "scale_rule 'amax' (default) or 'pow2'; page_size inferred from the page bytes "
              "unless given (padded pages)."),
    Store("store_index_k_fp4",
          [Arg("k", "Tensor"), Arg("slot_mapping", "Tensor"), Arg("cache", "Tensor", mutated=True),
           Arg("page_size", "int?", None, keyword=True),
           Arg("ties", "int", "even", choices=TIES, keyword=True),
           *batch_options()],
          *_paged(c.INDEX_K_FP4),
          doc="k [T, D] bf16 into the 68-byte fp4 indexer cache, uint8 [num_pages, page_bytes]; "
              "ties 'even' (DeepSeek, hardware) or 'toward_zero' (SGLang's default)."),
]
