//! The choice between a ReLU leaf's two candidate splits (`bab/search.rs`),
//! kept per search worker.

use crate::bab::search::Leaf;
use crate::base::options::PickOptions;
use crate::base::property::weakest;

/// Which of a ReLU leaf's candidate splits (`branch::relu_candidates`:
/// BaBSR's, then the first layer's) the search tries. Both pairs of
/// children are analysed and the better kept, until one candidate wins
/// under a quarter of the decided parents: then only the other is tried,
/// with both on every `PickOptions::probe`-th parent, so the shares stay
/// current.
#[derive(Default)]
pub(crate) struct Picks {
    /// Parents split so far.
    pub(crate) parents: usize,
    wins: [usize; 2],
    tune: PickOptions,
}

impl Picks {
    pub(crate) fn new(tune: PickOptions) -> Self {
        Self { parents: 0, wins: [0; 2], tune }
    }

    /// The one candidate to try, if the other rarely wins.
    pub(crate) fn only(&self) -> Option<usize> {
        let decided = self.wins[0] + self.wins[1];
        if decided < self.tune.warmup || self.parents.is_multiple_of(self.tune.probe) {
            return None;
        }
        (0..2).find(|&k| 4 * self.wins[1 - k] < decided)
    }

    /// Per analysed leaf, whether it counts: of a parent's candidates, the
    /// one whose worse child ends with the better bound (a proved child
    /// counts as `+∞`; ties keep the first, BaBSR's).
    pub(crate) fn keep<T>(&mut self, leaves: &[Leaf<T>], res: &[crate::gpupoly::passes::SlotResult]) -> Vec<bool> {
        let end =
            |i: usize| if res[i].proved { f64::INFINITY } else { weakest(&leaves[i].sp.unsafe_region, &res[i].lower) };
        // Per parent: per candidate, its worse child's bound.
        let mut worst: std::collections::BTreeMap<usize, [f64; 2]> = std::collections::BTreeMap::new();
        for (i, l) in leaves.iter().enumerate() {
            if let Some((p, k)) = l.pick {
                let w = worst.entry(p).or_insert([f64::INFINITY; 2]);
                w[k] = w[k].min(end(i));
            }
        }
        let best: std::collections::BTreeMap<usize, usize> =
            worst.into_iter().map(|(p, w)| (p, usize::from(w[1] > w[0]))).collect();
        for &k in best.values() {
            self.wins[k] += 1;
        }
        leaves.iter().map(|l| l.pick.is_none_or(|(p, k)| best[&p] == k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::property::{InputBox, Property};
    use crate::gpupoly::passes::SlotResult;

    /// Two candidates of parent 1: BaBSR's children end at −1 and proved,
    /// the first layer's at −0.5 and −0.2: the second is kept (its worse
    /// child is better). Parent 2 ties: BaBSR's is kept. A leaf without a
    /// pick always counts.
    #[test]
    fn picks_keep_the_candidate_whose_worse_child_is_better() {
        let p = Property::robustness("p", InputBox::new(vec![0.0], vec![1.0]).expect("box"), 0, 2).expect("p");
        let leaf = |pick| {
            let mut l = Leaf::<f64>::root(p.subproblems[0].clone(), 0);
            l.pick = pick;
            l
        };
        let leaves: Vec<Leaf<f64>> =
            [Some((1, 0)), Some((1, 0)), Some((1, 1)), Some((1, 1)), Some((2, 0)), Some((2, 1)), None]
                .into_iter()
                .map(leaf)
                .collect();
        let res = vec![
            (vec![-1.0], false),
            (vec![0.5], true),
            (vec![-0.5], false),
            (vec![-0.2], false),
            (vec![-0.3], false),
            (vec![-0.3], false),
            (vec![-9.0], false),
        ]
        .into_iter()
        .map(|(lower, proved)| SlotResult { lower, proved })
        .collect::<Vec<_>>();
        let mut picks = Picks::default();
        assert_eq!(picks.keep(&leaves, &res), vec![false, false, true, true, true, false, true]);
        assert_eq!(picks.wins, [1, 1]);
    }

    /// Both candidates until 32 parents are decided; then the one that wins
    /// three quarters or more alone, but for every 8th parent.
    #[test]
    fn picks_try_one_candidate_once_the_other_rarely_wins() {
        let at = |wins, parents| Picks { parents, wins, tune: PickOptions::default() }.only();
        assert_eq!(at([20, 5], 33), None);
        assert_eq!(at([40, 5], 33), Some(0));
        assert_eq!(at([5, 40], 33), Some(1));
        assert_eq!(at([40, 5], 40), None);
        assert_eq!(at([25, 15], 33), None);
    }
}
