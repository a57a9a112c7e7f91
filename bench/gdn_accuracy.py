#!/usr/bin/env python3
"""Gated DeltaNet accuracy, attnkit and flash-linear-attention on the same inputs.

For each case: makes the inputs the benchmark uses (bench/anchors_gdn.py's distributions: unit-norm
q/k, g = logsigmoid(x), beta in (0.5, 0.73)), writes them as raw files, runs `attnkit gdn-files`
(attnkit's chunked forward on the GPU, and the token-by-token recurrent definition in fp32 on the
CPU: the reference), then fla's chunk_gated_delta_rule on the same tensors. Prints, per case, the
relative L2 error and the largest absolute error of each implementation's output and final state
against that reference, and writes them as JSON.

  python3 bench/gdn_accuracy.py --attnkit build-gpu/tools/attnkit [--cases B1_T16k,varlen8_32k,B1_T64k]
                                [--out DIR]

Exits non-zero if attnkit fails, if fla cannot be imported, or if attnkit's error exceeds
docs/design.md's Gated DeltaNet bound (relative L2 1e-2).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

if os.environ.get("FLA_PATH"):
    sys.path.insert(0, os.environ["FLA_PATH"])
import numpy as np
import torch
import torch.nn.functional as F

CASES = {"B1_T4k": [4096], "B1_T16k": [16384], "B1_T64k": [65536],
         "varlen8_32k": [1000, 7000, 3000, 5000, 2768, 8000, 4000, 2000]}
H, HV, K, V = 16, 32, 128, 128
REL_L2_BOUND = 1e-2  # docs/design.md, Gated DeltaNet

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--attnkit", default="build/tools/attnkit", help="the attnkit binary")
ap.add_argument("--cases", default="B1_T16k,varlen8_32k,B1_T64k", help="cases: " + ",".join(CASES))
ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for gdn_accuracy.json")
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()
for c in args.cases.split(","):
    if c not in CASES:
        sys.exit(f"gdn_accuracy: unknown case {c}; valid: {','.join(CASES)}")

try:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
except Exception as e:
    sys.exit(f"gdn_accuracy: cannot import fla: {e!r}")

dev = "cuda"


def err(out, ref):
    out, ref = out.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    if not np.all(np.isfinite(out)):
        return {"rel_l2": float("nan"), "max_abs": float("nan")}
    return {"rel_l2": float(np.linalg.norm(out - ref) / np.linalg.norm(ref)),
            "max_abs": float(np.abs(out - ref).max())}


def save(t, path):
    t.contiguous().cpu().view(torch.int16 if t.dtype == torch.bfloat16 else t.dtype).numpy().tofile(path)


rows, failed = [], False
torch.manual_seed(args.seed)
for label in args.cases.split(","):
    lens = CASES[label]
    T = sum(lens)
    q = F.normalize(torch.randn(1, T, H, K, device=dev), dim=-1).bfloat16()
    k = F.normalize(torch.randn(1, T, H, K, device=dev), dim=-1).bfloat16()
    v = torch.randn(1, T, HV, V, device=dev).bfloat16()
    g = F.logsigmoid(torch.randn(1, T, HV, device=dev)).float()
    beta = torch.rand(1, T, HV, device=dev).sigmoid().bfloat16()
    cu = None if len(lens) == 1 else torch.tensor([0] + np.cumsum(lens).tolist(), device=dev, dtype=torch.int32)
    with tempfile.TemporaryDirectory() as d:
        for name, t in (("q.bf16", q), ("k.bf16", k), ("v.bf16", v), ("g.f32", g), ("beta.bf16", beta)):
            save(t, os.path.join(d, name))
        shape = ["--seqlen", str(T)] if len(lens) == 1 else ["--varlen", ",".join(map(str, lens))]
        cmd = [args.attnkit, "gdn-files", "--dir", d, "--heads", str(H), "--heads-v", str(HV)] + shape
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print(f"gdn_accuracy: {label}: attnkit failed ({r.returncode}): {r.stderr.strip()}", flush=True)
            failed = True
            continue
        load = lambda n: np.fromfile(os.path.join(d, n), dtype=np.float32)
        o_ak, s_ak, o_ref, s_ref = (load(n) for n in ("o_attnkit.f32", "state_attnkit.f32", "o_ref.f32",
                                                      "state_ref.f32"))
    o_fla, s_fla = chunk_gated_delta_rule(q, k, v, g, beta, scale=K ** -0.5, output_final_state=True,
                                          cu_seqlens=cu)
    o_fla = o_fla.float().cpu().numpy()
    s_fla = s_fla.float().cpu().numpy()
    row = {"case": label, "T": T, "n_seqs": len(lens),
           "attnkit_o": err(o_ak, o_ref), "attnkit_state": err(s_ak, s_ref),
           "fla_o": err(o_fla, o_ref), "fla_state": err(s_fla, s_ref)}
    rows.append(row)
    ok = row["attnkit_o"]["rel_l2"] <= REL_L2_BOUND and row["attnkit_state"]["rel_l2"] <= REL_L2_BOUND
    failed |= not ok
    print(f"{label}: attnkit o rel_l2 {row['attnkit_o']['rel_l2']:.3e} state {row['attnkit_state']['rel_l2']:.3e}"
          f" | fla o rel_l2 {row['fla_o']['rel_l2']:.3e} state {row['fla_state']['rel_l2']:.3e}"
          f"{'' if ok else '  (attnkit above the docs/design.md bound)'}", flush=True)

os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "gdn_accuracy.json"), "w") as f:
    json.dump(rows, f, indent=1)

print("\n## Gated DeltaNet accuracy vs the fp32 recurrent reference (same inputs; rel L2 / max abs)\n")
print("| case | attnkit o | fla o | attnkit final state | fla final state |")
print("|---|---|---|---|---|")
fmt = lambda e: f"{e['rel_l2']:.2e} / {e['max_abs']:.2e}"
for r in rows:
    print(f"| {r['case']} | {fmt(r['attnkit_o'])} | {fmt(r['fla_o'])} | {fmt(r['attnkit_state'])} | "
          f"{fmt(r['fla_state'])} |")
sys.exit(1 if failed else 0)
