"""Exact float32 / decimal helpers (fractions.Fraction only)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

F32 = np.float32
F32_MAX = Fraction(float(np.finfo(F32).max))


def frac(v) -> Fraction:
    """The exact value of a finite float32/float64."""
    return Fraction(float(v))


def decimal(q: Fraction) -> str:
    """The exact decimal expansion of `q` (its denominator must be 2^a·5^b)."""
    num, den = q.numerator, q.denominator
    a = b = 0
    d = den
    while d % 2 == 0:
        d //= 2
        a += 1
    while d % 5 == 0:
        d //= 5
        b += 1
    if d != 1:
        raise ValueError(f"{q} has no finite decimal expansion")
    k = max(a, b)
    scaled = num * (10**k) // den
    sign = "-" if scaled < 0 else ""
    s = str(abs(scaled)).rjust(k + 1, "0")
    if k == 0:
        return sign + s + ".0"
    return f"{sign}{s[:-k]}.{s[-k:]}"


def exact_f32(v) -> str:
    return decimal(frac(F32(v)))


def key(f) -> int:
    """An order-preserving integer for a float32 (±0 share 0)."""
    i = int(np.asarray(F32(f)).view(np.int32))
    return i if i >= 0 else -(i & 0x7FFFFFFF)


def unkey(k: int) -> np.float32:
    bits = k if k >= 0 else ((-k) | 0x80000000)
    return np.asarray(np.uint32(bits)).view(F32)[()]


def next_up(f):
    return unkey(key(f) + 1)


def next_down(f):
    return unkey(key(f) - 1)


def f32_above(q: Fraction):
    """The smallest float32 >= q (None when q is above every finite float32)."""
    if q > F32_MAX:
        return None
    if q < -F32_MAX:
        return F32(-np.finfo(F32).max)
    f = F32(float(q))
    if not np.isfinite(f):
        f = F32(np.copysign(np.finfo(F32).max, float(q)))
    while frac(f) < q:
        f = next_up(f)
    while True:
        g = next_down(f)
        if np.isfinite(g) and frac(g) >= q:
            f = g
        else:
            break
    return f


def f32_below(q: Fraction):
    """The largest float32 <= q (None when q is below every finite float32)."""
    r = f32_above(-q)
    return None if r is None else F32(-r) + F32(0)  # +0.0, not -0.0


def just_below(f) -> str:
    """A decimal one unit in the digit after the last below the float32 `f`
    (e.g. 1.000000119209289550781249 for 1 + 2^-23)."""
    s = exact_f32(f)
    q = Fraction(s)
    digits = len(s.split(".")[1]) + 1
    return decimal(q - Fraction(1, 10**digits))


def just_above(f) -> str:
    s = exact_f32(f)
    q = Fraction(s)
    digits = len(s.split(".")[1]) + 1
    return decimal(q + Fraction(1, 10**digits))


def midpoint(f, g) -> str:
    return decimal((frac(F32(f)) + frac(F32(g))) / 2)
