//! Optimised slopes for a ReLU search root's intermediate bounds
//! (α-CROWN's per-neuron α).
//!
//! DeepPoly bounds each unstable ReLU input with the relaxation's own lower
//! slopes. On deep MLPs those bounds are loose, and every later layer
//! inherits the looseness (256x6 MNIST: the last three layers wholly
//! unstable). Here each end of each unstable ReLU input, layer by layer,
//! gets lower slopes of its own for the ReLUs before it, chosen on the host
//! (`lagrange::neuron_slopes`).
//!
//! **Why it is sound.** The host only picks the slopes. Each end is then
//! bounded by the backend's sound backsubstitution, in a batch slot of its
//! own that holds the root's box, the bounds found so far as its prior, and
//! its slopes in its relaxation table (any slope in `[0, 1]` is a valid lower
//! line). A new bound only replaces a looser one. The search's root leaves
//! start from the result (`Leaf::prior`), and every leaf intersects its
//! bounds with its parent's, so the whole tree inherits them.

use crate::analysis::{AnalysisError, Analyzer};
use crate::backend::Backend;
use crate::backsub::{Goal, Rows};
use crate::batch::NodeBounds;
use crate::ir::Op;
use crate::lagrange::{Slopes, SlotBounds, neuron_slopes, rounding_offsets};
use crate::property::InputBox;
use crate::relax::unstable;
use polycert_interval::{Fp, fp};
use rayon::prelude::*;
use std::collections::HashMap;
use std::time::Instant;

/// Layers with more unstable neurons than this keep DeepPoly's bounds (the
/// host search costs a backward pass per end and Adam step).
const MAX_UNSTABLE: usize = 512;

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// A ReLU search root's node bounds: both passes' (DeepPoly), then
    /// tightened with per-neuron slopes.
    pub(crate) fn root_prior(
        &self,
        input: &InputBox,
        deadline: Option<Instant>,
    ) -> Result<NodeBounds<T>, AnalysisError> {
        let mut st = self.forward_pass(&[input])?;
        if self.opts.refine {
            self.refine_all(&mut st, &[0], &[], deadline)?;
        }
        let mut bounds: NodeBounds<T> = st.bounds.into_iter().map(|b| (b.lo, b.hi)).collect();
        self.tighten_intermediate(input, &mut bounds, deadline)?;
        Ok(bounds)
    }

    /// [`Analyzer::node_bounds`] tightened as a ReLU search's root is (see
    /// the module's notes); crossed bounds mean the box holds no input.
    pub fn tightened_node_bounds(&self, input: &InputBox) -> Result<Vec<crate::analysis::NodeBounds>, AnalysisError> {
        let deadline = self.opts.timeout.map(|t| Instant::now() + t);
        let b = self.root_prior(input, deadline)?;
        let f64s = |v: Vec<T>| v.into_iter().map(|x| x.to_f64_exact()).collect();
        Ok(b.into_iter().map(|(l, h)| (f64s(l), f64s(h))).collect())
    }

    /// Tightens `bounds` (a root's node bounds over `input`) in place. It
    /// stops once some neuron's bounds cross: the box holds no input, which
    /// the root's own analysis then finds.
    pub(crate) fn tighten_intermediate(
        &self,
        input: &InputBox,
        bounds: &mut NodeBounds<T>,
        deadline: Option<Instant>,
    ) -> Result<(), AnalysisError> {
        let _p = crate::profile::span("tighten");
        let net = self.net;
        let nodes = net.nodes();
        let lower = self.opts.relu_lower;
        let cap = self.batch_capacity().max(1);
        let offsets = rounding_offsets::<T>(net, &vec![None; nodes.len()]);
        // The first ReLU's input depends on no slope: skip it.
        let relus: Vec<usize> = (0..nodes.len()).filter(|&r| nodes[r].op == Op::Relu).skip(1).collect();
        for r in relus {
            let p = nodes[r].inputs[0];
            let n = nodes[p].shape.numel();
            let (lo, hi) = &bounds[p];
            let ends: Vec<(usize, f64)> =
                (0..n).filter(|&i| unstable(lo[i], hi[i])).flat_map(|i| [(i, 1.0), (i, -1.0)]).collect();
            if ends.is_empty() || ends.len() > 2 * MAX_UNSTABLE {
                continue;
            }
            let chosen: Vec<(usize, f64, Slopes)> = {
                let _p = crate::profile::span("tighten.slopes");
                let view: SlotBounds<'_, T> = bounds.iter().map(|(l, h)| (&l[..], &h[..])).collect();
                ends.par_iter()
                    .filter_map(|&(i, s)| neuron_slopes(net, (&view, &offsets), (p, i, s), lower).map(|a| (i, s, a)))
                    .collect()
            };
            for chunk in chosen.chunks(cap) {
                Self::check_deadline(deadline)?;
                let lbs = self.bound_ends(input, bounds, p, chunk, deadline)?;
                let (lo, hi) = &mut bounds[p];
                for (&(i, s, _), &lb) in chunk.iter().zip(&lbs) {
                    if s > 0.0 {
                        lo[i] = lo[i].max(fp::from_f64_down(lb));
                    } else {
                        hi[i] = hi[i].min(fp::from_f64_up(-lb));
                    }
                }
            }
            let (lo, hi) = &bounds[p];
            if lo.iter().zip(hi).any(|(l, h)| l > h) {
                return Ok(());
            }
            // The ReLU's own bounds follow exactly.
            let relu = (lo.iter().map(|&v| v.max(T::zero())).collect(), hi.iter().map(|&v| v.max(T::zero())).collect());
            bounds[r] = relu;
        }
        Ok(())
    }

    /// Sound lower bounds of `s·x_i` at node `p`, one slot per end with its
    /// slopes, all slots over `input` within `bounds`.
    fn bound_ends(
        &self,
        input: &InputBox,
        bounds: &NodeBounds<T>,
        p: usize,
        ends: &[(usize, f64, Slopes)],
        deadline: Option<Instant>,
    ) -> Result<Vec<f64>, AnalysisError> {
        let inputs = vec![input; ends.len()];
        let prior = vec![Some(bounds); ends.len()];
        let mut st = self.forward_pass_within(&inputs, &prior)?;
        if st.empty.iter().any(|&e| e) {
            // Crossed bounds: nothing to gain; the root's analysis proves it.
            return Ok(vec![f64::NEG_INFINITY; ends.len()]);
        }
        let slopes: HashMap<usize, Slopes> = ends.iter().enumerate().map(|(k, e)| (k, e.2.clone())).collect();
        self.set_slopes(&mut st, &slopes)?;
        let neurons: Vec<usize> = ends.iter().map(|e| e.0).collect();
        let val = ends.iter().map(|e| if e.1 > 0.0 { T::one() } else { -T::one() }).collect();
        let rows = Rows::units(p, self.net.node(p).shape, &neurons, (0..ends.len() as u32).collect(), val);
        self.backsubstitute(&mut st, &rows, Goal::NonNegative, deadline)
    }
}
