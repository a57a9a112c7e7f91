#!/usr/bin/env python3
"""Profile one prefill shape's kernel under Nsight Compute, attnkit's and cuDNN's (through PyTorch's
SDPA, as bench/anchors_attn.py calls it), and print their key metrics side by side.

ncu runs every kernel alone at its own locked clocks, so the two durations compare the kernels'
work per clock without the power cap or the L2 flush of a timed run: where a timed ratio and this
one differ, clocks (power) or memory state made the difference.

  python3 bench/ncu_prefill.py --attnkit build-gpu/tools/attnkit --out DIR \
      "b8 s2048 h8 d256 full" "b8 s2048 h32 d64 causal" ...

A shape is "b<batch> s<seqlen> h<heads> d<head dim> full|causal" (an FA3 row's name); the attnkit
row is picked from `attnkit bench --shapes fa3` by that text. For each shape DIR gets the two
reports (.ncu-rep) and their raw metric pages as CSV (ncu --page raw; with --sass also attnkit's
per-instruction page). The table lists for each side: duration, SM clock, issue slots busy, tensor
pipe busy, DRAM busy and the top stall reasons (warp cycles per issued instruction).
"""
import argparse
import csv
import io
import os
import re
import subprocess
import sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--attnkit", required=True, help="attnkit CLI binary")
ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the CSV pages")
ap.add_argument("--ncu", default="ncu")
ap.add_argument("--sass", action="store_true",
                help="also write attnkit's per-instruction page (SASS with stall samples) as CSV")
ap.add_argument("shapes", nargs="+")
args = ap.parse_args()

SHAPE = re.compile(r"^b(\d+) s(\d+) h(\d+) d(\d+) (full|causal)$")

CUDNN = """
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
b, s, h, d, causal = {b}, {s}, {h}, {d}, {causal}
q, k, v = (torch.randn(b, h, s, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
"""


def profile(cmd, kernel_regex, skip, rep, sass=False):
    """Runs cmd under ncu (the full section set) for the first kernel matching kernel_regex after
    `skip` matches; returns {metric: (unit, value)} of the raw page."""
    base = [args.ncu, "--target-processes", "all", "--set", "full", "-k", "regex:" + kernel_regex,
            "--launch-skip", str(skip), "--launch-count", "1", "-f", "-o", rep]
    r = subprocess.run(base + cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(rep + ".ncu-rep"):
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-2000:])
        return None
    raw = subprocess.run([args.ncu, "--import", rep + ".ncu-rep", "--page", "raw", "--csv"],
                         capture_output=True, text=True).stdout
    with open(rep + ".raw.csv", "w") as f:
        f.write(raw)
    if sass:
        with open(rep + ".sass.csv", "w") as f:
            subprocess.run([args.ncu, "--import", rep + ".ncu-rep", "--page", "source", "--csv",
                            "--print-source", "sass"], stdout=f, stderr=subprocess.DEVNULL, text=True)
    rows = list(csv.reader(io.StringIO(raw)))
    if len(rows) < 3:
        return None
    names, units, vals = rows[0], rows[1], rows[2]
    return {n: (u, v) for n, u, v in zip(names, units, vals)}


def num(m, name):
    if m is None or name not in m:
        return None
    try:
        return float(m[name][1].replace(",", ""))
    except ValueError:
        return None


def stalls(m):
    """Warp cycles per issued instruction by stall reason, largest first."""
    pre = "smsp__average_warps_issue_stalled_"
    post = "_per_issue_active.ratio"
    out = []
    for n in (m or {}):
        if n.startswith(pre) and n.endswith(post):
            v = num(m, n)
            if v:
                out.append((v, n[len(pre):-len(post)]))
    return sorted(out, reverse=True)


def first(m, *names):
    for n in names:
        v = num(m, n)
        if v is not None:
            return v
    return None


os.makedirs(args.out, exist_ok=True)
print(f"{'shape':28} {'side':8} {'us':>8} {'GHz':>5} {'issue%':>6} {'tensor%':>7} {'dram%':>6}  "
      "stalls (warp cycles per issued instruction)")
for shape in args.shapes:
    mt = SHAPE.match(shape)
    if not mt:
        sys.exit(f"ncu_prefill: shape '{shape}' is not 'b<B> s<S> h<H> d<D> full|causal'")
    b, s, h, d = (int(x) for x in mt.groups()[:4])
    causal = mt.group(5) == "causal"
    tag = shape.replace(" ", "_")
    sides = {
        "attnkit": profile([args.attnkit, "bench", "--shapes", "fa3", "--filter", shape, "--warmup", "1",
                            "--repeats", "1"], "sm90_fwd_kernel", 0, os.path.join(args.out, tag + "_attnkit"),
                           args.sass),
        "cuDNN": profile([sys.executable, "-c", CUDNN.format(b=b, s=s, h=h, d=d, causal=causal)],
                         "cudnn|sdpa|fprop|fmha|flash", 0, os.path.join(args.out, tag + "_cudnn")),
    }
    for side, m in sides.items():
        if m is None:
            print(f"{shape:28} {side:8} (no report)")
            continue
        us = num(m, "gpu__time_duration.sum")
        if us is not None:
            unit = m["gpu__time_duration.sum"][0]
            us *= {"ns": 1e-3, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}.get(unit, 1.0)
        ghz = first(m, "sm__cycles_elapsed.avg.per_second")
        ghz = ghz / 1e9 if ghz and ghz > 1e6 else ghz
        issue = first(m, "smsp__issue_active.avg.pct_of_peak_sustained_active")
        # The tensor pipe's busy cycles (HGMMA included); ncu files it under a section prefix.
        tensor = first(m, *[n for n in m if n.endswith("sm__pipe_tensor_cycles_active_realtime.avg."
                                                      "pct_of_peak_sustained_elapsed")])
        dram = first(m, "dram__cycles_active.avg.pct_of_peak_sustained_elapsed")
        top = ", ".join(f"{n} {v:.2f}" for v, n in stalls(m)[:5])
        f = lambda x, p=1: "-" if x is None else f"{x:.{p}f}"
        print(f"{shape:28} {side:8} {f(us):>8} {f(ghz, 2):>5} {f(issue):>6} {f(tensor):>7} {f(dram):>6}  {top}")
        print(f"{'':37} kernel: {m.get('Kernel Name', ('', '?'))[1][:100]}")
        sys.stdout.flush()
