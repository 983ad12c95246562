"""The oracle: onnxruntime (float32, CPU) and exact rational comparisons.

- `Evaluator` runs a network at float32 points.
- `search` looks for a float32 input inside a property's exact box whose
  output satisfies every atom of some disjunct exactly: hints, centre,
  corners, exhaustive enumeration of small float32 boxes, uniform samples
  and hill climbing on the largest signed violation.
- `check_cex` validates a counterexample reported by polycert.
"""

from __future__ import annotations

import itertools
import re
import time

import numpy as np
import onnxruntime as ort

from exact import F32, frac, key, unkey
from gen_vnnlib import float32_box


class Evaluator:
    def __init__(self, model_bytes: bytes, in_shape):
        self.model_bytes = model_bytes
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self.sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        self.in_name = self.sess.get_inputs()[0].name
        self.in_shape = tuple(in_shape)
        self.evals = 0
        self.cache: dict = {}

    def __call__(self, x) -> np.ndarray:
        x = np.ascontiguousarray(np.asarray(x, dtype=F32).reshape(-1))
        k = x.tobytes()
        y = self.cache.get(k)
        if y is None:
            self.evals += 1
            y = self.sess.run(None, {self.in_name: x.reshape(self.in_shape)})[0].reshape(-1)
            if len(self.cache) < 20000:
                self.cache[k] = y
        return y


