"""The op tour (every operator and the variants that matter, alone on a
fitting input) and the hand-built networks of the regression cases."""

from __future__ import annotations

from collections import Counter

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gen_onnx import FLAT_BLOCKS, IMAGE_BLOCKS, IMAGE_SHAPES, _apply, dense, nhwc_input, to_flat
from onnx_builder import F32, Builder, Net, V

# (name, input kind, block, forced choices)
TOUR = [
    ("Gemm", "flat", "dense", {"gemm"}),
    ("MatMul+bias", "flat", "dense", {"matmul"}),
    ("MatMul-const-left", "flat", "dense", {"left"}),
    ("MatMul-rows", "image", "matmul_rows", set()),
    ("Conv", "image", "conv", set()),
    ("Conv-dilated", "image", "conv", {"dilated"}),
    ("ConvTranspose", "image", "conv_transpose", set()),
    ("MaxPool", "image", "pool", {"MaxPool"}),
    ("MaxPool-dilated", "image", "pool", {"MaxPool", "dilated"}),
    ("AveragePool", "image", "pool", {"AveragePool"}),
    ("GlobalAveragePool", "image", "pool", {"GlobalAveragePool"}),
    ("GlobalMaxPool", "image", "pool", {"GlobalMaxPool"}),
    ("Add", "flat", "arith", {"Add"}),
    ("Sub", "flat", "arith", {"Sub"}),
    ("Mul", "image", "arith", {"Mul"}),
    ("Div", "image", "arith", {"Div"}),
    ("residual-Add", "image", "residual", {"Add"}),
    ("residual-Sub", "flat", "residual", {"Sub"}),
    ("BatchNormalization", "flat", "batchnorm", set()),
    ("BatchNormalization-image", "image", "batchnorm", set()),
    ("Relu", "flat", "activation", {"Relu"}),
    ("Sigmoid", "flat", "activation", {"Sigmoid"}),
    ("Tanh", "image", "activation", {"Tanh"}),
    ("Clip", "flat", "activation", {"Clip"}),
    ("LeakyRelu", "flat", "activation", {"LeakyRelu"}),
    ("Neg", "flat", "activation", {"Neg"}),
    ("Max", "flat", "maxmin", {"Max"}),
    ("Min", "image", "maxmin", {"Min"}),
    ("Transpose", "flat", "shape", {"transpose"}),
    ("Transpose-image", "image", "transpose", set()),
    ("Slice", "flat", "shape", {"slice"}),
    ("Gather", "flat", "shape", {"gather"}),
    ("Gather-twice", "flat", "shape", {"gather", "twice"}),
    ("Squeeze/Unsqueeze", "flat", "shape", {"squeeze"}),
    ("Identity", "flat", "shape", {"identity", "Identity"}),
    ("Dropout", "flat", "shape", {"identity", "Dropout"}),
    ("Split+Concat", "flat", "shape", {"split"}),
    ("Concat", "flat", "shape", {"concat"}),
    ("Flatten", "image", "to_flat", {"flatten"}),
    ("Reshape", "image", "to_flat", {"reshape"}),
    ("Shape-Gather-Concat", "image", "to_flat", {"shape"}),
    ("Pad", "image", "pad", set()),
    ("ReduceSum", "image", "reduce_sum", {"ReduceSum"}),
    ("ReduceMean", "image", "reduce_sum", {"ReduceMean"}),
    ("Concat-constant", "image", "broadcast_copy", {"concat"}),
    ("Expand-network", "image", "broadcast_copy", {"expand"}),
    ("Mul-broadcast-network", "image", "broadcast_copy", {"mul"}),
    ("Greater/Less-network", "flat", "steps", {"greater"}),
    ("Equal-network", "flat", "steps", {"equal"}),
    ("Where-network", "flat", "steps", {"where"}),
    ("Cast-int64-network", "flat", "steps", {"cast_int"}),
    ("Cast-bool-network", "flat", "steps", {"cast_bool"}),
    ("Sign-network", "flat", "steps", {"sign"}),
    ("Pow-square", "flat", "powers", {"square"}),
    ("Pow-cube", "flat", "powers", {"cube"}),
    ("Pow-fractional-negative", "flat", "powers", {"pow_neg"}),
    ("Pow-constant-base", "flat", "powers", {"exp"}),
    ("Sqrt", "flat", "powers", {"sqrt"}),
    ("Reciprocal", "flat", "powers", {"reciprocal"}),
    ("Mul-of-network-values", "flat", "powers", {"mul"}),
    ("Div-of-network-values", "flat", "powers", {"div"}),
    ("NHWC-input+Conv", "image", "conv", {"nhwc"}),
    ("Mul-by-const-Mul", "flat", "arith", {"Mul", "mul"}),
    ("Mul-by-const-Cast", "image", "arith", {"Mul", "cast"}),
    ("Add-const-chain", "flat", "arith", {"Add", "chain"}),
    ("Div-by-const-Div", "flat", "arith", {"Div", "div"}),
    ("Sub-const-Constant", "flat", "arith", {"Sub", "constant"}),
    ("Constant", "flat", "dense", {"gemm", "constant"}),
    ("ConstantOfShape-Equal-Greater-And-Where", "image", "arith", {"Mul", "where"}),
    ("Range-Gather-Reshape", "flat", "arith", {"Add", "range"}),
    ("Expand-const", "image", "arith", {"Sub", "expand"}),
    ("Cast", "flat", "dense", {"matmul", "cast"}),
    ("const-Mul", "flat", "dense", {"matmul", "mul"}),
    ("const-Div", "flat", "dense", {"gemm", "div"}),
    ("const-chain", "flat", "dense", {"gemm", "chain"}),
    ("Softmax", "flat", "softmax", set()),
    ("Softmax-inside", "flat", "softmax_inside", set()),
]


