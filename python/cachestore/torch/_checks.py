"""Metadata checks shared by the stores: dtype, shape, the contiguity a layout needs, one CUDA
device. Each raises TypeError / ValueError naming the argument; they read no device value, so
they also run on fake tensors under torch.compile. What only the library can check (alignment,
page strides, capacities) it checks itself and refuses with cachestore.CachestoreError."""
import torch

from .. import capi as c

POW2_PAGES = [1 << i for i in range(11)]  # 1 .. 1024


def check_tensor(name, t, dtypes, ndims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"{name}.dtype is {t.dtype}; expected " +
                        " or ".join(str(d) for d in dtypes))
    if t.dim() not in ndims:
        raise ValueError(f"{name} has {t.dim()} dimensions {tuple(t.shape)}; expected " +
                         " or ".join(str(n) for n in ndims))


def check_rows(name, t, width=None):
    """A [rows, width] bf16 matrix with contiguous rows (any row stride)."""
    check_tensor(name, t, (torch.bfloat16,), (2,))
    if width is not None and t.shape[1] != width:
        raise ValueError(f"{name} has {t.shape[1]} columns; the layout needs {width}")
    if t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{name} must have contiguous rows (stride(1) == 1), got {t.stride()}")


def check_slots(name, t, rows):
    check_tensor(name, t, (torch.int32, torch.int64), (1,))
    if t.shape[0] != rows:
        raise ValueError(f"{name} has {t.shape[0]} entries; the batch has {rows} rows")
    if t.shape[0] > 1 and t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous")


def check_page_table(a, rows):
    """The page-table slot source (FlashInfer's form): `slot_mapping` holds each row's int32
    batch index, `positions` its position, `kv_indptr` [batch + 1] and `kv_indices` the pages.
    Returns whether a page table is given."""
    given = [a.positions is not None, a.kv_indptr is not None, a.kv_indices is not None]
    if not any(given):
        return False
    if not all(given):
        raise ValueError("positions, kv_indptr and kv_indices go together (the page-table slot "
                         "source; slot_mapping then holds the batch indices)")
    if a.slot_mapping.dtype != torch.int32:
        raise TypeError(f"slot_mapping.dtype is {a.slot_mapping.dtype}; with a page table it "
                        f"holds the batch indices: expected torch.int32")
    check_slots("positions", a.positions, rows)
    for name in ("positions", "kv_indptr", "kv_indices"):
        t = getattr(a, name)
        check_tensor(name, t, (torch.int32,), (1,))
        if t.shape[0] > 1 and t.stride(0) != 1:
            raise ValueError(f"{name} must be contiguous")
    if a.kv_indptr.shape[0] < 1:
        raise ValueError("kv_indptr must hold batch + 1 entries (at least one)")
    return True


ROPE_ROUNDINGS = {"input_type": c.ROPE_ROUND_INPUT_TYPE, "fp32": c.ROPE_ROUND_FP32}
COS_SIN_ROWS = {"by_position": c.ROPE_COS_SIN_BY_POSITION, "by_row": c.ROPE_COS_SIN_BY_ROW}
COS_SIN_LAYOUTS = {"halves": c.ROPE_COS_SIN_HALVES, "interleaved": c.ROPE_COS_SIN_INTERLEAVED}
_COS_SIN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def check_like(name, t, like_name, like):
    """`t` must have the shape and dtype of `like` (an output beside its input)."""
    check_tensor(name, t, (like.dtype,), (like.dim(),))
    if t.shape != like.shape or t.stride(-1) != 1:
        raise ValueError(f"{name} {tuple(t.shape)} must have {like_name}'s shape "
                         f"{tuple(like.shape)}, the last dimension contiguous")


