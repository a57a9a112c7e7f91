#!/usr/bin/env python3
"""attnkit side by side with what a user would pick instead, in one run on one machine.

Runs `attnkit bench --json` on the chosen shape sets, then the anchor scripts (PyTorch SDPA's cuDNN
and FlashAttention-2 backends; flash-linear-attention for Gated DeltaNet) on the matching shapes,
and prints one table per op: attnkit's time and rate next to each anchor's, and the speed ratio
(anchor time / attnkit time: above 1 means attnkit is faster). A shape either side could not run
shows "n/a". Writes compare.json (every row, both sides) and compare.md (the tables) to --out.

  python3 bench/compare.py [--shapes default,fa3,decode,gdn] [--out DIR] [--attnkit PATH]
                           [--anchors-json FILE ...] [--no-anchors]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SETS = ("default", "fa3", "decode", "fp8kv", "gdn", "gdn-serving")
ATTN_IMPLS = [("cudnn", "cuDNN"), ("torch-flash(FA2)", "FA2")]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, logfile, timeout):
    """Runs cmd with output teed to logfile; returns the exit code (124 on timeout)."""
    log("compare: running " + " ".join(cmd))
    t0 = time.time()
    with open(logfile, "w") as f:
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in p.stdout:
                f.write(line)
                sys.stderr.write("  " + line)
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = 124
        except OSError as e:
            f.write(f"could not start: {e}\n")
            rc = 127
    log(f"compare: exit {rc} after {time.time() - t0:.0f} s (log: {logfile})")
    return rc


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        log(f"compare: could not read {path}: {e}")
        return None


def anchor_args(sets):
    """Anchor-script arguments covering the shapes of the chosen sets (None: nothing to run)."""
    attn, gdn = None, None
    kinds, dims, seqlens, dec_b, dec_l, dec_extra = set(), set(), set(), set(), set(), []
    if "fa3" in sets:
        kinds |= {"prefill", "gqa"}
        dims |= {64, 128, 256}
        seqlens |= {512, 1024, 2048, 4096, 8192, 16384}
    if "default" in sets:
        kinds |= {"prefill", "decode"}
        dims.add(128)
        seqlens.add(4096)
        dec_b |= {1, 16}
        dec_l.add(8192)
    if "decode" in sets:
        kinds.add("decode")
        dec_b |= {1, 16, 64}
        dec_l |= {1024, 8192, 32768}
        # attnkit bench's extra decode rows at batch 16 x 8k: GQA 8/8, 64/8, 128/8, d64 and d256
        dec_extra = ["16:8192:8:8:128", "16:8192:64:8:128", "16:8192:128:8:128",
                     "16:8192:32:8:64", "16:8192:32:8:256"]
    if "fp8kv" in sets:  # attnkit's bf16 and e4m3 caches beside the anchors' bf16 decode
        kinds.add("decode")
        dec_b |= {1, 16, 64}
        dec_l |= {8192, 32768}
    if kinds:
        attn = ["--kinds", ",".join(sorted(kinds | {"ceiling"}))]
        if dims:
            attn += ["--dims", ",".join(map(str, sorted(dims))), "--seqlens", ",".join(map(str, sorted(seqlens)))]
        if dec_b:
            attn += ["--decode-batches", ",".join(map(str, sorted(dec_b))),
                     "--decode-lens", ",".join(map(str, sorted(dec_l)))]
        if dec_extra:
            attn += ["--decode-extra", ",".join(dec_extra)]
    if "gdn" in sets:
        gdn = []
    elif "default" in sets:
        gdn = ["--cases", "B1_T16k", "--decode-batches", "32,256"]
    if "gdn-serving" in sets:  # bench.cpp's gdn-serving shapes
        heads = "16/32,2/8,4/16,16/64"
        if gdn is None:
            gdn = ["--cases", "B1_T16k,B1_T64k,varlen8_32k", "--decode-batches", ""]
        gdn += ["--heads", heads]
    return attn, gdn


def index_anchors(rows):
    """Anchor rows by the shape key they are matched on."""
    idx = {}
    for r in rows or []:
        k = r.get("kind")
        key = None
        if k == "prefill":
            key = ("prefill", r.get("d"), r.get("s"), r.get("b"), r.get("h"), r.get("h"), r.get("causal"))
        elif k == "prefill-gqa":
            s = r.get("s")
            b = r.get("b", 16384 // s if s else None)
            key = ("prefill", r.get("d"), s, b, r.get("hq"), r.get("hkv"), r.get("causal"))
        elif k == "decode":
            key = ("decode", r.get("b"), r.get("L"), r.get("hq", 32), r.get("hkv", 8), r.get("d", 128))
        elif k == "gdn-fwd":
            varlen = r.get("varlen", "varlen" in str(r.get("case", "")))
            key = ("gdn", r.get("T"), bool(varlen), r.get("H", 16), r.get("HV", 32))
        elif k == "gdn-decode":
            key = ("gdn-decode", r.get("B"))
        if key is not None and "impl" in r:
            idx.setdefault(key, {})[r["impl"]] = r
    return idx


def attnkit_key(r):
    op = r.get("op")
    if op == "attention":
        return ("prefill", r.get("d"), r.get("sq"), r.get("b"), r.get("hq"), r.get("hkv"), r.get("causal"))
    if op == "decode":
        return ("decode", r.get("b"), r.get("sk"), r.get("hq"), r.get("hkv"), r.get("d", 128))
    if op == "gdn":
        return ("gdn", r.get("T"), bool(r.get("varlen")), r.get("H", 16), r.get("HV", 32))
    if op == "gdn-decode":
        return ("gdn-decode", r.get("b"))
    return None


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def f(x, nd=3):
    x = num(x)
    if x is None:
        return "n/a"
    if nd == "rate":
        nd = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 1 else 4
    return f"{x:.{nd}f}"


def ratio(anchor_ms, ours_ms):
    a, o = num(anchor_ms), num(ours_ms)
    return f"{a / o:.2f}x" if a and o else "n/a"


def anchor_ms(entry):
    return None if entry is None or "error" in entry else entry.get("ms")


def table(headers, rows):
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(cells)) + " |"
    out = [line(headers), "|" + "|".join("-" * (x + 2) for x in w) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def status_of(r):
    s = r.get("status", "")
    return "ok" if s == "ok" else (s[:60] + ("..." if len(s) > 60 else ""))


def build_tables(ours, anchors):
    groups = {"attention": [], "decode": [], "gdn": [], "gdn-decode": []}
    for r in ours:
        groups.setdefault(r.get("op"), []).append(r)
    out = []
    if groups["attention"]:
        rows = []
        for r in groups["attention"]:
            a = anchors.get(attnkit_key(r), {})
            ms = r.get("ms") if r.get("status") == "ok" else None
            cells = [r.get("shape"), f(ms), f(r.get("tflops") if ms else None, "rate")]
            for impl, _ in ATTN_IMPLS:
                e = a.get(impl)
                cells += [f(anchor_ms(e)), f(e.get("TFLOPs") if anchor_ms(e) else None, "rate") if e else "n/a"]
            cells += [ratio(anchor_ms(a.get(impl)), ms) for impl, _ in ATTN_IMPLS]
            cells += [r.get("kernel"), status_of(r)]
            rows.append(cells)
        hdr = ["shape", "attnkit ms", "TFLOP/s"]
        for _, label in ATTN_IMPLS:
            hdr += [f"{label} ms", f"{label} TFLOP/s"]
        hdr += [f"vs {label}" for _, label in ATTN_IMPLS] + ["kernel", "status"]
        out.append(("Attention prefill (bf16; anchors' TFLOP/s count causal as exactly half)", hdr, rows))
    if groups["decode"]:
        rows = []
        for r in groups["decode"]:
            a = anchors.get(attnkit_key(r), {})
            ms = r.get("ms") if r.get("status") == "ok" else None
            fl = r.get("floor_ms") if ms else None
            cells = [r.get("shape"), f(ms, 4), f(r.get("gbps") if ms else None, "rate"), f(fl, 4),
                     f(100 * fl / ms, 1) if num(fl) else "n/a"]
            for impl, _ in ATTN_IMPLS:
                e = a.get(impl)
                cells += [f(anchor_ms(e), 4), f(e.get("GBps") if anchor_ms(e) else None, "rate") if e else "n/a"]
            cells += [ratio(anchor_ms(a.get(impl)), ms) for impl, _ in ATTN_IMPLS]
            # The best ratio any kernel could reach against cuDNN here: cuDNN's time over the floor.
            cells += [ratio(anchor_ms(a.get(ATTN_IMPLS[0][0])), fl)]
            cells += [r.get("kernel"), status_of(r)]
            rows.append(cells)
        hdr = ["shape", "attnkit ms", "GB/s", "floor ms", "% floor"]
        for _, label in ATTN_IMPLS:
            hdr += [f"{label} ms", f"{label} GB/s"]
        hdr += [f"vs {label}" for _, label in ATTN_IMPLS] + [f"floor vs {ATTN_IMPLS[0][1]}", "kernel", "status"]
        out.append(("Decode (K+V bytes read; anchors: PyTorch SDPA on a contiguous KV cache; floor: a kernel "
                    "that only reads the same K+V bytes, timed alike, and % floor = floor / attnkit time)",
                    hdr, rows))
    for op, unit, key_ours, key_fla in (("gdn", "TFLOP/s (est.)", "tflops", "TFLOPs_est"),
                                        ("gdn-decode", "state GB/s", "gbps", "state_GBps")):
        if not groups[op]:
            continue
        rows = []
        for r in groups[op]:
            e = anchors.get(attnkit_key(r), {}).get("fla-triton")
            ms = r.get("ms") if r.get("status") == "ok" else None
            rows.append([r.get("shape"), f(ms, 4), f(r.get(key_ours) if ms else None, "rate"),
                         f(anchor_ms(e), 4), f(e.get(key_fla) if anchor_ms(e) else None, "rate") if e else "n/a",
                         ratio(anchor_ms(e), ms), r.get("kernel"), status_of(r)])
        title = "Gated DeltaNet chunked forward" if op == "gdn" else "Gated DeltaNet decode step"
        out.append((title + " (anchor: flash-linear-attention, Triton)",
                    ["shape", "attnkit ms", unit, "fla ms", f"fla {unit}", "vs fla", "kernel", "status"], rows))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="default", help="comma list of: " + ", ".join(SETS))
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "out", "compare"),
                    help="folder for JSON, logs and tables [default: $OUT, else out/compare]")
    ap.add_argument("--attnkit", default=os.path.join(ROOT, "build", "tools", "attnkit"),
                    help="the attnkit binary [default: build/tools/attnkit]")
    ap.add_argument("--backend", default="auto", help="attnkit bench --backend")
    ap.add_argument("--repeats", type=int, default=None, help="attnkit bench --repeats")
    ap.add_argument("--attnkit-json", default=None,
                    help="use this `attnkit bench --json` file instead of running attnkit")
    ap.add_argument("--anchors-json", nargs="*", default=None,
                    help="use these anchor JSON files instead of running the anchor scripts")
    ap.add_argument("--no-anchors", action="store_true", help="attnkit only")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds allowed to each program")
    args = ap.parse_args()
    sets = [s for s in args.shapes.replace(" ", ",").split(",") if s]
    bad = [s for s in sets if s not in SETS]
    if bad:
        sys.exit(f"compare: unknown shape sets {bad}; valid: {', '.join(SETS)}")
    os.makedirs(args.out, exist_ok=True)
    failures = []

    # attnkit
    if args.attnkit_json:
        ours_json = args.attnkit_json
    else:
        ours_json = os.path.join(args.out, "attnkit_bench.json")
        if os.path.exists(ours_json):
            os.remove(ours_json)
        cmd = [args.attnkit, "bench", "--shapes", ",".join(sets), "--backend", args.backend, "--json", ours_json]
        if args.repeats:
            cmd += ["--repeats", str(args.repeats)]
        if run(cmd, os.path.join(args.out, "attnkit_bench.log"), args.timeout) != 0:
            failures.append("attnkit bench")
    doc = load(ours_json) or {}
    ours = doc.get("rows", [])
    meta = doc.get("meta", {})

    # anchors
    anchor_rows = []
    if args.anchors_json is not None:
        for p in args.anchors_json:
            anchor_rows += load(p) or []
        anchor_source = "stored: " + ", ".join(args.anchors_json)
    elif args.no_anchors:
        anchor_source = "none (--no-anchors)"
    else:
        anchor_source = "run now, same machine"
        attn_args, gdn_args = anchor_args(sets)
        for name, extra in (("anchors_attn", attn_args), ("anchors_gdn", gdn_args)):
            if extra is None:
                continue
            out_json = os.path.join(args.out, name + ".json")
            if os.path.exists(out_json):
                os.remove(out_json)
            rc = run([sys.executable, os.path.join(HERE, name + ".py"), "--out", out_json] + extra,
                     os.path.join(args.out, name + ".log"), args.timeout)
            if rc != 0:
                failures.append(name)
            anchor_rows += load(out_json) or []
    anchors = index_anchors(anchor_rows)

    device = meta.get("device", "?")
    anchor_dev = next((r.get("name") for r in anchor_rows if r.get("kind") == "device"), None)
    head = [f"attnkit {meta.get('version', '?')} on {device} ({meta.get('timing', '?')}, "
            f"{meta.get('repeats', '?')} repeats); shape sets: {', '.join(sets)}",
            f"anchors: {anchor_source}" + (f" on {anchor_dev}" if anchor_dev else "")]
    if not meta.get("gpu", False):
        head.append("note: attnkit ran on the CPU (no GPU found): its shapes are the small CPU ones, "
                    "and any ratio to a GPU anchor means nothing")
    if anchor_dev and device != anchor_dev and meta.get("gpu"):
        head.append(f"note: attnkit and anchors ran on different devices ({device} vs {anchor_dev})")
    ceilings = [r for r in anchor_rows if r.get("kind") == "ceiling"]
    for c in ceilings:
        head.append(f"ceiling: {c.get('what')}: " + (f"{c['GBps']} GB/s" if "GBps" in c else f"{c.get('TFLOPs')} TFLOP/s"))
    head.append("'vs X' = X's time / attnkit's time (above 1: attnkit is faster); n/a = not run or unsupported")

    md = ["# attnkit vs anchors", ""] + [f"- {h}" for h in head] + [""]
    print("\n".join(head))
    for title, hdr, rows in build_tables(ours, anchors):
        t = table(hdr, rows)
        print(f"\n{title}\n{t}")
        md += [f"## {title}", "", t, ""]
    if not ours:
        print("\n(no attnkit results)")
    if failures:
        print("\nfailed steps: " + ", ".join(failures))
        md += ["failed steps: " + ", ".join(failures)]
    with open(os.path.join(args.out, "compare.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")
    with open(os.path.join(args.out, "compare.json"), "w") as fh:
        json.dump({"meta": meta, "sets": sets, "anchor_source": anchor_source, "attnkit": ours,
                   "anchors": anchor_rows, "failures": failures}, fh, indent=1)
    log(f"compare: wrote {args.out}/compare.md and compare.json")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
