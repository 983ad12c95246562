//! Properties: an input box and an unsafe output region in disjunctive
//! normal form. The property holds when no input of the box reaches it.

use polycert_interval::{FloatModel, Interval, fp};

/// An input box in the network's input space (after normalisation).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InputBox {
    pub lo: Vec<f64>,
    pub hi: Vec<f64>,
    /// Where `lo`/`hi` only enclose the box the property states (decimal
    /// bounds rounded outward to f64): the float32 inputs inside the stated
    /// box, as the tightest float32 bounds `[lo, hi]` inside it. A
    /// counterexample must lie in these as well as in `lo`/`hi`; halves of a
    /// split box share them.
    #[serde(skip)]
    pub float32: Option<std::sync::Arc<(Vec<f32>, Vec<f32>)>>,
}

/// Error building a property.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("property: {0}")]
pub struct PropertyError(pub String);

impl InputBox {
    pub fn new(lo: Vec<f64>, hi: Vec<f64>) -> Result<Self, PropertyError> {
        if lo.len() != hi.len() {
            return Err(PropertyError(format!("box bounds have lengths {} and {}", lo.len(), hi.len())));
        }
        for (i, (&l, &h)) in lo.iter().zip(&hi).enumerate() {
            if l.is_nan() || h.is_nan() || l > h || l == f64::INFINITY || h == f64::NEG_INFINITY {
                return Err(PropertyError(format!("input {i} has an empty or NaN range [{l}, {h}]")));
            }
        }
        Ok(Self { lo, hi, float32: None })
    }

    /// A box whose float32 inputs are restricted to `[lo32, hi32]` (see
    /// [`InputBox::float32`]).
    pub fn with_float32(mut self, lo32: Vec<f32>, hi32: Vec<f32>) -> Result<Self, PropertyError> {
        if lo32.len() != self.len() || hi32.len() != self.len() {
            return Err(PropertyError("float32 bounds do not match the box".into()));
        }
        self.float32 = Some(std::sync::Arc::new((lo32, hi32)));
        Ok(self)
    }

    /// The zero-width box at `x`.
    pub fn point(x: &[f32]) -> Self {
        let v: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        Self { lo: v.clone(), hi: v, float32: None }
    }

    /// Whether the float32 input `x` lies in the box as stated: within
    /// `lo`/`hi` and, where given, the float32 bounds.
    pub fn holds_f32(&self, x: &[f32]) -> bool {
        let within = |lo: &[f64], hi: &[f64]| {
            x.iter().zip(lo.iter().zip(hi)).all(|(&v, (&l, &h))| l <= v as f64 && v as f64 <= h)
        };
        x.len() == self.len()
            && within(&self.lo, &self.hi)
            && self
                .float32
                .as_ref()
                .is_none_or(|b| x.iter().zip(b.0.iter().zip(&b.1)).all(|(v, (l, h))| l <= v && v <= h))
    }

    /// The float32 values of `x` pulled into the box as stated (to the
    /// nearest float32 inside each input's range; an input whose range holds
    /// no float32 is left where it is, and [`InputBox::holds_f32`] fails).
    pub fn to_f32_inside(&self, x: &[f64]) -> Vec<f32> {
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                let (mut l, mut h) = (fp::from_f64_up::<f32>(self.lo[i]), fp::from_f64_down::<f32>(self.hi[i]));
                if let Some(b) = &self.float32 {
                    (l, h) = (l.max(b.0[i]), h.min(b.1[i]));
                }
                let f = v as f32;
                if l <= h { f.clamp(l, h) } else { f }
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.lo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lo.is_empty()
    }

    pub fn centre(&self) -> Vec<f64> {
        self.lo.iter().zip(&self.hi).map(|(&l, &h)| Interval::new_unchecked(l, h).midpoint()).collect()
    }

