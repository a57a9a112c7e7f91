#!/usr/bin/env python3
"""Compares the SASS of two cuobjdump -sass listings function by function.

Instructions are compared as text with addresses and encodings stripped, so a refactor that
leaves the machine code alone reports every function SAME. Exit status 1 if any function differs,
is missing or is new.
Usage: sass_compare.py BEFORE.sass AFTER.sass
"""
import re
import sys


def functions(path):
    out, cur, body = {}, None, []
    with open(path) as f:
        for line in f:
            m = re.search(r"Function : (\S+)", line)
            if m:
                if cur:
                    out[cur] = body
                cur, body = m.group(1), []
                continue
            if cur is None:
                continue
            ins = re.sub(r"/\*[0-9a-f]{4,}\*/", "", line)
            ins = re.sub(r"/\*\s*0x[0-9a-f]+\s*\*/", "", ins).strip()
            if ins:
                body.append(ins)
    if cur:
        out[cur] = body
    return out


def main():
    before, after = functions(sys.argv[1]), functions(sys.argv[2])
    bad = 0
    for name, body in before.items():
        if name not in after:
            print(f"MISSING {name}")
            bad += 1
        elif body == after[name]:
            print(f"SAME    {len(body):6d} instructions  {name}")
        else:
            print(f"DIFF    {len(body):6d} -> {len(after[name]):6d}  {name}")
            bad += 1
    for name in after:
        if name not in before:
            print(f"NEW     {name}")
            bad += 1
    print(f"sass_compare: {len(before)} functions before, {len(after)} after, {bad} not identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
