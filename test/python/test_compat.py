"""cachestore.compat: the peers' entry points keep their names, signatures and argument
conventions, and refuse what cachestore refuses naming the argument. Host side (CPU tensors);
test_compat_gpu.py checks the bytes."""
import inspect

import pytest

from conftest import need_torch

torch = need_torch()
from cachestore.compat import flashinfer, sglang, vllm  # noqa: E402

VLLM_SIGNATURES = {
    "reshape_and_cache_flash": ["key", "value", "key_cache", "value_cache", "slot_mapping",
                                "kv_cache_dtype", "k_scale", "v_scale"],
    "reshape_and_cache": ["key", "value", "key_cache", "value_cache", "slot_mapping",
                          "kv_cache_dtype", "k_scale", "v_scale"],
    "concat_and_cache_mla": ["kv_c", "k_pe", "kv_cache", "slot_mapping", "kv_cache_dtype",
                             "scale"],
    "concat_and_cache_mla_rope_fused": ["positions", "q_pe", "k_pe", "kv_c", "cos_sin_cache",
                                        "is_neox", "slot_mapping", "kv_cache", "kv_cache_dtype",
                                        "kv_cache_scale"],
    "indexer_k_quant_and_cache": ["k", "kv_cache", "slot_mapping", "quant_block_size",
                                  "kv_cache_dtype"],
    "triton_reshape_and_cache_flash_per_token_head_quant": [
        "key", "value", "key_cache", "value_cache", "k_scale_cache", "v_scale_cache",
        "slot_mapping", "kv_quant_mode"],
}


def kv(*shape, dtype=torch.bfloat16):
    return torch.zeros(*shape, dtype=dtype)


def test_vllm_fp8_per_token_head_refusals_name_the_argument():
    """vLLM's fp8_per_token_head caches: fp8 (or uint8) caches and float32 scale caches of the
    cache's shape without its head dim; the int8 / int4 modes refused."""
    key, slots = kv(4, 8, 128), torch.zeros(4, dtype=torch.int64)
    cache = kv(10, 16, 8, 128, dtype=torch.float8_e4m3fn)
    scales = torch.zeros(10, 16, 8)
    store = vllm.triton_reshape_and_cache_flash_per_token_head_quant
    with pytest.raises(ValueError, match="^key is on cpu"):  # well-formed: only the device
        store(key, key, cache, cache, scales, scales, slots)
    with pytest.raises(ValueError, match="^key is on cpu"):  # uint8, the name of vLLM's mode
        store(key, key, cache.view(torch.uint8), cache.view(torch.uint8), scales, scales, slots,
              "FP8_PER_TOKEN_HEAD")
    with pytest.raises(ValueError, match="^key is on cpu"):
        vllm.reshape_and_cache_flash(key, key, cache, cache, slots, "fp8_per_token_head",
                                     scales, scales)
    with pytest.raises(ValueError, match="^kv_quant_mode = 'INT8_PER_TOKEN_HEAD'"):
        store(key, key, cache, cache, scales, scales, slots, "INT8_PER_TOKEN_HEAD")
    with pytest.raises(TypeError, match=r"^key_cache\.dtype torch\.bfloat16: an "
                                        r"fp8_e4m3_per_token_head cache is float8_e4m3fn"):
        store(key, key, kv(10, 16, 8, 128), kv(10, 16, 8, 128), scales, scales, slots)
    with pytest.raises(ValueError, match=r"^value_block_scale \(10, 16\) must be value_cache's "
                                         r"shape without its head dim"):
        store(key, key, cache, cache, scales, torch.zeros(10, 16), slots)
    with pytest.raises(TypeError, match=r"^key_block_scale\.dtype is torch\.float16"):
        store(key, key, cache, cache, scales.half(), scales, slots)
    with pytest.raises(ValueError, match="^key_block_scale is required for an "
                                         "fp8_e4m3_per_token_head cache"):
        vllm.reshape_and_cache_flash(key, key, cache, cache, slots, "fp8_per_token_head", None,
                                     scales)