def check_rope_inputs(a, rows, only):
    """RoPE in a store (`cos_sin_cache` given): the rounding, the cos/sin cache and
    rope_positions (none with a cos/sin row a row, which needs a row of the cache per row).
    Without cos_sin_cache the RoPE-only arguments `only` must be None (and fused_store_cache's
    cos_sin_rows and cos_sin_layout their defaults). Returns whether the store rotates."""
    check_id("rope_rounding", a.rope_rounding, len(ROPE_ROUNDINGS))
    rows_form = getattr(a, "cos_sin_rows", c.ROPE_COS_SIN_BY_POSITION)
    layout = getattr(a, "cos_sin_layout", c.ROPE_COS_SIN_HALVES)
    check_id("cos_sin_rows", rows_form, len(COS_SIN_ROWS))
    check_id("cos_sin_layout", layout, len(COS_SIN_LAYOUTS))
    if a.cos_sin_cache is None:
        for name in only:
            if getattr(a, name) is not None:
                raise ValueError(f"{name} given without cos_sin_cache (RoPE)")
        for name, given in (("cos_sin_rows", rows_form != c.ROPE_COS_SIN_BY_POSITION),
                            ("cos_sin_layout", layout != c.ROPE_COS_SIN_HALVES)):
            if given:
                raise ValueError(f"{name} given without cos_sin_cache (RoPE)")
        return False
    check_tensor("cos_sin_cache", a.cos_sin_cache, _COS_SIN_DTYPES, (2,))
    if a.cos_sin_cache.stride(-1) != 1:
        raise ValueError("cos_sin_cache: the last dimension must be contiguous")
    if rows_form == c.ROPE_COS_SIN_BY_ROW:
        if a.rope_positions is not None:
            raise ValueError("rope_positions given with cos_sin_rows 'by_row' (row i rotates by "
                             "cos_sin_cache row i)")
        if a.cos_sin_cache.shape[0] < rows:
            raise ValueError(f"cos_sin_cache has {a.cos_sin_cache.shape[0]} rows; cos_sin_rows "
                             f"'by_row' needs one a row ({rows})")
        return True
    if a.rope_positions is None:
        raise ValueError("rope_positions is required with cos_sin_cache")
    check_slots("rope_positions", a.rope_positions, rows)
    return True


def check_rope_outputs(a, rows, head_dim, dtype, query_ndims, key_name, key):
    """Q ([rows, heads, head_dim] of `dtype`), query_out (Q's shape) and key_out (`key`'s)."""
    if a.query is not None:
        check_tensor("query", a.query, (dtype,), query_ndims)
        if a.query.stride(-1) != 1:
            raise ValueError("query: the last dimension must be contiguous")
        if a.query.shape[0] != rows or a.query.shape[-1] != head_dim:
            raise ValueError(f"query {tuple(a.query.shape)} must be [{rows}, heads, "
                             f"{head_dim}]")
    elif a.query_out is not None:
        raise ValueError("query_out given without query")
    if a.query_out is not None:
        check_like("query_out", a.query_out, "query", a.query)
    if a.key_out is not None:
        check_like("key_out", a.key_out, key_name, key)


def rope_struct(a, rotary_dim, is_neox):
    """The C RoPE description of a's rotation (all zero without cos_sin_cache)."""
    r = c.Rope()
    if a.cos_sin_cache is None:
        return r
    cs, pos = a.cos_sin_cache, a.rope_positions
    if pos is not None:
        r.positions = pos.data_ptr()
        r.positions_type = c.SLOT_INT32 if pos.dtype == torch.int32 else c.SLOT_INT64
    r.cos_sin_rows = getattr(a, "cos_sin_rows", c.ROPE_COS_SIN_BY_POSITION)
    r.cos_sin_layout = getattr(a, "cos_sin_layout", c.ROPE_COS_SIN_HALVES)
    r.cos_sin_type = {torch.bfloat16: c.KV_BF16, torch.float16: c.KV_FP16,
                      torch.float32: c.KV_FP32}[cs.dtype]
    r.cos_sin_cache, r.cos_sin_stride, r.max_position = cs.data_ptr(), cs.stride(0), cs.shape[0]
    r.rotary_dim = rotary_dim
    r.style = c.ROPE_NEOX if is_neox else c.ROPE_GPTJ
    r.rounding = a.rope_rounding
    for name, t in (("query", a.query), ("query_out", a.query_out), ("key_out", a.key_out)):
        if t is not None:
            setattr(r, name, t.data_ptr())
            setattr(r, f"{name}_token_stride", t.stride(0))
            setattr(r, f"{name}_head_stride", t.stride(1) if t.dim() == 3 else t.shape[-1])
    if a.query is not None:
        r.num_query_heads = a.query.shape[1] if a.query.dim() == 3 else 1
    return r


