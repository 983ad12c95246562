//! The input side of a conjunction: the box of its bounds on single
//! inputs, and its linear constraints over several inputs decided on it.

use super::{Bound, Cls, Lin, Parser, Q, VnnlibError, exact, stated_box, tighter};
use num_traits::{Signed, Zero};
use polycert_deeppoly::InputBox;
use std::cmp::Ordering;

impl Parser<'_> {
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
                let (a, b) = (c * &l.v, c * &h.v);
                let (small, large) = if c.is_positive() { (a, b) } else { (b, a) };
                (min, max) = (min + small, max + large);
            }
            let nowhere = if rhs.strict { min >= rhs.v } else { min > rhs.v };
            let everywhere = if rhs.strict { max < rhs.v } else { max <= rhs.v };
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
                match self.classify(Lin { terms, k: -rhs.v.clone() }, rhs.strict, pos)? {
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
        let nonempty = |(l, h): (&Bound, &Bound)| match exact::cmp_q(&l.v, &h.v) {
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
