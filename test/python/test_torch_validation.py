"""cachestore.torch's checks before any call: a TypeError / ValueError naming the argument. CPU
tensors are enough (the device is checked after dtype and shape, and the ops have CPU kernels
that check, then refuse the device), so these run wherever PyTorch is installed: in CI they test
the native ops' host side (loading, registration, schemas, the C++ checks, fake tensors and
torch.compile tracing) as well as the Python ops'."""
import os

import pytest

from conftest import need_torch, run_under_python_ops

torch = need_torch()
import cachestore  # noqa: E402
import cachestore.torch as cst  # noqa: E402
from cachestore.torch import _native  # noqa: E402


def bf16(*shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


def i64(n):
    return torch.zeros(n, dtype=torch.int64)


def u8(*shape):
    return torch.zeros(*shape, dtype=torch.uint8)


K, K16 = bf16(4, 128), bf16(4, 8, 128)
SLOTS, SLOTS32 = i64(4), torch.zeros(4, dtype=torch.int32)
FP8_PAGES, FP4_PAGES, V4_PAGES = u8(8, 64 * 132), u8(8, 64 * 68), u8(8, 37440)
NOPE, ROPE = bf16(4, 448), bf16(4, 64)
KC = bf16(10, 16, 8, 128)
FP8 = torch.zeros(10, 16, 8, 128, dtype=torch.float8_e4m3fn)
ONE = torch.ones(1)
NV4 = torch.zeros(10, 16, 8, 64, dtype=torch.uint8)  # nvfp4 codes of D = 128
NV4_SF = torch.zeros(10, 16, 8, 8, dtype=torch.float8_e4m3fn)


def I32(n):  # noqa: N802 - a dtype-named constructor like the others
    return torch.zeros(n, dtype=torch.int32)


TABLE = {"positions": I32(4), "kv_indptr": I32(3), "kv_indices": I32(5)}
Q32 = bf16(4, 32, 128)
ROPE_KW = {"cos_sin_cache": torch.zeros(4096, 128), "rope_positions": I32(4), "query": Q32}
MLA_ROPE_KW = {"cos_sin_cache": torch.zeros(4096, 64).bfloat16(), "rope_positions": i64(4),
               "query": bf16(4, 16, 64)}

# (store, args, kwargs, exception, message regex): every refusal of the tensor checks, and a
# well-formed call on CPU tensors (only the device is wrong).
CASES = {
    "bf16_dtype": ("store_index_k_bf16", (K.float(), SLOTS, bf16(64, 128)), {}, TypeError,
                   r"^k\.dtype is torch\.float32; expected torch\.bfloat16$"),
    "bf16_slot_dtype": ("store_index_k_bf16", (K, SLOTS.float(), bf16(64, 128)), {}, TypeError,
                        r"slot_mapping\.dtype"),
    "bf16_slot_count": ("store_index_k_bf16", (K, SLOTS[:3], bf16(64, 128)), {}, ValueError,
                        "^slot_mapping has 3 entries; the batch has 4 rows$"),
    "bf16_cache_width": ("store_index_k_bf16", (K, SLOTS, bf16(64, 64)), {}, ValueError,
                         r"^cache must be \[num_slots, 128\] with contiguous rows, got \(64, 64\) "
                         r"strides \(64, 1\)$"),
    "bf16_rows": ("store_index_k_bf16", (bf16(128, 4).t(), SLOTS, bf16(64, 128)), {}, ValueError,
                  r"^k must have contiguous rows \(stride\(1\) == 1\), got \(1, 4\)$"),
    "bf16_ndim": ("store_index_k_bf16", (bf16(4, 1, 128), SLOTS, bf16(64, 128)), {}, ValueError,
                  r"^k has 3 dimensions \(4, 1, 128\); expected 2$"),
    "bf16_count": ("store_index_k_bf16", (K, SLOTS, bf16(64, 128)),
                   {"num_tokens_non_padded": torch.zeros(2, dtype=torch.int32)}, ValueError,
                   "num_tokens_non_padded must hold one int32"),
    "bf16_count_dtype": ("store_index_k_bf16", (K, SLOTS, bf16(64, 128)),
                         {"num_tokens_non_padded": torch.zeros(1, dtype=torch.int64)}, TypeError,
                         r"num_tokens_non_padded\.dtype is torch\.int64"),
    "bf16_diagnostics": ("store_index_k_bf16", (K, SLOTS, bf16(64, 128)),
                         {"diagnostics": i64(3)}, ValueError, "diagnostics must be"),
    "bf16_device": ("store_index_k_bf16", (K, SLOTS, bf16(64, 128)), {}, ValueError,
                    "^k is on cpu; cachestore stores run on CUDA tensors$"),
    "fp8_dtype": ("store_index_k_fp8", (K, SLOTS32, FP8_PAGES.float()), {}, TypeError,
                  r"^cache\.dtype is torch\.float32; expected torch\.uint8$"),
    "fp8_rule": ("store_index_k_fp8", (K, SLOTS32, FP8_PAGES), {"scale_rule": "max"}, ValueError,
                 r"^scale_rule = 'max': expected one of \['amax', 'pow2'\]$"),
    "fp8_page_size": ("store_index_k_fp8", (K, SLOTS32, u8(8, 1000)), {}, ValueError,
                      "^cache: no page size has exactly 1000 bytes per page in this layout; "
                      r"pass page_size= \(the page may be padded\)$"),
    "fp8_page_strides": ("store_index_k_fp8", (K, SLOTS32, u8(8, 64, 132)[:, :, :100]), {},
                         ValueError, r"^cache: each page \(dimensions 1\.\.\) must be contiguous, "
                         r"got strides \(8448, 132, 1\)$"),
    "fp4_ties": ("store_index_k_fp4", (K, SLOTS32, FP4_PAGES), {"ties": "up"}, ValueError,
                 "ties"),
    "fp4_owner_rank": ("store_index_k_fp4", (K, SLOTS32, FP4_PAGES),
                       {"owner_rank": 2, "owner_size": 2}, ValueError,
                       r"^owner_rank = 2: must be in \[0, owner_size = 2\)$"),
    "fp4_owner_size": ("store_index_k_fp4", (K, SLOTS32, FP4_PAGES), {"owner_size": 3},
                       ValueError, "^owner_size = 3: must be a power of two >= 1$"),
    "fp4_device": ("store_index_k_fp4", (K, SLOTS32, FP4_PAGES), {}, ValueError, "on cpu"),
    "mla_layout": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES), {"layout": "v5"},
                   ValueError, r"^layout = 'v5': expected one of \['v32', 'v4', 'v41', "
                   r"'v41_fp4'\]$"),
    "mla_width": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES), {"layout": "v32"},
                  ValueError, "^nope has 448 columns; the layout needs 512$"),
    "mla_rope_rows": ("fused_store_cache", (NOPE, ROPE[:2], SLOTS, V4_PAGES), {}, ValueError,
                      "^rope has 2 rows, nope 4$"),
    "mla_index_cache": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES), {"index_k": K},
                        ValueError, "^index_cache is required with index_k$"),
    "mla_index_slots": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                        {"index_k": K, "index_slot_mapping": SLOTS32, "index_cache": FP8_PAGES},
                        TypeError, r"^index_slot_mapping\.dtype must equal slot_mapping\.dtype$"),
    "mla_index_format": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                         {"index_k": K, "index_cache": FP8_PAGES, "index_format": "fp6"},
                         ValueError, "index_format"),
    "mla_index_rule": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                       {"index_k": K, "index_cache": FP8_PAGES, "index_rule": "even"},
                       ValueError, r"^index_rule = 'even': expected one of \['amax', 'pow2'\]$"),
    "mla_page_size": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES), {"layout": "v41"},
                      ValueError, "^kv_cache: no page size"),
    "mla_index_page_size": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                            {"index_k": K, "index_cache": u8(8, 999)}, ValueError,
                            "^index_cache: no page size has exactly 999 bytes"),
    "mla_device": ("fused_store_cache", (NOPE, ROPE, SLOTS, u8(8, 33792)), {"layout": "v41"},
                   ValueError, "^nope is on cpu"),
    "kv_layout": ("store_paged_kv", (K16, K16, SLOTS, KC, KC), {"layout": "xyz"}, ValueError,
                  r"^layout = 'xyz': expected one of \['hnd', 'nhd', 'paged_attention'\]$"),
    "kv_heads": ("store_paged_kv", (K16, bf16(4, 4, 128), SLOTS, KC, KC), {}, ValueError,
                 r"^value_cache \(10, 16, 8, 128\) does not hold value's 4 heads of 128 in layout "
                 r"'nhd'$"),
    "kv_heads_hnd": ("store_paged_kv", (K16, K16, SLOTS, KC, KC), {"layout": "hnd"}, ValueError,
                     r"^key_cache \(10, 16, 8, 128\) does not hold key's 8 heads of 128 in "
                     r"layout 'hnd'$"),
    "kv_value_dtype": ("store_paged_kv", (K16, K16.half(), SLOTS, KC, KC), {}, TypeError,
                       r"^value\.dtype torch\.float16 differs from key\.dtype torch\.bfloat16$"),
    "kv_16_bit": ("store_paged_kv", (K16, K16, SLOTS, KC.half(), KC.half()), {}, TypeError,
                  "an auto cache holds the input type torch.bfloat16$"),
    "kv_k_scale": ("store_paged_kv", (K16, K16, SLOTS, FP8, FP8.clone()), {}, ValueError,
                   "^k_scale is required for an fp8 or nvfp4 cache$"),
    "kv_v_scale": ("store_paged_kv", (K16, K16, SLOTS, FP8, FP8.clone()),
                   {"k_scale": ONE, "v_scale": torch.ones(3)}, ValueError,
                   r"^v_scale must hold 1 or 8 \(one per head\) float32$"),
    "kv_uint8": ("store_paged_kv", (K16, K16, SLOTS, u8(10, 16, 8, 128), u8(10, 16, 8, 128)),
                 {"k_scale": ONE, "v_scale": ONE}, ValueError,
                 "^key_cache is uint8: pass kv_cache_dtype='fp8_e4m3', 'fp8_e5m2' or 'nvfp4'$"),
    "kv_dtype_mismatch": ("store_paged_kv", (K16, K16, SLOTS, FP8, FP8.clone()),
                          {"kv_cache_dtype": "fp8_e5m2", "k_scale": ONE, "v_scale": ONE},
                          ValueError, "^kv_cache_dtype = 'fp8_e5m2' does not match "
                          "key_cache.dtype torch.float8_e4m3fn$"),
    "kv_same_type": ("store_paged_kv", (K16, K16, SLOTS, KC, FP8), {"v_scale": ONE}, TypeError,
                     "^key_cache and value_cache must have the same cache type$"),
    "kv_value_cache": ("store_paged_kv", (K16, None, SLOTS, KC, KC), {}, ValueError,
                       "^value_cache given without value$"),
    "kv_one_head": ("store_paged_kv", (K16, None, SLOTS, bf16(10, 16, 128), None), {},
                    ValueError, r"^key_cache is \[pages, P, D\] \(one head\) but key has 8 heads$"),
    "kv_last_dim": ("store_paged_kv", (bf16(4, 128, 8).transpose(1, 2), None, SLOTS, KC, None),
                    {}, ValueError, "^key: the last dimension must be contiguous$"),
    "kv_device": ("store_paged_kv", (K16, K16, SLOTS, KC, KC), {}, ValueError,
                  "^key is on cpu; cachestore stores run on CUDA tensors$"),
    "kv_fp32_device": ("store_paged_kv", (K16.float(), K16.float(), SLOTS, KC.float(),
                                          KC.float()), {}, ValueError, "^key is on cpu"),
    "kv_odd_dim_device": ("store_paged_kv", (bf16(4, 8, 100), None, SLOTS, bf16(10, 16, 8, 100),
                                             None), {}, ValueError, "^key is on cpu"),
    "kv_fp32_cache": ("store_paged_kv", (K16, K16, SLOTS, KC.float(), KC.float()), {}, TypeError,
                      "^key_cache.dtype torch.float32: an auto cache holds the input type "
                      "torch.bfloat16$"),
    "kv_paged_attention_device": ("store_paged_kv", (K16, K16, SLOTS, bf16(10, 8, 16, 16, 8),
                                                     bf16(10, 8, 128, 16)),
                                  {"layout": "paged_attention"}, ValueError, "^key is on cpu"),
    "kv_paged_attention_rank": ("store_paged_kv", (K16, K16, SLOTS, KC, bf16(10, 8, 128, 16)),
                                {"layout": "paged_attention"}, ValueError,
                                r"^key_cache \(10, 16, 8, 128\) does not hold key's 8 heads of 128 "
                                r"in layout 'paged_attention'$"),
    "kv_paged_attention_value": ("store_paged_kv", (K16, K16, SLOTS, bf16(10, 8, 16, 16, 8),
                                                    bf16(10, 8, 16, 128)),
                                 {"layout": "paged_attention"}, ValueError,
                                 r"^value_cache \(10, 8, 16, 128\) does not hold value's 8 heads "
                                 r"of 128 in layout 'paged_attention'$"),
    "kv_table_partial": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC),
                         {"positions": SLOTS32, "kv_indptr": I32(3)}, ValueError,
                         "^positions, kv_indptr and kv_indices go together"),
    "kv_table_batch_dtype": ("store_paged_kv", (K16, K16, SLOTS, KC, KC), TABLE, TypeError,
                             r"^slot_mapping\.dtype is torch\.int64; with a page table it holds "
                             r"the batch indices: expected torch\.int32$"),
    "kv_table_positions": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC),
                           dict(TABLE, positions=I32(3)), ValueError,
                           "^positions has 3 entries; the batch has 4 rows$"),
    "kv_table_positions_dtype": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC),
                                 dict(TABLE, positions=SLOTS), TypeError,
                                 r"^positions\.dtype is torch\.int64; expected torch\.int32$"),
    "kv_table_indptr_dtype": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC),
                              dict(TABLE, kv_indptr=i64(3)), TypeError,
                              r"^kv_indptr\.dtype is torch\.int64; expected torch\.int32$"),
    "kv_table_indices_strided": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC),
                                 dict(TABLE, kv_indices=I32(8)[::2]), ValueError,
                                 "^kv_indices must be contiguous$"),
    "kv_table_indptr_empty": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC),
                              dict(TABLE, kv_indptr=I32(0)), ValueError,
                              r"^kv_indptr must hold batch \+ 1 entries"),
    "kv_table_device": ("store_paged_kv", (K16, K16, SLOTS32, KC, KC), TABLE, ValueError,
                        "^key is on cpu"),
    "nvfp4_block_scale": ("store_paged_kv", (K16, K16, SLOTS, NV4, NV4.clone()),
                          {"kv_cache_dtype": "nvfp4", "k_scale": ONE, "v_scale": ONE},
                          ValueError, "^key_block_scale is required for an nvfp4 cache$"),
    "nvfp4_global_scale": ("store_paged_kv", (K16, K16, SLOTS, NV4, NV4.clone()),
                           {"key_block_scale": NV4_SF, "value_block_scale": NV4_SF.clone()},
                           ValueError, "^k_scale is required for an fp8 or nvfp4 cache$"),
    "nvfp4_cache_dtype": ("store_paged_kv", (K16, K16, SLOTS, FP8, FP8.clone()),
                          {"k_scale": ONE, "v_scale": ONE, "key_block_scale": NV4_SF,
                           "value_block_scale": NV4_SF.clone()}, TypeError,
                          "^key_cache.dtype torch.float8_e4m3fn: an nvfp4 cache \\(block scales "
                          "given\\) is uint8$"),
    "nvfp4_cache_shape": ("store_paged_kv", (K16, K16, SLOTS, u8(10, 16, 8, 128),
                                             u8(10, 16, 8, 128)),
                          {"kv_cache_dtype": "nvfp4", "k_scale": ONE, "v_scale": ONE},
                          ValueError, r"^key_cache \(10, 16, 8, 128\) does not hold key's 8 heads "
                          r"of 128 in layout 'nhd'$"),
    "nvfp4_block_scale_shape": ("store_paged_kv", (K16, K16, SLOTS, NV4, NV4.clone()),
                                {"k_scale": ONE, "v_scale": ONE, "key_block_scale": NV4_SF,
                                 "value_block_scale": u8(10, 16, 8, 16)}, ValueError,
                                r"^value_block_scale \(10, 16, 8, 16\) must be value_cache's "
                                r"pages with head dim / 16 = 8 e4m3 bytes"),
    "nvfp4_head_dim": ("store_paged_kv", (bf16(4, 8, 24), None, SLOTS, u8(10, 16, 8, 12), None),
                       {"kv_cache_dtype": "nvfp4", "k_scale": ONE}, ValueError,
                       "^key: an nvfp4 cache needs a head dim that is a multiple of 16, got 24$"),
    "nvfp4_paged_attention": ("store_paged_kv", (K16, None, SLOTS, u8(10, 8, 16, 16, 8), None),
                              {"layout": "paged_attention", "kv_cache_dtype": "nvfp4",
                               "k_scale": ONE}, ValueError,
                              "^key_cache: an nvfp4 cache takes layout 'nhd' or 'hnd'$"),
    "nvfp4_not_nvfp4": ("store_paged_kv", (K16, K16, SLOTS, FP8, FP8.clone()),
                        {"kv_cache_dtype": "fp8_e4m3", "k_scale": ONE, "v_scale": ONE,
                         "value_block_scale": NV4_SF}, TypeError,
                        "^value_cache.dtype torch.float8_e4m3fn: an nvfp4 cache"),
    "nvfp4_device": ("store_paged_kv", (K16, K16, SLOTS, NV4, NV4.clone()),
                     {"k_scale": ONE, "v_scale": ONE, "key_block_scale": NV4_SF,
                      "value_block_scale": NV4_SF.clone()}, ValueError, "^key is on cpu"),
    "rope_device": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                    dict(ROPE_KW, key_out=K16, query_out=Q32.clone(), rotary_dim=64,
                         is_neox=False, rope_rounding="fp32",
                         diagnostics=i64(3)), ValueError, "^key is on cpu"),
    "rope_without_cache": ("store_paged_kv", (K16, K16, SLOTS, KC, KC), {"query": Q32},
                           ValueError, r"^query given without cos_sin_cache \(RoPE\)$"),
    "rope_positions_missing": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                               dict(ROPE_KW, rope_positions=None), ValueError,
                               "^rope_positions is required with cos_sin_cache$"),
    "rope_positions_rows": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                            dict(ROPE_KW, rope_positions=I32(3)), ValueError,
                            "^rope_positions has 3 entries; the batch has 4 rows$"),
    "rope_cache_dtype": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                         dict(ROPE_KW, cos_sin_cache=I32(8).view(4, 2)), TypeError,
                         r"^cos_sin_cache\.dtype is torch\.int32; expected"),
    "rope_cache_strided": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                           dict(ROPE_KW, cos_sin_cache=torch.zeros(128, 4096).t()), ValueError,
                           "^cos_sin_cache: the last dimension must be contiguous$"),
    "rope_rotary_dim": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                        dict(ROPE_KW, rotary_dim=130), ValueError,
                        "^rotary_dim = 130: must be even, at most cos_sin_cache's width 128 and "
                        "the head dim 128$"),
    "rope_query_dtype": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                         dict(ROPE_KW, query=Q32.half()), TypeError,
                         r"^query\.dtype is torch\.float16; expected torch\.bfloat16$"),
    "rope_query_rows": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                        dict(ROPE_KW, query=bf16(3, 32, 128)), ValueError,
                        r"^query \(3, 32, 128\) must be \[4, heads, 128\]$"),
    "rope_query_out_alone": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                             dict(ROPE_KW, query=None, query_out=Q32), ValueError,
                             "^query_out given without query$"),
    "rope_query_out_shape": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                             dict(ROPE_KW, query_out=bf16(4, 16, 128)), ValueError,
                             r"^query_out \(4, 16, 128\) must have query's shape \(4, 32, 128\), "
                             r"the last dimension contiguous$"),
    "rope_key_out_dtype": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                           dict(ROPE_KW, key_out=K16.float()), TypeError,
                           r"^key_out\.dtype is torch\.float32; expected torch\.bfloat16$"),
    "rope_diagnostics": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                         dict(ROPE_KW, diagnostics=i64(2)), ValueError,
                         "^diagnostics must be a contiguous int64 tensor of 3 counters$"),
    "rope_rounding": ("store_paged_kv", (K16, K16, SLOTS, KC, KC),
                      dict(ROPE_KW, rope_rounding="bf16"), ValueError,
                      r"^rope_rounding = 'bf16': expected one of \['fp32', 'input_type'\]$"),
    "mla_rope_device": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                        dict(MLA_ROPE_KW, key_out=ROPE.clone(), query_out=bf16(4, 16, 64),
                             is_neox=True, diagnostics=i64(3)), ValueError, "^nope is on cpu"),
    "mla_rope_in_place_device": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                                 dict(MLA_ROPE_KW, key_out=ROPE, query=bf16(4, 16, 192)[..., 128:]),
                                 ValueError, "^nope is on cpu"),
    "mla_rope_width": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                       dict(MLA_ROPE_KW, cos_sin_cache=torch.zeros(4096, 128)), ValueError,
                       r"^cos_sin_cache has 128 columns; the RoPE part's cos \| sin are 64$"),
    "mla_rope_query_ndim": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                            dict(MLA_ROPE_KW, query=bf16(4, 64)), ValueError,
                            r"^query has 2 dimensions \(4, 64\); expected 3$"),
    "mla_rope_query_dim": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                           dict(MLA_ROPE_KW, query=bf16(4, 16, 128)), ValueError,
                           r"^query \(4, 16, 128\) must be \[4, heads, 64\]$"),
    "mla_rope_key_out": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                         dict(MLA_ROPE_KW, key_out=bf16(4, 32)), ValueError,
                         r"^key_out \(4, 32\) must have rope's shape \(4, 64\), the last "
                         r"dimension contiguous$"),
    "mla_rope_diagnostics": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                             dict(MLA_ROPE_KW, diagnostics=i64(2)), ValueError,
                             "^diagnostics must be a contiguous int64 tensor of 3 counters$"),
    "mla_rope_without_cache": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                               {"key_out": ROPE}, ValueError,
                               r"^key_out given without cos_sin_cache \(RoPE\)$"),
    "mla_rope_rows_without_cache": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                                    {"cos_sin_rows": "by_row"}, ValueError,
                                    r"^cos_sin_rows given without cos_sin_cache \(RoPE\)$"),
    "mla_rope_layout_without_cache": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                                      {"cos_sin_layout": "interleaved"}, ValueError,
                                      r"^cos_sin_layout given without cos_sin_cache \(RoPE\)$"),
    "mla_rope_by_row_positions": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                                  dict(MLA_ROPE_KW, cos_sin_rows="by_row"), ValueError,
                                  r"^rope_positions given with cos_sin_rows 'by_row' \(row i "
                                  r"rotates by cos_sin_cache row i\)$"),
    "mla_rope_by_row_too_few": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                                dict(MLA_ROPE_KW, rope_positions=None, cos_sin_rows="by_row",
                                     cos_sin_cache=torch.zeros(3, 64)), ValueError,
                                r"^cos_sin_cache has 3 rows; cos_sin_rows 'by_row' needs one a "
                                r"row \(4\)$"),
    "mla_rope_by_row_device": ("fused_store_cache", (NOPE, ROPE, SLOTS, V4_PAGES),
                               dict(MLA_ROPE_KW, rope_positions=None, cos_sin_rows="by_row",
                                    cos_sin_layout="interleaved",
                                    cos_sin_cache=torch.zeros(4, 64)), ValueError,
                               "^nope is on cpu"),
    "fp8_table_partial": ("store_index_k_fp8", (K, SLOTS32, FP8_PAGES), {"kv_indices": I32(4)},
                          ValueError, "^positions, kv_indptr and kv_indices go together"),
    "fp8_table_device": ("store_index_k_fp8", (K, SLOTS32, FP8_PAGES), TABLE, ValueError,
                         "^k is on cpu"),
    "fp4_table_batch_dtype": ("store_index_k_fp4", (K, SLOTS, FP4_PAGES), TABLE, TypeError,
                              r"^slot_mapping\.dtype is torch\.int64; with a page table"),
    "fused_table_positions": ("fused_store_cache", (NOPE, ROPE, SLOTS32, V4_PAGES),
                              dict(TABLE, positions=I32(5)), ValueError,
                              "^positions has 5 entries; the batch has 4 rows$"),
    "fused_table_device": ("fused_store_cache", (NOPE, ROPE, SLOTS32, V4_PAGES), TABLE,
                           ValueError, "^nope is on cpu"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refusal_names_the_argument(case):
    store, args, kwargs, error, message = CASES[case]
    with pytest.raises(error, match=message) as raised:
        getattr(cst, store)(*args, **kwargs)
    assert type(raised.value) is error


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_and_python_checks_say_the_same(case):
    # The op (native: C++ checks; else the Python ones) and the Python checks (`direct`, and
    # the fake under torch.compile) refuse with the same type and the same words.
    store, args, kwargs, error, _ = CASES[case]
    with pytest.raises(error) as op:
        getattr(cst, store)(*args, **kwargs)
    with pytest.raises(error) as python:
        getattr(cst.direct, store)(*args, **kwargs)
    assert str(op.value) == str(python.value)


def test_backend_says_which_ops_are_loaded():
    assert cst.backend in ("native", "python")
    assert isinstance(cst.backend_detail, str) and cst.backend_detail
    installed = os.path.isfile(_native.library_path())
    wanted = os.environ.get("CACHESTORE_TORCH_BACKEND", "")
    if wanted:
        assert cst.backend == wanted
    elif installed and _native._torch_version() >= _native.MIN_TORCH:
        assert cst.backend == "native", cst.backend_detail  # installed, so it must load
    if cst.backend == "native":
        assert cst.backend_detail == _native.library_path()
        import cachestore
        info = _native.build_info()  # what the loaded ops were compiled with
        headers = tuple(int(v) for v in info["torch_headers"].split(".")[:2])
        assert info["stable_abi_target"] == "2.10" and headers >= _native.MIN_TORCH
        assert info["cachestore"] == cachestore.__version__
        print(f"native ops: {info}; running under torch {torch.__version__}")


def test_op_schemas_are_the_argument_tables():
    # The native ops declare their schemas in C++ (src/torch/): they must be the tables'.
    for name, store in cst._STORES.items():
        op = getattr(torch.ops.cachestore, name).default
        assert str(op._schema) == str(torch._C.parse_schema(f"cachestore::{name}{store.schema()}"))
    schemas = {name: str(getattr(torch.ops.cachestore, name).default._schema)
               for name in cst._STORES}
    assert "Tensor(a!) cache" in schemas["store_index_k_fp8"]
    assert "Tensor(b!)? diagnostics=None" in schemas["store_index_k_fp8"]
    assert "Tensor(a!) kv_cache" in schemas["fused_store_cache"]
    assert "Tensor(b!)? index_cache=None" in schemas["fused_store_cache"]
    assert "Tensor(a!) key_cache, Tensor(b!)? value_cache" in schemas["store_paged_kv"]
    assert all(s.endswith("-> ()") for s in schemas.values())


def _raw_refusal(expected, words, call):
    """A raw op's refusal: the words, and the type cachestore.torch gives it. The class torch
    raises for a stable-ABI op's exception is torch's (ValueError up to 2.11, RuntimeError on
    2.15): the words decide the type (decisions.md)."""
    with pytest.raises((expected, RuntimeError)) as raised:
        call()
    typed = cst._store.typed_error(raised.value) or raised.value
    assert type(typed) is expected and str(typed) == words, str(raised.value)


def test_op_level_refusals():
    # torch.ops.cachestore.* take the choices as ids; a bad id is refused naming it, and the
    # refusals reach Python as the exception cachestore.torch raises (the native ops' raw form:
    # the words, "TypeError: " first for a type refusal).
    op = torch.ops.cachestore.store_paged_kv
    _raw_refusal(ValueError, "layout = 3: expected an id in [0, 3)",
                 lambda: op(K16, K16, SLOTS, KC, KC, 3))
    _raw_refusal(ValueError, "kv_cache_dtype = 7: expected an id in [0, 5)",
                 lambda: op(K16, K16, SLOTS, KC, KC, 0, 7))
    _raw_refusal(ValueError, "layout = 4: expected an id in [0, 4)",
                 lambda: torch.ops.cachestore.fused_store_cache(NOPE, ROPE, SLOTS, V4_PAGES, 4))
    with pytest.raises((TypeError, ValueError, RuntimeError)) as raised:
        torch.ops.cachestore.store_index_k_bf16(K.float(), SLOTS, bf16(64, 128))
    typed = cst._store.typed_error(raised.value) or raised.value
    assert type(typed) is TypeError and str(typed).startswith("k.dtype is torch.float32")
    with pytest.raises((ValueError, RuntimeError)) as raised:  # CPU tensors: checked, refused
        torch.ops.cachestore.store_index_k_bf16(K, SLOTS, bf16(64, 128))
    typed = cst._store.typed_error(raised.value) or raised.value
    assert type(typed) is ValueError and str(typed).startswith("k is on cpu")


def test_refusals_keep_their_types_when_torch_raises_runtime_error():
    # A torch that turns every C++ exception of an op into a RuntimeError (newer releases),
    # with its own lines after the message: cachestore.torch still raises the documented types
    # with the same words.
    trace = "\nException raised from run at op.cpp:1 (most recent call first):\nframe #0: ..."
    for raw, expected in (("layout = 3: expected an id in [0, 3)", ValueError),
                          ("TypeError: k.dtype is torch.float32", TypeError),
                          ("page_size = 3 [kErrorInvalidArgument]", cachestore.CachestoreError),
                          ("launch failed [kErrorCudaRuntime]", cachestore.CachestoreCudaError)):
        typed = cst._store.typed_error(RuntimeError(raw + trace))
        assert type(typed) is expected, raw
        words = raw.removeprefix("TypeError: ")
        assert str(typed) == words, raw
    assert cst._store.typed_error(RuntimeError("CUDA error: an illegal memory access")) is None
    assert cst._store.typed_error(KeyError("layout")) is None


def test_decode_step_traces_on_fake_cuda_tensors():
    # No GPU needed: make_fx and torch.compile(fullgraph=True) trace the stores as the torch ops
    # (metadata checks and fake implementations only; nothing launches).
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(hidden, slots, n, kv_cache, index_cache, key_cache, value_cache):
        cst.fused_store_cache(hidden[:, :448], hidden[:, 448:512], slots, kv_cache,
                              index_k=hidden[:, 512:640], index_cache=index_cache,
                              num_tokens_non_padded=n)
        kv = hidden[:, :1024].view(-1, 8, 128)
        cst.store_paged_kv(kv[:, :4], kv[:, 4:], slots, key_cache, value_cache,
                           num_tokens_non_padded=n, layout="nhd")
        cst.store_index_k_fp4(hidden[:, :128], slots, index_cache[:, :64 * 68], ties="toward_zero")
        return hidden.float().sum()

    with FakeTensorMode():
        args = (torch.empty(32, 1024, dtype=torch.bfloat16, device="cuda"),
                torch.empty(32, dtype=torch.int64, device="cuda"),
                torch.empty(1, dtype=torch.int32, device="cuda"),
                torch.empty(8, 37440, dtype=torch.uint8, device="cuda"),
                torch.empty(8, 64 * 132, dtype=torch.uint8, device="cuda"),
                torch.empty(8, 16, 4, 128, dtype=torch.bfloat16, device="cuda"),
                torch.empty(8, 16, 4, 128, dtype=torch.bfloat16, device="cuda"))
        gm = make_fx(step, tracing_mode="fake")(*args)
        ops = [str(n.target) for n in gm.graph.nodes if "cachestore" in str(n.target)]
        assert ops == ["cachestore.fused_store_cache.default", "cachestore.store_paged_kv.default",
                       "cachestore.store_index_k_fp4.default"]
        assert torch.compile(step, fullgraph=True, backend="eager")(*args).shape == ()
        # Symbolic batch sizes too (what an engine's dynamic=True compile sees).
        assert torch.compile(step, fullgraph=True, backend="eager", dynamic=True)(*args).shape == ()
        # The checks run while tracing too (the fake): refused before any graph exists.
        with pytest.raises(ValueError, match="nope has 448 columns; the layout needs 512"):
            make_fx(lambda h, s, c: cst.fused_store_cache(h[:, :448], h[:, 448:512], s, c,
                                                          layout="v32"),
                    tracing_mode="fake")(args[0], args[1], args[3])


@pytest.mark.skipif(os.environ.get("CACHESTORE_TORCH_BACKEND") == "python",
                    reason="this is the run under the Python ops")
def test_python_ops_pass_the_same_tests():
    # The fallback (torch < 2.10 or no extension): the same ops defined in Python. A fresh
    # interpreter, since one process holds one definition of torch.ops.cachestore.
    run_under_python_ops(__file__, "test_python_ops_pass_the_same_tests")

def test_rope_reference_reproduces_the_worked_pair():
    # The contract's bf16 pair (docs/layouts.md): x = 1.5, y = 0.3125, cos 0.6, sin 0.8.
    import torch_reference as ref
    x = torch.tensor([[[1.5, 0.3125]]], dtype=torch.bfloat16)
    cos_sin = torch.tensor([[0.6, 0.8]])
    for rounding, first in (("input_type", 0x3F27), ("fp32", 0x3F26)):
        out = ref.ref_rope(x, torch.tensor([0]), cos_sin, 2, True, rounding)
        assert out.view(torch.int16).flatten().tolist() == [first, 0x3FB2], rounding
