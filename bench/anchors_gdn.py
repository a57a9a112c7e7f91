#!/usr/bin/env python3
"""Anchor: flash-linear-attention's Triton Gated DeltaNet kernels on a GPU machine.

Needs the fla package importable: install the fla-core wheel there (scripts/gpu_round.sh installs
any wheels carried in .whl/), or point FLA_PATH at a folder that holds the fla package.
Shapes follow Qwen3-Next's linear-attention layers: 16 q/k heads, 32 v heads, K = V = 128, bf16.
Times the whole chunked forward, its stages (chunk_fwd_o is the stage the seed kernel implements)
and the one-token recurrent decode step.

Prints one line per measurement and writes a JSON list of rows (rewritten after every row);
bench/compare.py reads it. Exits non-zero if fla cannot be imported (after writing that error).

  python3 bench/anchors_gdn.py [--out FILE] [--cases B1_T4k,B1_T16k,B1_T64k,varlen8_32k]
                               [--heads 16/32,2/8,4/16,16/64]
                               [--decode-batches 1,32,256]
"""
import argparse
import json
import math
import os
import sys

if os.environ.get("FLA_PATH"):
    sys.path.insert(0, os.environ["FLA_PATH"])
import torch
import torch.nn.functional as F
from triton.testing import do_bench

CASES = {"B1_T4k": (4096, None), "B1_T16k": (16384, None), "B1_T64k": (65536, None),
         "varlen8_32k": (32768, [1000, 7000, 3000, 5000, 2768, 8000, 4000, 2000])}

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "anchors_gdn.json"),
                help="JSON output file [default: $OUT/anchors_gdn.json, else ./anchors_gdn.json]")
ap.add_argument("--cases", default=",".join(CASES), help="prefill cases: " + ",".join(CASES))
ap.add_argument("--decode-batches", default="1,32,256", help="decode batch sizes ('' for none)")
ap.add_argument("--heads", default="16/32",
                help="q/k heads / value heads of the prefill cases, a comma list (e.g. 2/8,4/16)")
args = ap.parse_args()
cases = [c for c in args.cases.split(",") if c]
for c in cases:
    if c not in CASES:
        sys.exit(f"anchors_gdn: unknown case {c}; valid: {','.join(CASES)}")
decode_batches = [int(x) for x in args.decode_batches.split(",") if x]

dev = "cuda"
rows = []


