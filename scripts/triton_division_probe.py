#!/usr/bin/env python3
"""Whether Triton's fp32 division rounds as IEEE division does, for the two quotients of vLLM's
fp8_per_token_head store (amax / 448 and 1 / s): the question behind the one documented
difference of cachestore's fp8_e4m3_per_token_head bytes (docs/layouts.md). Needs a GPU, torch
and triton. Prints, for each quotient written as vLLM's kernel writes it, how many inputs differ
from correctly rounded division (0 and 0: the formula of docs/layouts.md is the kernel's).

usage: python3 scripts/triton_division_probe.py [--values N]
"""
import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def _quotients(amax_ptr, s_out, r_out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    a = tl.load(amax_ptr + i, mask=mask, other=1.0)
    s = tl.maximum(a / 448.0, 1e-6)
    tl.store(s_out + i, s, mask=mask)
    tl.store(r_out + i, 1.0 / s, mask=mask)


def ieee(a, b):
    return a / (b if isinstance(b, torch.Tensor) else torch.full_like(a, b))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--values", type=int, default=1 << 24)
    args = parser.parse_args()
    dev = torch.device("cuda")
    # Every bf16 magnitude (the amax of bf16 input is one), then random fp32 magnitudes.
    bf16 = torch.arange(0, 0x7F80, dtype=torch.int32, device=dev).to(torch.int16)
    amax = torch.cat([bf16.view(torch.bfloat16).float(),
                      torch.rand(args.values, device=dev) * torch.exp2(
                          torch.randint(-40, 40, (args.values,), device=dev).float())])
    s = torch.empty_like(amax)
    r = torch.empty_like(amax)
    block = 1024
    _quotients[(triton.cdiv(amax.numel(), block),)](amax, s, r, amax.numel(), BLOCK=block)
    s_ieee = ieee(amax, 448.0).clamp(min=1e-6)
    r_ieee = ieee(torch.ones_like(s_ieee), s_ieee)
    s_diff = (s.view(torch.int32) != s_ieee.view(torch.int32)).sum().item()
    r_diff = (r.view(torch.int32) != ieee(torch.ones_like(s), s).view(torch.int32)).sum().item()
    print(f"inputs: {amax.numel()} ({bf16.numel()} bf16 magnitudes, {args.values} random fp32)")
    print(f"amax / 448: {s_diff} differ from IEEE division")
    print(f"1 / s: {r_diff} differ from IEEE division (s as Triton computed it)")
    r_chain = (r.view(torch.int32) != r_ieee.view(torch.int32)).sum().item()
    print(f"1 / s end to end (both quotients): {r_chain} differ")


if __name__ == "__main__":
    main()
