//! Elementwise functions of one value. Exact ones, which float inference
//! computes without rounding: steps and selections by a comparison with a
//! constant (ONNX's Equal, Greater, Less and the like, Where between the
//! value and a constant, Cast to bool), and truncation to an integer (Cast
//! to int32 or int64): each output is the input itself or a constant. And
//! powers `x^e` and exponentials `b^x`, within a tolerance (`power.rs`).
//!
//! **Relaxation** of the exact ones. Over an input interval `[l, u]` that
//! reaches one piece only, that piece is exact (the identity or the
//! constant). Otherwise the output lies between constant bounds: the least
//! and greatest value the reachable pieces take there. No relaxation has a
//! free parameter.

pub use super::power::PowerFn;

/// A comparison of the value `x` with a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

/// What a selection outputs: the value itself or a constant (a float32).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Piece {
    Value,
    Const(f64),
}

/// An exact elementwise function of one value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Elementwise {
    /// `if x cmp at { then } else { other }`.
    Select { cmp: Cmp, at: f64, then: Piece, other: Piece },
    /// `x` truncated toward zero to a signed integer of `bits` bits. Out of
    /// range the runtime's result is undefined, but an integer of that type.
    Trunc { bits: u32 },
    /// `x^e` or `b^x`, deployed within a tolerance.
    Power(PowerFn),
    /// `x²` exactly: arithmetic only the analysis does (a property's
    /// product of two variables), not a runtime op.
    Square,
}

impl Cmp {
    pub fn holds(self, x: f64, at: f64) -> bool {
        match self {
            Cmp::Gt => x > at,
            Cmp::Ge => x >= at,
            Cmp::Lt => x < at,
            Cmp::Le => x <= at,
            Cmp::Eq => x == at,
            Cmp::Ne => x != at,
        }
    }

    /// Whether some `x` in `[l, u]` makes the comparison true, and some false.
    fn reaches(self, (l, u): (f64, f64), at: f64) -> (bool, bool) {
        let (gt, ge, lt, le) = (u > at, u >= at, l < at, l <= at);
        let point = l == at && u == at;
        match self {
            Cmp::Gt => (gt, le),
            Cmp::Ge => (ge, lt),
            Cmp::Lt => (lt, ge),
            Cmp::Le => (le, gt),
            Cmp::Eq => (le && ge, !point),
            Cmp::Ne => (!point, le && ge),
        }
    }
}

/// A relaxation `lam_lo·x + mu_lo ≤ f(x) ≤ lam_up·x + mu_up` over an
/// interval, with the output's bounds `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Relaxation {
    pub lam_lo: f64,
    pub mu_lo: f64,
    pub lam_up: f64,
    pub mu_up: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Relaxation {
    pub(crate) fn identity((l, u): (f64, f64)) -> Self {
        Self { lam_lo: 1.0, mu_lo: 0.0, lam_up: 1.0, mu_up: 0.0, lo: l, hi: u }
    }

    pub(crate) fn between(lo: f64, hi: f64) -> Self {
        Self { lam_lo: 0.0, mu_lo: lo, lam_up: 0.0, mu_up: hi, lo, hi }
    }
}

impl Elementwise {
    /// Whether it is computed exactly where its result is a float32 (every
    /// output is `x` or a constant, or `x²`).
    pub fn is_exact(self) -> bool {
        !matches!(self, Elementwise::Power(_))
    }

    /// The function at `x` (exact where [`Elementwise::is_exact`]).
    pub fn eval(self, x: f64) -> f64 {
        match self {
            Elementwise::Power(p) => p.eval(x),
            Elementwise::Square => x * x,
            Elementwise::Select { cmp, at, then, other } => {
                let p = if cmp.holds(x, at) { then } else { other };
                match p {
                    Piece::Value => x,
                    Piece::Const(c) => c,
                }
            }
            Elementwise::Trunc { bits } => {
                let r = range(bits);
                if x.is_nan() || x < -r || x >= r { -r } else { x.trunc() }
            }
        }
    }

    /// The derivative where it exists (1 on the value's piece, else 0).
    pub fn slope(self, x: f64) -> f64 {
        match self {
            Elementwise::Power(p) => p.slope(x),
            Elementwise::Square => 2.0 * x,
            Elementwise::Select { cmp, at, then, other } => {
                let p = if cmp.holds(x, at) { then } else { other };
                if p == Piece::Value { 1.0 } else { 0.0 }
            }
            Elementwise::Trunc { .. } => 0.0,
        }
    }