def row(**kw):
    rows.append(kw)
    print(" | ".join(f"{k}={v}" for k, v in kw.items()), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


def bench(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")  # ms


try:
    from fla.ops.common.chunk_delta_h import chunk_gated_delta_rule_fwd_h
    from fla.ops.common.chunk_o import chunk_fwd_o
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.gated_delta_rule.chunk_fwd import chunk_gated_delta_rule_fwd_intra
    from fla.ops.utils import chunk_local_cumsum
except Exception as e:
    row(kind="gdn-fwd", error="import: " + repr(e)[:300])
    sys.exit(1)

H, HV, K, V = 16, 32, 128, 128
HEADS = [tuple(int(x) for x in hh.split("/")) for hh in args.heads.split(",") if hh]


def make(total_tokens, seqlens=None):
    q = F.normalize(torch.randn(1, total_tokens, H, K, device=dev), dim=-1).bfloat16()
    k = F.normalize(torch.randn(1, total_tokens, H, K, device=dev), dim=-1).bfloat16()
    v = torch.randn(1, total_tokens, HV, V, device=dev).bfloat16()
    g = F.logsigmoid(torch.randn(1, total_tokens, HV, device=dev)).float()
    beta = torch.rand(1, total_tokens, HV, device=dev).sigmoid().bfloat16()
    cu = None
    if seqlens is not None:
        cu = torch.tensor([0] + list(torch.tensor(seqlens).cumsum(0).tolist()), device=dev, dtype=torch.int32)
    return q, k, v, g, beta, cu


for (H, HV), label in [(hh, c) for hh in HEADS for c in cases]:
    T, sl = CASES[label]
    try:
        q, k, v, g, beta, cu = make(T, sl)
        scale = K ** -0.5
        fn = lambda: chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, output_final_state=True,
                                            cu_seqlens=cu)
        fn()
        ms = bench(fn)
        # FLOP estimate of the chunked algorithm (BT = 64), per chunk per value head: kkt 2*BT^2*K,
        # solve ~BT^3/3, w,u 2*BT^2*(K+V), state recurrence 4*BT*K*V, output 2*BT^2*(K+V) + 2*BT*K*V.
        BT = 64
        nchunks = sum(math.ceil(n / BT) for n in (sl or [T]))
        per = 2 * BT * BT * K + BT**3 / 3 + 2 * BT * BT * (K + V) + 4 * BT * K * V + 2 * BT * BT * (K + V) + 2 * BT * K * V
        flops = per * nchunks * HV
        row(kind="gdn-fwd", impl="fla-triton", case=label, T=T, H=H, HV=HV, varlen=sl is not None,
            n_seqs=len(sl) if sl else 1, ms=round(ms, 4), Mtok_s=round(T / ms / 1e3, 2),
            TFLOPs_est=round(flops / ms / 1e9, 1))
        gc = chunk_local_cumsum(g, chunk_size=64, cu_seqlens=cu)
        w, u, A = chunk_gated_delta_rule_fwd_intra(k=k, v=v, g=gc, beta=beta, cu_seqlens=cu, chunk_size=64)
        h, v_new, _ = chunk_gated_delta_rule_fwd_h(k=k, w=w, u=u, g=gc, cu_seqlens=cu, chunk_size=64)
        fo = lambda: chunk_fwd_o(q=q, k=k, v=v_new, h=h, g=gc, scale=scale, cu_seqlens=cu, chunk_size=64)
        fo()
        ms_o = bench(fo)
        bytes_o = (q.numel() + k.numel() + v_new.numel() + h.numel() + T * HV * V) * 2 + gc.numel() * 4
        row(kind="gdn-chunk_o", impl="fla-triton", case=label, T=T, H=H, HV=HV,
            ms=round(ms_o, 4), GBps=round(bytes_o / ms_o / 1e6, 1))
        fh = lambda: chunk_gated_delta_rule_fwd_h(k=k, w=w, u=u, g=gc, cu_seqlens=cu, chunk_size=64)
        ms_h = bench(fh)
        fi = lambda: chunk_gated_delta_rule_fwd_intra(k=k, v=v, g=gc, beta=beta, cu_seqlens=cu, chunk_size=64)
        ms_i = bench(fi)
        row(kind="gdn-stages", case=label, T=T, H=H, HV=HV, intra_ms=round(ms_i, 4),
            h_ms=round(ms_h, 4), o_ms=round(ms_o, 4))
        del q, k, v, g, beta, h, v_new, w, u, A
    except Exception as e:
        row(kind="gdn-fwd", case=label, T=T, H=H, HV=HV, error=repr(e)[:300])

# Decode: one token per sequence, recurrent state update. Bytes: the state read and written.
H, HV = 16, 32
if decode_batches:
    try:
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
        for B in decode_batches:
            q = F.normalize(torch.randn(B, 1, H, K, device=dev), dim=-1).bfloat16()
            k = F.normalize(torch.randn(B, 1, H, K, device=dev), dim=-1).bfloat16()
            v = torch.randn(B, 1, HV, V, device=dev).bfloat16()
            g = F.logsigmoid(torch.randn(B, 1, HV, device=dev)).float()
            beta = torch.rand(B, 1, HV, device=dev).bfloat16()
            h0 = torch.randn(B, HV, K, V, device=dev).float()
            fn = lambda: fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=K ** -0.5, initial_state=h0,
                                                          output_final_state=True)
            fn()
            ms = bench(fn)
            state_bytes = 2 * h0.numel() * 4
            row(kind="gdn-decode", impl="fla-triton", B=B, ms=round(ms, 4),
                state_GBps=round(state_bytes / ms / 1e6, 1))
    except Exception as e:
        row(kind="gdn-decode", error=repr(e)[:300])

print(f"anchors_gdn: wrote {len(rows)} rows to {args.out}", flush=True)
