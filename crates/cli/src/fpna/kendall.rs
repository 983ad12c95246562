//! Kendall's tau-b between orderings (Knight's O(n log n) algorithm), the
//! orderings files `fpna order` writes, and the histogram of a set of taus.

use crate::InputError;
use anyhow::{Context, Result, bail};
use std::path::Path;

/// Kendall's tau-b of two equally long sequences, compared element by
/// element (as `scipy.stats.kendalltau(a, b)`): `(n_c − n_d) /
/// sqrt((n_0 − n_1)(n_0 − n_2))` with `n_1`, `n_2` the pairs tied in `a`,
/// in `b`. `None` when a sequence is constant (tau-b is undefined).
pub fn tau_b(a: &[i64], b: &[i64]) -> Option<f64> {
    assert_eq!(a.len(), b.len(), "tau_b of sequences of different lengths");
    let n = a.len() as u64;
    let n0 = n * n.saturating_sub(1) / 2;
    // Sort by (a, b); count pairs tied in a (n1) and in both (n3).
    let mut idx: Vec<usize> = (0..a.len()).collect();
    idx.sort_unstable_by_key(|&i| (a[i], b[i]));
    let ties = |key: &dyn Fn(usize) -> (i64, i64)| -> u64 {
        let mut total = 0u64;
        let mut run = 1u64;
        for w in idx.windows(2) {
            if key(w[0]) == key(w[1]) {
                run += 1;
            } else {
                total += run * (run - 1) / 2;
                run = 1;
            }
        }
        total + run * (run - 1) / 2
    };
    let n1 = ties(&|i| (a[i], 0));
    let n3 = ties(&|i| (a[i], b[i]));
    // Discordant pairs: inversions of b in this order (pairs tied in a are
    // sorted by b, so they add none).
    let mut seq: Vec<i64> = idx.iter().map(|&i| b[i]).collect();
    let swaps = inversions(&mut seq);
    // seq is now b sorted: its tie groups give n2.
    let mut n2 = 0u64;
    let mut run = 1u64;
    for w in seq.windows(2) {
        if w[0] == w[1] {
            run += 1;
        } else {
            n2 += run * (run - 1) / 2;
            run = 1;
        }
    }
    n2 += run * (run - 1) / 2;
    let s = n0 as f64 - n1 as f64 - n2 as f64 + n3 as f64 - 2.0 * swaps as f64;
    let den = ((n0 - n1) as f64 * (n0 - n2) as f64).sqrt();
    (den > 0.0).then(|| (s / den).clamp(-1.0, 1.0))
}

/// Sorts `v` (merge sort) and returns its number of inversions.
fn inversions(v: &mut [i64]) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut count = inversions(&mut v[..mid]) + inversions(&mut v[mid..]);
    let mut merged = Vec::with_capacity(n);
    let (mut i, mut j) = (0, mid);
    while i < mid && j < n {
        if v[j] < v[i] {
            count += (mid - i) as u64;
            merged.push(v[j]);
            j += 1;
        } else {
            merged.push(v[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&v[i..mid]);
    merged.extend_from_slice(&v[j..]);
    v.copy_from_slice(&merged);
    count
}

/// The orderings of a file: one line per sample, comma-separated integers.
pub fn read_orderings(path: &Path) -> Result<Vec<Vec<i64>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut out: Vec<Vec<i64>> = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Vec<i64> = line
            .split(',')
            .map(|f| {
                f.trim()
                    .parse()
                    .map_err(|_| InputError(format!("{}:{}: '{f}' is not an integer", path.display(), ln + 1)))
            })
            .collect::<Result<_, _>>()?;
        if let Some(first) = out.first()
            && first.len() != row.len()
        {
            bail!(InputError(format!(
                "{}:{}: {} values, the first line has {}",
                path.display(),
                ln + 1,
                row.len(),
                first.len()
            )));
        }
        out.push(row);
    }
    if out.is_empty() {
        bail!(InputError(format!("{}: no orderings", path.display())));
    }
    Ok(out)
}

/// Counts of `taus` in `bins` equal bins over `[-1, 1]` (1 in the last).
pub fn histogram(taus: &[f64], bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins];
    for &t in taus {
        let k = (((t + 1.0) / 2.0) * bins as f64).floor() as isize;
        h[k.clamp(0, bins as isize - 1) as usize] += 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The O(n²) definition, for comparison.
    fn naive(a: &[i64], b: &[i64]) -> Option<f64> {
        let n = a.len();
        let (mut s, mut t1, mut t2, mut n0) = (0i64, 0i64, 0i64, 0i64);
        for i in 0..n {
            for j in i + 1..n {
                n0 += 1;
                let (da, db) = ((a[i] - a[j]).signum(), (b[i] - b[j]).signum());
                s += da * db;
                t1 += (da == 0) as i64;
                t2 += (db == 0) as i64;
            }
        }
        let den = (((n0 - t1) * (n0 - t2)) as f64).sqrt();
        (den > 0.0).then(|| s as f64 / den)
    }

    #[test]
    fn hand_computed_values() {
        let a = [0, 1, 2, 3, 4];
        assert_eq!(tau_b(&a, &a), Some(1.0));
        assert_eq!(tau_b(&a, &[4, 3, 2, 1, 0]), Some(-1.0));
        // One swapped pair of 10: (10 − 2·1)/10.
        assert_eq!(tau_b(&a, &[1, 0, 2, 3, 4]), Some(0.8));
        // Ties: a = [1,1,2], b = [1,2,2]: n0 = 3, n1 = 1, n2 = 1, S = 1 → 1/2.
        assert_eq!(tau_b(&[1, 1, 2], &[1, 2, 2]), Some(0.5));
        // a = [1,2,3,4], b = [1,1,2,2]: S = 4, n1 = 0, n2 = 2 → 4/sqrt(6·4).
        let t = tau_b(&[1, 2, 3, 4], &[1, 1, 2, 2]).unwrap();
        assert!((t - 4.0 / 24f64.sqrt()).abs() < 1e-15);
        assert_eq!(tau_b(&[3, 3, 3], &[1, 2, 3]), None);
    }

    #[test]
    fn agrees_with_the_definition() {
        let mut rng = polycert_deeppoly::base::rng::SplitMix(5);
        for case in 0..300 {
            let n = 2 + rng.below(40);
            let range = 1 + rng.below(if case % 2 == 0 { 4 } else { 100 }) as i64;
            let a: Vec<i64> = (0..n).map(|_| rng.below(range as usize) as i64).collect();
            let b: Vec<i64> = (0..n).map(|_| rng.below(range as usize) as i64).collect();
            match (tau_b(&a, &b), naive(&a, &b)) {
                (Some(x), Some(y)) => assert!((x - y).abs() < 1e-12, "{a:?} {b:?}: {x} vs {y}"),
                (x, y) => assert_eq!(x, y),
            }
        }
    }

    #[test]
    fn histogram_bins() {
        assert_eq!(histogram(&[-1.0, -0.5, 0.0, 0.99, 1.0], 4), vec![1, 1, 1, 2]);
    }
}
