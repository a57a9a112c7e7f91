#!/usr/bin/env python3
"""Plots attnkit against the anchors from `compare.py`'s compare.json files: one panel per op
(attention prefill, attention decode, Gated DeltaNet prefill and decode), one bar per shape and
anchor, the speed ratio (anchor time / attnkit time: right of the line at 1, attnkit is faster).
Several files may be given (e.g. one run per shape set); a row is paired only with the anchors of
its own file, so every bar is a same-run ratio. Needs matplotlib.

  python3 bench/plot_results.py OUT.png compare.json [compare.json ...] [--title TEXT]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ATTN_IMPLS, attnkit_key, index_anchors  # noqa: E402

PANELS = (  # op in attnkit's rows, panel title, the anchors' impl names and labels
    ("attention", "Attention prefill", ATTN_IMPLS),
    ("decode", "Attention decode", ATTN_IMPLS),
    ("gdn", "Gated DeltaNet prefill", [("fla-triton", "fla")]),
    ("gdn-decode", "Gated DeltaNet decode", [("fla-triton", "fla")]),
)


def ratios(path):
    """{op: [(shape, {anchor label: ratio})]} of one compare.json, and its device and date."""
    with open(path) as f:
        d = json.load(f)
    anchors = index_anchors(d.get("anchors"))
    out = {}
    for r in d.get("attnkit", []):
        ms = r.get("ms") if r.get("status") == "ok" else None
        if not ms:
            continue
        a = anchors.get(attnkit_key(r), {})
        for op, _, impls in PANELS:
            if r.get("op") != op:
                continue
            got = {}
            for impl, label in impls:
                e = a.get(impl) or {}
                if "error" not in e and isinstance(e.get("ms"), (int, float)) and e["ms"] > 0:
                    got[label] = e["ms"] / ms
            if got:
                out.setdefault(op, []).append((r.get("shape"), got))
    meta = d.get("meta", {})
    return out, meta.get("device", "?"), str(meta.get("date", "?"))[:10]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, devices, dates = {}, set(), set()
    for p in args.inputs:
        got, dev, date = ratios(p)
        devices.add(dev)
        dates.add(date)
        for op, rs in got.items():
            rows.setdefault(op, []).extend(rs)
    panels = [(op, title, impls) for op, title, impls in PANELS if rows.get(op)]
    if not panels:
        sys.exit("plot_results: no row with an anchor in " + ", ".join(args.inputs))
    heights = [max(1.5, 0.22 * len(rows[op]) * len(impls) + 0.8) for op, _, impls in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c"]
    for ax, (op, title, impls) in zip(axes[:, 0], panels):
        rs = rows[op]
        n = len(impls)
        bar = 0.8 / n
        for k, (_, label) in enumerate(impls):
            ys = [i + (k - (n - 1) / 2) * bar for i in range(len(rs))]
            xs = [r.get(label, math.nan) for _, r in rs]
            ax.barh(ys, xs, height=bar, color=colors[k % len(colors)], label="vs " + label)
            for y, x in zip(ys, xs):
                if math.isfinite(x):
                    ax.text(x, y, f" {x:.2f}", va="center", fontsize=6)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rs)))
        ax.set_yticklabels([s for s, _ in rs], fontsize=6)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("speed ratio: anchor time / attnkit time (> 1: attnkit faster)", fontsize=8)
    fig.suptitle(args.title or f"attnkit vs anchors, same run each: {', '.join(sorted(devices))}, "
                 f"{', '.join(sorted(dates))}", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot_results: wrote {args.out} ({sum(len(rows[op]) for op, _, _ in panels)} shapes)")


if __name__ == "__main__":
    main()
