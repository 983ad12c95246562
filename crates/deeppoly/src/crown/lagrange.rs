//! The free parameters of a leaf's output bound, chosen on the host.
//!
//! - **Split constraints (β-CROWN's Lagrangian terms).** On a leaf with
//!   split constraints `g_k = s_k·x_k ≥ 0` (`s_k = +1` for an active split,
//!   −1 for an inactive one), `f ≥ f − Σ β_k·g_k` for any `β ≥ 0`: the
//!   leaf's objective rows start with `−β_k·s_k` on each split neuron besides
//!   `c` on the outputs, and the sound backsubstitution bounds the sum.
//! - **Optimised lower slopes (α-CROWN).** An unstable ReLU's lower line
//!   `y ≥ α·x` is valid for every `α ∈ [0, 1]` (exactly: `α·x ≤ 0` for
//!   `x ≤ 0` and `≤ x` for `x ≥ 0`), so a slot's slopes are free parameters
//!   of its output rows' bounds. They are shared by the slot's rows.
//!
//! Any `β ≥ 0` and `α ∈ [0, 1]` is sound, so both are chosen without
//! rounding care: by projected supergradient ascent (Adam) on the relaxed
//! bound `L(α, β)`, evaluated at the input corner that minimises it, where
//! `∂L/∂β_k = −s_k·ẑ_k` and `∂L/∂α_j = a_j·ẑ_j` (`a_j ≥ 0`, the coefficient
//! of ReLU output `j`; `ẑ` the relaxed network there). The backend's sound
//! backsubstitution then bounds the rows with them (`Analyzer::set_slopes`).

use crate::base::ir::{Network, NodeId, Op};
use crate::base::options::CrownOptions;
use crate::base::relax::{ReluLower, Slopes, relu_relax, unstable};
use crate::crown::relaxed_bound::{Offsets, relaxed_bound};
use polycert_interval::Fp;
use rayon::prelude::*;

/// A ReLU split: `x_neuron ≥ 0` (active) or `≤ 0` at ReLU input `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitConstraint {
    pub node: NodeId,
    pub neuron: usize,
    pub active: bool,
}

impl SplitConstraint {
    pub(crate) fn sign(&self) -> f64 {
        if self.active { 1.0 } else { -1.0 }
    }
}

/// One slot's node bounds, `(lo, hi)` per node.
pub(crate) type SlotBounds<'b, T> = Vec<(&'b [T], &'b [T])>;

/// One slot's constant intervals of its affine layers (bias ± the float
/// inference's rounding bound), per node where known: the sound bound pays
/// the rounding, so the relaxed bound does too (without it, on a 6-layer
/// MNIST net the relaxed bound overshoots the sound one by up to 0.04).
pub(crate) type SlotBias<'b, T> = Vec<Option<(&'b [T], &'b [T])>>;

/// One output row to bound below: `c·y − d`, with its starting β.
pub(crate) struct Objective<'o> {
    pub c: &'o [f64],
    pub d: f64,
    pub beta: Option<&'o [f64]>,
}

/// What [`optimize`] chose: the slot's slopes (`None`: the relaxation's
/// own), and per row its β (`None`: no split terms, or `β = 0`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chosen {
    pub alpha: Option<Slopes>,
    pub betas: Vec<Option<Vec<f64>>>,
}

/// Adam on parameters projected onto `[lo, hi]`.
pub(crate) struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    lr: f64,
    range: (f64, f64),
}

impl Adam {
    pub(crate) fn new(n: usize, lr: f64, range: (f64, f64)) -> Self {
        Self { m: vec![0.0; n], v: vec![0.0; n], lr, range }
    }

