"""PyTorch references of every cachestore layout (docs/layouts.md), written from the formulas, for the
Python tests. Each `ref_*` writes the real rows' records into `cache` (a clone of the cache before
the store) at their slots, exactly as the contract says; bytes are compared whole."""
import torch

MIDPOINTS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def true_div(a, b):
    """IEEE division elementwise (PyTorch divides by a Python scalar through its reciprocal)."""
    return a / (b if isinstance(b, torch.Tensor) else torch.full_like(a, b))


def pow2_exponent(f):
    """ceil(log2 f) for positive f, exactly (frexp: f = m * 2^e, m in [0.5, 1))."""
    mant, exp = torch.frexp(f)
    return torch.where(mant == 0.5, exp - 1, exp)


def pow2(e):
    return torch.ldexp(torch.ones_like(e, dtype=torch.float32), e)


def e4m3_bytes(x):
    return x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)


def e5m2_bytes(x):
    return x.clamp(-57344, 57344).to(torch.float8_e5m2).view(torch.uint8)


def e2m1_codes(q, ties_to_even=True, zero_sign=True):
    """e2m1 codes of q: nearest, ties to even (or toward zero), |q| > 6 -> 6, sign bit kept
    (zero_sign) or only with a nonzero magnitude."""
    a = q.abs()
    code = torch.zeros_like(q, dtype=torch.int32)
    for i, m in enumerate(MIDPOINTS):
        up = (a >= m) if (ties_to_even and i % 2 == 1) else (a > m)
        code += up.to(torch.int32)
    sign = torch.signbit(q).to(torch.int32) * 8
    if not zero_sign:
        sign = torch.where(code == 0, torch.zeros_like(sign), sign)
    return (code | sign).to(torch.uint8)


