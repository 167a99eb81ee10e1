#!/usr/bin/env python3
"""Turns bench_store's JSON into markdown tables (a summary per store, every row) and a PNG plot.

usage: bench_report.py BENCH.json --markdown OUT.md [--plot OUT.png] [--previous OLD.json]

--previous: an earlier run (the committed docs/bench-h200.json, before it is replaced): each
row's time over that run's.
"""
import argparse
import json
import sys

SIZES = [1, 8, 32, 128, 512, 4096, 16384, 65536, 262144]
STORES = ["index_k_bf16", "index_k_fp8_amax", "index_k_fp8_pow2", "mla_v4", "mla_v32",
          "mla_v32_amax", "fused_v4_index", "fused_v32_index", "index_k_fp4", "mla_v41",
          "mla_v41_fp4", "fused_v41_fp4_index"]
KV_STORES = ["paged_kv_nhd", "paged_kv_hnd", "paged_kv_nhd_fp8", "paged_kv_hnd_fp8",
             "paged_kv_mla576", "paged_kv_mla576_fp8", "paged_kv_nhd_fp32",
             "paged_kv_nhd_fp32_fp8", "paged_kv_nhd_d100", "paged_kv_paged_attention",
             "paged_kv_paged_attention_fp8", "paged_kv_nhd_page_table"]
BASELINES = ["naive_bf16_scatter", "naive_fp8_composition", "separate_v4_plus_index",
             "separate_v32_plus_index", "naive_kv_two_nodes", "naive_k_one_node", "d2d_copy"]
SMALL = [1, 8, 32, 128, 512]


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        key = dict(part.split("=", 1) for part in b["name"].split("/") if "=" in part)
        rows[(key["store"], key["mode"], key["pdl"], key["slots"], int(key["n"]))] = b
    return data.get("context", {}), rows


def cell(rows, store, mode, pdl, slots, n, field="us"):
    b = rows.get((store, mode, pdl, slots, n))
    return None if b is None else b.get(field)


