#!/usr/bin/env python3
"""Summarises `polycert vnncomp` result files (onnx,vnnlib,result,seconds): per network,
the counts of each result and the median / p90 / max time in milliseconds, as a Markdown table."""
import csv
import statistics
import sys
from collections import defaultdict


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


print("| file | network | n | unsat | sat | other | median ms | p90 ms | max ms |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for path in sys.argv[1:]:
    rows = defaultdict(list)
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) < 4 or r[0] == "onnx":
                continue
            try:
                rows[r[0].rsplit("/", 1)[-1].removesuffix(".onnx")].append((r[2], float(r[3])))
            except ValueError:
                continue
    for net, rs in sorted(rows.items()):
        t = [s * 1000 for _, s in rs]
        c = defaultdict(int)
        for res, _ in rs:
            c[res] += 1
        other = len(rs) - c["unsat"] - c["sat"]
        name = path.rsplit("/", 1)[-1]
        print(f"| {name} | {net} | {len(rs)} | {c['unsat']} | {c['sat']} | {other} | "
              f"{statistics.median(t):.2f} | {pct(t, 0.9):.2f} | {max(t):.2f} |")