    /// One ascent step at iteration `t ≥ 1` along `grad`.
    pub(crate) fn step(&mut self, t: usize, x: &mut [f64], grad: &[f64]) {
        let (b1, b2) = (0.9f64, 0.999f64);
        let (c1, c2) = (1.0 - b1.powi(t as i32), 1.0 - b2.powi(t as i32));
        for i in 0..x.len() {
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * grad[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * grad[i] * grad[i];
            let step = self.lr * (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + 1e-8);
            x[i] = (x[i] + step).clamp(self.range.0, self.range.1);
        }
    }
}

/// What an evaluator gives per row: its relaxed bound `c·y` with its β
/// terms (before its `d`), and its supergradients `(∂L/∂β, ∂L/∂α)`.
pub(crate) type Eval = (f64, Vec<f64>, SlopeGrads);

/// A row's supergradient in the lower slopes: per node and neuron (the
/// host's evaluators), or only at the free slopes, in [`free_slopes`]'s
/// order (the backend's, which downloads no more).
#[derive(Debug, Clone)]
pub(crate) enum SlopeGrads {
    Dense(Slopes),
    Free(Vec<f64>),
}

impl SlopeGrads {
    /// The supergradient of free slope `k`, neuron `j` of node `id`.
    pub(crate) fn at(&self, k: usize, (id, j): (usize, usize)) -> f64 {
        match self {
            SlopeGrads::Dense(s) => s.get(id).and_then(|v| v.get(j)).copied().unwrap_or(0.0),
            SlopeGrads::Free(v) => v.get(k).copied().unwrap_or(0.0),
        }
    }
}

/// One slot's Adam search over its rows' β and its shared slopes, driven
/// by whoever evaluates the rows: the host ([`finish_on_host`]) or the
/// backend for many slots at once (`relaxed.rs`).
pub(crate) struct SlotSearch {
    unstable: Vec<(usize, usize)>,
    use_alpha: bool,
    alpha: Slopes,
    flat_a: Vec<f64>,
    betas: Vec<Vec<f64>>,
    d: Vec<f64>,
    adam_b: Vec<Adam>,
    adam_a: Adam,
    steps: usize,
    /// `CrownOptions::proved_margin`.
    margin: f64,
    t: usize,
    done: bool,
    best: f64,
    chosen: Option<(Option<Slopes>, Vec<Vec<f64>>)>,
    /// Ends a search that cannot prove its slot, where nothing follows it.
    hopeless: Option<crate::crown::hopeless::Hopeless>,
}

impl SlotSearch {
    /// The search for a slot's `rows` (`None`: the relaxed network has a
    /// layer the search does not evaluate, or there is nothing to choose).
    /// `slopes` turns the slope search on; `warm` is the parent's slopes;
    /// `tune` gives its steps and step sizes.
    pub(crate) fn new<T: Fp>(
        net: &Network,
        bounds: &SlotBounds<'_, T>,
        rows: &[Objective<'_>],
        splits: &[SplitConstraint],
        (lower, tune): (ReluLower, &CrownOptions),
        (slopes, warm): (bool, Option<&Slopes>),
    ) -> Option<Self> {
        let nodes = net.nodes();
        if rows.is_empty() || nodes.iter().any(|n| matches!(n.op, Op::Sigmoid | Op::Elementwise(_) | Op::MaxPool2d(_)))
        {
            return None;
        }
        let unstable = free_slopes(net, bounds, nodes.len());
        let use_alpha = slopes && !unstable.is_empty();
        if !use_alpha && splits.is_empty() {
            return None;
        }
        let mut alpha = relaxation_slopes(net, bounds, lower);
        if let Some(w) = warm.filter(|w| w.len() == alpha.len()) {
            for &(id, j) in &unstable {
                if let Some(&a) = w[id].get(j) {
                    alpha[id][j] = a.clamp(0.0, 1.0);
                }
            }
        }
        let k = splits.len();
        let betas: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| {
                let mut b = vec![0.0; k];
                if let Some(s) = r.beta.filter(|s| s.len() <= k) {
                    b[..s.len()].copy_from_slice(s);
                }
                b
            })
            .collect();
        // With every ReLU stable the relaxation is exact, and the best β gives
        // the leaf's exact minimum (LP duality): worth a long search, as the leaf
        // cannot be split further.
        let warm_start = warm.is_some() || rows.iter().any(|r| r.beta.is_some());
        let steps = match (unstable.is_empty(), warm_start) {
            (true, _) => tune.stable_steps,
            (false, true) => tune.warm_steps,
            (false, false) => tune.steps,
        };
        let flat_a = unstable.iter().map(|&(id, j)| alpha[id][j]).collect();
        Some(Self {
            adam_b: rows.iter().map(|_| Adam::new(k, tune.lr_beta, (0.0, f64::INFINITY))).collect(),
            adam_a: Adam::new(unstable.len(), tune.lr_alpha, (0.0, 1.0)),
            unstable,
            use_alpha,
            alpha,
            flat_a,
            betas,
            d: rows.iter().map(|r| r.d).collect(),
            steps,
            margin: tune.proved_margin,
            t: 0,
            done: false,
            best: f64::NEG_INFINITY,
            chosen: None,
            hopeless: None,
        })
    }

