#!/usr/bin/env python3
"""Per-GPU instance lists for bench/gpu/full.sh, balanced by expected time.

Usage: full_lists.py GPUS OUTDIR RESULTS.csv... [K=SECONDS ...] [--factor=F] [--part=I/N]

An instance's expected time is its seconds in the given polycert results CSVs (a solved row:
F·x + 2 s, F = 1.3 by default, for rows timed alone on a machine: four processes on one host run
solved instances up to 1.3x slower; an open or missing one: its timeout). Instances go longest first to the GPU with the
least expected time (LPT); on each GPU the ones expected solved run first, so a run cut short loses
the expected timeouts. `K=S` charges GPU K with S seconds of other work first (tests).
`--part=I/N` balances the instances over N·GPUS lists and writes the I-th GPUS of them (I from 1):
on 4 GPUs the 96 take about 1,790 s, more than one session's device time, so N runs (one build,
the same lists) make up a full run.
Paths in OUTDIR/gK.csv are relative to OUTDIR, which must sit beside carry/bench (carry/full).
"""
import csv
import os
import sys


def main(argv):
    gpus, outdir = int(argv[1]), argv[2]
    factor = float(next((a.split("=")[1] for a in argv[3:] if a.startswith("--factor=")), 1.3))
    heads = [a for a in argv[3:] if "=" in a and not a.endswith(".csv") and not a.startswith("--")]
    results = [a for a in argv[3:] if a.endswith(".csv")]
    part, parts = (int(x) for x in next((a.split("=")[1] for a in argv[3:] if a.startswith("--part=")), "1/1").split("/"))
    assert 1 <= part <= parts
    seen = {}
    for path in results:
        for r in csv.DictReader(open(path)):
            key = (os.path.basename(r["onnx"]), os.path.basename(r["vnnlib"]))
            solved = r["result"] in ("sat", "unsat")
            seen[key] = float(r["seconds"]) * factor + 2 if solved else None
    items = []
    for set_ in ("mnist_fc", "cifar10_resnet"):
        for onnx, vnnlib, timeout in csv.reader(open(f"carry/bench/{set_}/instances.csv")):
            key = (os.path.basename(onnx), os.path.basename(vnnlib))
            expect = seen.get(key)
            opened = expect is None
            row = (f"../bench/{set_}/{onnx}", f"../bench/{set_}/{vnnlib}", timeout)
            items.append((float(timeout) if opened else expect, opened, row))
    bins = gpus * parts
    load = [0.0] * bins
    for h in heads:
        k, s = h.split("=")
        load[(part - 1) * gpus + int(k)] += float(s)
    lists = [[] for _ in range(bins)]
    # Ties go to the lowest bin, so the parts' lists do not depend on the part asked for.
    for it in sorted(items, key=lambda x: (-x[0], x[2])):
        k = min(range(bins), key=lambda g: load[g])
        load[k] += it[0]
        lists[k].append(it)
    lists, load = lists[(part - 1) * gpus : part * gpus], load[(part - 1) * gpus : part * gpus]
    os.makedirs(outdir, exist_ok=True)
    for k, items_k in enumerate(lists):
        with open(f"{outdir}/g{k}.csv", "w") as f:
            for _, _, row in sorted(items_k, key=lambda x: (x[1], x[2][0], x[0])):
                f.write(",".join(row) + "\n")
        print(f"g{k}: {len(items_k)} instances, {load[k]:.0f} s expected")


if __name__ == "__main__":
    main(sys.argv)
