//! The two passes: tightening unstable ReLU inputs, and proving the
//! property's half-spaces infeasible.

use crate::analysis::{AnalysisError, Analyzer};
use crate::backend::{Backend, BackendError};
use crate::backsub::{Goal, Rows};
use crate::forward::RunState;
use crate::geom::Geom;
use crate::ir::Op;
use crate::property::SubProblem;
use polycert_interval::{Fp, fp};
use std::time::Instant;

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Lower bound of `c·y − d` for every half-space (flattened in order),
    /// and whether every disjunct has an infeasible half-space.
    pub(crate) fn prove_output(
        &self,
        st: &mut RunState<T, B::Buf>,
        sp: &SubProblem,
        deadline: Option<Instant>,
    ) -> Result<(Vec<f64>, bool), AnalysisError> {
        let out = self.net.output();
        let shape = self.net.output_shape();
        let n = shape.numel();
        let (mut lo, mut hi, mut cst, mut group) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (gi, conj) in sp.unsafe_region.iter().enumerate() {
            for h in conj {
                lo.extend(h.c.iter().map(|&c| fp::from_f64_down::<T>(c)));
                hi.extend(h.c.iter().map(|&c| fp::from_f64_up::<T>(c)));
                cst.push(-h.d);
                group.push(gi as u32);
            }
        }
        debug_assert_eq!(lo.len(), cst.len() * n);
        let rows = Rows { start: out, geom: Geom::full(shape, cst.len()), lo, hi, cst, group };
        let lbs = self.backsubstitute(st, &rows, Goal::Positive, deadline)?;
        let mut k = 0;
        let mut proved = true;
        for conj in &sp.unsafe_region {
            proved &= lbs[k..k + conj.len()].iter().any(|&l| l > 0.0);
            k += conj.len();
        }
        Ok((lbs, proved))
    }

    /// Tightens the input bounds of every ReLU whose interval straddles 0,
    /// layer by layer in topological order. After a layer, the forward pass
    /// re-runs only up to the next layer to refine (backsubstitution from a
    /// node reads nothing later), and to the end once all are done.
    pub(crate) fn refine_all(
        &self,
        st: &mut RunState<T, B::Buf>,
        deadline: Option<Instant>,
    ) -> Result<(), AnalysisError> {
        let last = self.net.nodes().len() - 1;
        // Nodes `..=fresh` reflect every refinement so far.
        let mut fresh = last;
        for r in 0..self.net.nodes().len() {
            if !matches!(self.net.node(r).op, Op::Relu) {
                continue;
            }
            let p = self.net.node(r).inputs[0];
            if p > fresh {
                self.forward_range(st, fresh, p)?;
                fresh = p;
            }
            let shape = self.net.node(p).shape;
            let b = &st.bounds[p];
            let unstable: Vec<usize> =
                (0..b.lo.len()).filter(|&i| b.lo[i] < T::zero() && b.hi[i] > T::zero()).collect();
            if unstable.is_empty() {
                continue;
            }
            // Two rows per neuron: +x_i bounds l_i, −x_i bounds −u_i.
            let neurons: Vec<usize> = unstable.iter().flat_map(|&i| [i, i]).collect();
            let geom = Geom::unit(shape, &neurons);
            let c = shape.c;
            let hw = shape.h * shape.w;
            let mut lo = vec![T::zero(); neurons.len() * c];
            for (row, &i) in neurons.iter().enumerate() {
                lo[row * c + i / hw] = if row % 2 == 0 { T::one() } else { -T::one() };
            }
            let hi = lo.clone();
            let group = (0..neurons.len() as u32).collect();
            let rows = Rows { start: p, geom, lo, hi, cst: vec![0.0; neurons.len()], group };
            let lbs = self.backsubstitute(st, &rows, Goal::NonNegative, deadline)?;
            let b = &mut st.bounds[p];
            for (t, &i) in unstable.iter().enumerate() {
                b.lo[i] = b.lo[i].max(fp::from_f64_down(lbs[2 * t]));
                b.hi[i] = b.hi[i].min(fp::from_f64_up(-lbs[2 * t + 1]));
                if b.lo[i] > b.hi[i] {
                    let msg = format!("inconsistent bounds for neuron {i} of '{}'", self.net.node(p).name);
                    return Err(BackendError::Failure(msg).into());
                }
            }
            b.dev = None;
            st.invalidate_from(p);
            fresh = p;
        }
        if fresh < last {
            self.forward_range(st, fresh, last)?;
        }
        Ok(())
    }
}