def test_vllm_refusals_name_the_argument():
    key, slots = kv(4, 8, 128), torch.zeros(4, dtype=torch.int64)
    cache, scale = kv(10, 16, 8, 128), torch.ones(1)
    with pytest.raises(ValueError, match=r"^kv_cache_dtype = 'fp6': expected one of"):
        vllm.reshape_and_cache_flash(key, key, cache, cache, slots, "fp6", scale, scale)
    with pytest.raises(TypeError, match=r"^key_cache\.dtype torch\.float16: an auto cache"):
        vllm.reshape_and_cache_flash(key, key, cache.half(), cache.half(), slots, "auto", scale,
                                     scale)
    with pytest.raises(ValueError, match="^key is on cpu"):  # well-formed: only the device
        vllm.reshape_and_cache_flash(key, key, cache, cache, slots, "auto", scale, scale)
    u8 = kv(10, 16, 8, 128, dtype=torch.uint8)
    with pytest.raises(ValueError, match="^key is on cpu"):  # "fp8" = e4m3 on a uint8 cache
        vllm.reshape_and_cache_flash(key, key, u8, u8, slots, "fp8", scale, scale)
    # More key rows than slots: vLLM stores the first slot_mapping.shape[0].
    with pytest.raises(ValueError, match="^key is on cpu"):
        vllm.reshape_and_cache_flash(kv(9, 8, 128), kv(9, 8, 128), cache, cache, slots, "auto",
                                     scale, scale)
    pa_k, pa_v = kv(10, 8, 16, 16, 8), kv(10, 8, 128, 16)
    with pytest.raises(ValueError, match="^key is on cpu"):
        vllm.reshape_and_cache(key, key, pa_k, pa_v, slots, "auto", scale, scale)
    with pytest.raises(ValueError, match="does not hold key's 8 heads of 128 in layout "
                                         "'paged_attention'"):
        vllm.reshape_and_cache(key, key, cache, pa_v, slots, "auto", scale, scale)
    with pytest.raises(ValueError, match="^kv_c is on cpu|^nope is on cpu|^key is on cpu"):
        vllm.concat_and_cache_mla(kv(4, 512), kv(4, 64), kv(10, 16, 576), slots, "auto", scale)
    with pytest.raises(ValueError, match="^nope is on cpu"):
        vllm.concat_and_cache_mla(kv(4, 512), kv(4, 64), kv(10, 16, 656, dtype=torch.uint8),
                                  slots, "fp8_ds_mla", scale)
    q_pe, cos_sin = kv(4, 16, 64), torch.zeros(4096, 64)
    with pytest.raises(ValueError, match="^key is on cpu"):  # well-formed: only the device
        vllm.concat_and_cache_mla_rope_fused(slots, q_pe, kv(4, 64), kv(4, 512), cos_sin, False,
                                             slots, kv(10, 16, 576), "auto", scale)
    with pytest.raises(TypeError, match=r"^query\.dtype is torch\.float16"):
        vllm.concat_and_cache_mla_rope_fused(slots, q_pe.half(), kv(4, 64), kv(4, 512), cos_sin,
                                             True, slots, kv(10, 16, 576), "auto", scale)
    with pytest.raises(ValueError, match="^diagnostics must be a contiguous int64 tensor of 3"):
        vllm.concat_and_cache_mla_rope_fused(slots, q_pe, kv(4, 64), kv(4, 512), cos_sin, True,
                                             slots, kv(10, 16, 576), "auto", scale,
                                             diagnostics=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="^quant_block_size = 64"):
        vllm.indexer_k_quant_and_cache(kv(4, 128), kv(10, 64, 132, dtype=torch.uint8), slots, 64,
                                       "ue8m0")
    with pytest.raises(ValueError, match="^k is on cpu"):
        vllm.indexer_k_quant_and_cache(kv(4, 128), kv(10, 64, 132, dtype=torch.uint8), slots, 128,
                                       "ue8m0")


def test_sglang_store_cache_signature_and_refusals():
    params = inspect.signature(sglang.store_cache).parameters
    assert [p for p, v in params.items() if v.kind == v.POSITIONAL_OR_KEYWORD] == [
        "k", "v", "k_cache", "v_cache", "indices"]
    assert {"row_bytes", "num_split", "num_tokens_non_padded"} <= set(params)
    k, slots = kv(4, 1024), torch.zeros(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="^key is on cpu"):
        sglang.store_cache(k, k, kv(64, 1024), kv(64, 1024), slots)
    with pytest.raises(ValueError, match="^key is on cpu"):  # [T, H, D] inputs: flattened rows
        sglang.store_cache(kv(4, 8, 128), kv(4, 8, 128), kv(64, 1024), kv(64, 1024), slots)
    with pytest.raises(ValueError, match="^key is on cpu"):  # each input on its own
        sglang.store_cache(k, kv(4, 8, 128), kv(64, 1024), kv(64, 1024), slots)
    with pytest.raises(ValueError, match=r"^key_cache \(64, 1, 512\) does not hold"):
        sglang.store_cache(k, k, kv(64, 512), kv(64, 512), slots)


