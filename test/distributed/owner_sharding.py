#!/usr/bin/env python3
"""Page-owner sharding across real GPUs: each rank of a torch.distributed (NCCL) job holds its
own caches and stores the same padded batch with owner_size = world size, owner_rank = rank,
inside a CUDA graph captured once and replayed with several real-row counts (padding 0, stale
or -1; NaN junk in the padding rows). After each replay the ranks all-gather their pages;
interleaved by the owner rule (global page g is local page g // W of rank g % W) they must equal,
byte for byte, the caches one unsharded store writes on rank 0 (paged K/V NHD by slot mapping and by a
FlashInfer-form page table, NVFP4 K/V with per-head global scales changed every replay, K/V
with RoPE fused into the store (bf16 and fp8 e4m3 caches), fp8 index-K, V4 + fp8 index-K, V4.1 +
fp4 index-K). The ranks' slot diagnostics add up to the unsharded store's (each out-of-range
row is counted by its page's owner only); with RoPE every rank rotates every real row's Q and K
whatever its page's owner, so each rank's Q and rotated K equal the unsharded store's and each
rank counts the out-of-range positions itself. The guard page after each rank's cache is never
written.

  torchrun --nproc_per_node 2 test/distributed/owner_sharding.py
"""
import os

import torch
import torch.distributed as dist

import cachestore.torch as cst

B, P, GLOBAL_PAGES = 32, 16, 16
CAPACITY = P * GLOBAL_PAGES
GUARD = 0xAB