def tour_net(rng: np.random.Generator, name: str, entry) -> Net:
    """One operator alone on a fitting input (a dense layer after it when
    its output would be large), the tour entry's choices forced."""
    label, kind, block, force = entry
    opset = int(rng.choice([13, 13, 11, 17]))
    b = Builder(rng, opset)
    b.force = set(force)
    in_shape = tuple(IMAGE_SHAPES[rng.integers(len(IMAGE_SHAPES))]) if kind == "image" else (1, int(rng.integers(2, 9)))
    b.anchor = rng.uniform(-1, 1, size=int(np.prod(in_shape))).astype(F32)
    x = V("x", in_shape)
    if "nhwc" in force:
        x, in_shape = nhwc_input(b, in_shape)
    softmax = False
    table = dict(FLAT_BLOCKS if kind == "flat" else IMAGE_BLOCKS, to_flat=to_flat)
    if block == "softmax":
        x = dense(b, x, int(rng.integers(2, 9)))
        x = V(b.node("Softmax", [x.name], axis=-1 if opset >= 13 else 1), x.shape)
        softmax = True
        b.features.add("Softmax:final")
    else:
        x = _apply(b, x, table, block) if block != "dense" else dense(b, x, int(rng.integers(1, 9)))
    model = b.model(V("x", in_shape), x, in_shape)
    net = Net(name, model, in_shape, x.shape, softmax=softmax, anchor=b.anchor, opset=opset)
    net.features = b.features | {"tour:" + label}
    net.ops = Counter(n.op_type for n in model.graph.node)
    return net


# ---------------------------------------------------------------------------
# Hand-built networks for the regression cases


def simple_net(name: str, nodes, inits, in_shape, out_shape, out_name: str = "y", softmax=False, opset=13) -> Net:
    g = helper.make_graph(
        nodes,
        "boundary_hunt_regression",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, list(out_shape))],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="boundary_hunt")
    m.ir_version = 8
    net = Net(name, m, tuple(in_shape), tuple(out_shape), softmax=softmax, anchor=np.zeros(int(np.prod(in_shape)), F32))
    net.ops = Counter(n.op_type for n in m.graph.node)
    return net
