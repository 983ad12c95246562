//! One box's bounds of every node, in the analysis's float type.

use polycert_interval::Fp;

/// One node's lower and upper bounds, per value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoHi<T> {
    pub(crate) lo: Vec<T>,
    pub(crate) hi: Vec<T>,
}

/// One box's bounds of every node.
pub(crate) type NodeBounds<T> = Vec<LoHi<T>>;

/// Node bounds in `f64` (exactly).
pub(crate) fn bounds_f64<T: Fp>(b: NodeBounds<T>) -> Vec<crate::base::analyzer::NodeBounds> {
    let f64s = |v: Vec<T>| v.into_iter().map(|x| x.to_f64_exact()).collect();
    b.into_iter().map(|LoHi { lo, hi }| (f64s(lo), f64s(hi))).collect()
}
