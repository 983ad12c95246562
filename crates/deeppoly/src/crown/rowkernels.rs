//! A dense layer over a handful of rows at once, for the host's relaxed
//! bounds (`hostrows.rs`): each weight row is read once for all rows, and
//! zero coefficients are skipped. Plain f64 in any order: these values
//! only steer α and β, never a bound.
//!
//! The kernel is compiled twice, for the baseline and for AVX2, and the
//! copy is picked at run time.

/// Rows per block of a pass.
const Q: usize = 8;

/// `acc[r·k + i] += Σ_o g[r·n + o]·w[o·k + i]` for the rows `g` (`rn × n`)
/// and `w` (`n × k`, row-major): the backward pass through a dense layer
/// (`w` its weights), or the forward one (`w` its weights transposed).
pub(crate) fn accumulate(acc: &mut [f64], g: &[f64], w: &[f32], (rn, n, k): (usize, usize, usize)) {
    assert!(acc.len() == rn * k && g.len() == rn * n && w.len() == n * k, "rowkernels::accumulate: shapes");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { accumulate_avx2(acc, g, w, (rn, n, k)) };
    }
    accumulate_body(acc, g, w, (rn, n, k))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn accumulate_avx2(acc: &mut [f64], g: &[f64], w: &[f32], dims: (usize, usize, usize)) {
    accumulate_body(acc, g, w, dims)
}

#[inline(always)]
fn accumulate_body(acc: &mut [f64], g: &[f64], w: &[f32], (rn, n, k): (usize, usize, usize)) {
    // The rows' zero coefficients mostly fall on the same neurons (inactive
    // ReLUs): only the others' weight rows are read, `Q` at a time, and
    // each row's accumulator is read and written once per `Q` products.
    let nz: Vec<usize> = (0..n).filter(|&o| (0..rn).any(|r| g[r * n + o] != 0.0)).collect();
    for block in nz.chunks(Q) {
        let q = block.len();
        let ws: [&[f32]; Q] =
            std::array::from_fn(|j| if j < q { &w[block[j] * k..(block[j] + 1) * k] } else { &w[..0] });
        for r in 0..rn {
            let s: [f64; Q] = std::array::from_fn(|j| if j < q { g[r * n + block[j]] } else { 0.0 });
            if s.iter().all(|&v| v == 0.0) {
                continue;
            }
            let a = &mut acc[r * k..(r + 1) * k];
            if q == Q {
                axpy(a, s, ws);
            } else {
                for j in 0..q {
                    a.iter_mut().zip(ws[j]).for_each(|(a, &wv)| *a += s[j] * f64::from(wv));
                }
            }
        }
    }
}

/// `a += Σ_j s_j·w_j` over `P` rows `w_j` of `a`'s length.
#[inline(always)]
fn axpy<const P: usize>(a: &mut [f64], s: [f64; P], w: [&[f32]; P]) {
    let k = a.len();
    let w: [&[f32]; P] = std::array::from_fn(|j| &w[j][..k]);
    for i in 0..k {
        // Pairwise, so the adds do not wait on one another.
        let mut t: [f64; P] = std::array::from_fn(|j| s[j] * f64::from(w[j][i]));
        let mut m = P;
        while m > 1 {
            m /= 2;
            for j in 0..m {
                t[j] += t[j + m];
            }
        }
        a[i] += t[0];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::SplitMix;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs()))
    }

    /// The kernel against the plain triple loop, for row counts around
    /// the block size and lengths around the lane count (zeros included).
    #[test]
    fn kernels_match_the_plain_products() {
        let mut rng = SplitMix(11);
        for (rn, n, k) in [(1, 1, 1), (3, 5, 7), (4, 8, 16), (9, 13, 21), (5, 4, 8), (2, 9, 33)] {
            let mut v =
                |len: usize| -> Vec<f64> { (0..len).map(|i| if i % 5 == 0 { 0.0 } else { rng.weight(1.0) }).collect() };
            let (w, g) = (v(n * k), v(rn * n));
            let w: Vec<f32> = w.iter().map(|&x| x as f32).collect();
            let base = v(rn * k);
            let mut acc = base.clone();
            accumulate(&mut acc, &g, &w, (rn, n, k));
            for r in 0..rn {
                for i in 0..k {
                    let want = base[r * k + i] + (0..n).map(|o| g[r * n + o] * f64::from(w[o * k + i])).sum::<f64>();
                    assert!(close(acc[r * k + i], want), "accumulate ({rn}, {n}, {k}) at ({r}, {i})");
                }
            }
        }
    }
}