    /// L∞ ball of radius `eps` around `x` (values in `[0, 1]` scale),
    /// clipped to `[clip_lo, clip_hi]`, then normalised per channel as
    /// `(x − mean)/std` (channel-first; `mean`/`std` empty for none). The
    /// normalisation is rounded outward and widened by float32's rounding
    /// of the two operations, so the box holds what a float32 pipeline feeds
    /// the network.
    pub fn linf(x: &[f64], eps: f64, clip: (f64, f64), mean: &[f64], std: &[f64]) -> Result<Self, PropertyError> {
        if eps.is_nan() || eps < 0.0 || !eps.is_finite() {
            return Err(PropertyError(format!("eps must be finite and >= 0, got {eps}")));
        }
        if mean.len() != std.len() || std.iter().any(|&s| s.is_nan() || s <= 0.0 || !s.is_finite()) {
            return Err(PropertyError("mean/std must have equal lengths and std > 0".into()));
        }
        let channels = mean.len().max(1);
        if !x.len().is_multiple_of(channels) {
            return Err(PropertyError(format!("{} inputs do not split into {channels} channels", x.len())));
        }
        let per = x.len() / channels;
        let (mut lo, mut hi) = (Vec::with_capacity(x.len()), Vec::with_capacity(x.len()));
        for (i, &v) in x.iter().enumerate() {
            if !v.is_finite() {
                return Err(PropertyError(format!("input {i} is {v}")));
            }
            let l = fp::sub_down(v, eps).max(clip.0).min(clip.1);
            let h = fp::add_up(v, eps).min(clip.1).max(clip.0);
            let mut iv = Interval::new_unchecked(l.min(h), h);
            if !mean.is_empty() {
                let c = i / per;
                let m = Interval::new_unchecked(mean[c], mean[c]);
                iv = (iv - m).div_pos(std[c]).map_err(|e| PropertyError(e.to_string()))?;
                let e = FloatModel::F32.rounding_error_bound(2, iv.mag());
                iv = Interval::new_unchecked(fp::sub_down(iv.lo(), e), fp::add_up(iv.hi(), e));
            }
            lo.push(iv.lo());
            hi.push(iv.hi());
        }
        Ok(Self { lo, hi, float32: None })
    }
}

/// The half-space `{y : c·y ≤ d}` over the outputs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Halfspace {
    pub c: Vec<f64>,
    /// At least the stated threshold (a decimal is rounded up): proving
    /// `c·y > d` proves the stated half-space unreachable.
    pub d: f64,
    /// At most the stated threshold: the largest f64 `t` such that `c·y ≤ t`
    /// meets the stated relation (strict or not). A counterexample's
    /// certified `c·y` must reach it.
    pub hit: f64,
}

impl Halfspace {
    /// `c·y ≤ d` with `d` exact and the relation non-strict.
    pub fn new(c: Vec<f64>, d: f64) -> Self {
        Self { c, d, hit: d }
    }
}

/// Every disjunct of `region` with its half-spaces' range in `lbs` (their
/// certified lower bounds of `c·y − d`, flattened in order) and its best
/// bound (the largest of them; −∞ where missing: a missing or NaN bound
/// proves nothing). A best bound > 0 proves the disjunct infeasible.
pub fn disjunct_bounds<'r>(
    region: &'r [Vec<Halfspace>],
    lbs: &'r [f64],
) -> impl Iterator<Item = (usize, std::ops::Range<usize>, f64)> + 'r {
    region.iter().enumerate().scan(0, move |at, (d, conj)| {
        let r = *at..*at + conj.len();
        *at = r.end;
        let best =
            lbs.get(r.clone()).map_or(f64::NEG_INFINITY, |l| l.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        Some((d, r, best))
    })
}

/// The disjuncts of `region` that `lbs` do not prove infeasible (no
/// half-space with a bound > 0), as [`disjunct_bounds`] gives them.
pub fn unproved_disjuncts(region: &[Vec<Halfspace>], lbs: &[f64]) -> Vec<(usize, std::ops::Range<usize>, f64)> {
    disjunct_bounds(region, lbs).filter(|d| d.2 <= 0.0).collect()
}

