//! `fp_dot_enclosure(w, x, b, model)` must contain every value that a float
//! program of that precision can compute for `Σ w_i·x_i + b` with float
//! points `x_i ∈ x[i]`: we evaluate it in `T` (round-to-nearest) in many
//! orders (left-to-right, reversed, random permutations, sorted by |term|
//! and by value, pairwise trees, FMA chains, blocked split-K) and also
//! exactly with rug. Lengths go up to 300.

use crate::common::*;
use polycert_interval::{FloatModel, fp_dot_enclosure};
use proptest::prelude::*;

fn bias<T: TF>() -> BoxedStrategy<T> {
    prop_oneof![float::<T>(false), moderate::<T>()].boxed()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn f32_program_orders_inside((x, w) in dot_data::<f32>(300, true), b in bias::<f32>(), seed: u64) {
        let e = fp_dot_enclosure(&w, &x, b, FloatModel::F32);
        check_fp_dot(&w, &x, b, (e.lo(), e.hi()), seed, true)?;
    }

    #[test]
    fn f32_program_tame_data((x, w) in tame_dot_data::<f32>(300), b in moderate::<f32>(), seed: u64) {
        // Finite, mostly moderate data: enclosures are finite and tight, so
        // this exercises the error bound itself rather than the overflow path.
        let e = fp_dot_enclosure(&w, &x, b, FloatModel::F32);
        check_fp_dot(&w, &x, b, (e.lo(), e.hi()), seed, true)?;
    }

    #[test]
    fn f64_program_orders_inside((x, w) in dot_data::<f64>(300, true), b in bias::<f64>(), seed: u64) {
        let e = fp_dot_enclosure(&w, &x, b, FloatModel::F64);
        check_fp_dot(&w, &x, b, (e.lo(), e.hi()), seed, true)?;
    }

    #[test]
    fn exact_model_encloses_exact_value((x, w) in dot_data::<f32>(300, true), b in bias::<f32>(), seed: u64) {
        let e = fp_dot_enclosure(&w, &x, b, FloatModel::EXACT);
        check_fp_dot(&w, &x, b, (e.lo(), e.hi()), seed, false)?;
    }
}
