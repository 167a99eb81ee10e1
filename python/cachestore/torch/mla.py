"""The MLA stores: DeepSeek's KV layouts (the library's layout table: v4, v32, v41, v41_fp4),
optionally with the fp8 or fp4 index-K of the same rows in the same launch."""
from .. import capi as c
from . import _checks as k_
from .index_k import SCALE_RULES, TIES, index_cache_struct, index_page_size
from ._store import Arg, Store, batch_options

LAYOUTS = {name: info.layout for name, info in c.MLA_LAYOUTS.items()}
_BY_ID = {info.layout: info for info in c.MLA_LAYOUTS.values()}
INDEX_FORMATS = {name: info.format for name, info in c.INDEX_K_FORMATS.items()}
_ROPE_DIM = 64  # the rows' RoPE part: what a rotating store rotates, as Q's
_ROPE_ONLY = ("rope_positions", "query", "query_out", "key_out")


def _prepare(a):
    k_.check_id("layout", a.layout, len(_BY_ID))
    info = _BY_ID[a.layout]
    k_.check_rows("nope", a.nope, info.nope_dim)
    k_.check_rows("rope", a.rope, info.rope_dim)
    if a.rope.shape[0] != a.nope.shape[0]:
        raise ValueError(f"rope has {a.rope.shape[0]} rows, nope {a.nope.shape[0]}")
    k_.check_slots("slot_mapping", a.slot_mapping, a.nope.shape[0])
    k_.check_page_table(a, a.nope.shape[0])
    k_.check_paged_bytes("kv_cache", a.kv_cache)
    rows = a.nope.shape[0]
    if k_.check_rope_inputs(a, rows, _ROPE_ONLY):
        if a.cos_sin_cache.shape[1] != _ROPE_DIM:
            raise ValueError(f"cos_sin_cache has {a.cos_sin_cache.shape[1]} columns; the RoPE "
                             f"part's cos | sin are {_ROPE_DIM}")
        k_.check_rope_outputs(a, rows, _ROPE_DIM, a.rope.dtype, (3,), "rope", a.rope)
    k_.check_options(a, 2 if a.cos_sin_cache is None else 3)
    if a.scale_rule is None:
        a.scale_rule = c.SCALE_POW2
    a.page_size = k_.infer_page_size("kv_cache", a.page_size, a.kv_cache, ("mla", a.layout),
                                     lambda p: c.mla_min_page_stride(a.layout, p))
    if a.index_k is None:
        a.index_format, a.index_page_size, a.index_rule = 0, 0, 0
    else:
        if a.index_cache is None:
            raise ValueError("index_cache is required with index_k")
        k_.check_rows("index_k", a.index_k)
        if a.index_k.shape[0] != a.nope.shape[0]:
            raise ValueError(f"index_k has {a.index_k.shape[0]} rows, nope {a.nope.shape[0]}")
        if a.index_slot_mapping is None:
            a.index_slot_mapping = a.slot_mapping
        k_.check_slots("index_slot_mapping", a.index_slot_mapping, a.nope.shape[0])
        if a.index_slot_mapping.dtype != a.slot_mapping.dtype:
            raise TypeError("index_slot_mapping.dtype must equal slot_mapping.dtype")
        k_.check_paged_bytes("index_cache", a.index_cache)
        k_.check_id("index_format", a.index_format, len(INDEX_FORMATS))
        if a.index_rule is None:
            a.index_rule = 0  # amax (fp8), ties to even (fp4)
        k_.check_id("index_rule", a.index_rule, 2)
        a.index_page_size = index_page_size(a.index_format, "index_cache", a.index_cache,
                                            a.index_page_size, a.index_k.shape[1])
    k_.same_device(("nope", a.nope), ("rope", a.rope), ("slot_mapping", a.slot_mapping),
                   ("positions", a.positions), ("kv_indptr", a.kv_indptr),
                   ("kv_indices", a.kv_indices), ("kv_cache", a.kv_cache), ("index_k", a.index_k),
                   ("index_slot_mapping", a.index_slot_mapping), ("index_cache", a.index_cache),
                   ("num_tokens_non_padded", a.num_tokens_non_padded),
                   ("diagnostics", a.diagnostics), ("cos_sin_cache", a.cos_sin_cache),
                   ("rope_positions", a.rope_positions), ("query", a.query),
                   ("query_out", a.query_out), ("key_out", a.key_out))


