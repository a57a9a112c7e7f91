#!/usr/bin/env python3
"""CTest for `attnkit gdn-files` on the CPU backend (standard library only): random inputs written as
raw files, the command run on them, its outputs read back. Checks that every output element is
written and finite, that attnkit's output meets docs/design.md's Gated DeltaNet bound vs the fp32
recurrent reference (and not identical to it: two different algorithms), and that a truncated input
file is refused with exit code 2.

  python3 tests/cli/gdn_files_test.py path/to/attnkit
"""
import array
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

T, H, HV, K, V = 200, 2, 4, 16, 16
LENS = [50, 1, 149]  # a one-token sequence and chunk boundaries at 64 and 128
random.seed(7)


def bf16_bits(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


def write_bf16(path, vals):
    array.array("H", [bf16_bits(x) for x in vals]).tofile(open(path, "wb"))


def unit_rows(n, d):
    out = []
    for _ in range(n):
        r = [random.gauss(0, 1) for _ in range(d)]
        s = math.sqrt(sum(x * x for x in r))
        out += [x / s for x in r]
    return out


def read_f32(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def run(binary, d, extra=()):
    cmd = [binary, "gdn-files", "--dir", d, "--varlen", ",".join(map(str, LENS)), "--heads", str(H),
           "--heads-v", str(HV), "--dim-k", str(K), "--dim-v", str(V), "--backend", "cpu", *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        write_bf16(os.path.join(d, "q.bf16"), unit_rows(T * H, K))
        write_bf16(os.path.join(d, "k.bf16"), unit_rows(T * H, K))
        write_bf16(os.path.join(d, "v.bf16"), [random.gauss(0, 1) for _ in range(T * HV * V)])
        gates = [-math.log1p(math.exp(-random.gauss(0, 1))) for _ in range(T * HV)]
        array.array("f", gates).tofile(open(os.path.join(d, "g.f32"), "wb"))
        write_bf16(os.path.join(d, "beta.bf16"), [1 / (1 + math.exp(-random.gauss(0, 1))) for _ in range(T * HV)])

        r = run(binary, d)
        print(r.stdout + r.stderr)
        assert r.returncode == 0, f"gdn-files failed with {r.returncode}"
        sizes = {"o": T * HV * V, "state": len(LENS) * HV * K * V}
        for what, n in sizes.items():
            out = read_f32(os.path.join(d, f"{what}_attnkit.f32"))
            ref = read_f32(os.path.join(d, f"{what}_ref.f32"))
            assert len(out) == n and len(ref) == n, f"{what}: {len(out)}/{len(ref)} elements, expected {n}"
            assert all(math.isfinite(x) for x in out) and all(math.isfinite(x) for x in ref), f"{what}: non-finite"
            diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(out, ref)))
            norm = math.sqrt(sum(b * b for b in ref))
            assert norm > 0, f"{what}: the reference is all zeros"
            rel = diff / norm
            print(f"{what}: rel_l2 {rel:.3e}")
            assert 0 < rel <= 1e-2, f"{what}: rel_l2 {rel} outside (0, 1e-2]"

        with open(os.path.join(d, "v.bf16"), "r+b") as f:
            f.truncate(T * HV * V * 2 - 2)
        r = run(binary, d)
        assert r.returncode == 2 and "v.bf16" in r.stderr, f"truncated input: exit {r.returncode}, {r.stderr!r}"
    print("gdn_files_test: ok")


if __name__ == "__main__":
    main()
