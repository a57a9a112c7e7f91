"""Host time per call of one decode step through attnkit's Python layers, against the bare call
into the extension (arrays and plan prepared, output preallocated): what an engine pays in Python
per layer and step. Each figure is the median over repeats of the host time to enqueue `--calls`
calls (fewer than the launch queue holds, so the host never waits for the GPU), synchronised
outside the timed loop. torch's own SDPA call is timed the same way for context.

    python3 bench/python_overhead.py [--batch 32] [--keys 4096] [--json out.json]
"""

import argparse
import json
import statistics
import time

import torch

import attnkit
from attnkit import _C
from attnkit import flash_attn_interface as fai
from attnkit import torch_ops


def per_call_us(fn, calls, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((t1 - t0) / calls * 1e6)
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--keys", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--json")
    a = ap.parse_args()

    dt, d, dev = torch.bfloat16, 128, "cuda"
    pages = a.batch * a.keys // a.page
    kc = torch.randn(pages, a.page, a.kv_heads, d, device=dev, dtype=dt)
    vc = torch.randn_like(kc)
    table = torch.randperm(pages, device=dev).view(a.batch, -1).to(torch.int32)
    seqlens = torch.full((a.batch,), a.keys, dtype=torch.int32, device=dev)
    q = torch.randn(a.batch, 1, a.heads, d, device=dev, dtype=dt)
    out = torch.empty_like(q)
    scale = d ** -0.5
    stream = torch_ops.stream(q)
    plan = attnkit.plan_attention(q, kc, vc, page_table=table, seqused_k=seqlens,
                                  max_seqlen_k=a.keys, causal=True)

    def bare():
        _C.attention_forward(q, kc, vc, out, None, None, None, table, seqlens, None, None, None,
                             None, None, 0, a.keys, scale, -1, 0, 0, 0.0, 0, "auto", stream, False, 0,
                             plan)

    def bare_unplanned():
        _C.attention_forward(q, kc, vc, out, None, None, None, table, seqlens, None, None, None,
                             None, None, 0, a.keys, scale, -1, 0, 0, 0.0, 0, "auto", stream, False, 0,
                             None)

    def bare_alloc():  # what any API that returns a new tensor adds: its allocation
        torch.empty_like(out)
        bare()

    def core():
        attnkit.attention(q, kc, vc, page_table=table, seqused_k=seqlens, max_seqlen_k=a.keys,
                          causal=True, out=out, plan=plan)

    def impl():
        torch_ops.attention_impl(q, kc, vc, None, None, table, seqlens, None, None, None, None,
                                 None, 0, a.keys, scale, -1, 0, 0, 0.0, 0, False, True)

    def drop_in():
        fai.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, page_table=table, causal=True)

    def dispatcher():
        torch.ops.attnkit.attention(q, kc, vc, None, None, table, seqlens, None, None, None,
                                    None, 0, a.keys, scale, -1, 0, 0, 0.0, 0, False, True)

    qs = q.transpose(1, 2)
    ks = torch.randn(a.batch, a.kv_heads, 64, d, device=dev, dtype=dt)

    def sdpa():
        torch.nn.functional.scaled_dot_product_attention(qs, ks, ks, enable_gqa=True)

    rows = [
        ("bare: _C.attention_forward, plan given", bare),
        ("_C.attention_forward, planning each call", bare_unplanned),
        ("bare + torch.empty_like(out) (allocation floor)", bare_alloc),
        ("attnkit.attention(out=, plan=): plan/run API", core),
        ("torch_ops.attention_impl (allocates out)", impl),
        ("flash_attn_with_kvcache (drop-in, eager)", drop_in),
        ("torch.ops.attnkit.attention (dispatcher)", dispatcher),
        ("torch SDPA, 64 keys (context)", sdpa),
    ]
    results = {}
    print(f"decode: batch {a.batch}, {a.keys} keys, heads {a.heads}/{a.kv_heads}, page {a.page}, "
          f"bf16; kernel {plan.kernel}; {a.calls} calls x {a.repeats} repeats")
    print(f"{'path':46s} {'median us':>10s} {'min us':>8s} {'over bare':>10s}")
    base = None
    with torch.inference_mode():
        for name, fn in rows:
            med, lo = per_call_us(fn, a.calls, a.repeats)
            base = med if base is None else base
            results[name] = {"median_us": med, "min_us": lo, "over_bare_us": med - base}
            print(f"{name:46s} {med:10.2f} {lo:8.2f} {med - base:10.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "args": vars(a),
                       "kernel": plan.kernel, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
