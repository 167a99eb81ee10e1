#!/usr/bin/env python3
"""A same-build A/B of two launch policies: bench_store's rows of FILTER run alternately under
CACHESTORE_TUNING=A and CACHESTORE_TUNING=B (the policy is read once per process, so each run is
its own process), ROUNDS times each; prints every row's median us and % of copy under A and B
and B / A.

usage: bench_ab.py BENCH_STORE FILTER A B [--rounds N] [--out DIR]
  A, B: CACHESTORE_TUNING values ("" for the built-in policy), e.g.
  bench_ab.py build-gpu/bench/bench_store 'store=paged_kv_nhd/mode=graph/.*/n=262144/' \\
      '' paged_kv.wide_rows=4096
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(bench, flt, tuning, out):
    env = dict(os.environ)
    env.pop("CACHESTORE_TUNING", None)
    if tuning:
        env["CACHESTORE_TUNING"] = tuning
    subprocess.run([bench, f"--benchmark_filter={flt}", f"--benchmark_out={out}",
                    "--benchmark_out_format=json"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        rows = {}
        for b in json.load(f)["benchmarks"]:
            if not b.get("error_occurred"):
                rows[b["name"].split("/iterations")[0]] = (b["us"], b.get("pct_copy"))
        return rows


def median_pct(side):
    """The median % of copy of one row's runs, or '-' where the row has none."""
    values = [x[1] for x in side if x[1] is not None]
    return f"{statistics.median(values):.1f}%" if values else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("filter")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    runs = {"a": [], "b": []}
    for r in range(args.rounds):
        for side in ("a", "b"):
            out = os.path.join(args.out, f"ab-{side}{r}.json")
            runs[side].append(run(args.bench, args.filter, getattr(args, side), out))
    print(f"A: CACHESTORE_TUNING='{args.a}'  B: CACHESTORE_TUNING='{args.b}'  "
          f"({args.rounds} runs each, alternating; us per node, median of the runs' medians)")
    print("| row | A us | A % copy | B us | B % copy | B / A |")
    print("|---|---|---|---|---|---|")
    for name in runs["a"][0]:
        a = [r[name] for r in runs["a"] if name in r]
        b = [r[name] for r in runs["b"] if name in r]
        if not a or not b:
            continue
        ua, ub = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
        print(f"| {name} | {ua:.3f} | {median_pct(a)} | {ub:.3f} | {median_pct(b)} | "
              f"{ub / ua:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
