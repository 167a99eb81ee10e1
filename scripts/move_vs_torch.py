#!/usr/bin/env python3
"""cachestore.move against the PyTorch gather / scatter an engine would otherwise write, on the
GPU, in one process: n pages of a Llama-3-8B layer's K/V cache (P = 16, H = 8, D = 128 bf16, a K
and a V plane: 64 KiB a page) gathered from a 1 GiB cache into a page-first staging buffer
(torch: index_select of K and of V, each into its own contiguous staging tensor) and scattered
back into another cache (torch: index_copy_ of each). Each side captured in a CUDA graph of 32
calls, the two replayed alternately, medians of 15 samples; the ratio is cachestore / torch.

  python scripts/move_vs_torch.py [--sizes 1,32,512,4096]
"""
import argparse
import statistics

import torch

import cachestore.move as mv

P, H, D, PAGES = 16, 8, 128, 16384
NODES = 32


def graph_of(fn):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(NODES):
            fn()
    return g


def time_us(g):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    g.replay()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / NODES


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1,32,512,4096")
    args = parser.parse_args()
    dev = torch.device("cuda")
    k = torch.randn(PAGES, P, H, D, device=dev).to(torch.bfloat16)
    v = torch.randn(PAGES, P, H, D, device=dev).to(torch.bfloat16)
    k2, v2 = torch.zeros_like(k), torch.zeros_like(v)
    cache, other = mv.paged_kv(k, v), mv.paged_kv(k2, v2)
    print(f"{'n':>6} {'gather us (torch)':>20} {'x':>6} {'scatter us (torch)':>20} {'x':>6}")
    for n in (int(s) for s in args.sizes.split(",")):
        ids = torch.randperm(PAGES, device=dev)[:n]
        back = torch.randperm(PAGES, device=dev)[:n]
        buf, stage = mv.staging(cache, n)
        # torch at its best: a contiguous staging tensor a plane, one kernel each.
        tk = torch.empty(n, P, H, D, dtype=torch.bfloat16, device=dev)
        tv = torch.empty_like(tk)
        graphs = {
            "cs_gather": graph_of(lambda: mv.gather_pages(cache, ids, stage)),
            "torch_gather": graph_of(lambda: (torch.index_select(k, 0, ids, out=tk),
                                              torch.index_select(v, 0, ids, out=tv))),
            "cs_scatter": graph_of(lambda: mv.scatter_pages(stage, other, back)),
            "torch_scatter": graph_of(lambda: (k2.index_copy_(0, back, tk),
                                               v2.index_copy_(0, back, tv))),
        }
        samples = {name: [] for name in graphs}
        for _ in range(5):
            for g in graphs.values():
                time_us(g)
        for _ in range(15):
            for name, g in graphs.items():
                samples[name].append(time_us(g))
        med = {name: statistics.median(s) for name, s in samples.items()}
        print(f"{n:>6} {med['cs_gather']:>9.2f} ({med['torch_gather']:>8.2f}) "
              f"{med['cs_gather'] / med['torch_gather']:>6.2f} {med['cs_scatter']:>9.2f} "
              f"({med['torch_scatter']:>8.2f}) {med['cs_scatter'] / med['torch_scatter']:>6.2f}")


if __name__ == "__main__":
    main()
