//! When a host loop is worth rayon's pool.
//!
//! A search worker runs many small loops per round (a batch's per-value
//! relaxations, its slots' α/β steps). Waking the pool for a few thousand
//! operations costs more than the loop: the soundness hunt's searches on
//! small networks spent most of their time in the scheduler, and on the
//! GPU machine four workers share one pool. Loops of less work than
//! [`SERIAL_WORK`] run on the calling thread. Either way every item is
//! computed by the same code, so the values are the same.

use rayon::prelude::*;

/// Elementary operations (a multiply-add, a comparison) below which a
/// loop runs on the calling thread. Not in `Options`: the CPU backend's
/// kernels ask [`worth`] too, with no options at hand.
pub const SERIAL_WORK: usize = 1 << 14;

/// Operations per value of a per-value loop (a relaxation's few
/// comparisons and products).
pub const VALUE_WORK: usize = 4;

/// Whether `work` operations are worth the pool.
pub fn worth(work: usize) -> bool {
    work >= SERIAL_WORK
}

/// `(0..n).map(f)` collected, `work` operations in all: on the pool, in
/// pieces of at least [`SERIAL_WORK`], only when [`worth`] it.
pub fn map_range<R: Send>(n: usize, work: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if worth(work) {
        let per_item = work.div_ceil(n.max(1)).max(1);
        (0..n).into_par_iter().with_min_len(SERIAL_WORK.div_ceil(per_item)).map(f).collect()
    } else {
        (0..n).map(f).collect()
    }
}

/// `f` on every item of `items`, `work` operations in all, on the pool
/// only when [`worth`] it.
pub fn for_each_mut<I: Send>(items: &mut [I], work: usize, f: impl Fn(&mut I) + Sync + Send) {
    if worth(work) {
        items.par_iter_mut().for_each(f);
    } else {
        items.iter_mut().for_each(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_and_parallel_give_the_same_values() {
        let f = |i: usize| (i as f64).sqrt() * 3.0 + 1.0 / (i as f64 + 1.0);
        let n = 10_000;
        let serial = map_range(n, SERIAL_WORK - 1, f);
        let parallel = map_range(n, 100 * SERIAL_WORK, f);
        assert_eq!(serial.len(), n);
        assert!(serial.iter().zip(&parallel).all(|(a, b)| a.to_bits() == b.to_bits()));
        let (mut a, mut b) = (vec![1.5_f64; n], vec![1.5_f64; n]);
        for_each_mut(&mut a, 0, |x| *x = x.powi(3) - 0.25);
        for_each_mut(&mut b, usize::MAX, |x| *x = x.powi(3) - 0.25);
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x == 1.5_f64.powi(3) - 0.25));
    }

    #[test]
    fn the_threshold() {
        assert!(!worth(SERIAL_WORK - 1));
        assert!(worth(SERIAL_WORK));
        assert!(map_range(0, 0, |i| i).is_empty());
        assert!(map_range(0, SERIAL_WORK, |i| i).is_empty());
    }
}
