//! The input side of a conjunction: the box of its bounds on single
//! inputs, and its linear constraints over several inputs decided on it.

use super::num::Num;
use super::sexpr::{Pos, Sx};
use super::{Bound, Cls, Lin, Parser, Q, VnnlibError, exact};
use num_traits::{One, Signed, Zero};
use polycert_deeppoly::InputBox;
use std::cmp::Ordering;

impl Parser<'_> {
    /// `(op X_i c)` or `(op c X_i)` with a decimal `c`: the bound on one
    /// input that [`Parser::classify`] would make of it, read directly (a box
    /// of 3,072 bounds is most of an image property's parse). `None` for any
    /// other atom.
    pub(super) fn input_bound(&self, op: &str, a: &Sx, b: &Sx) -> Result<Option<Cls>, VnnlibError> {
        let (Sx::Atom(sa, pa), Sx::Atom(sb, pb)) = (a, b) else { return Ok(None) };
        // `lhs ≤ rhs` (strict for `<`, `>`).
        let (lhs, rhs) = match op {
            "<=" | "<" => ((sa, pa), (sb, pb)),
            ">=" | ">" => ((sb, pb), (sa, pa)),
            _ => return Ok(None),
        };
        let strict = matches!(op, "<" | ">");
        let var = |(s, p): (&std::borrow::Cow<'_, str>, &Pos)| -> Result<Option<usize>, VnnlibError> {
            if self.v2 {
                return Ok(None);
            }
            Ok(match self.var_name(s, *p)? {
                Some((0, i)) if self.declared[0][i] => Some(i),
                _ => None,
            })
        };
        let (i, c, upper) = match (var(lhs)?, var(rhs)?) {
            (Some(i), None) => (i, rhs, true),
            (None, Some(i)) => (i, lhs, false),
            _ => return Ok(None),
        };
        let Some(v) = Num::decimal(c.0) else { return Ok(None) };
        let v = v.map_err(|m| self.err(*c.1, m))?;
        Ok(Some(Cls::Bound(i, upper, Bound { v, strict })))
    }

    /// Whether a conjunction's linear constraints over several inputs can
    /// hold on its box: `None` where one holds nowhere on it (exactly, in
    /// rationals over the box's closure); else the half-spaces, over the
    /// inputs' copies among the outputs (VNNLIB 2.0), of those that cut the
    /// box, which join the unsafe region. An error where one cuts the box
    /// and its inputs have no copies (the region is then a polytope).
    pub(super) fn inputs_meet<'c>(
        &self,
        atoms: impl Iterator<Item = &'c Cls> + Clone,
    ) -> Result<Option<Vec<polycert_deeppoly::Halfspace>>, VnnlibError> {
        let mut cuts = Vec::new();
        let n_in = self.n[0];
        let (mut lo, mut hi): (Vec<Option<Bound>>, Vec<Option<Bound>>) = (vec![None; n_in], vec![None; n_in]);
        for a in atoms.clone() {
            match a {
                Cls::Bound(i, true, b) => tighter(&mut hi[*i], b, true),
                Cls::Bound(i, false, b) => tighter(&mut lo[*i], b, false),
                _ => {}
            }
        }
        for a in atoms {
            let Cls::InLin(terms, rhs) = a else { continue };
            let (mut min, mut max) = (Q::zero(), Q::zero());
            for (i, c) in terms {
                let (Some(l), Some(h)) = (&lo[*i], &hi[*i]) else {
                    return Err(self.semantic(format!("X_{i} is in a linear constraint but has no bounds")));
                };
                let (a, b) = (c * l.v.q().as_ref(), c * h.v.q().as_ref());
                let (small, large) = if c.is_positive() { (a, b) } else { (b, a) };
                (min, max) = (min + small, max + large);
            }
            let r = rhs.v.q();
            let nowhere = if rhs.strict { min >= *r } else { min > *r };
            let everywhere = if rhs.strict { max < *r } else { max <= *r };
            if nowhere {
                return Ok(None);
            }
            if !everywhere {
                let copies: Option<_> =
                    terms.iter().map(|(i, c)| Some(((1, *self.mirror.get(i)?), c.clone()))).collect();
                let Some(terms) = copies else {
                    return Err(self.semantic(
                        "a linear constraint over several inputs cuts the input box (only boxes are supported)".into(),
                    ));
                };
                let pos = super::sexpr::Pos { line: 1, col: 1 };
                match self.classify(Lin { terms, k: -r.into_owned() }, rhs.strict, pos)? {
                    Cls::Out(h) => cuts.push(h),
                    other => unreachable!("a constraint over outputs classifies as one: {other:?}"),
                }
            }
        }
        Ok(Some(cuts))
    }

    /// The box of a conjunction's input bounds (`None`: empty).
    pub(super) fn input_box<'c>(&self, atoms: impl Iterator<Item = &'c Cls>) -> Result<Option<InputBox>, VnnlibError> {
        let n_in = self.n[0];
        let mut lo: Vec<Option<Bound>> = vec![None; n_in];
        let mut hi: Vec<Option<Bound>> = vec![None; n_in];
        for a in atoms {
            match a {
                Cls::Bound(i, true, b) => tighter(&mut hi[*i], b, true),
                Cls::Bound(i, false, b) => tighter(&mut lo[*i], b, false),
                _ => {}
            }
        }
        if let Some(i) = (0..n_in).find(|&i| lo[i].is_none() || hi[i].is_none()) {
            let which = if lo[i].is_none() { "lower" } else { "upper" };
            return Err(self.semantic(format!("X_{i} has no {which} bound")));
        }
        let (lo, hi): (Vec<Bound>, Vec<Bound>) =
            (lo.into_iter().flatten().collect(), hi.into_iter().flatten().collect());
        let nonempty = |(l, h): (&Bound, &Bound)| match l.v.cmp(&h.v) {
            Ordering::Less => true,
            Ordering::Equal => !l.strict && !h.strict,
            Ordering::Greater => false,
        };
        if !lo.iter().zip(&hi).all(nonempty) {
            return Ok(None);
        }
        stated_box(&lo, &hi).map(Some).map_err(|e| self.semantic(e.to_string()))
    }
}