def page_bytes(kind):
    return {"index_fp8": P * 132, "index_fp4": P * 68, "v4": (584 * P + 575) // 576 * 576,
            "v41": (528 * P + 511) // 512 * 512}[kind]


def caches(pages, dev):
    """Each cache with one guard page after its `pages` pages (poisoned, never to be written)."""
    out = {kind: torch.full((pages + 1, page_bytes(kind)), GUARD, dtype=torch.uint8, device=dev)
           for kind in ("index_fp8", "index_fp4", "v4", "v41")}
    for side in ("k", "v"):
        out[side] = torch.full((pages + 1, P, 8, 128), 1.5, dtype=torch.bfloat16, device=dev)
        # the same K/V through the page-table slot source
        out[f"{side}_table"] = torch.full((pages + 1, P, 8, 128), 1.5, dtype=torch.bfloat16,
                                          device=dev)
        # NVFP4: codes and e4m3 block scales
        out[f"{side}_nvfp4"] = torch.full((pages + 1, P, 8, 64), GUARD, dtype=torch.uint8,
                                          device=dev)
        out[f"{side}_nvfp4_scales"] = torch.full((pages + 1, P, 8, 8), GUARD, dtype=torch.uint8,
                                                 device=dev)
        # RoPE fused into the store: a bf16 cache, and an fp8 e4m3 one (bytes)
        out[f"{side}_rope"] = torch.full((pages + 1, P, 8, 128), 1.5, dtype=torch.bfloat16,
                                         device=dev)
        out[f"{side}_rope_fp8"] = torch.full((pages + 1, P, 8, 128), GUARD, dtype=torch.uint8,
                                             device=dev)
    return out


ROPE_HEADS, MAX_POSITION = 32, 4096


class Rope:
    """The RoPE inputs every rank shares (Q, cos/sin, positions) and one store's outputs: Q
    rotated into q_out (the input stays for the other stores) and the rotated K into k_out,
    for the bf16 and the fp8 store."""

    def __init__(self, dev, inputs=None):
        if inputs is None:
            gen = torch.Generator(device=dev)
            gen.manual_seed(7)
            inputs = (torch.zeros(B, ROPE_HEADS, 128, dtype=torch.bfloat16, device=dev),
                      (torch.rand(MAX_POSITION, 128, device=dev, generator=gen) * 2 - 1)
                      .bfloat16(),
                      torch.zeros(B, dtype=torch.int64, device=dev))
        self.q, self.cos_sin, self.positions = inputs
        self.q_out = [torch.zeros_like(self.q) for _ in range(2)]
        self.k_out = [torch.zeros(B, 8, 128, dtype=torch.bfloat16, device=dev)
                      for _ in range(2)]
        self.diagnostics = torch.zeros(3, dtype=torch.int64, device=dev)

    def outputs(self):
        return self.q_out + self.k_out


def store(c, pages, x, slots, table, global_scales, n, rope, diagnostics, rank, world):
    """Every store of the check on caches of `pages` pages (the guard page excluded)."""
    kw = dict(num_tokens_non_padded=n, diagnostics=diagnostics, owner_rank=rank,
              owner_size=world)
    live = {k: v[:pages] for k, v in c.items()}
    kv = x[:, :2048].view(B, 16, 128)
    cst.store_paged_kv(kv[:, :8], kv[:, 8:], slots, live["k"], live["v"], **kw)
    batch, positions, indptr, indices = table
    cst.store_paged_kv(kv[:, :8], kv[:, 8:], batch, live["k_table"], live["v_table"],
                       positions=positions, kv_indptr=indptr, kv_indices=indices, **kw)
    cst.store_paged_kv(kv[:, :8], kv[:, 8:], slots, live["k_nvfp4"], live["v_nvfp4"],
                       k_scale=global_scales[0], v_scale=global_scales[1],
                       key_block_scale=live["k_nvfp4_scales"],
                       value_block_scale=live["v_nvfp4_scales"], **kw)
    scale = global_scales[0][:1]  # the fp8 RoPE store's per-tensor scale
    for i, (suffix, extra) in enumerate((("", {}), ("_fp8", dict(k_scale=scale, v_scale=scale)))):
        k_cache, v_cache = live[f"k_rope{suffix}"], live[f"v_rope{suffix}"]
        if suffix:
            k_cache, v_cache = (t.view(torch.float8_e4m3fn) for t in (k_cache, v_cache))
        cst.store_paged_kv(kv[:, :8], kv[:, 8:], slots, k_cache, v_cache, query=rope.q,
                           cos_sin_cache=rope.cos_sin, rope_positions=rope.positions,
                           rope_rounding="fp32" if suffix else "input_type",
                           query_out=rope.q_out[i], key_out=rope.k_out[i],
                           **dict(kw, diagnostics=rope.diagnostics), **extra)
    cst.store_index_k_fp8(x[:, 2048:2176], slots, live["index_fp8"], **kw)
    cst.fused_store_cache(x[:, 2176:2624], x[:, 2624:2688], slots, live["v4"], layout="v4",
                          index_k=x[:, 2048:2176], index_cache=live["index_fp8"], **kw)
    cst.fused_store_cache(x[:, 2176:2624], x[:, 2624:2688], slots, live["v41"], layout="v41",
                          index_k=x[:, 2048:2176], index_cache=live["index_fp4"],
                          index_format="fp4", **kw)


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    local_pages = GLOBAL_PAGES // world

    x = torch.zeros(B, 2688, dtype=torch.bfloat16, device=dev)
    slots = torch.full((B,), -1, dtype=torch.int64, device=dev)
    n = torch.zeros(1, dtype=torch.int32, device=dev)
    diag = torch.zeros(2, dtype=torch.int64, device=dev)
    # A FlashInfer-form table yielding the same slots: row i is request i, one page
    # (slot // P) at position slot % P; padded rows get batch index -1 or a live request.
    table = (torch.full((B,), -1, dtype=torch.int32, device=dev),
             torch.zeros(B, dtype=torch.int32, device=dev),
             torch.arange(B + 1, dtype=torch.int32, device=dev),
             torch.zeros(B, dtype=torch.int32, device=dev))
    # NVFP4 global decode scales per head, changed every replay (read at run time)
    global_scales = (torch.ones(8, device=dev), torch.ones(8, device=dev))
    args = (x, slots, table, global_scales, n)
    rope = Rope(dev)
    sharded = caches(local_pages, dev)
    store(sharded, local_pages, *args, rope, diag, rank, world)  # warm-up, then capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        store(sharded, local_pages, *args, rope, diag, rank, world)
    # The unsharded store on rank 0; every rank keeps a Rope for the gathers' shapes.
    full_rope = Rope(dev, (rope.q, rope.cos_sin, rope.positions))
    if rank == 0:
        full = caches(GLOBAL_PAGES, dev)
        full_diag = torch.zeros(2, dtype=torch.int64, device=dev)
        full_graph = torch.cuda.CUDAGraph()
        store(full, GLOBAL_PAGES, *args, full_rope, full_diag, 0, 1)
        with torch.cuda.graph(full_graph):
            store(full, GLOBAL_PAGES, *args, full_rope, full_diag, 0, 1)
    gen = torch.Generator(device=dev)
    gen.manual_seed(2026)  # the same batch on every rank
    checked = 0
    for step, real in enumerate([32, 20, 7, 0, 1, 32, 13]):
        padding = ("zero", "stale", "minus_one")[step % 3]
        fresh = torch.randperm(CAPACITY, device=dev, generator=gen)[:real]
        if real > 4:
            fresh[3] = CAPACITY + 5 + step  # a caller bug: past every rank's pages, counted once
        pad = {"zero": torch.zeros(B - real, dtype=torch.int64, device=dev),
               "stale": slots[real:].clone(),
               "minus_one": torch.full((B - real,), -1, dtype=torch.int64, device=dev)}[padding]
        slots.copy_(torch.cat([fresh, pad]))
        batch, positions, _, indices = table
        batch.copy_(torch.where(torch.arange(B, device=dev) < real,
                                torch.arange(B, device=dev), -1 if padding == "minus_one" else 0))
        positions.copy_(slots.remainder(P))
        indices.copy_(slots.div(P, rounding_mode="floor"))
        for g in global_scales:
            g.copy_(torch.rand(8, device=dev, generator=gen) * 0.05 + 0.002)
        x.copy_(torch.randn(B, 2688, device=dev, generator=gen).bfloat16())
        x[real:] = float("nan")
        rope.q.copy_(torch.randn(rope.q.shape, device=dev, generator=gen).bfloat16())
        rope.q[real:] = float("nan")
        rope.positions.copy_(torch.randint(-3, 2 * MAX_POSITION, (B,), device=dev,
                                           generator=gen))  # padding: any position
        rope.positions[:real] = torch.randint(0, MAX_POSITION, (real,), device=dev,
                                              generator=gen)
        bad_positions = 0
        if real > 2:  # real rows past either end of the cos/sin cache: skipped, counted
            rope.positions[1], rope.positions[2] = MAX_POSITION, -1
            bad_positions = 2 * 2  # each counted by both RoPE stores (one diagnostics tensor)
        for r in (rope, full_rope):
            for t in r.outputs():
                t.fill_(-2.0)
            r.diagnostics.zero_()
        n.fill_(real)
        diag.zero_()
        graph.replay()
        if rank == 0:
            full_diag.zero_()
            full_graph.replay()
        torch.cuda.synchronize()

        # Q and the rotated K: every rank's equal the unsharded store's, byte for byte.
        for i, (mine, want) in enumerate(zip(rope.outputs(), full_rope.outputs())):
            gathered = torch.empty((world,) + tuple(mine.shape), dtype=mine.dtype, device=dev)
            dist.all_gather_into_tensor(gathered.view(-1).view(torch.uint8),
                                        mine.contiguous().view(-1).view(torch.uint8))
            if rank == 0:
                for r in range(world):
                    assert torch.equal(gathered[r].view(torch.int16), want.view(torch.int16)), \
                        (f"RoPE output {i} (Q, Q fp8, K, K fp8), replay {step} (n={real}): rank "
                         f"{r} differs from the unsharded store")
        assert rope.diagnostics[2].item() == bad_positions, \
            f"rank {rank}: replay {step}: out_of_range_positions {rope.diagnostics.tolist()}"
        rope_slots = rope.diagnostics[:2].clone()
        dist.all_reduce(rope_slots)
        if rank == 0:
            assert full_rope.diagnostics.tolist() == [*rope_slots.tolist(), bad_positions], \
                (f"replay {step}: RoPE store's diagnostics {rope_slots.tolist()} (ranks' sum) "
                 f"!= unsharded {full_rope.diagnostics.tolist()}")

        for kind, local in sharded.items():
            assert torch.equal(local[local_pages], torch.full_like(local[local_pages],
                               GUARD if local.dtype == torch.uint8 else 1.5)), \
                f"rank {rank}: {kind}: the guard page after the cache was written"
            gathered = torch.empty((world,) + tuple(local[:local_pages].shape), dtype=local.dtype,
                                   device=dev)
            dist.all_gather_into_tensor(gathered.view(-1).view(torch.uint8),
                                        local[:local_pages].contiguous().view(-1).view(torch.uint8))
            if rank == 0:
                # global page g = local page g // world of rank g % world
                interleaved = gathered.transpose(0, 1).reshape((GLOBAL_PAGES,) + tuple(local.shape[1:]))
                want = full[kind][:GLOBAL_PAGES]
                bad = (interleaved.view(torch.uint8) != want.view(torch.uint8)).nonzero()
                assert bad.numel() == 0, (f"{kind}, replay {step} (n={real}, padding {padding}): "
                                          f"{bad.shape[0]} bytes differ from the unsharded store")
                checked += 1
        total = diag.clone()
        dist.all_reduce(total)
        if rank == 0:
            assert torch.equal(total, full_diag), (f"replay {step}: ranks' diagnostics "
                                                  f"{total.tolist()} != unsharded {full_diag.tolist()}")
        print(f"rank {rank}: replay {step}: n={real:2d}, padding {padding:9s}, diagnostics "
              f"{diag.tolist()}", flush=True)
    dist.barrier()
    if rank == 0:
        print(f"owner_sharding: {world} ranks, 7 replays, {checked} gathered caches equal the "
              f"unsharded store; diagnostics add up; guard pages untouched: OK", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