def table(rows, mode, pdl, slots):
    sizes = [n for n in SIZES if slots == "decode" or n >= 4096]
    out = [f"\n### {mode} timing, PDL {pdl}, {slots} slots: us per store (x_naive for n <= 512, % of copy bandwidth for n >= 65536)\n",
           "| store | " + " | ".join(str(n) for n in sizes) + " |",
           "|---|" + "---|" * len(sizes)]
    for store in STORES + KV_STORES + BASELINES:
        if pdl == "on" and store in ("naive_bf16_scatter", "naive_fp8_composition", "d2d_copy",
                                     "naive_kv_two_nodes", "naive_k_one_node"):
            continue
        vals = []
        for n in sizes:
            us = cell(rows, store, mode, pdl, slots, n)
            if us is None:
                vals.append("-")
                continue
            text = f"{us:.2f}"
            xn = cell(rows, store, mode, pdl, slots, n, "x_naive")
            if n <= 512 and xn is not None:
                text += f" ({xn:.2f}x)"
            if n >= 65536:
                text += f" ({cell(rows, store, mode, pdl, slots, n, 'pct_copy'):.0f}%)"
            vals.append(text)
        out.append(f"| {store} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def summary(rows):
    """The headline per store: graph us and x_naive at n = 1, 32, 512 (decode slots, PDL off and
    on), % of copy at n = 262144 (prefill and decode slots, PDL off)."""
    head = ["store", "n=1 off", "32 off", "512 off", "1 on", "32 on", "512 on",
            "262144 prefill", "262144 decode"]
    lines = ["\n## Summary: us per node (x_naive), % of copy at large n\n",
             "| " + " | ".join(head) + " |", "|---|" + "---|" * (len(head) - 1)]
    for store in STORES + KV_STORES + ["naive_bf16_scatter", "d2d_copy"]:
        cells = []
        for pdl in ("off", "on"):
            for n in (1, 32, 512):
                us = cell(rows, store, "graph", pdl, "decode", n)
                x = cell(rows, store, "graph", pdl, "decode", n, "x_naive")
                cells.append("" if us is None else f"{us:.2f}" + ("" if x is None else f" ({x:.2f}x)"))
        for slots in ("prefill", "decode"):
            p = cell(rows, store, "graph", "off", slots, 262144, "pct_copy")
            cells.append("" if p is None else f"{p:.0f}%")
        lines.append(f"| {store} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def page_table(rows):
    """The page-table slot source's cost over the slot-mapping store, both sampled alternately in
    one row (baseline_us): (page table - mapping) / the lean naive node at n <= 512 (target
    <= 0.05), page table / mapping - 1 at n = 262144 (target <= 2%)."""
    lines = ["\n## Page-table slot source: paged_kv_nhd_page_table vs paged_kv_nhd in one row\n",
             "| PDL | slots | n | page table us | mapping us | cost | target | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for pdl in ("off", "on"):
        for slots, sizes in (("decode", SMALL + [262144]), ("prefill", [262144])):
            for n in sizes:
                b = rows.get(("paged_kv_nhd_page_table", "graph", pdl, slots, n))
                if b is None or "baseline_us" not in b:
                    continue
                us, mapping = b["us"], b["baseline_us"]
                if n <= 512:
                    naive = cell(rows, "paged_kv_nhd_page_table", "graph", pdl, slots, n,
                                 "naive_us")
                    if naive is None:  # PDL rows have no naive node: the PDL-off one
                        naive = cell(rows, "paged_kv_nhd_page_table", "graph", "off", slots, n,
                                     "naive_us")
                    if naive is None:
                        continue
                    cost, limit, text = (us - mapping) / naive, 0.05, "x naive"
                    shown = f"{cost:+.3f}{text}"
                else:
                    cost, limit = us / mapping - 1, 0.02
                    shown = f"{100 * cost:+.1f}%"
                verdict = "met" if cost <= limit else "missed"
                target = "<= 0.05x naive" if n <= 512 else "<= 2%"
                lines.append(f"| {pdl} | {slots} | {n} | {us:.2f} | {mapping:.2f} | {shown} | "
                             f"{target} | {verdict} |")
    return "\n".join(lines)


# The bandwidth targets at n = 262144 (% of the same-run copy, prefill / decode slots; None: no
# target for that slot mode) and the decode-size targets (x_naive, PDL off, at most this).
COPY_TARGETS = {
    "paged_kv_nhd_fp8": (92, 88), "paged_kv_hnd_fp8": (92, 88), "paged_kv_mla576": (92, 88),
    "paged_kv_mla576_fp8": (92, 88),
    "mla_v41_fp4": (80, 80), "index_k_fp4": (80, 80), "index_k_fp8_amax": (None, 85),
    "index_k_fp8_pow2": (None, 85), "fused_v4_index": (92, 85), "mla_v4": (None, 88),
    "mla_v32": (None, 88), "paged_kv_nhd": (93, 93), "paged_kv_hnd": (93, 93),
    "paged_kv_nhd_nvfp4": (75, 75), "paged_kv_nhd_rope": (90, 90), "mla_v41_rope": (75, 75),
    "paged_kv_mla576_rope": (75, 75), "mla_v41_rope_k": (None, 85),
    "mla_v41_rope_k_by_row": (None, 85), "paged_kv_nhd_fp8_per_token_head": (85, 85),
}
# x_baseline (PDL off, at most this) at the decode sizes: NVFP4 and per-token-head fp8 beside
# the fp8 store; the RoPE stores beside the lean two-node pair they replace and beside the store
# without RoPE.
_DECODE = (1, 8, 32, 128, 512)
BASELINE_TARGETS = {"paged_kv_nhd_nvfp4": dict.fromkeys(_DECODE, 1.10),
                    "paged_kv_nhd_fp8_per_token_head": dict.fromkeys(_DECODE, 1.15),
                    "paged_kv_nhd_rope": dict.fromkeys(_DECODE, 0.60),
                    "paged_kv_nhd_rope_vs_store": dict.fromkeys(_DECODE, 1.15),
                    "mla_v41_rope": dict.fromkeys(_DECODE, 0.60),
                    "mla_v41_rope_vs_store": dict.fromkeys(_DECODE, 1.15)}
NAIVE_TARGETS = {"mla_v41": {1: 1.00, 8: 1.00, 32: 1.00, 128: 1.10, 512: 1.10},
                 "mla_v4": {1: 1.10, 8: 1.10, 32: 1.10, 128: 1.10},
                 "mla_v41_rope_k": dict.fromkeys(_DECODE, 1.00),
                 "mla_v41_rope_k_by_row": dict.fromkeys(_DECODE, 1.00)}
# x_naive with PDL on (the PDL row's node over the PDL-off row's naive node), at most this.
NAIVE_PDL_TARGETS = {"mla_v41_rope_k": dict.fromkeys(_DECODE, 0.80),
                     "mla_v41_rope_k_by_row": dict.fromkeys(_DECODE, 0.80)}


def targets(rows, previous):
    """Each bandwidth and decode-size target with its verdict: % of copy at n = 262144 with PDL
    off and on (on within 2% of off), x_naive with PDL off, and (with an earlier run) every other
    decode-size row no more than 0.02x slower in x_naive."""
    lines = ["\n## Targets (met / missed)\n", "| store | target | measured | verdict |",
             "|---|---|---|---|"]

    def add(store, target, measured, ok):
        lines.append(f"| {store} | {target} | {measured} | {'met' if ok else 'missed'} |")

    for store, goals in COPY_TARGETS.items():
        for slots, goal in zip(("prefill", "decode"), goals):
            if goal is None:
                continue
            off = cell(rows, store, "graph", "off", slots, 262144, "pct_copy")
            on = cell(rows, store, "graph", "on", slots, 262144, "pct_copy")
            if off is None:
                continue
            add(store, f"{slots} >= {goal}% of copy, PDL off", f"{off:.0f}%", off >= goal)
            if on is not None:
                add(store, f"{slots} PDL on within 2% of off", f"{on:.0f}%", on >= goal and
                    abs(on - off) <= 0.02 * off)
    for store, limits in NAIVE_TARGETS.items():
        for n, limit in limits.items():
            x = cell(rows, store, "graph", "off", "decode", n, "x_naive")
            if x is not None:
                add(store, f"n = {n}: <= {limit:.2f}x naive, PDL off", f"{x:.2f}x", x <= limit)
    for store, limits in NAIVE_PDL_TARGETS.items():
        for n, limit in limits.items():
            on = cell(rows, store, "graph", "on", "decode", n, "us")
            naive = cell(rows, store, "graph", "off", "decode", n, "naive_us")
            if on is not None and naive:
                add(store, f"n = {n}: <= {limit:.2f}x naive, PDL on", f"{on / naive:.2f}x",
                    on / naive <= limit)
    for store, limits in BASELINE_TARGETS.items():
        for n, limit in limits.items():
            b = rows.get((store, "graph", "off", "decode", n))
            if b is not None and "x_baseline" in b:
                add(store, f"n = {n}: <= {limit:.2f}x its baseline row, PDL off",
                    f"{b['x_baseline']:.2f}x", b["x_baseline"] <= limit)
    if previous is not None:
        worse = []
        for key, b in rows.items():
            store, mode, pdl, slots, n = key
            if mode != "graph" or pdl != "off" or n > 512 or store in NAIVE_TARGETS:
                continue
            old = previous.get(key)
            if old is not None and "x_naive" in b and "x_naive" in old and \
                    b["x_naive"] > old["x_naive"] + 0.02:
                worse.append(f"{store} n={n} {old['x_naive']:.2f}x -> {b['x_naive']:.2f}x")
        add("every other decode-size row", "<= 0.02x slower than the earlier run",
            "; ".join(worse) if worse else "none slower", not worse)
    return "\n".join(lines)


# The stores beside the write pattern of their layout (pattern_* rows: the layout's records
# written from the same input bytes at the same slots, without quantizing).
PATTERNS = {"index_k_fp8_amax": "pattern_index_k_fp8", "index_k_fp8_pow2": "pattern_index_k_fp8",
            "index_k_fp4": "pattern_index_k_fp4", "mla_v4": "pattern_mla_v4",
            "mla_v32": "pattern_mla_v32", "mla_v32_amax": "pattern_mla_v32",
            "mla_v41": "pattern_mla_v41", "mla_v41_fp4": "pattern_mla_v41_fp4"}


def patterns(rows):
    """% of copy at n = 262144 (PDL off) of each store and of its layout's write pattern."""
    lines = ["\n## Layout write patterns: % of copy at n = 262144, PDL off\n",
             "| store | decode: store | decode: pattern | store / pattern | prefill: store | "
             "prefill: pattern | store / pattern |", "|---|---|---|---|---|---|---|"]
    for store, pattern in PATTERNS.items():
        cells = []
        for slots in ("decode", "prefill"):
            a = cell(rows, store, "graph", "off", slots, 262144, "pct_copy")
            b = cell(rows, pattern, "graph", "off", slots, 262144, "pct_copy")
            cells += ["-" if a is None else f"{a:.0f}%", "-" if b is None else f"{b:.0f}%",
                      "-" if a is None or b is None else f"{a / b:.2f}"]
        if any(c != "-" for c in cells):
            lines.append(f"| {store} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(rows, previous):
    """Each graph row's time over the same row of an earlier run: the spread of the ratios per
    store, and the rows beyond 5% either way."""
    lines = ["\n## Against the earlier run (graph rows, this run's us / that run's)\n",
             "| store | rows | min | median | max |", "|---|---|---|---|---|"]
    outliers = []
    for store in STORES + KV_STORES + BASELINES:
        ratios = []
        for key, b in rows.items():
            if key[0] != store or key[1] != "graph":
                continue
            old = previous.get(key)
            if old is not None and old.get("us"):
                ratios.append((b["us"] / old["us"], key))
        if not ratios:
            continue
        vals = sorted(r for r, _ in ratios)
        lines.append(f"| {store} | {len(vals)} | {vals[0]:.3f} | {vals[len(vals) // 2]:.3f} | "
                     f"{vals[-1]:.3f} |")
        outliers += [(r, k) for r, k in ratios if abs(r - 1) > 0.05]
    if outliers:
        lines.append("\nRows beyond 5%: " + "; ".join(
            f"{k[0]} pdl={k[2]} {k[3]} n={k[4]}: {r:.3f}" for r, k in sorted(outliers)))
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(14, 6))
    series = STORES + KV_STORES + BASELINES
    colors = dict(zip(series, (plt.cm.tab20.colors + plt.cm.tab20b.colors)[:len(series)]))
    for ax, pdl in zip(axes, ("off", "on")):
        for store in series:
            pts = [(n, cell(rows, store, "graph", pdl, "decode" if n < 4096 else "prefill", n)) for n in SIZES]
            pts = [(n, us) for n, us in pts if us is not None]
            if pts:
                style = "--" if store in BASELINES else "-"
                ax.plot(*zip(*pts), style, marker="o", markersize=3, label=store, color=colors[store])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows n (decode slots below 4096, prefill from 4096)")
        ax.set_ylabel("us per store (CUDA graph, per node)")
        ax.set_title(f"PDL {pdl}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--plot")
    ap.add_argument("--previous")
    args = ap.parse_args()
    context, rows = load(args.json)
    previous = load(args.previous)[1] if args.previous else None
    md = ["## bench_store results\n"]
    for k in ("date", "gpu", "compute_capability", "driver", "cuda_runtime", "build_arches",
              "kernel_variant", "copy_GBps", "timing"):
        if k in context:
            md.append(f"- {k}: {context[k]}")
    md.append(summary(rows))
    md.append(page_table(rows))
    md.append(targets(rows, previous))
    md.append(patterns(rows))
    if previous is not None:
        md.append(compare(rows, previous))
    for mode in ("graph", "stream"):
        for pdl in ("off", "on"):
            for slots in ("decode", "prefill"):
                md.append(table(rows, mode, pdl, slots))
    with open(args.markdown, "w") as f:
        f.write("\n".join(md) + "\n")
    if args.plot:
        try:
            plot(rows, args.plot)
        except ImportError as e:
            print(f"no plot: {e}", file=sys.stderr)
    print(summary(rows))
    print(page_table(rows))
    print(targets(rows, previous))
    print(patterns(rows))
    if previous is not None:
        print(compare(rows, previous))


if __name__ == "__main__":
    main()
