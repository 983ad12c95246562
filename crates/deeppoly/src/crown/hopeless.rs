//! When nothing follows an α/β search (no branch and bound), a slot it
//! cannot prove gains nothing from its remaining steps: an unproved row's
//! bound decides no verdict. The search ends once some row, gaining
//! `factor` times its fastest step so far at every step left, would still
//! stay below the margin at the last one. The rule only saves time: the
//! sound backsubstitution bounds the rows with the best parameters seen,
//! wherever the search stopped.

/// Evaluations before the rule may end a search (Adam's first steps may
/// lose ground that later ones win back).
const FROM: usize = 4;

/// The rows' best bounds and fastest gains of one search.
pub(crate) struct Hopeless {
    factor: f64,
    best: Vec<f64>,
    fastest: Vec<f64>,
}

impl Hopeless {
    /// The rule with `factor` for a search of `rows` rows.
    pub(crate) fn new(factor: f64, rows: usize) -> Self {
        Self { factor, best: vec![f64::NEG_INFINITY; rows], fastest: vec![0.0; rows] }
    }

    /// Takes evaluation `t` (from 1) of the rows' bounds and says whether
    /// the search should end, with `left` evaluations to go and `margin`
    /// the bound a row needs.
    pub(crate) fn ends(&mut self, t: usize, bounds: impl Iterator<Item = f64>, left: usize, margin: f64) -> bool {
        let mut hopeless = false;
        for ((b, f), e) in self.best.iter_mut().zip(&mut self.fastest).zip(bounds) {
            if e > *b {
                if b.is_finite() {
                    *f = f.max(e - *b);
                }
                *b = e;
            }
            hopeless |= *b + self.factor * *f * (left as f64) < margin;
        }
        t >= FROM && hopeless
    }
}

#[cfg(test)]
mod tests {
    use super::Hopeless;

    /// The evaluation at which the rule ends a search of `steps` steps over
    /// one row's bounds `trace` (`None`: never).
    fn ends_at(trace: &[f64], steps: usize) -> Option<usize> {
        let mut h = Hopeless::new(3.0, 1);
        trace
            .iter()
            .enumerate()
            .map(|(k, &e)| (k + 1, e))
            .find_map(|(t, e)| h.ends(t, std::iter::once(e), steps + 1 - t, 1e-4).then_some(t))
    }

    #[test]
    fn a_row_that_barely_moves_ends_the_search() {
        let stuck: Vec<f64> = (0..21).map(|k| -1149.0 + 0.2 * k as f64).collect();
        assert_eq!(ends_at(&stuck, 20), Some(4));
    }

    #[test]
    fn a_row_on_its_way_to_the_margin_keeps_the_search() {
        // From −1 at 0.08 a step: proved at the 14th evaluation.
        let rising: Vec<f64> = (0..21).map(|k| -1.0 + 0.08 * k as f64).collect();
        assert_eq!(ends_at(&rising, 20), None);
        // A first step that loses ground, then the climb.
        let dip: Vec<f64> = [-1.0, -1.3, -1.1].into_iter().chain((0..18).map(|k| -0.9 + 0.1 * k as f64)).collect();
        assert_eq!(ends_at(&dip, 20), None);
    }

    #[test]
    fn the_rule_waits_for_its_first_evaluations() {
        assert_eq!(ends_at(&[-5.0, -5.0, -5.0], 20), None);
    }
}
