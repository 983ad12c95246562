//! `polycert fpna variability`: run a model's inference several times with
//! different summation orders, measure how much the outputs move (the FPNA
//! study's metrics), and check that every output lies in polycert's
//! certified bounds.

use crate::images::Image;
use polycert_deeppoly::LoHi;
use polycert_deeppoly::Network;
use polycert_deeppoly::base::rng::SplitMix;

/// The FPNA study's metrics between each run and the first, over every
/// image and output (`d` values compared).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Variability {
    /// `(1/D)·Σ |A_i − B_i| / |A_i|` (a term is 0 when `A_i = B_i`, 1 when
    /// only `A_i` is 0).
    pub v_ermv: f64,
    /// `(1/D)·Σ 1(A_i ≠ B_i)`.
    pub v_c: f64,
    /// Images whose predicted label differs from the first run's in some run.
    pub flips: usize,
    pub d: usize,
}

/// `outputs[run][image]` are the outputs of one run.
pub fn variability(outputs: &[Vec<Vec<f32>>]) -> Variability {
    let Some((first, rest)) = outputs.split_first() else { return Variability::default() };
    let argmax = |y: &[f32]| (0..y.len()).max_by(|&a, &b| y[a].total_cmp(&y[b]));
    let (mut rel, mut diff, mut d) = (0.0, 0usize, 0usize);
    let mut flipped = vec![false; first.len()];
    for run in rest {
        for (k, (a, b)) in first.iter().zip(run).enumerate() {
            for (&x, &y) in a.iter().zip(b) {
                d += 1;
                if x != y {
                    diff += 1;
                    rel += if x == 0.0 { 1.0 } else { ((x as f64) - (y as f64)).abs() / (x as f64).abs() };
                }
            }
            flipped[k] |= argmax(a) != argmax(b);
        }
    }
    let per = |v: f64| if d == 0 { 0.0 } else { v / d as f64 };
    Variability { v_ermv: per(rel), v_c: per(diff as f64), flips: flipped.iter().filter(|&&f| f).count(), d }
}

/// `runs` CPU inferences of every image, each with every dense and conv
/// sum in a fresh random order (run `r` of image `k` seeded from
/// `seed, r, k`, so a run is reproducible).
pub fn cpu_runs(net: &Network, inputs: &[Vec<f32>], runs: usize, seed: u64) -> Vec<Vec<Vec<f32>>> {
    use rayon::prelude::*;
    (0..runs)
        .map(|r| {
            inputs
                .par_iter()
                .enumerate()
                .map(|(k, x)| {
                    let mut rng = SplitMix(seed ^ ((r as u64) << 32) ^ k as u64);
                    polycert_deeppoly::base::eval::eval_shuffled::<f32>(net, x, &mut rng)
                })
                .collect()
        })
        .collect()
}

/// How many observed outputs (`(image, outputs)`) lie outside their image's
/// certified bounds; `report` hears about the first ten.
pub fn outside_bounds(
    observed: &[(usize, Vec<f32>)],
    bounds: &[LoHi<f64>],
    report: &mut dyn FnMut(usize, usize, f64, f64, f64),
) -> usize {
    let mut outside = 0;
    for (k, y) in observed {
        let LoHi { lo, hi } = &bounds[*k];
        for (j, &v) in y.iter().enumerate() {
            let v = v as f64;
            if !(lo[j] <= v && v <= hi[j]) {
                if outside < 10 {
                    report(*k, j, v, lo[j], hi[j]);
                }
                outside += 1;
            }
        }
    }
    outside
}

/// The predicted label of each image agrees with its file label?
pub fn accuracy(images: &[Image], first_run: &[Vec<f32>]) -> usize {
    images
        .iter()
        .zip(first_run)
        .filter(|(img, y)| (0..y.len()).max_by(|&a, &b| y[a].total_cmp(&y[b])) == Some(img.label))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_by_hand() {
        // Two images of two outputs, three runs: run 1 changes one value by
        // 10% and flips image 0's label; run 2 sets a zero output to 1.
        let r0 = vec![vec![1.0, 0.95], vec![2.0, 0.0]];
        let r1 = vec![vec![0.9, 0.95], vec![2.0, 0.0]];
        let r2 = vec![vec![1.0, 0.95], vec![2.0, 1.0]];
        let v = variability(&[r0.clone(), r1, r2]);
        assert_eq!(v.d, 8);
        assert!((v.v_ermv - (0.1f32 as f64 / 1.0 + 1.0) / 8.0).abs() < 1e-7, "{v:?}");
        assert_eq!(v.v_c, 2.0 / 8.0);
        assert_eq!(v.flips, 1);
        // Identical runs: all zero.
        let v = variability(&[r0.clone(), r0.clone()]);
        assert_eq!((v.v_ermv, v.v_c, v.flips, v.d), (0.0, 0.0, 0, 4));
        assert_eq!(variability(&[]).d, 0);
    }

    #[test]
    fn outputs_outside_the_bounds_are_counted() {
        let bounds = vec![LoHi { lo: vec![0.0, 1.0], hi: vec![1.0, 2.0] }];
        let obs = vec![(0, vec![0.5, 1.5]), (0, vec![1.5, 2.0]), (0, vec![f32::NAN, 0.5])];
        let mut seen = vec![];
        let n = outside_bounds(&obs, &bounds, &mut |k, j, v, _, _| seen.push((k, j, v)));
        assert_eq!(n, 3, "1.5 > 1, NaN, 0.5 < 1");
        assert_eq!(seen[0], (0, 0, 1.5));
    }

    #[test]
    fn shuffled_sums_move_outputs_only_by_rounding() {
        let mut rng = SplitMix(3);
        let net = polycert_deeppoly::testnets::random_mlp(&mut rng, &[64, 64, 64, 10]);
        let xs: Vec<Vec<f32>> = (0..20).map(|_| (0..64).map(|_| rng.unit() as f32).collect()).collect();
        let out = cpu_runs(&net, &xs, 5, 1);
        let v = variability(&out);
        assert!(v.v_c > 0.0, "random orders change some float32 outputs");
        assert!(v.v_ermv < 1e-4, "{v:?}");
        // Reproducible from the seed.
        assert_eq!(cpu_runs(&net, &xs, 2, 1), out[..2].to_vec());
    }
}