/// One input box with the unsafe region `∪_i ∩_k H_ik` over the outputs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SubProblem {
    pub input: InputBox,
    /// Disjunction of conjunctions of half-spaces.
    pub unsafe_region: Vec<Vec<Halfspace>>,
}

/// A property: it holds when every sub-problem is safe.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Property {
    pub name: String,
    pub subproblems: Vec<SubProblem>,
    /// The label, for robustness properties.
    pub label: Option<usize>,
}

impl Property {
    /// Robustness: `y_label − y_j > 0` for every `j ≠ label`.
    pub fn robustness(
        name: impl Into<String>,
        input: InputBox,
        label: usize,
        n_out: usize,
    ) -> Result<Self, PropertyError> {
        if label >= n_out {
            return Err(PropertyError(format!("label {label} out of range for {n_out} outputs")));
        }
        let unsafe_region = (0..n_out)
            .filter(|&j| j != label)
            .map(|j| {
                let mut c = vec![0.0; n_out];
                c[label] = 1.0;
                c[j] = -1.0;
                vec![Halfspace::new(c, 0.0)]
            })
            .collect();
        Ok(Self { name: name.into(), subproblems: vec![SubProblem { input, unsafe_region }], label: Some(label) })
    }

    /// Checks dimensions against a network's input and output sizes.
    pub fn check_dims(&self, n_in: usize, n_out: usize) -> Result<(), PropertyError> {
        for sp in &self.subproblems {
            if sp.input.len() != n_in {
                return Err(PropertyError(format!("input box has {} values, the model takes {n_in}", sp.input.len())));
            }
            for h in sp.unsafe_region.iter().flatten() {
                if h.c.len() != n_out {
                    return Err(PropertyError(format!(
                        "output constraint has {} terms, the model has {n_out} outputs",
                        h.c.len()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A concrete input that reaches the unsafe region in float32 inference.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Counterexample {
    pub input: Vec<f32>,
    pub output: Vec<f32>,
    /// How the output was computed (summation order matters in float).
    pub checked_with: String,
}

/// The answer of an analysis.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Verdict {
    Verified,
    Falsified(Counterexample),
    Unknown,
    Timeout,
}

impl Verdict {
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::Falsified(_) => "falsified",
            Verdict::Unknown => "unknown",
            Verdict::Timeout => "timeout",
        }
    }
}

/// Verdict with the certified lower bounds of `c·y − d` for each half-space
/// of the first sub-problem (for robustness: `y_label − y_j`, `j ≠ label`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    pub verdict: Verdict,
    pub lower_bounds: Vec<f64>,
    pub seconds: f64,
    /// Input splitting's progress, where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<crate::base::property::SearchStats>,
}

/// Progress of a search: leaves proved (with `Stabilize::Auto`, those of
/// its earlier stages too), leaves left open, and its bound.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SearchStats {
    /// What is split: "input" or "ReLU".
    pub branching: &'static str,
    pub leaves_proved: usize,
    pub leaves_open: usize,
    /// A leaf's bound is the largest lower bound among the half-spaces of
    /// its weakest disjunct (it is proved once that is > 0). While leaves
    /// are left unproved: the smallest of theirs (`bab/openlist.rs`; a leaf not
    /// analysed counts with its parent's, a root not analysed with the
    /// analysis's before the search, −∞ where there was none).
    /// Once every leaf is proved: the smallest margin (> 0) by which a leaf
    /// closed a disjunct. Over several sub-problems, the smallest of theirs.
    pub best_bound: f64,
    /// Leaves that kept only their root's bounds for want of search memory
    /// (`SearchOptions::memory`).
    pub leaves_from_root: usize,
    /// The leaf limit that ended the search, where one did (a search
    /// without a deadline has one: [`crate::base::budget::Budget`]).
    pub leaf_limit: Option<usize>,
    /// Leaves analysed (a parent's dropped candidate children too), and
    /// the seconds the search's rounds took, from its first to its end.
    pub leaves_analysed: usize,
    pub seconds: f64,
}

impl SearchStats {
    /// Leaves (sub-boxes, for input splitting) analysed per second.
    pub fn leaves_per_second(&self) -> Option<f64> {
        (self.seconds > 0.0 && self.leaves_analysed > 0).then(|| self.leaves_analysed as f64 / self.seconds)
    }

    /// "sub-boxes" or "leaves": what the search analyses.
    pub fn leaf_word(&self) -> &'static str {
        if self.branching == "input" { "sub-boxes" } else { "leaves" }
    }
}

impl Default for SearchStats {
    fn default() -> Self {
        Self {
            branching: "",
            leaves_proved: 0,
            leaves_open: 0,
            best_bound: f64::INFINITY,
            leaves_from_root: 0,
            leaf_limit: None,
            leaves_analysed: 0,
            seconds: 0.0,
        }
    }
}

/// The `k` disjuncts closest to being reachable: those whose best certified
/// lower bound (over their half-spaces, flattened in `lbs`) is smallest.
pub fn weakest_disjuncts(sp: &SubProblem, lbs: &[f64], k: usize) -> Vec<usize> {
    let mut open = unproved_disjuncts(&sp.unsafe_region, lbs);
    open.sort_by(|a, b| a.2.total_cmp(&b.2));
    open.into_iter().take(k).map(|(d, _, _)| d).collect()
}

/// The largest lower bound among the half-spaces of each disjunct, the
/// smallest over the disjuncts that are not closed (`lbs` flattened).
pub(crate) fn weakest(region: &[Vec<Halfspace>], lbs: &[f64]) -> f64 {
    unproved_disjuncts(region, lbs).into_iter().map(|(_, _, best)| best).fold(f64::INFINITY, f64::min)
}

/// The same, over the disjuncts that are closed (their bound > 0; `∞`: none).
pub(crate) fn closed_margin(region: &[Vec<Halfspace>], lbs: &[f64]) -> f64 {
    disjunct_bounds(region, lbs).map(|d| d.2).filter(|&b| b > 0.0).fold(f64::INFINITY, f64::min)
}

/// In the weakest open disjunct, the half-space with the largest lower
/// bound, and its index in `lbs`.
pub(crate) fn nearest_halfspace<'s>(sp: &'s SubProblem, lbs: &[f64]) -> Option<(usize, &'s Halfspace)> {
    let d = *weakest_disjuncts(sp, lbs, 1).first()?;
    let at: usize = sp.unsafe_region[..d].iter().map(|c| c.len()).sum();
    let conj = &sp.unsafe_region[d];
    let k = (0..conj.len()).max_by(|&a, &b| {
        let (x, y) = (
            lbs.get(at + a).copied().unwrap_or(f64::NEG_INFINITY),
            lbs.get(at + b).copied().unwrap_or(f64::NEG_INFINITY),
        );
        x.total_cmp(&y)
    })?;
    Some((at + k, conj.get(k)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Disjuncts of 2, 1 and 2 half-spaces: the best of each is its largest
    /// bound; open ones give the weakest bound, closed ones the margin.
    #[test]
    fn weakest_and_closed_margin_by_hand() {
        let h = || Halfspace::new(vec![1.0], 0.0);
        let region = vec![vec![h(), h()], vec![h()], vec![h(), h()]];
        let lbs = [-2.0, 0.5, -0.25, 3.0, -1.0];
        assert_eq!((weakest(&region, &lbs), closed_margin(&region, &lbs)), (-0.25, 0.5));
        let all = [0.1, -1.0, 0.2, -5.0, 0.3];
        assert_eq!((weakest(&region, &all), closed_margin(&region, &all)), (f64::INFINITY, 0.1));
        // A missing bound proves nothing.
        assert_eq!((weakest(&region, &lbs[..3]), closed_margin(&region, &lbs[..3])), (f64::NEG_INFINITY, 0.5));
    }
}