/// `lin ≤ rhs` (`<` when strict) over inputs only: a bound on one input,
/// or a linear constraint over several.
pub(super) fn input_atom(lin: Lin, rhs: Q, strict: bool) -> Cls {
    let [(&(_, i), c)] = lin.terms.iter().collect::<Vec<_>>()[..] else {
        let terms = lin.terms.into_iter().map(|((_, i), c)| (i, c)).collect();
        return Cls::InLin(terms, Bound { v: Num::Q(rhs), strict });
    };
    let v = if c.is_one() {
        rhs
    } else if (-c).is_one() {
        -rhs
    } else {
        rhs / c
    };
    Cls::Bound(i, c.is_positive(), Bound { v: Num::Q(v), strict })
}

/// Keeps the tighter of `b` and the bound in `slot` (an upper bound when
/// `upper`); at equal values the strict one.
pub(super) fn tighter(slot: &mut Option<Bound>, b: &Bound, upper: bool) {
    let replace = match slot {
        None => true,
        Some(old) => {
            let inside = if upper { Ordering::Less } else { Ordering::Greater };
            match b.v.cmp(&old.v) {
                Ordering::Equal => b.strict && !old.strict,
                o => o == inside,
            }
        }
    };
    if replace {
        *slot = Some(b.clone());
    }
}

/// The analysis's box (each stated bound rounded outward to f64) with the
/// float32 inputs inside the stated box.
pub(super) fn stated_box(
    lo: &[Bound],
    hi: &[Bound],
) -> Result<InputBox, polycert_deeppoly::base::property::PropertyError> {
    let (lo_r, hi_r): (Vec<_>, Vec<_>) =
        (lo.iter().map(|b| b.v.rounded()).collect(), hi.iter().map(|b| b.v.rounded()).collect());
    let lo64 = lo_r.iter().map(exact::Rounded::f64_down).collect();
    let hi64 = hi_r.iter().map(exact::Rounded::f64_up).collect();
    let lo32 = lo_r.iter().zip(lo).map(|(r, b)| r.f32_above(b.strict)).collect();
    let hi32 = hi_r.iter().zip(hi).map(|(r, b)| r.f32_below(b.strict)).collect();
    InputBox::new(lo64, hi64)?.with_float32(lo32, hi32)
}