FLASHINFER_SIGNATURES = {
    "append_paged_kv_cache": ["append_key", "append_value", "batch_indices", "positions",
                              "paged_kv_cache", "kv_indices", "kv_indptr", "kv_last_page_len",
                              "kv_layout"],
    "append_paged_mla_kv_cache": ["append_ckv", "append_kpe", "batch_indices", "positions",
                                  "ckv_cache", "kpe_cache", "kv_indices", "kv_indptr",
                                  "kv_last_page_len"],
}


def test_flashinfer_refusals_name_the_argument():
    key = kv(4, 8, 128)
    i32 = torch.zeros(4, dtype=torch.int32)
    indptr, indices = torch.tensor([0, 2, 4], dtype=torch.int32), torch.arange(4).int()
    nhd = kv(8, 16, 8, 128)
    with pytest.raises(ValueError, match=r"^kv_layout = 'NDH': expected 'NHD' or 'HND'$"):
        flashinfer.append_paged_kv_cache(key, key, i32, i32, (nhd, nhd), indices, indptr, None,
                                         "NDH")
    with pytest.raises(ValueError, match=r"^paged_kv_cache \(8, 16, 8, 128\): a 5-D tensor"):
        flashinfer.append_paged_kv_cache(key, key, i32, i32, nhd, indices, indptr, None)
    with pytest.raises(ValueError, match="^paged_kv_cache: a tuple"):
        flashinfer.append_paged_kv_cache(key, key, i32, i32, (nhd,), indices, indptr, None)
    with pytest.raises(ValueError, match="^key is on cpu"):  # a well-formed call, on the CPU
        flashinfer.append_paged_kv_cache(key, key, i32, i32, kv(8, 2, 16, 8, 128), indices,
                                         indptr, None)
    with pytest.raises(ValueError, match="^key is on cpu"):  # int64 tables are cast, as FlashInfer
        flashinfer.append_paged_kv_cache(key, key, i32.long(), i32.long(), (nhd, nhd),
                                         indices.long(), indptr.long(), None)
    with pytest.raises(ValueError, match=r"^key_cache \(8, 16, 8, 128\) does not hold key's 8 "
                                         r"heads of 128 in layout 'hnd'$"):
        flashinfer.append_paged_kv_cache(key, key, i32, i32, (nhd, nhd), indices, indptr, None,
                                         "HND")
    with pytest.raises(ValueError, match=r"^positions has 3 entries; the batch has 4 rows$"):
        flashinfer.append_paged_kv_cache(key, key, i32, i32[:3], (nhd, nhd), indices, indptr,
                                         None)
    with pytest.raises(ValueError, match="^key is on cpu"):
        flashinfer.append_paged_mla_kv_cache(kv(4, 512), kv(4, 64), i32, i32, kv(8, 16, 512),
                                             kv(8, 16, 64), indices, indptr, None)


