"""VNNLIB properties (the VNN-COMP subset) with their exact structure.

A property is a disjunction of `Disjunct`s, each an input box (decimal
bounds, kept as text and as exact Fractions) and a conjunction of `Atom`s
over the outputs: `left op right` with `op` in `<=`/`>=` and each side a
sum of `coef·Y_j` terms and decimal constants. The driver writes the file
from this structure and the judge evaluates the same structure exactly,
so nothing is re-parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from exact import F32, decimal, exact_f32, f32_above, f32_below, frac, just_above, just_below, midpoint

# An expression item: ("var", coef_text or None, j) or ("const", text).


@dataclass
class Atom:
    op: str  # "<=" or ">="
    left: list
    right: list
    flip: bool = False  # write as (op' right left)

    def coeffs(self):
        """(dict j -> Fraction, const) of `left − right`."""
        c: dict = {}
        k = Fraction(0)
        for sign, side in ((1, self.left), (-1, self.right)):
            for it in side:
                if it[0] == "var":
                    v = Fraction(it[1]) if it[1] is not None else Fraction(1)
                    c[it[2]] = c.get(it[2], Fraction(0)) + sign * v
                else:
                    k += sign * Fraction(it[1])
        return c, k

    def vars(self):
        return {it[2] for side in (self.left, self.right) for it in side if it[0] == "var"}


@dataclass
class Disjunct:
    lo: list  # decimal strings
    hi: list
    atoms: list

    def box(self):
        return [Fraction(s) for s in self.lo], [Fraction(s) for s in self.hi]


@dataclass
class Prop:
    name: str
    disjuncts: list
    kind: str = ""
    hints: list = field(default_factory=list)  # float32 points known to reach some disjunct
    expect: str | None = None  # "sat" when a hint reaches it by construction
    top_level_box: bool = True

    def features(self):
        return {self.kind}


# ---------------------------------------------------------------------------
# Writing


def _expr(items) -> str:
    def one(it):
        if it[0] == "const":
            return it[1]
        return f"Y_{it[2]}" if it[1] is None else f"(* {it[1]} Y_{it[2]})"

    if len(items) == 1:
        return one(items[0])
    return "(+ " + " ".join(one(it) for it in items) + ")"


def atom_text(a: Atom) -> str:
    if a.flip:
        op = ">=" if a.op == "<=" else "<="
        return f"({op} {_expr(a.right)} {_expr(a.left)})"
    return f"({a.op} {_expr(a.left)} {_expr(a.right)})"


def write(prop: Prop, n_in: int, n_out: int) -> str:
    out = [f"; boundary hunt property {prop.name} ({prop.kind})\n"]
    out.extend(f"(declare-const X_{i} Real)\n" for i in range(n_in))
    out.append("".join(f"(declare-const Y_{j} Real)\n" for j in range(n_out)))
    ds = prop.disjuncts
    same_box = all(d.lo == ds[0].lo and d.hi == ds[0].hi for d in ds)
    if same_box and prop.top_level_box:
        for i in range(n_in):
            out.append(f"(assert (>= X_{i} {ds[0].lo[i]}))\n")
            out.append(f"(assert (<= X_{i} {ds[0].hi[i]}))\n")
        if len(ds) == 1:
            for a in ds[0].atoms:
                out.append(f"(assert {atom_text(a)})\n")
        else:
            parts = ["(and " + " ".join(atom_text(a) for a in d.atoms) + ")" for d in ds]
            out.append("(assert (or\n  " + "\n  ".join(parts) + "))\n")
    else:
        parts = []
        for d in ds:
            xs = [f"(>= X_{i} {d.lo[i]}) (<= X_{i} {d.hi[i]})" for i in range(n_in)]
            parts.append("(and " + " ".join(xs + [atom_text(a) for a in d.atoms]) + ")")
        out.append("(assert (or\n  " + "\n  ".join(parts) + "))\n")
    return "".join(out)


# ---------------------------------------------------------------------------
# Random generation


def _bound_text(rng, v: np.float32, upper: bool) -> str:
    """A decimal bound near the float32 `v`: exactly it, a short decimal,
    one unit in the digit after its last just inside/outside, or the
    midpoint to its neighbour."""
    style = rng.choice(["exact", "exact", "short", "justoff", "mid"])
    if style == "exact":
        return exact_f32(v)
    if style == "short":
        return decimal(Fraction(f"{float(v):.6g}")) if abs(float(v)) > 1e-30 else exact_f32(v)
    if style == "justoff":
        return just_below(v) if upper else just_above(v)
    nb = np.nextafter(v, F32(np.inf) if upper else F32(-np.inf))
    return midpoint(v, nb)


def random_box(rng, net, centre=None):
    n = net.n_in
    if centre is None:
        centre = net.anchor if (net.anchor is not None and rng.random() < 0.4) else rng.uniform(-1, 1, n)
    centre = np.asarray(centre, dtype=F32)
    mode = rng.choice(["point", "point", "tiny", "small", "medium", "large", "large"])
    if mode == "point":
        kind = rng.choice(["exact", "exact", "exact", "short", "justoff"])
        lo, hi = [], []
        for v in centre:
            if kind == "exact":
                t = exact_f32(v)
                lo.append(t)
                hi.append(t)
            elif kind == "short":
                t = decimal(Fraction(f"{float(v):.5g}"))
                lo.append(t)
                hi.append(t)
            else:  # a point just off the float32: no float32 inside
                t = just_below(v)
                lo.append(t)
                hi.append(t)
        return lo, hi, "point-" + kind
    r = {"tiny": 1e-6, "small": 1e-3, "medium": 0.05, "large": 0.5}[mode]
    rad = (r * rng.uniform(0.2, 1.0, size=n) * np.maximum(1.0, np.abs(centre))).astype(np.float64)
    lo = (centre - rad).astype(F32)
    hi = (centre + rad).astype(F32)
    lo_t = [_bound_text(rng, v, False) for v in lo]
    hi_t = [_bound_text(rng, v, True) for v in hi]
    for i in range(n):  # a short decimal may cross the other bound of a tiny box
        if Fraction(lo_t[i]) > Fraction(hi_t[i]):
            lo_t[i], hi_t[i] = exact_f32(lo[i]), exact_f32(hi[i])
    return lo_t, hi_t, mode


def float32_box(lo_txt, hi_txt):
    """The float32 box inside the exact decimal box, or None when empty."""
    lo32, hi32 = [], []
    for l, h in zip(lo_txt, hi_txt):
        a, b = f32_above(Fraction(l)), f32_below(Fraction(h))
        if a is None or b is None or frac(a) > frac(b):
            return None
        lo32.append(a)
        hi32.append(b)
    return np.array(lo32, dtype=F32), np.array(hi32, dtype=F32)


def sample_in(rng, box32, how: str):
    lo, hi = box32
    if how == "centre":
        x = ((lo.astype(np.float64) + hi.astype(np.float64)) / 2).astype(F32)
    elif how == "corner":
        x = np.where(rng.random(len(lo)) < 0.5, lo, hi)
    else:
        x = rng.uniform(lo.astype(np.float64), hi.astype(np.float64)).astype(F32)
    return np.clip(x, lo, hi).astype(F32)


def _coef_text(rng) -> str:
    return str(rng.choice(["1", "2", "-1", "0.5", "-0.25", "0.3", "-0.7", "1.5", "0.1", "-3", "0.125"]))


def _split_coef(rng, c: str) -> list:
    """`c` as 1..3 decimal parts that sum to it exactly."""
    k = int(rng.integers(1, 4))
    if k == 1:
        return [c]
    q = Fraction(c)
    parts = []
    for _ in range(k - 1):
        p = Fraction(int(rng.integers(-9, 10)), 10)
        parts.append(p)
    parts.append(q - sum(parts))
    return [decimal(p) for p in parts]


def _terms(rng, js, coefs):
    items = []
    for j, c in zip(js, coefs):
        for part in _split_coef(rng, c):
            items.append(("var", part, j))
    if rng.random() < 0.25:  # a zero-sum group on some output
        j = int(rng.choice(js))
        items += [("var", "0.3", j), ("var", "-0.1", j), ("var", "-0.2", j)]
    rng.shuffle(items)
    return items


def _value(items, y) -> Fraction:
    s = Fraction(0)
    for it in items:
        if it[0] == "var":
            s += (Fraction(it[1]) if it[1] is not None else 1) * frac(y[it[2]])
        else:
            s += Fraction(it[1])
    return s


def _attained_atom(rng, y, n_out, multi: bool, shift: Fraction | None):
    """An atom whose threshold is the exact value the network attains at
    the point that gave `y` (shifted by `shift` when given)."""
    op = str(rng.choice(["<=", ">="]))
    if multi and n_out >= 1:
        m = int(rng.integers(1, min(3, n_out) + 1))
        js = [int(j) for j in rng.choice(n_out, size=m, replace=False)]
        left = _terms(rng, js, [_coef_text(rng) for _ in js])
    else:
        j = int(rng.integers(n_out))
        left = [("var", None, j)]
    v = _value(left, y)
    if shift is not None:
        v = v + shift if op == ">=" else v - shift
    return Atom(op, left, [("const", decimal(v))], flip=rng.random() < 0.2)


def _compare_atom(rng, n_out, i=None, j=None, strict_form=False):
    if i is None:
        i, j = (int(v) for v in rng.choice(n_out, size=2, replace=False))
    op = str(rng.choice(["<=", ">="]))
    form = rng.choice(["plain", "plain", "diff", "scaled"])
    if form == "plain":
        return Atom(op, [("var", None, i)], [("var", None, j)])
    if form == "diff":
        return Atom(op, [("var", None, i), ("var", "-1", j)], [("const", "0")])
    c = _coef_text(rng).lstrip("-")
    return Atom(op, [("var", c, i)], [("var", c, j)])


def random_prop(rng, net, ev, name: str) -> Prop:
    """A random property for `net`; `ev(x)` is onnxruntime's float32 output
    (flattened) at a flattened float32 input."""
    n_out = net.n_out
    lo, hi, boxkind = random_box(rng, net)
    box32 = float32_box(lo, hi)
    hints = []
    if net.softmax:
        kinds = ["compare", "robust", "compare_pair"]
    else:
        kinds = ["attained"] * 3 + ["attained_multi"] * 2 + ["shifted"] * 2 + ["zero_sum", "compare", "robust", "robust", "mixed", "mixed"]
    kind = str(rng.choice(kinds))
    disjuncts = []
    expect = None

    def point():
        if box32 is None:
            return None
        x = sample_in(rng, box32, str(rng.choice(["centre", "corner", "random"])))
        return x, ev(x)

    if kind in ("attained", "attained_multi", "shifted", "mixed"):
        for d in range(int(rng.integers(1, 4))):
            p = point()
            if p is None:
                y = ev(np.zeros(net.n_in, F32))
                x = None
            else:
                x, y = p
            if not np.all(np.isfinite(y)):
                continue
            atoms = []
            shift = None
            if kind == "shifted" or (kind == "mixed" and rng.random() < 0.5):
                mag = max(abs(float(y[int(rng.integers(n_out))])), 1e-30)
                e = float(rng.choice([1e-7, 1e-5, 1e-3, 0.1, 1.0])) * mag
                shift = Fraction(f"{e:.3g}") * int(rng.choice([1, -1]))
            for _ in range(int(rng.integers(1, 3))):
                atoms.append(_attained_atom(rng, y, n_out, kind != "attained" and rng.random() < 0.7, shift))
            if kind == "mixed" and n_out >= 2 and rng.random() < 0.5:
                a = _compare_atom(rng, n_out)
                atoms.append(a)
            disjuncts.append(Disjunct(lo, hi, atoms))
            if shift is None and x is not None and kind != "mixed":
                hints.append(x)
                expect = "sat"
    elif kind == "zero_sum":
        j = int(rng.integers(n_out))
        rhs = str(rng.choice(["0.0", "0", "0.0", "-0.5", "1e-40"]))
        op = str(rng.choice([">=", "<="]))
        items = [("var", "0.3", j), ("var", "-0.1", j), ("var", "-0.2", j)]
        disjuncts.append(Disjunct(lo, hi, [Atom(op, items, [("const", rhs)])]))
        holds = (op == ">=" and Fraction(rhs) <= 0) or (op == "<=" and Fraction(rhs) >= 0)
        if holds and box32 is not None:
            expect = "sat"
            hints.append(sample_in(rng, box32, "centre"))
    elif kind in ("compare", "compare_pair"):
        if n_out < 2:
            disjuncts.append(Disjunct(lo, hi, [Atom("<=", [("var", None, 0)], [("var", None, 0)])]))
        elif kind == "compare_pair" and net.n_out >= 4 and "Softmax:big" in net.features:
            # the subnormal pairs of big_softmax_net
            k = 2 * int(rng.integers(2))
            atom = Atom("<=", [("var", None, k + 1)], [("var", None, k)])
            disjuncts.append(Disjunct(lo, hi, [atom]))
        else:
            for _ in range(int(rng.integers(1, 4))):
                disjuncts.append(Disjunct(lo, hi, [_compare_atom(rng, n_out) for _ in range(int(rng.integers(1, 3)))]))
    else:  # robust: the label stays the largest
        y = ev(sample_in(rng, box32, "centre")) if box32 is not None else ev(np.zeros(net.n_in, F32))
        label = int(np.nanargmax(y)) if np.any(np.isfinite(y)) else 0
        if n_out < 2:
            disjuncts.append(Disjunct(lo, hi, [Atom("<=", [("var", None, 0)], [("const", exact_f32(y[0]))])]))
        else:
            others = [j for j in range(n_out) if j != label]
            if len(others) > 8:
                others = [int(v) for v in rng.choice(others, size=8, replace=False)]
            for j in others:
                disjuncts.append(Disjunct(lo, hi, [Atom("<=", [("var", None, label)], [("var", None, j)])]))
    if not disjuncts:
        disjuncts.append(Disjunct(lo, hi, [Atom(">=", [("var", None, 0)], [("const", "0")])]))
    prop = Prop(name, disjuncts, kind=f"{kind}/{boxkind}", hints=hints, expect=expect)
    prop.top_level_box = rng.random() < 0.85
    return prop


def tight_prop(rng, net, ev, name: str) -> Prop:
    """A point box at a float32 point (exact decimals) and one threshold
    exactly at onnxruntime's output there, `>=` or `<=` (with a second
    disjunct for the other direction half of the time): reachable, so any
    unsat is wrong."""
    x = rng.uniform(-1, 1, net.n_in).astype(F32)
    if net.anchor is not None and rng.random() < 0.3:
        x = net.anchor.astype(F32)
    y = ev(x)
    fin = [j for j in range(net.n_out) if np.isfinite(y[j])]
    if net.softmax or not fin:
        return random_prop(rng, net, ev, name)
    xs = [exact_f32(v) for v in x]
    j = int(rng.choice(fin))
    ops = [str(rng.choice(["<=", ">="]))]
    if rng.random() < 0.5:
        ops.append("<=" if ops[0] == ">=" else ">=")
    ds = [Disjunct(xs, xs, [Atom(op, [("var", None, j)], [("const", exact_f32(y[j]))])]) for op in ops]
    return Prop(name, ds, kind="tight/point-exact", hints=[x], expect="sat")
