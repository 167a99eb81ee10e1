#!/usr/bin/env python3
"""Prefill -> decode transfer of a request's KV pages between two processes with cachestore.move.

Rank 0 (the prefill engine: per-layer NHD caches, 16-token pages) gathers the request's pages of
every layer in one launch into a staging buffer, with a CRC-32 per block, and sends both; rank 1
(the decode engine: one HND buffer for all layers, 8-token pages) receives them and scatters them
into its own pages in one launch, the checksums verified on the way in: a block that changed in
transit is not written and is counted. The transport is torch.distributed: gloo with the staging
buffer in pinned host memory, or NCCL with it on the GPU (two GPUs, one per rank). A transfer
engine (NIXL, Mooncake) would register the same staging buffer: its data_ptr() and numel() bytes.

  python examples/python/pd_transfer.py                       # gloo, two processes, one GPU
  python examples/python/pd_transfer.py --backend nccl        # two GPUs
  python examples/python/pd_transfer.py --corrupt             # one byte changed in transit

Rank 1 then compares its whole decode cache with a reference (the prefill cache is rebuilt from
its seed) and prints "decode cache equals the reference".
"""
import argparse
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import cachestore.move as mv

LAYERS, HEADS, HEAD_DIM = 4, 8, 128
PREFILL_PAGE, PREFILL_PAGES = 16, 64
DECODE_PAGE, DECODE_PAGES = 8, 96
REQUEST = [41, 3, 17, 60, 8, 29]           # the request's pages in the prefill cache
POISON = 0xEE


def prefill_caches(device):
    """The prefill engine's K and V caches, one tensor a layer, from a fixed seed."""
    g = torch.Generator(device="cpu").manual_seed(1234)
    shape = (PREFILL_PAGES, PREFILL_PAGE, HEADS, HEAD_DIM)
    make = lambda: torch.randn(shape, generator=g).to(torch.bfloat16).to(device)  # noqa: E731
    k = [make() for _ in range(LAYERS)]
    v = [make() for _ in range(LAYERS)]
    return k, v


def decode_page_ids(device):
    """Where the decode engine puts the request: two of its pages a prefill page."""
    g = torch.Generator(device="cpu").manual_seed(99)
    return torch.randperm(DECODE_PAGES, generator=g)[:2 * len(REQUEST)].to(device)


def prefill(device, backend, corrupt):
    k, v = prefill_caches(device)
    cache = mv.paged_kv(k, v)                                 # per-layer tensors: plane_bases
    ids = torch.tensor(REQUEST, device=device)
    on_host = backend == "gloo"
    buffer, stage = mv.staging(cache, len(REQUEST), pin_memory=on_host, device=device)
    sums = mv.checksum_buffer(cache, len(REQUEST), device=device)
    mv.gather_pages(cache, ids, stage, checksums=sums)       # one launch, every layer
    torch.cuda.synchronize(device)
    if corrupt:
        buffer[2, 1, 12345] ^= 0x01                           # the network flips a bit
    dist.send(buffer, dst=1)
    dist.send(sums if not on_host else sums.cpu(), dst=1)


def decode(device, backend, corrupt):
    on_host = backend == "gloo"
    k = torch.full((LAYERS, DECODE_PAGES, HEADS, DECODE_PAGE, HEAD_DIM * 2), POISON,
                   dtype=torch.uint8, device=device).view(torch.bfloat16)
    v = torch.full_like(k.view(torch.uint8), POISON).view(torch.bfloat16)
    cache = mv.paged_kv(list(k), list(v), layout="hnd")      # one buffer: a layer stride
    per_layer = PREFILL_PAGE * cache.token_bytes
    buffer = torch.empty((len(REQUEST), LAYERS, per_layer), dtype=torch.uint8,
                         pin_memory=on_host, device=None if on_host else device)
    sums = torch.empty((len(REQUEST), LAYERS, 2), dtype=torch.int32,
                       device=None if on_host else device)
    dist.recv(buffer, src=0)
    dist.recv(sums, src=0)
    # Staging in the prefill engine's page size: entries of 16 tokens, each into two pages of 8.
    stage = mv.staging_pages(buffer, mv.paged_kv(*_prefill_like(device)))
    diag = torch.zeros(3, dtype=torch.int64, device=device)
    dst_ids = decode_page_ids(device)
    mv.scatter_pages(stage, cache, dst_ids, diagnostics=diag,
                     expected_checksums=sums.to(device))
    torch.cuda.synchronize(device)
    out_of_range, _, mismatches = diag.tolist()

    # The reference: the prefill cache rebuilt from its seed, each request page's tokens in the
    # decode layout; a corrupted block (layer 1's K plane of entry 2) stays as it was.
    ref_k, ref_v = prefill_caches(device)
    want_k = torch.full_like(k.view(torch.uint8), POISON)
    want_v = torch.full_like(v.view(torch.uint8), POISON)
    for e, page in enumerate(REQUEST):
        for half in range(2):
            d = int(dst_ids[2 * e + half])
            rows = slice(half * DECODE_PAGE, (half + 1) * DECODE_PAGE)
            for l in range(LAYERS):
                for plane, (src, want) in enumerate(((ref_k, want_k), (ref_v, want_v))):
                    if corrupt and (e, l, plane) == (2, 1, 0):
                        continue
                    tokens = src[l][page][rows].view(torch.uint8)      # [8, H, D * 2]
                    want[l, d] = tokens.permute(1, 0, 2)
    same = torch.equal(k.view(torch.uint8), want_k) and torch.equal(v.view(torch.uint8), want_v)
    expected_mismatches = 1 if corrupt else 0
    print(f"decode: {len(REQUEST)} pages of {PREFILL_PAGE} tokens x {LAYERS} layers received "
          f"({buffer.numel()} bytes over {backend}); checksum mismatches {mismatches} "
          f"(expected {expected_mismatches}), out-of-range {out_of_range}")
    if same and mismatches == expected_mismatches and out_of_range == 0:
        print("decode cache equals the reference")
    else:
        raise SystemExit("decode cache differs from the reference")


def _prefill_like(device):
    """Caches shaped as the prefill engine's (a page each): what its staging buffer's views need."""
    shape = (LAYERS, 1, PREFILL_PAGE, HEADS, HEAD_DIM)
    k = torch.empty(shape, dtype=torch.bfloat16, device=device)
    return list(k), list(torch.empty_like(k))


def main(rank, world, port, backend, corrupt):
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        (prefill if rank == 0 else decode)(device, backend, corrupt)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--corrupt", action="store_true", help="change one byte in transit")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("pd_transfer: no CUDA device here; it needs a GPU")
    if args.backend == "nccl" and torch.cuda.device_count() < 2:
        raise SystemExit("pd_transfer: --backend nccl needs two GPUs")
    mp.spawn(main, args=(2, free_port(), args.backend, args.corrupt), nprocs=2, join=True)
