#!/usr/bin/env python3
"""The boundary hunt's long run: many independent shards of hunt.py (each
its own seed, networks and work folder) run side by side until a wall-clock
deadline, then their summaries merged.

    python3 scripts/boundary_hunt/shards.py --polycert P --jobs 56 --deadline 540 \\
        --first-seed 1000 --networks 20 --props 10 --gpus 4 \\
        --configs cpu:f64:point,cpu:f32:point,cpu:f64:interval,cpu:f32:interval,cuda:f32:point \\
        --out merged.json

Every eighth shard runs polycert's default search (branch and bound, with
`--timeout`); the others pass `--no-bab`, so that most of the time goes to
the boundary (import, VNNLIB, counterexample checks) rather than the search.
Shard k sees GPU k mod --gpus. A shard still running at the deadline is
stopped and not counted. Exit 1 if any counted shard found a violation.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def shard_cmd(a, seed: int, work: Path, bab: bool) -> list:
    cmd = [sys.executable, str(HERE / "hunt.py"), "--polycert", a.polycert, "--seed", str(seed),
           "--networks", str(a.networks), "--props", str(a.props), "--timeout", str(a.timeout),
           "--configs", a.configs, "--no-regression", "--no-tour", "--workdir", str(work / "work"),
           "--summary", str(work / "summary.json"), "--keep", str(work / "keep")]
    cmd += [f"--polycert-arg={x}" for x in a.polycert_arg]
    return cmd if bab else cmd + ["--polycert-arg=--no-bab"]


def merge(summaries: list) -> dict:
    tallies: dict = {}
    judged, nets, crashes, violations, disagree = Counter(), Counter(), [], [], []
    props = 0
    for s in summaries:
        props += s["properties"]
        for k in ("generated", "imported", "refused", "generator_failures"):
            nets[k] += s["networks"][k]
        for c, t in s["tallies"].items():
            tallies.setdefault(c, Counter()).update(t)
        judged.update(s["judged"])
        violations += [dict(v, seed=s["seed"]) for v in s["violations"]]
        crashes += [dict(c, seed=s["seed"]) for c in s["crashes"]]
        disagree += [dict(v, seed=s["seed"]) for v in s.get("runtime_disagreements", [])]
    return {"shards": len(summaries), "networks": dict(nets), "properties": props,
            "tallies": {c: dict(t) for c, t in tallies.items()}, "judged": dict(judged),
            "violations": violations, "runtime_disagreements": disagree, "crashes": crashes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--polycert", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--deadline", type=float, default=540, help="seconds; no shard starts or is counted after it")
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--max-shards", type=int, default=10**6)
    ap.add_argument("--networks", type=int, default=20)
    ap.add_argument("--props", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=1.0)
    ap.add_argument("--gpus", type=int, default=0)
    ap.add_argument("--configs", default="cpu:f64:point,cpu:f32:point,cpu:f64:interval,cpu:f32:interval")
    ap.add_argument("--root", default="/tmp/bh-shards")
    ap.add_argument("--polycert-arg", action="append", default=[], help="extra argument for polycert (repeatable)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t0, root = time.time(), Path(a.root)
    running, done, stopped, seed = {}, [], 0, a.first_seed
    while running or (time.time() - t0 < a.deadline and seed < a.first_seed + a.max_shards):
        while len(running) < a.jobs and time.time() - t0 < a.deadline and seed < a.first_seed + a.max_shards:
            work = root / f"s{seed}"
            work.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, RAYON_NUM_THREADS="1", PYTHONUNBUFFERED="1")
            if a.gpus:
                env["CUDA_VISIBLE_DEVICES"] = str(seed % a.gpus)
            log = open(work / "log.txt", "w")
            p = subprocess.Popen(shard_cmd(a, seed, work, seed % 8 == 7), stdout=log, stderr=subprocess.STDOUT, env=env)
            running[seed] = (p, work, log)
            seed += 1
        time.sleep(0.5)
        for s, (p, work, log) in list(running.items()):
            late = time.time() - t0 > a.deadline + 30
            if p.poll() is None and not late:
                continue
            if p.poll() is None:
                p.kill()
                stopped += 1
            p.wait()
            log.close()
            del running[s]
            f = work / "summary.json"
            if f.exists() and p.returncode in (0, 1):
                done.append(json.loads(f.read_text()))
    m = merge(done)
    m.update(stopped_at_deadline=stopped, wall_seconds=round(time.time() - t0, 1), args=vars(a))
    Path(a.out).write_text(json.dumps(m, indent=1))
    print(json.dumps({k: v for k, v in m.items() if k not in ("violations", "runtime_disagreements", "crashes", "args")}, indent=1))
    print(f"VIOLATIONS: {len(m['violations'])}, crashes: {len(m['crashes'])}, "
          f"onnxruntime against the reference evaluator: {len(m['runtime_disagreements'])}")
    for v in m["violations"][:20]:
        print(f"  seed {v['seed']} [{v['kind']}] {v['instance']} under {v['config']}: {v['reason'][:200]}")
    return 1 if m["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
