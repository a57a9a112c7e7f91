#!/usr/bin/env python3
"""Anchor timings on a GPU machine: what a user would pick instead of attnkit.

Times PyTorch's fused attention backends (FlashAttention-2 inside PyTorch, cuDNN, memory-efficient),
FlexAttention (Triton, compiled) and the machine's ceilings (copy bandwidth, bf16 matmul) on the
FlashAttention-3 paper's shapes (batch * seqlen = 16k tokens, hidden 2048, bf16), GQA 32/8 prefill
and GQA 32/8 decode with a contiguous KV cache.

Prints one line per measurement and writes a JSON list of rows (rewritten after every row, so a run
cut short keeps what it measured). bench/compare.py reads it.

  python3 bench/anchors_attn.py [--out FILE] [--kinds ceiling,prefill,gqa,decode,flex]
                                [--dims 64,128,256] [--seqlens 512,...] [--decode-batches 1,16,64]
                                [--decode-lens 1024,8192,32768]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

KINDS = ("ceiling", "prefill", "gqa", "decode", "flex")


def ints(s):
    return [int(x) for x in s.split(",") if x]


ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "anchors_attn.json"),
                help="JSON output file [default: $OUT/anchors_attn.json, else ./anchors_attn.json]")
ap.add_argument("--kinds", default=",".join(KINDS), help="which groups to run: " + ",".join(KINDS))
ap.add_argument("--dims", type=ints, default=[64, 128, 256], help="prefill head dims")
ap.add_argument("--seqlens", type=ints, default=[512, 1024, 2048, 4096, 8192, 16384],
                help="prefill sequence lengths (batch = 16384 / seqlen)")
ap.add_argument("--gqa-seqlens", type=ints, default=[4096, 16384], help="GQA prefill lengths")
ap.add_argument("--decode-batches", type=ints, default=[1, 16, 64])
ap.add_argument("--decode-lens", type=ints, default=[1024, 8192, 32768])
ap.add_argument("--decode-extra", default="",
                help="more decode rows, comma list of b:L:hq:hkv:d (e.g. 16:8192:64:8:128)")
ap.add_argument("--warmup-ms", type=int, default=25)
ap.add_argument("--rep-ms", type=int, default=100)
args = ap.parse_args()
kinds = set(k for k in args.kinds.split(",") if k)
unknown = kinds - set(KINDS)
if unknown:
    sys.exit(f"anchors_attn: unknown kinds {sorted(unknown)}; valid: {','.join(KINDS)}")

dev = "cuda"
torch.manual_seed(0)
rows = []


def bench(fn):
    return do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median")  # ms


def row(**kw):
    rows.append(kw)
    print(" | ".join(f"{k}={v}" for k, v in kw.items()), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


props = torch.cuda.get_device_properties(0)
row(kind="device", name=props.name, sms=props.multi_processor_count, torch=torch.__version__,
    cudnn=torch.backends.cudnn.version())

if "ceiling" in kinds:
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a))
    row(kind="ceiling", what="d2d copy", GBps=round(2 * n / ms / 1e6, 1))
    del a, b
    m = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    ms = bench(lambda: m @ m)
    row(kind="ceiling", what="bf16 gemm 8192^3", TFLOPs=round(2 * 8192**3 / ms / 1e9, 1))
    del m

backends = {
    "torch-flash(FA2)": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "mem-efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def time_sdpa(name, be, fn):
    with sdpa_kernel(be):
        fn()
        return bench(fn)


# Prefill, FA3 paper setup. FLOPs: 4 * s^2 * d per head, halved for causal.
if "prefill" in kinds:
    for d in args.dims:
        h = 2048 // d
        for s in args.seqlens:
            bsz = max(1, 16384 // s)
            q, k, v = (torch.randn(bsz, h, s, d, dtype=torch.bfloat16, device=dev) for _ in range(3))
            for causal in (False, True):
                flops = 4 * bsz * h * s * s * d / (2 if causal else 1)
                for name, be in backends.items():
                    try:
                        ms = time_sdpa(name, be, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                        row(kind="prefill", impl=name, d=d, s=s, b=bsz, h=h, causal=causal,
                            ms=round(ms, 4), TFLOPs=round(flops / ms / 1e9, 1))
                    except Exception as e:
                        row(kind="prefill", impl=name, d=d, s=s, b=bsz, h=h, causal=causal, error=str(e)[:80])
            del q, k, v

# GQA prefill, Llama-3-8B-like heads.
if "gqa" in kinds:
    for s in args.gqa_seqlens:
        bsz = max(1, 16384 // s)
        q = torch.randn(bsz, 32, s, 128, dtype=torch.bfloat16, device=dev)
        k = torch.randn(bsz, 8, s, 128, dtype=torch.bfloat16, device=dev)
        v = torch.randn_like(k)
        for causal in (False, True):
            flops = 4 * bsz * 32 * s * s * 128 / (2 if causal else 1)
            for name, be in backends.items():
                try:
                    ms = time_sdpa(name, be, lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal, enable_gqa=True))
                    row(kind="prefill-gqa", impl=name, d=128, s=s, b=bsz, hq=32, hkv=8, causal=causal,
                        ms=round(ms, 4), TFLOPs=round(flops / ms / 1e9, 1))
                except Exception as e:
                    row(kind="prefill-gqa", impl=name, d=128, s=s, b=bsz, hq=32, hkv=8, causal=causal,
                        error=str(e)[:80])
        del q, k, v

# Decode: one query token, contiguous bf16 KV; GQA 32/8, d=128 on the batch x length grid, and
# the --decode-extra rows. Bytes: K and V read once.
if "decode" in kinds:
    shapes = [(bsz, L, 32, 8, 128) for bsz in args.decode_batches for L in args.decode_lens]
    shapes += [tuple(int(x) for x in e.split(":")) for e in args.decode_extra.split(",") if e]
    for bsz, L, hq, hkv, d in shapes:
        q = torch.randn(bsz, hq, 1, d, dtype=torch.bfloat16, device=dev)
        k = torch.randn(bsz, hkv, L, d, dtype=torch.bfloat16, device=dev)
        v = torch.randn_like(k)
        kv_bytes = 2 * k.numel() * 2
        for name, be in backends.items():
            try:
                ms = time_sdpa(name, be, lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
                row(kind="decode", impl=name, b=bsz, L=L, hq=hq, hkv=hkv, d=d, ms=round(ms, 4),
                    GBps=round(kv_bytes / ms / 1e6, 1))
            except Exception as e:
                row(kind="decode", impl=name, b=bsz, L=L, hq=hq, hkv=hkv, d=d, error=str(e)[:80])
        del q, k, v

# FlexAttention: causal, sliding window 1024, tanh softcap 50 (Gemma-2 style), d=128, s=8192.
if "flex" in kinds:
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
        s, d, h, bsz = 8192, 128, 16, 2
        q, k, v = (torch.randn(bsz, h, s, d, dtype=torch.bfloat16, device=dev) for _ in range(3))
        causal_mask = lambda b, h, qi, ki: qi >= ki
        window = lambda b, h, qi, ki: (qi >= ki) & (qi - ki < 1024)
        softcap = lambda score, b, h, qi, ki: 50.0 * torch.tanh(score / 50.0)
        for label, mm, sm, frac in (("causal", causal_mask, None, 0.5),
                                    ("window1024", window, None, 1024 / s),
                                    ("causal+softcap", causal_mask, softcap, 0.5)):
            bm = create_block_mask(mm, None, None, s, s)
            fn = lambda: flex(q, k, v, block_mask=bm, score_mod=sm)
            fn()
            ms = bench(fn)
            flops = 4 * bsz * h * s * s * d * frac
            row(kind="flex", impl="flex_attention", case=label, d=d, s=s, b=bsz, h=h, ms=round(ms, 4),
                TFLOPs=round(flops / ms / 1e9, 1))
    except Exception as e:
        row(kind="flex", error=str(e)[:200])

print(f"anchors_attn: wrote {len(rows)} rows to {args.out}", flush=True)