def _build(a):
    p = c.FusedStoreParams()
    k_.batch_fields(p, a.nope.shape[0], a)
    table = a.positions is not None  # one table for both caches, each at its own page size
    p.kv_slots = k_.slots_of(a.slot_mapping, a.reserved_slot, a.owner_rank, a.owner_size, table)
    p.kv_page_table = k_.page_table_of(a)
    p.nope, p.nope_row_stride = a.nope.data_ptr(), a.nope.stride(0)
    p.rope, p.rope_row_stride = a.rope.data_ptr(), a.rope.stride(0)
    p.layout, p.kv_scale_rule = a.layout, a.scale_rule
    p.kv_cache, p.kv_num_pages = a.kv_cache.data_ptr(), a.kv_cache.shape[0]
    p.kv_page_stride_bytes, p.kv_page_size = a.kv_cache.stride(0), a.page_size
    if a.index_k is not None:
        p.index_k, p.index_k_row_stride = a.index_k.data_ptr(), a.index_k.stride(0)
        p.index_slots = k_.slots_of(a.index_slot_mapping, a.index_reserved_slot, a.owner_rank,
                                    a.owner_size, table)
        p.index_page_table = p.kv_page_table
        p.index_format = a.index_format
        cache = index_cache_struct(a.index_format, a.index_cache, a.index_page_size,
                                   a.index_k.shape[1], a.index_rule)
        if a.index_format == c.INDEX_K_FP4:
            p.index_fp4_cache = cache
        else:
            p.index_cache = cache
    p.rotary = k_.rope_struct(a, _ROPE_DIM, a.is_neox)
    return c.fused_store_cache, p, a.nope


_options = batch_options()
STORES = [
    Store("fused_store_cache",
          [Arg("nope", "Tensor"), Arg("rope", "Tensor"), Arg("slot_mapping", "Tensor"),
           Arg("kv_cache", "Tensor", mutated=True),
           Arg("layout", "int", "v4", choices=LAYOUTS, keyword=True),
           Arg("page_size", "int?", None, keyword=True),
           Arg("scale_rule", "int?", None, choices=SCALE_RULES, keyword=True),
           Arg("index_k", "Tensor?", None, keyword=True),
           Arg("index_slot_mapping", "Tensor?", None, keyword=True),
           Arg("index_cache", "Tensor?", None, mutated=True, keyword=True),
           Arg("index_format", "int", "fp8", choices=INDEX_FORMATS, keyword=True),
           Arg("index_page_size", "int?", None, keyword=True),
           Arg("index_rule", "int?", None, choices={"fp8": SCALE_RULES, "fp4": TIES},
               choices_by="index_format", keyword=True),
           *_options[:2], Arg("index_reserved_slot", "int", -1, keyword=True), *_options[2:],
           Arg("query", "Tensor?", None, mutated=True, keyword=True),
           Arg("cos_sin_cache", "Tensor?", None, keyword=True),
           Arg("rope_positions", "Tensor?", None, keyword=True),
           Arg("is_neox", "bool", False, keyword=True),
           Arg("rope_rounding", "int", "input_type", choices=k_.ROPE_ROUNDINGS, keyword=True),
           Arg("query_out", "Tensor?", None, mutated=True, keyword=True),
           Arg("key_out", "Tensor?", None, mutated=True, keyword=True),
           Arg("cos_sin_rows", "int", "by_position", choices=k_.COS_SIN_ROWS, keyword=True),
           Arg("cos_sin_layout", "int", "halves", choices=k_.COS_SIN_LAYOUTS, keyword=True)],
          _prepare, _build,
          doc="DeepSeek MLA KV (layout 'v4', 'v32', 'v41', 'v41_fp4') from nope [T, 448 | 512] "
              "and rope [T, 64] bf16 into kv_cache uint8 [num_pages, page_bytes]; with index_k, "
              "the fp8 (index_rule 'amax' | 'pow2') or fp4 (index_rule 'even' | 'toward_zero') "
              "index-K of the same rows in the same launch (index_slot_mapping defaults to "
              "slot_mapping). RoPE in the same launch (cos_sin_cache [max_position, 64] given): "
              "each row's rope part rotated at rope_positions (cos_sin_rows 'by_row': by "
              "cos_sin_cache row i, no rope_positions) before it is stored, a row's cos then "
              "its sin (cos_sin_layout 'interleaved': each pair's side by side, SGLang's "
              "freqs_cis), GPT-J pairs (DeepSeek's; is_neox for halves), rope_rounding "
              "'input_type' (vLLM) or 'fp32'; "
              "query [T, H, 64] bf16 (q_pe, e.g. q[..., 128:]) rotated in place or into "
              "query_out; the rotated rope part into key_out (rope itself: in place). A real row "
              "whose position is outside the cache stores no KV record and is counted "
              "(diagnostics then holds 3 counters); its index-K is stored."),
]
