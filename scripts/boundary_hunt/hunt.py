#!/usr/bin/env python3
"""Boundary hunt: polycert's soundness through real files, against
onnxruntime (float32, CPU) and exact rational comparisons.

Generates small ONNX networks (gen_onnx.py) and VNNLIB properties
(gen_vnnlib.py), runs them through `polycert vnncomp` under several
configurations, and judges every answer (judge.py):

- unsat (verified): searched for a float32 input inside the exact box whose
  onnxruntime output satisfies some disjunct exactly; a hit is a VIOLATION.
- sat (falsified): the counterexample must be float32 values inside the
  exact box whose onnxruntime output satisfies some disjunct exactly.

unknown / timeout / refused (import error) / error are tallied. The five
regression cases of regress.py always run.

    python3 scripts/boundary_hunt/hunt.py --polycert target/release/polycert --short
    python3 scripts/boundary_hunt/hunt.py --polycert P --networks 200 --props 4 --seed 7 \\
        --keep /tmp/bh-keep --summary /tmp/bh.json

Exit status: 1 if any violation, else 0 (2 on a usage or setup error).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.dont_write_bytecode = True  # keep the scripts folder clean
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import regress  # noqa: E402
from gen_onnx import random_net  # noqa: E402
from onnx_builder import Skip  # noqa: E402
from tour import TOUR, tour_net  # noqa: E402
from gen_vnnlib import random_prop, tight_prop, write  # noqa: E402
from judge import Evaluator, check_cex, exact_point, runtime_disagrees, search  # noqa: E402

DEFAULT_CONFIGS = "cpu:f64:point,cpu:f32:point,cpu:f64:interval,cpu:f32:interval"


def config_flags(cfg: str):
    parts = cfg.split(":")
    if len(parts) != 3 or parts[0] not in ("cpu", "cuda", "auto") or parts[1] not in ("f32", "f64"):
        raise SystemExit(f"bad config {cfg!r} (expected backend:precision:arith, e.g. cpu:f64:point)")
    if parts[2] not in ("point", "interval"):
        raise SystemExit(f"bad arith in {cfg!r}")
    return ["--backend", parts[0], "--precision", parts[1], "--arith", parts[2]]


class Instance:
    def __init__(self, net, prop, onnx_rel, vnnlib_rel, timeout):
        self.net, self.prop = net, prop
        self.onnx, self.vnnlib, self.timeout = onnx_rel, vnnlib_rel, timeout
        self.results: dict = {}  # cfg -> row dict
        self.witness = None  # search result, once searched
        self.searched = False

    @property
    def key(self):
        return (self.onnx, self.vnnlib)

    @property
    def id(self):
        return Path(self.vnnlib).stem


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------
# Generation


def validated_net(seed: int, i: int, allow_big: bool, failures: list, tour=None):
    """A random network (or the op tour's entry `tour`) that onnx's
    checker and onnxruntime accept."""
    for attempt in range(8):
        rng = np.random.default_rng([seed, i, attempt])
        try:
            if tour is None:
                net = random_net(rng, f"n{i:04d}", allow_big_softmax=allow_big)
            else:
                net = tour_net(rng, f"t{i - 100000:02d}_" + re.sub(r"[^A-Za-z0-9]+", "_", tour[0]), tour)
            onnx.checker.check_model(net.model)
            data = net.model.SerializeToString()
            ev = Evaluator(data, net.in_shape)
            y = ev(net.anchor)
            if y.size != net.n_out:
                raise ValueError(f"output has {y.size} values, declared {net.out_shape}")
            return net, ev, data, rng
        except Skip:  # the tour's block does not fit this draw's input
            continue
        except Exception as e:  # a generator bug: count it, try another draw
            failures.append(f"n{i:04d}#{attempt}: {type(e).__name__}: {str(e)[:300]}")
    return None


# ---------------------------------------------------------------------------
# Running polycert


def read_results(path: Path):
    rows = {}
    if not path.exists():
        return rows
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows[(r["onnx"], r["vnnlib"])] = r
    return rows


def run_config(polycert: str, cfg: str, instances, work: Path, extra: list):
    """Runs every instance under `cfg` in one `polycert vnncomp` call (more
    after a crash: the instance in flight is recorded and the rest rerun)."""
    tag = cfg.replace(":", "_")
    remaining = list(instances)
    rows: dict = {}
    crashes = []
    attempt = 0
    t0 = time.time()
    while remaining:
        attempt += 1
        inst_path = work / f"instances_{tag}_{attempt}.csv"
        res_path = work / f"results_{tag}_{attempt}.csv"
        with open(inst_path, "w") as f:
            for it in remaining:
                f.write(f"{it.onnx},{it.vnnlib},{it.timeout}\n")
        cmd = [polycert, "vnncomp", "--instances", str(inst_path), "--results", str(res_path), "--overwrite"]
        cmd += config_flags(cfg) + extra
        limit = sum(it.timeout for it in remaining) * 1.5 + 120
        rc, err = None, ""
        try:
            p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=limit)
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = "killed (wall-clock limit)", (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        (work / f"stderr_{tag}_{attempt}.log").write_text(err)
        got = read_results(res_path)
        rows.update(got)
        left = [it for it in remaining if it.key not in rows]
        if left:
            dead = left[0]
            lines = err.strip().splitlines()
            tail = "\n".join(lines[-6:])
            fatal = next((ln[len("polycert: error: "):] for ln in reversed(lines) if ln.startswith("polycert: error: ")), "")
            if rc == 2 and re.match(r"^\S*" + re.escape(os.path.basename(dead.onnx)) + ":", fatal):
                # The run stopped on this network (e.g. `--precision f32` on
                # weights that are not float32): refused under this config.
                same = [it for it in left if it.onnx == dead.onnx]
                for it in same:
                    rows[it.key] = {"result": "error", "seconds": "", "counterexample": "", "message": fatal, "fatal": "1"}
                left = [it for it in left if it.onnx != dead.onnx]
            else:
                kind = "error" if rc == 2 else "crash"
                crashes.append({"config": cfg, "instance": dead.id, "onnx": dead.onnx, "vnnlib": dead.vnnlib, "rc": str(rc), "kind": kind, "stderr_tail": tail})
                rows[dead.key] = {"result": kind, "seconds": "", "counterexample": "", "message": f"polycert exited {rc} here: {tail[-500:]}"}
                log(f"  [{cfg}] polycert exited {rc} on {dead.id}; rerunning the {len(left) - 1} instances after it")
                left = left[1:]
        remaining = left
    for it in instances:
        it.results[cfg] = rows[it.key]
    return time.time() - t0, crashes


def classify(it, row) -> str:
    r = row["result"]
    if r == "error":
        msg = row.get("message", "")
        if re.match(r"^\S*" + re.escape(os.path.basename(it.onnx)) + ":", msg):
            return "refused"
    return r


# ---------------------------------------------------------------------------
# Keeping evidence


def _copy(src: Path, dst_dir: Path):
    if src.stat().st_size > (1 << 20):
        with open(src, "rb") as a, gzip.open(dst_dir / (src.name + ".gz"), "wb") as b:
            shutil.copyfileobj(a, b)
        return src.name + ".gz"
    shutil.copy(src, dst_dir / src.name)
    return src.name


def keep(keep_dir: Path, work: Path, it, cfg: str, kind: str, reason: str, point, polycert: str):
    d = keep_dir / f"{it.id}__{cfg.replace(':', '_')}"
    d.mkdir(parents=True, exist_ok=True)
    on = _copy(work / it.onnx, d)
    vn = _copy(work / it.vnnlib, d)
    row = it.results[cfg]
    (d / "polycert_row.json").write_text(json.dumps(row, indent=1))
    cex = row.get("counterexample")
    if cex and Path(cex).exists():
        shutil.copy(cex, d / "polycert.counterexample")
    if point is not None:
        (d / "ort_point.json").write_text(json.dumps(point, indent=1))
    (d / "instances.csv").write_text(f"{on},{vn},{it.timeout}\n")
    (d / "repro.sh").write_text(
        "#!/bin/sh\n# " + kind + ": " + reason.replace("\n", " ")[:600] + "\n"
        f'cd "$(dirname "$0")" && "${{POLYCERT:-{polycert}}}" vnncomp --instances instances.csv '
        f"--results results.csv --overwrite {' '.join(config_flags(cfg))}\ncat results.csv\n"
    )
    os.chmod(d / "repro.sh", 0o755)
    return str(d)


# ---------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--polycert", required=True, help="the polycert binary")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--networks", type=int, default=40, help="random networks")
    ap.add_argument("--props", type=int, default=4, help="properties per random network")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="comma-separated backend:precision:arith")
    ap.add_argument("--timeout", type=float, default=5.0, help="polycert timeout per instance, seconds")
    ap.add_argument("--budget", type=int, default=600, help="onnxruntime evaluations per property search")
    ap.add_argument("--short", action="store_true", help="CI preset: 30 networks x 3 properties, 2 s timeouts")
    ap.add_argument("--keep", type=Path, default=None, help="folder for every violation's files")
    ap.add_argument("--summary", type=Path, default=None, help="write the summary JSON here")
    ap.add_argument("--workdir", type=Path, default=None, help="where generated files go (default: a temp dir)")
    ap.add_argument("--no-regression", action="store_true", help="skip the fixed regression cases")
    ap.add_argument("--no-tour", action="store_true", help="skip the op tour (every operator alone)")
    ap.add_argument("--tour-props", type=int, default=None, help="properties per op-tour network (default: --props)")
    ap.add_argument("--softmax-n", type=int, default=10**6, help="outputs of the Softmax regression case")
    ap.add_argument("--polycert-arg", action="append", default=[], help="extra argument for polycert (repeatable)")
    ap.add_argument("--generate-only", action="store_true", help="write the networks and properties, run nothing")
    a = ap.parse_args(argv)
    if a.short:
        a.networks, a.props, a.timeout, a.budget = 30, 3, 2.0, 300
        a.tour_props = 2 if a.tour_props is None else a.tour_props
    if not a.generate_only and not os.access(a.polycert, os.X_OK):
        print(f"error: {a.polycert} is not an executable", file=sys.stderr)
        return 2
    polycert = str(Path(a.polycert).resolve())
    configs = [c.strip() for c in a.configs.split(",") if c.strip()]
    for c in configs:
        config_flags(c)
    t_start = time.time()
    work = a.workdir or Path(tempfile.mkdtemp(prefix=f"boundary_hunt_{a.seed}_"))
    work = work.resolve()
    (work / "nets").mkdir(parents=True, exist_ok=True)
    (work / "props").mkdir(parents=True, exist_ok=True)
    log(f"boundary hunt: seed {a.seed}, {a.networks} networks x {a.props} properties, configs {configs}, work {work}")

    # -- generate --------------------------------------------------------
    instances = []
    nets = []  # (net, ev, regression note)
    gen_failures: list = []
    evs = {}

    def add(net, ev, data, props, note=None):
        onnx_rel = f"nets/{net.name}.onnx"
        (work / onnx_rel).write_bytes(data)
        nets.append((net, note))
        evs[net.name] = ev
        for p in props:
            vn_rel = f"props/{net.name}__{p.name}.vnnlib"
            (work / vn_rel).write_text(write(p, net.n_in, net.n_out))
            instances.append(Instance(net, p, onnx_rel, vn_rel, a.timeout))

    if not a.no_regression:
        for net, props, note in regress.all_cases(a.softmax_n):
            data = net.model.SerializeToString()
            add(net, Evaluator(data, net.in_shape), data, props, note)
            log(f"  regression {net.name}: {note}")
    t_gen = time.time()
    jobs = [(i, None, a.props) for i in range(a.networks)]
    if not a.no_tour:
        tp = a.props if a.tour_props is None else a.tour_props
        jobs += [(100000 + t, entry, tp) for t, entry in enumerate(TOUR)]
    for i, entry, n_props in jobs:
        got = validated_net(a.seed, i, True, gen_failures, entry)
        if got is None:
            continue
        net, ev, data, rng = got
        prng = np.random.default_rng([a.seed, i, 1000])
        props = []
        for k in range(n_props):
            try:
                # the op tour's first property, and some others: a threshold
                # exactly at the output of a point box
                tight = (entry is not None and k == 0) or prng.random() < 0.1
                props.append((tight_prop if tight else random_prop)(prng, net, ev, f"p{k}"))
            except Exception as e:
                gen_failures.append(f"{net.name} p{k}: {type(e).__name__}: {str(e)[:300]}")
        add(net, ev, data, props)
    log(f"generated {len(nets)} networks, {len(instances)} instances in {time.time() - t_gen:.1f}s" + (f" ({len(gen_failures)} generator failures)" if gen_failures else ""))

    if a.generate_only:
        with open(work / "instances.csv", "w") as f:
            f.writelines(f"{it.onnx},{it.vnnlib},{it.timeout}\n" for it in instances)
        log(f"wrote {work / 'instances.csv'}")
        for g in gen_failures[:10]:
            log(f"  generator failure: {g}")
        return 0

    # -- run polycert ------------------------------------------------------
    crashes = []
    config_seconds = {}
    for cfg in configs:
        secs, cr = run_config(polycert, cfg, instances, work, a.polycert_arg)
        config_seconds[cfg] = round(secs, 2)
        crashes += cr
        tally = Counter(classify(it, it.results[cfg]) for it in instances)
        log(f"  {cfg}: {dict(tally)} in {secs:.1f}s")

    # -- judge -------------------------------------------------------------
    violations = []
    disagreements = []  # onnxruntime against the ONNX reference evaluator (judge.runtime_disagrees)
    notes = []
    t_judge = time.time()
    tallies = {cfg: Counter() for cfg in configs}
    judged = Counter()
    for idx, it in enumerate(instances):
        ev = evs[it.net.name]
        for cfg in configs:
            row = it.results[cfg]
            cls = classify(it, row)
            tallies[cfg][cls] += 1
            if cls == "unsat":
                if not it.searched:
                    it.searched = True
                    srng = np.random.default_rng([a.seed, 7, idx])
                    it.witness = search(ev, it.prop, srng, budget=a.budget)
                    judged["unsat_searched"] += 1
                if it.witness is not None:
                    x, y, di, how = it.witness
                    outs = sorted(set().union(*(at.vars() for at in it.prop.disjuncts[di].atoms)) or {0})
                    point = exact_point(x, y, outs)
                    point.update(disjunct=di, found_by=how)
                    reason = f"verified, but onnxruntime reaches disjunct {di} at a float32 point of the box (found by {how})"
                    v = {"instance": it.id, "config": cfg, "kind": "false_unsat", "reason": reason, "regression": it.net.regression, "point": point}
                    if a.keep:
                        v["kept"] = keep(a.keep, work, it, cfg, "false_unsat", reason, point, polycert)
                    (disagreements if runtime_disagrees(ev, x, y) else violations).append(v)
            elif cls == "sat":
                judged["sat_checked"] += 1
                cex = row.get("counterexample", "")
                text = Path(cex).read_text() if cex and Path(cex).exists() else ""
                if not text:
                    ok, reason, x, y = False, "sat without a counterexample file", None, None
                else:
                    ok, reason, x, y = check_cex(ev, it.prop, it.net.n_in, text)
                if not ok:
                    point = None
                    if x is not None:
                        outs = sorted(set().union(*(at.vars() for d in it.prop.disjuncts for at in d.atoms)) or {0})[:50]
                        point = exact_point(x, y, outs)
                    v = {"instance": it.id, "config": cfg, "kind": "false_sat", "reason": reason, "regression": it.net.regression, "point": point}
                    if a.keep:
                        v["kept"] = keep(a.keep, work, it, cfg, "false_sat", reason, point, polycert)
                    disagree = x is not None and y is not None and runtime_disagrees(ev, x, y)
                    (disagreements if disagree else violations).append(v)
            elif cls in ("unknown", "timeout") and it.prop.expect == "sat":
                judged[f"missed_sat:{cfg}"] += 1  # reachable by construction, not falsified
            if cls in ("error", "crash"):
                notes.append({"instance": it.id, "config": cfg, "result": cls, "message": row.get("message", "")[:400]})
    judged["ort_evaluations"] = sum(ev.evals for ev in evs.values())
    log(f"judged in {time.time() - t_judge:.1f}s: {dict(judged)}")

    # -- summary -----------------------------------------------------------
    refused_by = defaultdict(set)  # network -> configs refusing it
    for it in instances:
        for c in configs:
            if classify(it, it.results[c]) == "refused":
                refused_by[it.net.name].add(c)
    refused = {n for n, cs in refused_by.items() if len(cs) == len(configs)}
    refusal_msgs = Counter()
    for it in instances:
        for c in refused_by.get(it.net.name, ()):
            msg = it.results[c].get("message", "")
            msg = re.sub(r"^\S+: (node|layer) '[^']*':? ", "", msg)
            refusal_msgs[re.sub(r"-?\d[\d.e+-]{5,}", "N", msg)[:160]] += 1
    op_cov: dict = defaultdict(lambda: {"networks": 0, "imported": 0, "nodes": 0})
    feat_cov: dict = defaultdict(lambda: {"networks": 0, "imported": 0})
    for net, _ in nets:
        imported = net.name not in refused
        for op, k in net.ops.items():
            op_cov[op]["networks"] += 1
            op_cov[op]["nodes"] += k
            op_cov[op]["imported"] += imported
        for f in net.features:
            feat_cov[f]["networks"] += 1
            feat_cov[f]["imported"] += imported
    prop_kinds = Counter(it.prop.kind.split("/")[0] for it in instances)
    regression = {}
    for it in instances:
        if it.net.regression:
            regression[it.id] = {
                cfg: it.results[cfg]["result"] + (" VIOLATION" if any(v["instance"] == it.id and v["config"] == cfg for v in violations) else "")
                for cfg in configs
            }
    summary = {
        "seed": a.seed,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "polycert": polycert,
        "workdir": str(work),
        "elapsed_seconds": round(time.time() - t_start, 1),
        "config_seconds": config_seconds,
        "networks": {
            "generated": len(nets),
            "random": sum(1 for n, _ in nets if not n.regression and not n.name.startswith("t")),
            "op_tour": sum(1 for n, _ in nets if n.name.startswith("t")),
            "regression": sum(1 for n, _ in nets if n.regression),
            "imported": len(nets) - len(refused),
            "refused": len(refused),
            "refused_by_some_configs": {n: sorted(cs) for n, cs in refused_by.items() if n not in refused},
            "generator_failures": len(gen_failures),
        },
        "properties": len(instances),
        "property_kinds": dict(prop_kinds),
        "tallies": {c: dict(t) for c, t in tallies.items()},
        "judged": dict(judged),
        "violations": violations,
        "runtime_disagreements": disagreements,
        "regression": regression,
        "crashes": crashes,
        "refusals": dict(refusal_msgs.most_common(30)),
        "errors": notes[:100],
        "op_coverage": dict(sorted(op_cov.items())),
        "instances": {it.id: {"kind": it.prop.kind, **{c: classify(it, it.results[c]) for c in configs}} for it in instances},
        "feature_coverage": dict(sorted(feat_cov.items())),
        "generator_failures": gen_failures[:50],
    }
    if a.summary:
        a.summary.parent.mkdir(parents=True, exist_ok=True)
        a.summary.write_text(json.dumps(summary, indent=1, default=str))

    log("")
    log(f"networks: {summary['networks']}")
    log(f"properties: {len(instances)}  kinds: {dict(prop_kinds)}")
    for c in configs:
        log(f"  {c:<20} {dict(tallies[c])}")
    log("op coverage (networks/imported): " + ", ".join(f"{op} {v['networks']}/{v['imported']}" for op, v in sorted(op_cov.items())))
    if refusal_msgs:
        log("refusals: " + "; ".join(f"{k} x{v}" for k, v in refusal_msgs.most_common(5)))
    if crashes:
        log(f"RUN ERRORS AND CRASHES: {len(crashes)}")
        for c in crashes[:10]:
            log(f"  {c['config']} {c['instance']}: {c['kind']} rc {c['rc']}: {c['stderr_tail'][-200:]}")
    if gen_failures:
        log(f"generator failures: {len(gen_failures)} (first: {gen_failures[0]})")
    if regression:
        log("regression cases:")
        for k, v in regression.items():
            log(f"  {k:<36} " + "  ".join(f"{c}={r}" for c, r in v.items()))
    if disagreements:
        log(f"onnxruntime departs from the ONNX reference evaluator on {len(disagreements)} judged answers (not counted):")
        for v in disagreements[:5]:
            log(f"  {v['instance']} under {v['config']}: {v['reason'][:200]}")
    log(f"VIOLATIONS: {len(violations)}")
    for v in violations:
        log(f"  [{v['kind']}] {v['instance']} under {v['config']}: {v['reason'][:300]}" + (f"\n      kept: {v['kept']}" if "kept" in v else ""))
    log(f"elapsed {summary['elapsed_seconds']}s")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
