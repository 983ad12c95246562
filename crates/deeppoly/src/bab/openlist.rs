//! The open list of a branch and bound, with the search's weakest bound.
//!
//! The weakest bound of a search is the smallest bound among the leaves it
//! has not proved: those open, those in a round in flight, and those that
//! left it unproved (stuck, of a root given up, or in a round cut short).
//! A leaf not analysed yet counts with its parent's bound, which holds over
//! it (its box or its split domain lies in its parent's). ReLU leaves are
//! taken from the top of the list and their children put back on top, so a
//! running minimum per position keeps the open leaves' minimum at O(1).

use crate::bab::search::Leaf;

/// Leaves to analyse, the newest last.
pub(crate) struct OpenList<T> {
    leaves: Vec<Leaf<T>>,
    /// `mins[k]`: the smallest `weakest` of `leaves[..=k]`.
    mins: Vec<f64>,
}

impl<T> OpenList<T> {
    pub fn new(leaves: Vec<Leaf<T>>) -> Self {
        let mut l = Self { leaves: Vec::new(), mins: Vec::new() };
        l.extend(leaves);
        l
    }

    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    pub fn leaves(&self) -> &[Leaf<T>] {
        &self.leaves
    }

    /// Puts `leaves` on top.
    pub fn extend(&mut self, leaves: Vec<Leaf<T>>) {
        for l in leaves {
            let below = self.mins.last().copied().unwrap_or(f64::INFINITY);
            self.mins.push(below.min(l.weakest));
            self.leaves.push(l);
        }
    }

    /// Takes the leaves from position `at` up.
    pub fn split_off(&mut self, at: usize) -> Vec<Leaf<T>> {
        self.mins.truncate(at);
        self.leaves.split_off(at)
    }

    /// The smallest bound of the open leaves (`∞` when none is open).
    pub fn weakest(&self) -> f64 {
        self.mins.last().copied().unwrap_or(f64::INFINITY)
    }

    /// Orders the leaves so that the weakest is taken first.
    pub fn sort_weakest_on_top(&mut self) {
        self.leaves.sort_by(|a, b| b.weakest.total_cmp(&a.weakest));
        self.reindex();
    }

    /// Keeps the leaves `keep` accepts; returns the smallest bound of the
    /// others (`∞` when none left).
    pub fn retain(&mut self, mut keep: impl FnMut(&Leaf<T>) -> bool) -> f64 {
        let mut dropped = f64::INFINITY;
        self.leaves.retain(|l| {
            let k = keep(l);
            if !k {
                dropped = dropped.min(l.weakest);
            }
            k
        });
        self.reindex();
        dropped
    }

    fn reindex(&mut self) {
        let leaves = std::mem::take(&mut self.leaves);
        self.mins.clear();
        self.extend(leaves);
    }
}

/// The smallest `weakest` of `leaves` (`∞` for none).
pub(crate) fn weakest_of<T>(leaves: &[Leaf<T>]) -> f64 {
    leaves.iter().map(|l| l.weakest).fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::property::{InputBox, SubProblem};

    fn leaf(weakest: f64, root: usize) -> Leaf<f64> {
        let sp = SubProblem { input: InputBox::new(vec![0.0], vec![1.0]).unwrap(), unsafe_region: Vec::new() };
        let mut l = Leaf::root(sp, root);
        l.weakest = weakest;
        l
    }

    fn brute(l: &OpenList<f64>) -> f64 {
        weakest_of(l.leaves())
    }

    #[test]
    fn running_minimum_follows_the_stack() {
        let mut l = OpenList::new(vec![leaf(-3.0, 0), leaf(-1.0, 1)]);
        assert_eq!(l.weakest(), -3.0);
        l.extend(vec![leaf(-5.0, 2), leaf(-0.5, 3), leaf(-2.0, 4)]);
        assert_eq!(l.weakest(), -5.0);
        let top = l.split_off(3);
        assert_eq!(top.iter().map(|x| x.root).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(weakest_of(&top), -2.0);
        assert_eq!(l.weakest(), -5.0);
        let top = l.split_off(2);
        assert_eq!(weakest_of(&top), -5.0);
        assert_eq!(l.weakest(), -3.0);
        l.extend(vec![leaf(-0.1, 5)]);
        assert_eq!((l.len(), l.weakest()), (3, -3.0));
        // Given up: the dropped leaves' smallest bound comes back.
        assert_eq!(l.retain(|x| x.root != 0), -3.0);
        assert_eq!((l.len(), l.weakest()), (2, -1.0));
        assert_eq!(l.retain(|_| true), f64::INFINITY);
        l.extend(vec![leaf(-4.0, 6), leaf(-7.0, 7)]);
        l.sort_weakest_on_top();
        assert_eq!(l.leaves().last().map(|x| x.root), Some(7));
        assert_eq!(l.weakest(), brute(&l));
        assert_eq!(l.split_off(0).len(), 4);
        assert!(l.is_empty() && l.weakest() == f64::INFINITY);
    }

    /// Random pushes, takes and sorts: the running minimum is the list's.
    #[test]
    fn running_minimum_matches_a_scan() {
        let mut rng = crate::base::rng::SplitMix(7);
        let mut l = OpenList::new(Vec::new());
        for step in 0..2000 {
            match rng.next_u64() % 5 {
                0 | 1 => {
                    let n = (rng.next_u64() % 4) as usize;
                    l.extend((0..n).map(|k| leaf(-((rng.next_u64() % 1000) as f64), step + k)).collect());
                }
                2 | 3 => {
                    let at = l.len().saturating_sub((rng.next_u64() % 5) as usize);
                    l.split_off(at);
                }
                _ if step % 50 == 0 => l.sort_weakest_on_top(),
                _ => {
                    l.retain(|x| x.root % 7 != 3);
                }
            }
            assert_eq!(l.weakest(), brute(&l), "step {step}");
        }
    }
}
