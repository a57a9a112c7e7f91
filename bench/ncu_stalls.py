#!/usr/bin/env python3
"""Warp-stall samples of one kernel, per SASS instruction or per instruction range, from ncu's
source page (how the Gated DeltaNet kernels' warpgroups were profiled: bench/RESULTS.md).

  ncu --set full --import-source no -k regex:NAME -c 1 -o prof <program>
  ncu -i prof.ncu-rep --page source --csv --print-source sass > src.csv

  python3 bench/ncu_stalls.py src.csv                     # totals by stall reason
  python3 bench/ncu_stalls.py src.csv --list 50           # instructions with >= 50 samples, and
                                                          # every barrier / WGMMA / fence line
  python3 bench/ncu_stalls.py src.csv --ranges "top=2700-2722;vn=2722-2893"
                                                          # samples and instructions per range of
                                                          # instruction indices (as --list prints)

Samples are per warp, taken at the instruction the warp waits to issue: a warp held at a barrier
shows up on the instruction after it. The index of a line is its position in the listing, which is
stable for one binary, so ranges can be read off --list first.
"""
import argparse
import csv
import sys

ALL = "Warp Stall Sampling (All Samples)"
EXEC = "Instructions Executed"
MARKERS = ("BAR.", "WGMMA", "HGMMA", "WARPGROUP", "FENCE", "SYNCS", "MEMBAR")


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # Row 0 names the kernel, row 1 the columns.
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    cols = {h: i for i, h in enumerate(rows[head])}
    for need in (ALL, EXEC, "Source"):
        if need not in cols:
            sys.exit(f"ncu_stalls: no column '{need}' in {path} (was it --page source --csv?)")
    stalls = [h for h in rows[head] if h.startswith("stall_") and "(Not Issued)" not in h]
    return rows[head + 1:], cols, stalls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--list", type=float, metavar="MIN", help="list instructions with at least MIN samples")
    ap.add_argument("--ranges", help="name=lo-hi;... instruction index ranges to total")
    args = ap.parse_args()
    data, cols, stalls = load(args.csv)
    samples = [num(r[cols[ALL]]) for r in data]
    total = sum(samples) or 1.0
    print(f"{len(data)} instructions, {total:.0f} samples")
    by_reason = {s: sum(num(r[cols[s]]) for r in data) for s in stalls}
    for s, v in sorted(by_reason.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {s[6:]:24s} {v:9.0f} {100 * v / total:5.1f}%")
    if args.list is not None:
        for i, r in enumerate(data):
            src = r[cols["Source"]].strip()
            if samples[i] < args.list and not any(m in src for m in MARKERS):
                continue
            top = sorted(((num(r[cols[s]]), s[6:]) for s in stalls), reverse=True)[:2]
            why = " ".join(f"{name}:{v:.0f}" for v, name in top if v > 0)
            print(f"{i:5d} {samples[i]:7.0f} {num(r[cols[EXEC]]):10.0f}  {src[:64]:64s} {why}")
    if args.ranges:
        for part in args.ranges.split(";"):
            name, span = part.split("=")
            lo, hi = (int(x) for x in span.split("-"))
            s = sum(samples[lo:hi])
            execs = [num(r[cols[EXEC]]) for r in data[lo:hi]]
            per = sum(execs) / max(execs[0], 1.0) if execs else 0.0
            print(f"{name:24s} {lo:5d}-{hi:5d} {s:8.0f} samples {100 * s / total:5.1f}%  "
                  f"{per:5.0f} instructions per pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
