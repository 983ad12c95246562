//! A final Softmax is dropped: the IR network computes the logits and is
//! marked (`Network::set_softmax_output`), so that the analysis checks
//! comparisons of outputs with a float margin (`polycert_deeppoly::base::softmax`).

use crate::graph::{Importer, Node, OpResult, Value, unsupported};
use crate::tensor::norm_axis;

pub(super) fn softmax(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if node.proto.output.first().map(String::as_str) != Some(imp.output) {
        return unsupported("Softmax is only supported as the last operation (it is then dropped)");
    }
    if imp.is_const(xn) {
        return unsupported("Softmax of a constant");
    }
    let x = imp.dynamic(xn)?;
    let rank = x.dims.len();
    let default = if imp.opset < 13 { 1 } else { -1 };
    let axis = norm_axis(node.int("axis", default)?, rank)?;
    // Over every output: the dims outside the Softmax group are all 1.
    let outside = if imp.opset < 13 { &x.dims[..axis] } else { &[&x.dims[..axis], &x.dims[axis + 1..]].concat()[..] };
    if outside.iter().any(|&d| d != 1) {
        return unsupported(format!("Softmax over axis {axis} of dims {:?} (only over all outputs)", x.dims));
    }
    imp.net.set_softmax_output(true);
    Ok(Value::Dyn(x))
}
