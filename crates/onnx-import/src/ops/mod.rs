//! Lowering of ONNX operators, one file per family.

mod affine;
mod broadcast;
pub(crate) use broadcast::constant_output;
mod conv_transpose;
mod fold;
mod linear;
mod pad;
mod piecewise;
mod pool;
mod power;
pub(crate) use power::polarized;
mod reduce;
mod scurve;
mod shape;
mod softmax;
mod step;

use crate::graph::{Importer, Node, OpResult, Value, unsupported};

const SUPPORTED: &str = "Gemm, MatMul, Conv (1-D and 2-D, dilated), ConvTranspose (as a dense layer), Add, Sub, Mul, Div (also of two network values), Pow (a constant exponent or base), Sqrt, Reciprocal, Neg, BatchNormalization, Relu, Sigmoid, Tanh, Clip, LeakyRelu, Max, Min, MaxPool, \
    AveragePool, GlobalAveragePool, GlobalMaxPool, Flatten, Reshape, Transpose, Slice, Split, Gather (constant indices), \
    Pad (zeros on H and W), Softmax (last, dropped), ReduceSum, ReduceMean, Squeeze, Unsqueeze, Concat (also of constants with one network value), Identity, Dropout, Expand, Equal, Greater, Less, GreaterOrEqual, LessOrEqual \
    (of a network value against one constant), Where (between the compared value and a constant), Sign, Cast (to float32, bool, int32, int64), \
    and on constants Shape, Constant, ConstantOfShape, Range, And, Or, Xor, Not";

/// Most weights (`n_out × n_in`) of a dense layer that an operator
/// without a step of its own becomes (ConvTranspose, reductions, copies).
pub(crate) const MAX_WEIGHTS: usize = 1 << 22;

/// Every ONNX operator type the importer reads, in some form (the
/// restrictions are in [`SUPPORTED`]'s text and in each refusal).
pub const OPERATORS: &[&str] = &[
    "Add",
    "And",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Div",
    "Dropout",
    "Equal",
    "Expand",
    "Flatten",
    "Gather",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "Identity",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "MatMul",
    "Max",
    "MaxPool",
    "Min",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "Pad",
    "Pow",
    "Range",
    "Reciprocal",
    "ReduceMean",
    "ReduceSum",
    "Relu",
    "Reshape",
    "Shape",
    "Sigmoid",
    "Sign",
    "Slice",
    "Softmax",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Tanh",
    "Transpose",
    "Unsqueeze",
    "Where",
    "Xor",
];

/// Lowers one node, returning the values of its outputs in order (fewer
/// than the node declares when the rest are unsupported and unused).
pub(crate) fn run(imp: &mut Importer, node: &Node) -> OpResult<Vec<Value>> {
    if !node.inputs().iter().any(|n| imp.is_integer(n)) {
        return run_op(imp, node);
    }
    // An integer network value (see `step`).
    if !step::READ_INTEGERS.contains(&node.op()) {
        return unsupported(format!(
            "{} of an integer network value (after a Cast to an integer type): integer arithmetic wraps around, \
             which is not modelled",
            node.op()
        ));
    }
    if node.op() == "Add" {
        return Ok(vec![step::add_zero(imp, node)?]);
    }
    let outs = run_op(imp, node)?;
    if !matches!(node.op(), "Cast" | "Equal" | "Greater" | "Less" | "GreaterOrEqual" | "LessOrEqual") {
        imp.mark_outputs_integer(node);
    }
    Ok(outs)
}

fn run_op(imp: &mut Importer, node: &Node) -> OpResult<Vec<Value>> {
    let one = |v: Value| Ok(vec![v]);
    match node.op() {
        "Gemm" => one(linear::gemm(imp, node)?),
        "MatMul" => one(linear::matmul(imp, node)?),
        "Conv" => one(linear::conv(imp, node)?),
        "ConvTranspose" => one(conv_transpose::conv_transpose(imp, node)?),
        "Add" | "Sub" | "Mul" | "Div" => one(affine::binary(imp, node)?),
        "BatchNormalization" => one(affine::batch_norm(imp, node)?),
        "Relu" => one(affine::relu(imp, node)?),
        "Clip" => one(piecewise::clip(imp, node)?),
        "LeakyRelu" => one(piecewise::leaky_relu(imp, node)?),
        "Sigmoid" => one(scurve::sigmoid(imp, node)?),
        "Tanh" => one(scurve::tanh(imp, node)?),
        "Max" | "Min" => one(piecewise::max_min(imp, node)?),
        "Neg" => one(affine::neg(imp, node)?),
        "AveragePool" | "MaxPool" => one(pool::pool(imp, node)?),
        "GlobalAveragePool" | "GlobalMaxPool" => one(pool::global_pool(imp, node)?),
        "Flatten" => one(shape::flatten(imp, node)?),
        "Reshape" => one(shape::reshape(imp, node)?),
        "Transpose" => one(shape::transpose(imp, node)?),
        "Pad" => one(pad::pad(imp, node)?),
        "Unsqueeze" | "Squeeze" => one(shape::squeeze(imp, node)?),
        "Concat" => one(shape::concat(imp, node)?),
        "Shape" => one(shape::shape(imp, node)?),
        "Gather" => one(shape::gather(imp, node)?),
        "Slice" => one(shape::slice(imp, node)?),
        "Split" => shape::split(imp, node),
        "Cast" => one(shape::cast(imp, node)?),
        "Constant" => one(shape::constant(imp, node)?),
        "ConstantOfShape" => one(fold::constant_of_shape(imp, node)?),
        "Expand" => one(fold::expand(imp, node)?),
        "Range" => one(fold::range(imp, node)?),
        "Where" if node.inputs().iter().all(|n| imp.is_const(n)) => one(fold::where_(imp, node)?),
        "Where" => one(step::where_(imp, node)?),
        "Sign" => one(step::sign(imp, node)?),
        "Equal" | "Greater" | "Less" | "GreaterOrEqual" | "LessOrEqual"
            if !node.inputs().iter().all(|n| imp.is_const(n)) =>
        {
            one(step::compare(imp, node)?)
        }
        "Equal" | "Greater" | "Less" | "GreaterOrEqual" | "LessOrEqual" | "And" | "Or" | "Xor" | "Not" => {
            one(fold::logic(imp, node)?)
        }
        "Identity" | "Dropout" => one(shape::identity(imp, node)?),
        "Softmax" => one(softmax::softmax(imp, node)?),
        "Pow" => one(power::pow(imp, node)?),
        "Sqrt" | "Reciprocal" => one(power::unary(imp, node)?),
        "ReduceSum" | "ReduceMean" => one(reduce::reduce(imp, node)?),
        "LogSoftmax" => unsupported(
            "LogSoftmax is not supported: export the model without it (a final Softmax is dropped; properties \
             that compare outputs are then checked on the logits)",
        ),
        op => unsupported(format!("operator {op} (polycert supports {SUPPORTED})")),
    }
}