def check_id(name, value, count):
    """An op-level enum argument: one of the ids 0 .. count - 1."""
    if not 0 <= value < count:
        raise ValueError(f"{name} = {value}: expected an id in [0, {count})")


def check_options(a, counters=2):
    """The batch options every store takes (num_tokens_non_padded, diagnostics, owner_*);
    `counters`: the diagnostics a store writes (3 with RoPE)."""
    if a.num_tokens_non_padded is not None:
        check_tensor("num_tokens_non_padded", a.num_tokens_non_padded, (torch.int32,), (0, 1))
        if a.num_tokens_non_padded.numel() != 1:
            raise ValueError("num_tokens_non_padded must hold one int32 (the real row count)")
    if a.diagnostics is not None:
        check_tensor("diagnostics", a.diagnostics, (torch.int64, torch.uint64), (1,))
        if a.diagnostics.numel() != counters or not a.diagnostics.is_contiguous():
            raise ValueError(f"diagnostics must be a contiguous int64 tensor of {counters} "
                             f"counters")
    owner_rank, owner_size = getattr(a, "owner_rank", 0), getattr(a, "owner_size", 1)
    if owner_size < 1 or owner_size & (owner_size - 1):
        raise ValueError(f"owner_size = {owner_size}: must be a power of two >= 1")
    if not 0 <= owner_rank < owner_size:
        raise ValueError(f"owner_rank = {owner_rank}: must be in [0, owner_size = {owner_size})")


def check_paged_bytes(name, t):
    """A byte cache: uint8 [num_pages, ...], each page's bytes contiguous (any page stride)."""
    check_tensor(name, t, (torch.uint8,), (2, 3, 4))
    shape, stride = t.shape, t.stride()
    expected = 1
    for i in range(len(shape) - 1, 0, -1):
        if shape[i] != 1 and stride[i] != expected:
            raise ValueError(f"{name}: each page (dimensions 1..) must be contiguous, got "
                             f"strides {stride}")
        expected *= shape[i]


def page_bytes(t):
    size = 1
    for n in t.shape[1:]:
        size *= n
    return size


_PAGE_SIZES = {}  # (layout key, page bytes) -> the page size whose minimum page is that size


def infer_page_size(name, page_size, t, key, min_bytes):
    """`page_size` if given, else the power of two whose minimum page (min_bytes(P), from the
    library's layout table) is exactly the cache's bytes per page."""
    if page_size is not None:
        return int(page_size)
    size = page_bytes(t)
    cached = isinstance(size, int)  # not a symbolic size (torch.compile with dynamic shapes)
    found = _PAGE_SIZES.get((key, size)) if cached else None
    if found is None:
        found = next((p for p in POW2_PAGES if min_bytes(p) == size), 0)
        if cached:
            _PAGE_SIZES[(key, size)] = found
    if found == 0:
        raise ValueError(f"{name}: no page size has exactly {size} bytes per page in this "
                         f"layout; pass page_size= (the page may be padded)")
    return found


def same_device(*named):
    index = None
    for name, t in named:
        if t is None:
            continue
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; cachestore stores run on CUDA tensors")
        if index is None:
            index, first = t.get_device(), t
        elif t.get_device() != index:
            raise ValueError(f"{name} is on {t.device}, the other tensors on {first.device}")


def ptr(t):
    return None if t is None else t.data_ptr()


def batch_fields(params, rows, a):
    params.num_tokens = rows
    params.num_tokens_non_padded = ptr(a.num_tokens_non_padded)
    params.diagnostics = ptr(a.diagnostics)
    params.enable_pdl = int(a.enable_pdl)


def slots_of(t, reserved_slot, owner_rank=0, owner_size=1, page_table=False):
    kind = c.SLOT_PAGE_TABLE if page_table else \
        c.SLOT_INT32 if t.dtype == torch.int32 else c.SLOT_INT64
    return c.Slots(t.data_ptr(), kind, owner_rank, reserved_slot, owner_size, 0)


def page_table_of(a):
    """The C page table of `a`'s positions, kv_indptr and kv_indices (zeros without them)."""
    if a.positions is None:
        return c.PageTable()
    return c.PageTable(a.positions.data_ptr(), a.kv_indptr.data_ptr(), a.kv_indices.data_ptr(),
                       a.kv_indptr.shape[0] - 1, 0)