    /// With `factor` (nothing follows the search), it ends once a row
    /// cannot reach the margin (`hopeless.rs`).
    pub(crate) fn hopeless_after(mut self, factor: Option<f64>) -> Self {
        self.hopeless = factor.map(|f| crate::crown::hopeless::Hopeless::new(f, self.d.len()));
        self
    }

    /// The slopes to evaluate at (`None`: the relaxation's own).
    pub(crate) fn alpha(&self) -> Option<&Slopes> {
        self.use_alpha.then_some(&self.alpha)
    }

    /// Per row, the β to evaluate at.
    pub(crate) fn betas(&self) -> &[Vec<f64>] {
        &self.betas
    }

    /// Adam steps this search takes at most.
    pub(crate) fn steps(&self) -> usize {
        self.steps
    }

    pub(crate) fn done(&self) -> bool {
        self.done
    }

    /// Operations of one [`SlotSearch::update`]: the slopes' gradient over
    /// the rows, and the Adam steps.
    pub(crate) fn step_work(&self) -> usize {
        (self.unstable.len() + 1) * (self.d.len() + 1) + self.betas.iter().map(Vec::len).sum::<usize>()
    }

    /// Row evaluations so far (rows × evaluations of the slot).
    pub(crate) fn evaluations(&self) -> usize {
        self.t * self.d.len()
    }

    /// Takes the rows' relaxed bounds `c·y` (with their β terms) and
    /// supergradients at the current parameters, keeps the best parameters
    /// so far, and steps (or ends: every row proved with room, or the steps
    /// spent).
    pub(crate) fn update(&mut self, mut evals: Vec<Eval>) {
        if self.done {
            return;
        }
        self.t += 1;
        let t = self.t;
        for (e, d) in evals.iter_mut().zip(&self.d) {
            e.0 -= d;
        }
        // Each row pulls until it is proved with room.
        let margin = self.margin;
        let objective: f64 = evals.iter().map(|e| e.0.min(margin)).sum();
        if objective > self.best {
            self.best = objective;
            self.chosen = Some((self.alpha().cloned(), self.betas.clone()));
        }
        let left = (self.steps + 1).saturating_sub(t);
        let hopeless = self.hopeless.as_mut().is_some_and(|h| h.ends(t, evals.iter().map(|e| e.0), left, margin));
        if (t > 1 && evals.iter().all(|e| e.0 > margin)) || t > self.steps || hopeless {
            self.done = true;
            return;
        }
        for ((b, adam), e) in self.betas.iter_mut().zip(&mut self.adam_b).zip(&evals) {
            adam.step(t, b, &e.1);
        }
        if self.use_alpha {
            let grad: Vec<f64> = self
                .unstable
                .iter()
                .enumerate()
                .map(|(k, &at)| evals.iter().filter(|e| e.0 <= margin).map(|e| e.2.at(k, at)).sum())
                .collect();
            self.adam_a.step(t, &mut self.flat_a, &grad);
            for (&(id, j), &v) in self.unstable.iter().zip(&self.flat_a) {
                self.alpha[id][j] = v;
            }
        }
    }