def runtime_disagrees(ev: Evaluator, x, y) -> bool:
    """Whether onnx's reference evaluator (numpy: an implementation of the
    spec independent of onnxruntime's kernels) puts some output at `x` more
    than 1e-3 (relative) from onnxruntime's `y`: then onnxruntime, not
    polycert, departs from the model (seen: onnxruntime 1.30's MaxPool with
    asymmetric pads), and the case is reported apart from violations."""
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(ev.model_bytes)
    name = ref.input_names[0]
    r = np.asarray(ref.run(None, {name: np.asarray(x, dtype=F32).reshape(ev.in_shape)})[0], dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    return bool(np.any(np.abs(r - y) > 1e-3 * (1 + np.abs(y))))


class Compiled:
    """A disjunct's atoms as exact `Σ c_j y_j + k ≤ 0` rows."""

    def __init__(self, disjunct):
        self.rows = []
        for a in disjunct.atoms:
            c, k = a.coeffs()
            if a.op == ">=":
                c = {j: -v for j, v in c.items()}
                k = -k
            self.rows.append(([(j, v) for j, v in c.items() if v != 0], k))
        lo, hi = disjunct.box()
        self.lo, self.hi = lo, hi
        self.box32 = float32_box(disjunct.lo, disjunct.hi)

    def margins(self, y):
        """Exact margins (≤ 0: satisfied), or None when a needed output is not finite."""
        out = []
        for terms, k in self.rows:
            s = k
            for j, c in terms:
                v = y[j]
                if not np.isfinite(v):
                    return None
                s += c * frac(v)
            out.append(s)
        return out

    def objective(self, y):
        """(hit, score): score is the largest margin as a float (+inf when undefined)."""
        m = self.margins(y)
        if m is None:
            return False, float("inf")
        if not m:
            return True, -1.0
        worst = max(m)
        return worst <= 0, float(worst)

    def inside(self, x) -> bool:
        return all(self.lo[i] <= frac(v) <= self.hi[i] for i, v in enumerate(x))


def _clip(x, lo, hi):
    return np.minimum(np.maximum(np.asarray(x, dtype=F32), lo), hi).astype(F32)


def _step_keys(x, i, d, lo, hi):
    x = x.copy()
    k = key(x[i]) + d
    k = min(max(k, key(lo[i])), key(hi[i]))
    x[i] = unkey(k)
    return x


def search(ev: Evaluator, prop, rng, budget: int = 600, deadline: float | None = None):
    """A float32 input inside some disjunct's exact box reaching it exactly
    under onnxruntime: (x, y, disjunct index, how) or None."""
    comps = [Compiled(d) for d in prop.disjuncts]
    live = [(i, c) for i, c in enumerate(comps) if c.box32 is not None]
    if not live:
        return None
    per = max(60, budget // len(live))
    for di, c in live:
        lo, hi = c.box32
        n = len(lo)
        used = 0
        pool = []  # (score, x)

        def try_x(x, how):
            nonlocal used
            used += 1
            x = _clip(x, lo, hi)
            y = ev(x)
            hit, score = c.objective(y)
            if hit and c.inside(x):
                return (x, y, di, how)
            pool.append((score, x))
            return None

        for h in prop.hints:
            h = np.asarray(h, dtype=F32)
            if h.shape == lo.shape and np.all(h >= lo) and np.all(h <= hi):
                r = try_x(h, "hint")
                if r:
                    return r
        counts = [key(hi[i]) - key(lo[i]) + 1 for i in range(n)]
        total = 1
        for k in counts:
            total *= k
            if total > 4096:
                break
        if total <= min(per, 1024):
            # every float32 of the box
            axes = [[unkey(k) for k in range(key(lo[i]), key(hi[i]) + 1)] for i in range(n)]
            for pt in itertools.product(*axes):
                r = try_x(np.array(pt, dtype=F32), "exhaustive")
                if r:
                    return r
            continue
        r = try_x((lo.astype(np.float64) + hi.astype(np.float64)) / 2, "centre")
        if r:
            return r
        corners = itertools.product([0, 1], repeat=n) if n <= 6 else ([int(b) for b in rng.integers(0, 2, n)] for _ in range(48))
        for bits in corners:
            r = try_x(np.where(np.array(bits, dtype=bool), hi, lo), "corner")
            if r:
                return r
        n_samples = max(20, per // 3)
        for s in range(n_samples):
            if s % 3 == 2:  # uniform over the float32 keys (log-scale across magnitudes)
                x = np.array([unkey(int(rng.integers(key(lo[i]), key(hi[i]) + 1))) for i in range(n)], dtype=F32)
            else:
                x = rng.uniform(lo.astype(np.float64), hi.astype(np.float64))
            r = try_x(x, "sample")
            if r:
                return r
            if deadline and time.time() > deadline:
                return None
        # hill climbing on the largest signed violation
        pool.sort(key=lambda t: t[0])
        starts = [p[1] for p in pool[:3]]
        width = hi.astype(np.float64) - lo.astype(np.float64)
        steps_each = max(10, (per - used) // max(1, len(starts)))
        for x0 in starts:
            x, best = x0, c.objective(ev(x0))[1]
            sigma = 0.25
            for _ in range(steps_each):
                mv = rng.random()
                if mv < 0.4:
                    cand = x.astype(np.float64) + rng.normal(0, 1, n) * width * sigma
                elif mv < 0.7:
                    i = int(rng.integers(n))
                    cand = x.astype(np.float64).copy()
                    cand[i] += rng.choice([-1, 1]) * width[i] * sigma
                else:
                    i = int(rng.integers(n))
                    cand = _step_keys(x, i, int(rng.choice([-1, 1])) * int(2 ** rng.integers(0, 12)), lo, hi)
                cand = _clip(cand, lo, hi)
                y = ev(cand)
                hit, score = c.objective(y)
                if hit and c.inside(cand):
                    return (cand, y, di, "climb")
                if score <= best:
                    if score < best:
                        sigma = min(0.5, sigma * 2)
                    x, best = cand, score
                else:
                    sigma = max(sigma / 2, 1e-9)
                if deadline and time.time() > deadline:
                    return None
    return None


CEX_RE = re.compile(r"\(\s*([XY])_(\d+)\s+([^\s()]+)\s*\)")


def parse_cex(text: str):
    xs, ys = {}, {}
    for kind, i, v in CEX_RE.findall(text):
        (xs if kind == "X" else ys)[int(i)] = v
    return xs, ys


def stated_outputs_differ(ys: dict, y) -> str:
    """Why the file's `Y_j` fail VNN-COMP's check against onnxruntime's
    outputs `y` (every output stated; the largest difference at most 1e-3
    of the largest stated value), or "" where they pass."""
    if sorted(ys) != list(range(len(y))):
        return f"counterexample states outputs {sorted(ys)[:10]}..., expected Y_0..Y_{len(y) - 1}"
    got = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return ""
    stated = np.array([float(ys[j]) for j in range(len(y))])
    diff, norm = float(np.max(np.abs(stated - got))), float(np.max(np.abs(stated)))
    if (diff / norm if norm >= 1e-6 else 0.0) > 1e-3:
        return f"stated outputs differ from onnxruntime's by {diff:.3g} (relative {diff / max(norm, 1e-300):.3g} > 1e-3)"
    return ""


def check_cex(ev: Evaluator, prop, n_in: int, text: str):
    """(ok, reason, x, y) for polycert's counterexample file text."""
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    if first != "sat":
        return False, f"counterexample file does not start with 'sat' ({first!r})", None, None
    xs, _ys = parse_cex(text)
    if sorted(xs) != list(range(n_in)):
        return False, f"counterexample has inputs {sorted(xs)[:10]}..., expected X_0..X_{n_in - 1}", None, None
    x = np.zeros(n_in, dtype=F32)
    not32 = []
    for i in range(n_in):
        d = float(xs[i])
        x[i] = F32(d)
        if float(x[i]) != d:
            not32.append(i)
    y = ev(x)
    if not32:
        return False, f"X_{not32[0]} = {xs[not32[0]]} is not a float32 value", x, y
    bad_y = stated_outputs_differ(_ys, y)
    if bad_y:
        return False, bad_y, x, y
    comps = [Compiled(d) for d in prop.disjuncts]
    reasons = []
    for di, c in enumerate(comps):
        if not c.inside(x):
            bad = next(i for i in range(n_in) if not (c.lo[i] <= frac(x[i]) <= c.hi[i]))
            reasons.append(
                f"disjunct {di}: X_{bad} = {frac(x[bad])} ({float(x[bad])!r}) is outside "
                f"[{prop.disjuncts[di].lo[bad]}, {prop.disjuncts[di].hi[bad]}]"
            )
            continue
        m = c.margins(y)
        if m is None:
            reasons.append(f"disjunct {di}: onnxruntime's output is not finite")
            continue
        if all(v <= 0 for v in m):
            return True, f"disjunct {di} reached", x, y
        k = max(range(len(m)), key=lambda t: m[t])
        reasons.append(f"disjunct {di}: atom {k} violated by {float(m[k]):.6g} (exact {m[k]})"[:400])
    return False, "; ".join(reasons)[:2000], x, y


def exact_point(x, y, outputs=None):
    """A JSON-able record of a point: exact decimals and floats."""
    from exact import exact_f32

    ys = range(len(y)) if outputs is None else outputs
    return {
        "x": [exact_f32(v) for v in x],
        "x_float": [float(v) for v in x],
        "y": {str(j): (exact_f32(y[j]) if np.isfinite(y[j]) else str(y[j])) for j in ys},
        "y_float": {str(j): float(y[j]) for j in ys},
    }