    /// A sound relaxation over `[l, u]` (`l ≤ u`); `None` where the
    /// function may be undefined there (a power's pole, say).
    pub fn relax(self, (l, u): (f64, f64)) -> Option<Relaxation> {
        Some(match self {
            Elementwise::Power(p) => return p.relax((l, u)),
            Elementwise::Square => return PowerFn::Power(2.0).relax_exact((l, u)),
            Elementwise::Select { cmp, at, then, other } => {
                let (yes, no) = cmp.reaches((l, u), at);
                let reached: Vec<Piece> = [(yes, then), (no, other)].iter().filter(|(r, _)| *r).map(|p| p.1).collect();
                match reached[..] {
                    [Piece::Value] | [Piece::Value, Piece::Value] => Relaxation::identity((l, u)),
                    [Piece::Const(c)] => Relaxation::between(c, c),
                    _ => {
                        let span = |p: &Piece| match *p {
                            Piece::Value => (l, u),
                            Piece::Const(c) => (c, c),
                        };
                        let lo = reached.iter().map(|p| span(p).0).fold(f64::INFINITY, f64::min);
                        let hi = reached.iter().map(|p| span(p).1).fold(f64::NEG_INFINITY, f64::max);
                        Relaxation::between(lo, hi)
                    }
                }
            }
            Elementwise::Trunc { bits } => {
                let r = range(bits);
                if l < -r || u >= r {
                    // Some input is out of range: any integer of the type.
                    return Some(Relaxation::between(-r, r));
                }
                Relaxation::between(l.trunc(), u.trunc())
            }
        })
    }

    /// The constants it can output (float32 values, checked by the importer).
    pub fn constants(self) -> Vec<f64> {
        match self {
            Elementwise::Select { then, other, .. } => {
                [then, other].into_iter().filter_map(|p| if let Piece::Const(c) = p { Some(c) } else { None }).collect()
            }
            Elementwise::Trunc { bits } => vec![-range(bits), range(bits)],
            Elementwise::Power(_) | Elementwise::Square => Vec::new(),
        }
    }
}

/// `2^(bits−1)`: the integer type's values lie in `[−r, r)`.
fn range(bits: u32) -> f64 {
    2f64.powi(bits as i32 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every relaxation holds at every point of its interval, on a grid that
    /// includes the thresholds.
    #[test]
    fn relaxations_enclose_the_function() {
        let fs = [
            Elementwise::Select { cmp: Cmp::Gt, at: -1.0, then: Piece::Value, other: Piece::Const(10.0) },
            Elementwise::Select { cmp: Cmp::Eq, at: 0.0, then: Piece::Const(1.0), other: Piece::Const(0.0) },
            Elementwise::Select { cmp: Cmp::Ne, at: 0.5, then: Piece::Const(1.0), other: Piece::Value },
            Elementwise::Select { cmp: Cmp::Le, at: 2.0, then: Piece::Value, other: Piece::Value },
            Elementwise::Select { cmp: Cmp::Lt, at: 0.0, then: Piece::Const(-3.0), other: Piece::Value },
            Elementwise::Select { cmp: Cmp::Ge, at: 1.5, then: Piece::Const(2.0), other: Piece::Const(-2.0) },
            Elementwise::Trunc { bits: 8 },
            Elementwise::Trunc { bits: 64 },
        ];
        let grid: Vec<f64> = (-12..=12).map(|k| k as f64 * 0.25).chain([-300.0, 300.0]).collect();
        for f in fs {
            for (i, &l) in grid.iter().enumerate() {
                for &u in &grid[i..] {
                    let r = f.relax((l, u)).unwrap();
                    for &x in grid.iter().filter(|&&x| l <= x && x <= u) {
                        let y = f.eval(x);
                        let ok = r.lam_lo * x + r.mu_lo <= y && y <= r.lam_up * x + r.mu_up && r.lo <= y && y <= r.hi;
                        assert!(ok, "{f:?} on [{l}, {u}] at {x}: {y} vs {r:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn one_piece_is_exact() {
        let f = Elementwise::Select { cmp: Cmp::Gt, at: -1.0, then: Piece::Value, other: Piece::Const(10.0) };
        assert_eq!(f.relax((0.0, 1.0)), Some(Relaxation::identity((0.0, 1.0))));
        assert_eq!(f.relax((-3.0, -1.0)), Some(Relaxation::between(10.0, 10.0)));
        assert_eq!(f.relax((-3.0, 1.0)), Some(Relaxation::between(-3.0, 10.0)));
        assert_eq!(Elementwise::Trunc { bits: 64 }.relax((2.1, 2.4)), Some(Relaxation::between(2.0, 2.0)));
        assert_eq!(Elementwise::Trunc { bits: 8 }.relax((100.0, 200.0)), Some(Relaxation::between(-128.0, 128.0)));
    }
}
