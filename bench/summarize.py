#!/usr/bin/env python3
"""Summarises `polycert vnncomp` result files (onnx,vnnlib,result,seconds): per network,
the counts of each result and the median / p90 / max time in milliseconds, and the median less
each row's property parse (where the file has `parse_seconds`), as a Markdown table."""
import csv
import statistics
import sys
from collections import defaultdict


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


print("| file | network | n | unsat | sat | other | median ms | p90 ms | max ms | median less parse ms |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in sys.argv[1:]:
    rows = defaultdict(list)
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) < 4 or r[0] == "onnx":
                continue
            try:
                parse = float(r[6]) if len(r) > 6 and r[6] else None
                rows[r[0].rsplit("/", 1)[-1].removesuffix(".onnx")].append((r[2], float(r[3]), parse))
            except ValueError:
                continue
    for net, rs in sorted(rows.items()):
        t = [s * 1000 for _, s, _ in rs]
        less = [(s - p) * 1000 for _, s, p in rs if p is not None]
        less = f"{statistics.median(less):.2f}" if less else "-"
        c = defaultdict(int)
        for res, _, _ in rs:
            c[res] += 1
        other = len(rs) - c["unsat"] - c["sat"]
        name = path.rsplit("/", 1)[-1]
        print(f"| {name} | {net} | {len(rs)} | {c['unsat']} | {c['sat']} | {other} | "
              f"{statistics.median(t):.2f} | {pct(t, 0.9):.2f} | {max(t):.2f} | {less} |")
