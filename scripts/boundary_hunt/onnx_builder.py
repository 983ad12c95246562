"""The ONNX graph builder the generators share: `Net` (a generated network
and what the property generator and the judge need), `V` (a value and its
shape), `Builder` (names, initialisers, nodes, constant subgraphs, weights
with the nasty magnitudes)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32 = np.float32


@dataclass
class Net:
    name: str
    model: object  # onnx.ModelProto
    in_shape: tuple
    out_shape: tuple
    softmax: bool = False
    anchor: np.ndarray | None = None  # a float32 point (flattened input) the weights were tuned around
    ops: Counter = field(default_factory=Counter)
    features: set = field(default_factory=set)
    opset: int = 13
    regression: str | None = None

    @property
    def n_in(self) -> int:
        return int(np.prod(self.in_shape))

    @property
    def n_out(self) -> int:
        return int(np.prod(self.out_shape))


class Skip(Exception):
    """A block that does not apply to the current value's shape."""


@dataclass
class V:
    name: str
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


MAX_NEURONS = 64


class Builder:
    def __init__(self, rng: np.random.Generator, opset: int = 13):
        self.rng = rng
        self.opset = opset
        self.nodes = []
        self.inits = []
        self.k = 0
        self.features: set = set()
        self.extreme: str | None = None  # applied once, to the first weight layer
        self.anchor: np.ndarray | None = None
        self.input_name = "x"
        self.force: set = set()  # choices to take whenever offered (the op tour)

    def pick(self, options):
        forced = [o for o in options if o in self.force]
        return str(forced[0]) if forced else str(self.rng.choice(options))

    # -- names, initialisers, nodes -------------------------------------
    def fresh(self, prefix: str) -> str:
        self.k += 1
        return f"{prefix}_{self.k}"

    def init(self, arr, prefix: str = "c") -> str:
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def ints(self, vals) -> str:
        return self.init(np.asarray(vals, dtype=np.int64), "i")

    def node(self, op: str, inputs, outputs: int = 1, **attrs):
        outs = [self.fresh(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=self.fresh("n_" + op), **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, arr) -> str:
        """A float32 constant, supplied by a random constant subgraph: an
        initialiser, a Constant node, Mul/Div/Add/Sub of initialisers, a
        Cast of a double initialiser, or shape arithmetic as exporters leave
        it (ConstantOfShape, Equal, Greater, And, Where; Range and Gather;
        Expand) (the network computes whatever the fold gives; onnxruntime
        is the reference)."""
        arr = np.asarray(arr, dtype=F32)
        r = self.rng
        mode = self.pick(["init"] * 8 + ["constant", "mul", "div", "chain", "cast", "where", "range", "expand"])
        if mode == "init":
            return self.init(arr)
        self.features.add("const:" + mode)
        if mode == "constant":
            return self.node("Constant", [], value=numpy_helper.from_array(arr, self.fresh("cv")))
        if mode == "mul":
            a = (r.uniform(0.5, 2.0, size=arr.shape) * r.choice([-1, 1], size=arr.shape)).astype(F32)
            b = (arr.astype(np.float64) / a).astype(F32)
            ins = [self.init(a), self.init(b)]
            if r.random() < 0.5:
                ins.reverse()
            return self.node("Mul", ins)
        if mode == "div":
            d = F32(r.choice([3.0, 0.7, 10.0, -1.3]))
            a = (arr.astype(np.float64) * float(d)).astype(F32)
            return self.node("Div", [self.init(a), self.init(np.array(d, dtype=F32))])
        if mode == "chain":
            p = r.normal(0, 1, size=arr.shape).astype(F32)
            q = (arr.astype(np.float64) - p).astype(F32)
            s = self.node("Add", [self.init(p), self.init(q)])
            z = r.normal(0, 1, size=()).astype(F32)
            s = self.node("Add", [s, self.init(np.array(z))])
            return self.node("Sub", [s, self.init(np.array(z))])
        if mode in ("where", "range", "expand"):
            return self.shape_arith(arr, mode)
        # cast
        a64 = arr.astype(np.float64) * (1 + r.normal(0, 1e-9, size=arr.shape))
        return self.node("Cast", [self.init(a64)], to=TensorProto.FLOAT)

    def shape_arith(self, arr, mode: str) -> str:
        """`arr` computed through ops that only fold on constants."""
        dims = self.ints(list(arr.shape))
        if mode == "where":
            one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
            zero = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
            ones = self.node("ConstantOfShape", [dims], value=one)
            zeros = self.node("ConstantOfShape", [dims], value=zero)
            keep = self.node("And", [self.node("Equal", [ones, ones]), self.node("Greater", [ones, zeros])])
            junk = self.rng.normal(0, 1, size=arr.shape).astype(F32)
            return self.node("Where", [keep, self.init(arr), self.init(junk)])
        if mode == "range":
            idx = self.node("Range", [self.init(np.array(0, np.int64)), self.init(np.array(arr.size, np.int64)),
                                      self.init(np.array(1, np.int64))])
            flat = self.node("Gather", [self.init(arr.reshape(-1)), idx], axis=0)
            return self.node("Reshape", [flat, dims])
        return self.node("Expand", [self.init(arr), self.ints([1] * arr.ndim)])

    # -- weights ----------------------------------------------------------
    def weights(self, shape, fan_in: int, is_input: bool = False):
        """A weight array (float32) and the extreme mode applied to it."""
        r = self.rng
        w = r.normal(0, 1.0 / np.sqrt(max(fan_in, 1)), size=shape)
        mode = self.extreme
        if mode is not None and (mode != "cancel" or is_input):
            self.extreme = None
            self.features.add("weights:" + mode)
            if mode == "huge":
                w = w * 1e30
            elif mode == "tiny":
                w = w * 1e-30
            elif mode == "subnormal":
                mask = r.random(size=shape) < 0.5
                w = np.where(mask, np.sign(w) * r.integers(1, 1000, size=shape) * 1e-43, w)
            elif mode == "cancel":
                w = w * 1e3
            return w.astype(F32), mode
        return w.astype(F32), None

    def bias(self, n: int, mode) -> np.ndarray:
        b = self.rng.normal(0, 0.5, size=n)
        if mode == "huge":
            b = b * 1e30
        elif mode == "tiny":
            b = b * 1e-30
        elif mode == "subnormal":
            b = b * 1e-40
        return b.astype(F32)

    def model(self, x: V, y: V, in_shape):
        g = helper.make_graph(
            self.nodes,
            "boundary_hunt",
            [helper.make_tensor_value_info(self.input_name, TensorProto.FLOAT, list(in_shape))],
            [helper.make_tensor_value_info(y.name, TensorProto.FLOAT, list(y.shape))],
            self.inits,
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="boundary_hunt")
        m.ir_version = 8
        return m