def test_flashinfer_nvfp4_refusals_name_the_argument():
    key = kv(4, 8, 128)
    i32 = torch.zeros(4, dtype=torch.int32)
    indptr, indices = torch.tensor([0, 2, 4], dtype=torch.int32), torch.arange(4).int()
    data = torch.zeros(8, 16, 8, 64, dtype=torch.uint8)
    sf = torch.zeros(8, 16, 8, 8, dtype=torch.float8_e4m3fn)
    append = flashinfer.nvfp4_quantize_append_paged_kv_cache
    by_slot = flashinfer.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping
    with pytest.raises(ValueError, match="^NVFP4 paged K/V cache tensors must have dtype "
                                         "torch.uint8$"):
        append(key, key, i32, i32, (data.float(), data), (sf, sf), indices, indptr, None, 1.0, 1.0)
    with pytest.raises(ValueError, match="^NVFP4 scale cache tensors must have dtype "
                                         "torch.float8_e4m3fn$"):
        append(key, key, i32, i32, (data, data), (sf, sf.view(torch.uint8)), indices, indptr,
               None, 1.0, 1.0)
    with pytest.raises(ValueError, match="^k_scale must be a positive finite global decode "
                                         "scale$"):
        append(key, key, i32, i32, (data, data), (sf, sf), indices, indptr, None, 0.0, 1.0)
    with pytest.raises(ValueError, match="^v_scale must be a positive finite global decode "
                                         "scale$"):
        append(key, key, i32, i32, (data, data), (sf, sf), indices, indptr, None, 1.0,
               float("inf"))
    with pytest.raises(ValueError, match="^append_key must be float16 or bfloat16, got "
                                         "torch.float32$"):
        append(key.float(), key, i32, i32, (data, data), (sf, sf), indices, indptr, None, 1.0,
               1.0)
    with pytest.raises(ValueError, match="^slot_mapping must be int32 or int64"):
        by_slot(key, key, i32.float(), (data, data), (sf, sf), 1.0, 1.0)
    with pytest.raises(ValueError, match="^append_key and append_value must have at least"):
        by_slot(key[:2], key[:2], i32, (data, data), (sf, sf), 1.0, 1.0)
    for bad in (0.0, -1.0, float("nan")):  # a host tensor's value is read, as FlashInfer does
        with pytest.raises(ValueError, match="^v_scale must be a positive finite global decode "
                                             "scale$"):
            by_slot(key, key, i32, (data, data), (sf, sf), torch.ones(1), torch.tensor([bad]))
    with pytest.raises(ValueError, match="^k_scale must be torch.float32, got torch.float64$"):
        by_slot(key, key, i32, (data, data), (sf, sf), torch.ones(1, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="^key is on cpu"):  # a well-formed call, on the CPU
        by_slot(key, key, i32.long(), (data, data), (sf, sf), torch.ones(1), 0.5)
    with pytest.raises(ValueError, match="^key is on cpu"):
        append(key, key, i32, i32, (data, data), (sf, sf), indices, indptr, None, 1.0, 1.0,
               kv_layout="NHD")


SGLANG_SIGNATURES = {
    "fused_store_index_k_cache": ["key", "index_k_with_scale", "out_cache_loc",
                                  "extend_num_tokens", "page_size"],
    "fused_store_cache": ["input", "cache", "indices"],
    "store_fp4_index_k_cache": ["input", "cache", "loc"],
    "fused_store_flashmla_cache": ["input", "cache", "indices", "page_size"],
    "fused_store_indexer_cache": ["input", "cache", "indices", "page_size"],
    "fused_store_flashmla_cache_v41": ["input", "cache", "indices", "page_size", "layout"],
}


def test_sglang_deepseek_refusals():
    k, loc = kv(4, 128), torch.zeros(4, dtype=torch.int64)
    with pytest.raises(ValueError, match="^k is on cpu"):
        sglang.fused_store_index_k_cache(k, torch.zeros(2, 64 * 132, dtype=torch.uint8), loc)
    with pytest.raises(ValueError, match="^k is on cpu"):
        sglang.store_fp4_index_k_cache(k, torch.zeros(2, 64 * 68, dtype=torch.uint8), loc,
                                       page_size=64)
    with pytest.raises(ValueError, match="^nope is on cpu"):
        sglang.fused_store_flashmla_cache(kv(4, 512), torch.zeros(2, 37440, dtype=torch.uint8),
                                          loc, 64)
    with pytest.raises(ValueError, match=r"^layout = 'V5': expected 'V41' or 'V41_FP4'$"):
        sglang.fused_store_flashmla_cache_v41(kv(4, 512), torch.zeros(2, 33792,
                                                                      dtype=torch.uint8),
                                              loc, 64, "V5")
    v41 = torch.zeros(2, 33792, dtype=torch.uint8)
    with pytest.raises(ValueError, match="^nope is on cpu"):  # freqs_cis well formed
        sglang.fused_store_flashmla_cache_v41(kv(4, 512), v41, loc, 64,
                                              freqs_cis=torch.zeros(4, 64))
    with pytest.raises(ValueError, match=r"^cos_sin_cache has 3 rows; cos_sin_rows 'by_row' "
                                         r"needs one a row \(4\)$"):
        sglang.fused_store_flashmla_cache_v41(kv(4, 512), v41, loc, 64,
                                              freqs_cis=torch.zeros(3, 64))
    with pytest.raises(ValueError, match="^cos_sin_cache has 32 columns"):
        sglang.fused_store_flashmla_cache_v41(kv(4, 512), v41, loc, 64,
                                              freqs_cis=torch.zeros(4, 32))


def test_sglang_fused_store_cache_and_gates():
    x, loc = kv(4, 512), torch.zeros(4, dtype=torch.int64)
    v41 = torch.zeros(2, 33792, dtype=torch.uint8)
    params = inspect.signature(sglang.fused_store_cache).parameters
    assert params["page_size"].kind == params["type"].kind == inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(ValueError, match="^unknown fused_store_cache type 'mla'"):
        sglang.fused_store_cache(x, v41, loc, page_size=64, type="mla")
    with pytest.raises(ValueError, match="^layout = 'V5': expected KVLayout V4, V41 or V41_FP4$"):
        sglang.fused_store_cache(x, v41, loc, page_size=64, type="flashmla", layout="V5")
    with pytest.raises(ValueError, match="^freqs_cis: the V4 layout keeps its RoPE dims"):
        sglang.fused_store_cache(x, v41, loc, page_size=64, type="flashmla",
                                 freqs_cis=torch.zeros(4, 64))
    with pytest.raises(ValueError, match="^nope is on cpu"):  # V4.1 with freqs_cis: the store's
        sglang.fused_store_cache(x, v41, loc, page_size=64, type="flashmla", layout="V41",
                                 freqs_cis=torch.zeros(4, 64))
    with pytest.raises(ValueError, match="^layout and freqs_cis belong to type='flashmla'$"):
        sglang.fused_store_cache(x[:, :128], v41, loc, page_size=64, type="indexer",
                                 layout="V41")

    class KVLayout:  # SGLang's enum member: read by name
        name = "V41"
    with pytest.raises(ValueError, match="^nope is on cpu"):  # well formed: on to the store
        sglang.fused_store_cache(x, v41, loc, page_size=64, type="flashmla", layout=KVLayout())
    with pytest.raises(ValueError, match="^k is on cpu"):
        sglang.fused_store_cache(x[:, :128], torch.zeros(2, 64 * 132, dtype=torch.uint8), loc,
                                 page_size=64, type="indexer")
    n = torch.ones(1, dtype=torch.int32)
    with pytest.raises(TypeError, match="^extend_num_tokens and num_tokens_non_padded"):
        sglang.fused_store_index_k_cache(x[:, :128], torch.zeros(2, 64 * 132, dtype=torch.uint8),
                                         loc, n, num_tokens_non_padded=n)
    assert sglang.can_use_store_cache(1024) and sglang.can_use_store_cache(512, 512)
    assert not sglang.can_use_store_cache(0) and not sglang.can_use_store_cache(3)
    assert not sglang.can_use_store_cache(512, 256)
    assert sglang.can_use_nsa_fused_store(torch.bfloat16, torch.int64, 64)
    assert sglang.can_use_nsa_fused_store(torch.bfloat16, torch.int32, 1)
    assert not sglang.can_use_nsa_fused_store(torch.float16, torch.int64, 64)
    assert not sglang.can_use_nsa_fused_store(torch.bfloat16, torch.int16, 64)
    assert not sglang.can_use_nsa_fused_store(torch.bfloat16, torch.int64, 0)


SIGNATURES = {"vllm": (vllm, VLLM_SIGNATURES), "flashinfer": (flashinfer, FLASHINFER_SIGNATURES),
              "sglang": (sglang, SGLANG_SIGNATURES)}


@pytest.mark.parametrize("module,name", [(m, n) for m, (_, table) in SIGNATURES.items()
                                         for n in sorted(table)])
def test_peer_signatures(module, name):
    """The peer's positional parameters in its order, and the keyword it lacks."""
    mod, table = SIGNATURES[module]
    params = inspect.signature(getattr(mod, name)).parameters
    positional = [p for p, v in params.items() if v.kind == v.POSITIONAL_OR_KEYWORD]
    assert positional == table[name]
    assert params["num_tokens_non_padded"].kind == inspect.Parameter.KEYWORD_ONLY