def pack_nibbles(codes):
    """[..., 2k] codes -> [..., k] bytes, the even index in the low nibble."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def paged(cache, page_size, slots, offset, width, stride_in_page):
    """The [rows, width] byte views of `slots`' records at `offset + (s % P) * stride_in_page`
    of their pages."""
    page, off = slots // page_size, slots % page_size
    cols = torch.arange(width, device=cache.device)
    idx = offset + (off * stride_in_page).unsqueeze(1) + cols
    return page.unsqueeze(1).expand_as(idx), idx


def put(cache, page_size, slots, offset, stride_in_page, rows):
    p, i = paged(cache, page_size, slots, offset, rows.shape[1], stride_in_page)
    cache[p, i] = rows


def ref_index_k_bf16(cache, k, slots):
    cache[slots] = k


def index_fp8_records(k, rule):
    x = k.float().view(k.shape[0], k.shape[1] // 128, 128)
    base = true_div(torch.clamp(x.abs().amax(-1), min=1e-4), 448.0)
    s = pow2(pow2_exponent(base)) if rule == "pow2" else base
    q = e4m3_bytes(true_div(x, s.unsqueeze(-1))).view(k.shape[0], k.shape[1])
    return q, s.contiguous().view(torch.uint8).view(k.shape[0], 4 * (k.shape[1] // 128))


def ref_index_k_fp8(cache, page_size, k, slots, rule="amax"):
    d = k.shape[1]
    q, s = index_fp8_records(k, rule)
    put(cache, page_size, slots, 0, d, q)
    put(cache, page_size, slots, page_size * d, 4 * (d // 128), s)


def index_fp4_records(k, ties_to_even):
    x = k.float().view(k.shape[0], k.shape[1] // 32, 32)
    sf = torch.clamp(true_div(x.abs().amax(-1), 6.0), min=1e-4)
    bits = sf.view(torch.int32)
    byte = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    byte = byte.clamp(1, 254)
    q = x * pow2(127 - byte).unsqueeze(-1)
    codes = e2m1_codes(q, ties_to_even, zero_sign=False).view(k.shape[0], k.shape[1])
    return pack_nibbles(codes), byte.to(torch.uint8)


def ref_index_k_fp4(cache, page_size, k, slots, ties_to_even=True):
    d = k.shape[1]
    q, s = index_fp4_records(k, ties_to_even)
    put(cache, page_size, slots, 0, d // 2, q)
    put(cache, page_size, slots, page_size * (d // 2), d // 32, s)


def ref_mla(cache, page_size, layout, nope, rope, slots, scale_rule="pow2"):
    m = nope.shape[0]
    if layout == "v4":
        x = nope.float().view(m, 7, 64)
        e = pow2_exponent(true_div(torch.clamp(x.abs().amax(-1), min=1e-4), 448.0))
        q = e4m3_bytes(x * pow2(-e).unsqueeze(-1)).view(m, 448)
        data = torch.cat([q, rope.contiguous().view(torch.uint8)], 1)
        scales = torch.cat([(e + 127).to(torch.uint8), torch.zeros(m, 1, dtype=torch.uint8,
                                                                     device=nope.device)], 1)
        put(cache, page_size, slots, 0, 576, data)
        put(cache, page_size, slots, 576 * page_size, 8, scales)
    elif layout == "v32":
        x = nope.float().view(m, 4, 128)
        amax = x.abs().amax(-1)
        if scale_rule == "pow2":
            s = pow2(pow2_exponent(torch.clamp(true_div(amax, 448.0), min=1e-4)))
        else:
            s = torch.clamp(true_div(amax, 448.0), min=torch.finfo(torch.float32).tiny)
        q = e4m3_bytes(true_div(x, s.unsqueeze(-1))).view(m, 512)
        record = torch.cat([q, s.contiguous().view(torch.uint8).view(m, 16),
                            rope.contiguous().view(torch.uint8)], 1)
        put(cache, page_size, slots, 0, 656, record)
    elif layout == "v41":
        x = torch.cat([nope, rope], 1).float().view(m, 16, 32)
        e = pow2_exponent(torch.clamp(true_div(x.abs().amax(-1), 448.0), min=1e-4))
        q = e4m3_bytes(x * pow2(-e).unsqueeze(-1)).view(m, 512)
        put(cache, page_size, slots, 0, 512, q)
        put(cache, page_size, slots, 512 * page_size, 16, (e + 127).to(torch.uint8))
    else:  # v41_fp4
        x = torch.cat([nope, rope], 1).float().view(m, 32, 16)
        s = true_div(x.abs().amax(-1), 6.0).clamp(2.0 ** -9, 448.0).to(torch.float8_e4m3fn)
        q = true_div(x, s.float().unsqueeze(-1))
        put(cache, page_size, slots, 0, 256, pack_nibbles(e2m1_codes(q).view(m, 512)))
        put(cache, page_size, slots, 256 * page_size, 32, s.view(torch.uint8))


def ref_paged_kv(cache, layout, x, slots, scale=None, is_key=True):
    """x [m, H, D] into cache NHD [pages, P, H, D], HND [pages, H, P, D] or vLLM's paged
    attention (K [pages, H, D / x, P, x], V [pages, H, D, P]); a cache of the input's dtype
    copies, float8 quantizes by x / scale, scale of 1 or H values."""
    page_size = (cache.shape[1] if layout == "nhd" else
                 cache.shape[3] if layout == "paged_attention" else cache.shape[2])
    page, off = slots // page_size, slots % page_size
    if cache.dtype in (torch.bfloat16, torch.float16, torch.float32):
        vals = x
    else:
        q = true_div(x.float(), scale.view(1, -1, 1).expand_as(x).float())
        vals = (e4m3_bytes(q) if cache.dtype == torch.float8_e4m3fn else e5m2_bytes(q)).view(
            cache.dtype)
    if layout == "nhd":
        cache[page, off] = vals
    elif layout == "hnd":
        cache.permute(0, 2, 1, 3)[page, off] = vals
    elif is_key:
        m, h, d = vals.shape
        cache[page, :, :, off, :] = vals.reshape(m, h, d // cache.shape[4], cache.shape[4])
    else:
        cache[page, :, :, off] = vals


def nvfp4_records(x, g):
    """FlashInfer's NVFP4 blocks of x [m, H, D] under global decode scales g (1 or H values):
    (codes [m, H, D / 2] uint8, block scales [m, H, D / 16] uint8). Per 16 values amax (NaN
    ignored), sf = e4m3(amax / (6 g)) (IEEE division; 0 unless amax, g > 0), out = 1 / (sf g)
    (0 unless sf > 0 too), codes e2m1(x * out) ties to even, a NaN product giving 0."""
    m, h, d = x.shape
    b = x.float().reshape(m, h, d // 16, 16)
    amax = torch.where(b.isnan(), torch.zeros_like(b), b.abs()).amax(-1)
    g = g.float().view(1, -1, 1).expand(m, h, d // 16)
    scaled = (amax > 0) & (g > 0)
    sf_byte = e4m3_bytes(torch.where(scaled, true_div(amax, 6 * g), torch.zeros_like(amax)))
    sf = sf_byte.view(torch.float8_e4m3fn).float()
    out = torch.where(scaled & (sf > 0), true_div(torch.ones_like(sf), sf * g),
                      torch.zeros_like(sf))
    q = b * out.unsqueeze(-1)
    codes = torch.where(q.isnan(), torch.zeros_like(q, dtype=torch.uint8), e2m1_codes(q))
    return pack_nibbles(codes.reshape(m, h, d)), sf_byte


def ref_paged_kv_nvfp4(cache, block_scales, layout, x, slots, g):
    """x [m, H, D] into an nvfp4 cache (uint8 [pages, P, H, D / 2] NHD or [pages, H, P, D / 2]
    HND) and its block scales (the same with D / 16)."""
    codes, sf = nvfp4_records(x, g)
    page_size = cache.shape[1] if layout == "nhd" else cache.shape[2]
    page, off = slots // page_size, slots % page_size
    for dst, vals in ((cache, codes), (block_scales, sf)):
        vals = vals.view(dst.dtype)
        if layout == "nhd":
            dst[page, off] = vals
        else:
            dst.permute(0, 2, 1, 3)[page, off] = vals


def token_head_records(x):
    """vLLM's fp8_per_token_head records of x [m, H, D]: (e4m3 bytes [m, H, D], scales [m, H]
    float32). Per (token, head) s = max(amax / 448, 1e-6) (NaN left out of the amax), the values
    e4m3(x * (1 / s)), each operation IEEE (true_div, not torch's reciprocal for a scalar)."""
    v = x.float()
    amax = torch.where(v.isnan(), torch.zeros_like(v), v.abs()).amax(-1)
    s = true_div(amax, 448.0).clamp(min=1e-6)
    r = true_div(torch.ones_like(s), s)
    return e4m3_bytes(v * r.unsqueeze(-1)), s


def ref_paged_kv_token_head(cache, scales, layout, x, slots):
    """x [m, H, D] into an fp8_e4m3_per_token_head cache ([pages, P, H, D] NHD or [pages, H, P,
    D] HND, float8 or uint8) and its scale cache ([pages, P, H] or [pages, H, P] float32)."""
    q, s = token_head_records(x)
    page_size = cache.shape[1] if layout == "nhd" else cache.shape[2]
    page, off = slots // page_size, slots % page_size
    q = q.view(cache.dtype)
    if layout == "nhd":
        cache[page, off] = q
        scales[page, off] = s
    else:
        cache.permute(0, 2, 1, 3)[page, off] = q
        scales.permute(0, 2, 1)[page, off] = s


def ref_rope(x, positions, cos_sin, rotary_dim, is_neox, rounding):
    """x [m, H, D] rotated at positions [m] by cos_sin [max_position, >= rotary_dim] (cos in the
    first half), the first rotary_dim values in NeoX halves or GPT-J pairs. 'input_type' on 16-bit
    x: cos / sin rounded to x's dtype, each product and the sum rounded to it (torch's own
    per-operation rounding, as vLLM's rotary_embedding); else fma(own, cos, -+(partner * sin)) in
    fp32, then x's dtype (FlashInfer): the exact product and sum in float64, rounded once to
    fp32 (the double rounding differs only where the float64 sum lands on an fp32 midpoint, which
    random operands do not)."""
    half = rotary_dim // 2
    row = cos_sin[positions.long()]
    c, s = row[:, :half].unsqueeze(1), row[:, half:rotary_dim].unsqueeze(1)
    first = slice(0, half) if is_neox else slice(0, rotary_dim, 2)
    second = slice(half, rotary_dim) if is_neox else slice(1, rotary_dim, 2)
    x1, x2 = x[..., first], x[..., second]
    if rounding == "input_type" and x.dtype != torch.float32:
        c, s = c.to(x.dtype), s.to(x.dtype)
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    else:
        def fma(own, partner, sign):
            product = (partner.float() * s.float()).double()
            return (own.double() * c.double() + sign * product).float().to(x.dtype)
        o1, o2 = fma(x1, x2, -1.0), fma(x2, x1, 1.0)
    out = x.clone()
    out[..., first], out[..., second] = o1, o2
    return out
