#!/usr/bin/env python3
"""Same-call A/B of two attnkit builds or switches from `attnkit bench --json` files.

  python3 bench/ab_compare.py --a A1.json [A2.json ...] --b B1.json [B2.json ...] [--names A B]

Each side may have several interleaved runs (A, B, A, B on one machine); a shape's time on a side is
the median over that side's runs. Prints one row per shape (ms of each run, the median, B/A speed:
A ms / B ms, above 1 means B is faster) and the geometric mean of B/A per head dim and mask, so a
change is judged against the run-to-run spread of the same side.
"""
import argparse
import json
import math
import statistics
import sys


def rows(path):
    with open(path) as f:
        d = json.load(f)
    return {r["shape"]: r for r in d.get("rows", []) if r.get("status") == "ok" and r.get("ms")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", nargs="+", required=True, help="attnkit bench --json runs of the baseline")
    ap.add_argument("--b", nargs="+", required=True, help="runs of the candidate")
    ap.add_argument("--names", nargs=2, default=["A", "B"])
    args = ap.parse_args()
    a_runs = [rows(p) for p in args.a]
    b_runs = [rows(p) for p in args.b]
    shapes = [s for s in a_runs[0] if all(s in r for r in a_runs + b_runs)]
    if not shapes:
        print("ab_compare: no shape measured ok on both sides", file=sys.stderr)
        return 1
    na, nb = args.names
    w = max(len(s) for s in shapes)
    print(f"{'shape':<{w}}  {na + ' ms':>{9 * len(a_runs)}}  {nb + ' ms':>{9 * len(b_runs)}}  "
          f"{na + ' med':>9} {nb + ' med':>9} {nb + '/' + na:>7}  kernel ({nb})")
    groups = {}
    for s in shapes:
        ta = [r[s]["ms"] for r in a_runs]
        tb = [r[s]["ms"] for r in b_runs]
        ma, mb = statistics.median(ta), statistics.median(tb)
        ratio = ma / mb
        r0 = b_runs[0][s]
        key = f"d{r0.get('d')} {'causal' if r0.get('causal') else 'full'}"
        if r0.get("hq") != r0.get("hkv"):
            key += " gqa"
        groups.setdefault(key, []).append(ratio)
        print(f"{s:<{w}}  {''.join(f'{t:9.4f}' for t in ta)}  {''.join(f'{t:9.4f}' for t in tb)}  "
              f"{ma:9.4f} {mb:9.4f} {ratio:7.3f}  {r0.get('kernel', '')}")
    allr = [x for v in groups.values() for x in v]
    print()
    for k, v in sorted(groups.items()):
        print(f"geomean {nb}/{na} {k:<16} {math.exp(sum(map(math.log, v)) / len(v)):.3f}  ({len(v)} shapes)")
    print(f"geomean {nb}/{na} {'all':<16} {math.exp(sum(map(math.log, allr)) / len(allr)):.3f}  ({len(allr)} shapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