    /// The best parameters seen (`None`: the relaxation's own and `β = 0`).
    pub(crate) fn finish(self) -> Option<Chosen> {
        let (alpha, betas) = self.chosen?;
        let betas: Vec<Option<Vec<f64>>> = betas.into_iter().map(|b| b.iter().any(|&x| x > 0.0).then_some(b)).collect();
        (alpha.is_some() || betas.iter().any(Option::is_some)).then_some(Chosen { alpha, betas })
    }
}

#[cfg(test)]
/// Slopes and β for the lower bounds of a slot's `rows`, its relaxed bound
/// evaluated on the host (see [`SlotSearch::new`] for `None`).
pub(crate) fn optimize<T: Fp>(
    net: &Network,
    (bounds, bias): (&SlotBounds<'_, T>, &SlotBias<'_, T>),
    rows: &[Objective<'_>],
    splits: &[SplitConstraint],
    lower: ReluLower,
    slopes: (bool, Option<&Slopes>),
) -> Option<Chosen> {
    let search = SlotSearch::new(net, bounds, rows, splits, (lower, &CrownOptions::default()), slopes)?;
    finish_on_host(
        search,
        net,
        (bounds, &crate::crown::relaxed_bound::rounding_offsets(net, bias)),
        rows,
        splits,
        lower,
        crate::base::budget::Budget::UNLIMITED,
    )
    .0
}

/// Runs `search` to its end with its rows' relaxed bounds evaluated on the
/// host, row by row; also returns its row evaluations. Past `budget`'s
/// deadline it stops with the best parameters so far (an unfinished step's
/// rows are dropped).
pub(crate) fn finish_on_host<T: Fp>(
    mut search: SlotSearch,
    net: &Network,
    (bounds, offsets): (&SlotBounds<'_, T>, &Offsets),
    rows: &[Objective<'_>],
    splits: &[SplitConstraint],
    lower: ReluLower,
    budget: crate::base::budget::Budget,
) -> (Option<Chosen>, usize) {
    while !search.done() && !budget.expired() {
        let a = search.alpha();
        let evals: Vec<Option<Eval>> = rows
            .par_iter()
            .zip(search.betas())
            .map(|(r, b)| {
                if budget.expired() {
                    return None;
                }
                relaxed_bound(net, (bounds, offsets), (net.output(), r.c), splits, b, a, lower)
                    .map(|(l, gb, ga)| (l, gb, SlopeGrads::Dense(ga)))
            })
            .collect();
        if budget.expired() {
            break;
        }
        let Some(evals) = evals.into_iter().collect() else { return (None, search.evaluations()) };
        search.update(evals);
    }
    let work = search.evaluations();
    (search.finish(), work)
}

/// The unstable ReLUs `(node, neuron)` before node `end`, whose lower
/// slopes are free.
pub(crate) fn free_slopes<T: Fp>(net: &Network, bounds: &SlotBounds<'_, T>, end: NodeId) -> Vec<(usize, usize)> {
    let nodes = net.nodes();
    (0..end)
        .filter(|&id| nodes[id].op == Op::Relu)
        .flat_map(|id| {
            let (lo, hi) = bounds[nodes[id].inputs[0]];
            (0..lo.len()).filter(move |&j| unstable(lo[j], hi[j])).map(move |j| (id, j))
        })
        .collect()
}

/// The relaxation's own lower slopes (`ReluLower`) of every ReLU neuron.
pub(crate) fn relaxation_slopes<T: Fp>(net: &Network, bounds: &SlotBounds<'_, T>, lower: ReluLower) -> Slopes {
    net.nodes()
        .iter()
        .map(|n| {
            if n.op != Op::Relu {
                return Vec::new();
            }
            let (lo, hi) = bounds[n.inputs[0]];
            lo.iter().zip(hi).map(|(&l, &h)| relu_relax(l, h, lower).lam_lo.to_f64_exact()).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ir::Shape;
    use crate::crown::relaxed_bound::rounding_offsets;

    fn view(b: &[(Vec<f64>, Vec<f64>)]) -> SlotBounds<'_, f64> {
        b.iter().map(|(l, h)| (&l[..], &h[..])).collect()
    }

    /// `y = relu(s) − relu(s)`, `s = a + b` twice over `[−1, 1]²`: with
    /// `s_0 ≤ 0` and `s_1 ≥ 0` split, the bound without β is −2 (the splits
    /// only clamp intervals); `β_0 = 1` cancels `s_1`'s coefficient: 0.
    #[test]
    fn beta_cancels_the_same_neuron_split_twice() {
        let mut n = Network::new(Shape::flat(2));
        n.push("s", Op::Dense { weight: vec![1.0; 4], bias: vec![0.0; 2], out: 2 }, &[0]).unwrap();
        n.push("r", Op::Relu, &[1]).unwrap();
        n.push("y", Op::Dense { weight: vec![1.0, -1.0], bias: vec![0.0], out: 1 }, &[2]).unwrap();
        let b: Vec<(Vec<f64>, Vec<f64>)> = vec![
            (vec![-1.0, -1.0], vec![1.0, 1.0]),
            (vec![-2.0, 0.0], vec![0.0, 2.0]),
            (vec![0.0, 0.0], vec![0.0, 2.0]),
            (vec![-2.0], vec![0.0]),
        ];
        let sb = view(&b);
        let nb: SlotBias<'_, f64> = vec![None; 4];
        let off = rounding_offsets(&n, &nb);
        let splits = [
            SplitConstraint { node: 1, neuron: 0, active: false },
            SplitConstraint { node: 1, neuron: 1, active: true },
        ];
        let area = ReluLower::Area;
        let (l0, g0, _) = relaxed_bound(&n, (&sb, &off), (3, &[1.0]), &splits, &[0.0, 0.0], None, area).unwrap();
        assert_eq!(l0, -2.0);
        // At the minimiser (1, 1): s = (2, 2), so g = (−s_0, s_1) → ∂L/∂β = (2, −2).
        assert_eq!(g0, vec![2.0, -2.0]);
        let (l1, _, _) = relaxed_bound(&n, (&sb, &off), (3, &[1.0]), &splits, &[1.0, 0.0], None, area).unwrap();
        assert_eq!(l1, 0.0);
        let rows = [Objective { c: &[1.0], d: 0.0, beta: None }];
        // Every ReLU is stable here: no slopes to choose, even when asked.
        let got = optimize(&n, (&sb, &nb), &rows, &splits, area, (true, None)).unwrap();
        assert_eq!(got.alpha, None);
        let beta = got.betas[0].clone().unwrap();
        let (lb, _, _) = relaxed_bound(&n, (&sb, &off), (3, &[1.0]), &splits, &beta, None, area).unwrap();
        assert!(lb > -0.2 && beta[0] > 0.8, "{lb} {beta:?}");
    }

    /// `y = relu(x) − x/2` over `x ∈ [−1, 1]`: the area slope 0 bounds it
    /// by −0.5; slope α gives `min (α − ½)·x = −|α − ½|`, so α → ½ closes
    /// the gap to the exact minimum 0, with `∂L/∂α = x̂` at the minimiser.
    #[test]
    fn slopes_close_the_gap_of_relu_minus_half() {
        // y = r − x/2, as r + h with h = −x/2.
        let mut n2 = Network::new(Shape::flat(1));
        n2.push("x", Op::Dense { weight: vec![1.0], bias: vec![0.0], out: 1 }, &[0]).unwrap();
        n2.push("r", Op::Relu, &[1]).unwrap();
        n2.push("h", Op::Dense { weight: vec![-0.5], bias: vec![0.0], out: 1 }, &[1]).unwrap();
        n2.push("y", Op::Add, &[2, 3]).unwrap();
        let b: Vec<(Vec<f64>, Vec<f64>)> = vec![
            (vec![-1.0], vec![1.0]),
            (vec![-1.0], vec![1.0]),
            (vec![0.0], vec![1.0]),
            (vec![-0.5], vec![0.5]),
            (vec![-0.5], vec![1.5]),
        ];
        let sb = view(&b);
        let nb: SlotBias<'_, f64> = vec![None; 5];
        let off = rounding_offsets(&n2, &nb);
        let area = ReluLower::Area;
        let (l0, _, _) = relaxed_bound(&n2, (&sb, &off), (4, &[1.0]), &[], &[], None, area).unwrap();
        assert_eq!(l0, -0.5);
        let mut al: Slopes = vec![Vec::new(); 5];
        al[2] = vec![0.25];
        let (l1, _, ga) = relaxed_bound(&n2, (&sb, &off), (4, &[1.0]), &[], &[], Some(&al), area).unwrap();
        // (0.25 − 0.5)·x is least at x = 1: −0.25, and ∂L/∂α = 1·x̂ = 1.
        assert_eq!((l1, ga[2][0]), (-0.25, 1.0));
        let rows = [Objective { c: &[1.0], d: 0.0, beta: None }];
        assert_eq!(optimize(&n2, (&sb, &nb), &rows, &[], area, (false, None)), None);
        let got = optimize(&n2, (&sb, &nb), &rows, &[], area, (true, None)).unwrap();
        let a = got.alpha.unwrap();
        let (l2, _, _) = relaxed_bound(&n2, (&sb, &off), (4, &[1.0]), &[], &[], Some(&a), area).unwrap();
        assert!(l2 > -0.06 && (a[2][0] - 0.5).abs() < 0.06, "{l2} {a:?}");
        assert_eq!(got.betas, vec![None]);
        // h's rounding `[−0.1, 0.1]` around its bias 0: the bound, which adds
        // h with coefficient +1, pays 0.1 (at α = ½ it is exactly −0.1).
        let (lo, hi) = (vec![-0.1], vec![0.1]);
        let mut wide: SlotBias<'_, f64> = vec![None; 5];
        wide[3] = Some((&lo[..], &hi[..]));
        let mut half: Slopes = vec![Vec::new(); 5];
        half[2] = vec![0.5];
        let (l3, _, _) =
            relaxed_bound(&n2, (&sb, &rounding_offsets(&n2, &wide)), (4, &[1.0]), &[], &[], Some(&half), area).unwrap();
        assert!((l3 + 0.1).abs() < 1e-12, "{l3}");
        // The same sum as an intermediate neuron's lower end (node 4, +1):
        // the layer's shared slopes also go to ½; its upper end (−1) pays
        // ReLU's upper line only, so it has nothing to choose.
        let tune = CrownOptions::default();
        let slopes = |node, end: f64, budget| {
            crate::crown::tighten::layer_slopes(&n2, (&sb, &off), node, &[(0, end)], (area, &tune, budget))
        };
        let all = crate::base::budget::Budget::UNLIMITED;
        let (a, gain) = slopes(4, 1.0, all).unwrap();
        assert!((a[2][0] - 0.5).abs() < 0.06, "{a:?}");
        // From −0.5 to about 0: nearly all of it.
        assert!(gain > 0.85 && gain <= 1.0, "{gain}");
        let (l4, _, _) = relaxed_bound(&n2, (&sb, &off), (4, &[1.0]), &[], &[], Some(&a), area).unwrap();
        assert!(l4 > -0.06, "{l4}");
        assert_eq!(slopes(4, -1.0, all), None);
        // Node 1 (before every ReLU) has no slope to choose.
        assert_eq!(slopes(1, 1.0, all), None);
        // Past its deadline it takes no step, so nothing is gained.
        assert_eq!(slopes(4, 1.0, crate::base::budget::Budget::until(std::time::Instant::now())), None);
    }
}
