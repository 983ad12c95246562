"""Random small ONNX networks covering every operator polycert's importer
accepts (crates/onnx-import/src/ops/), alone and in small random graphs,
with float32 initialisers and the nasty magnitudes: huge (1e30), tiny
(1e-30), subnormal (1e-40), cancelling biases and BatchNormalization
statistics, constant subgraphs, final Softmax (also with 10^3..10^5
outputs and subnormal results).

Every network is built from a numpy Generator, so a seed reproduces it.
A network is a `Net`: the ModelProto plus what the property generator and
the judge need (input/output names and shapes, an anchor point, the ops
and features it exercises).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from onnx import TensorProto

from onnx_builder import F32, MAX_NEURONS, Builder, Net, Skip, V

# ---------------------------------------------------------------------------
# Blocks on flat values [1, n]


def _axes_input(b: Builder, op: str, x: str, axes):
    if b.opset >= 13:
        return b.node(op, [x, b.ints(axes)])
    return b.node(op, [x], axes=list(axes))


def dense(b: Builder, x: V, m: int) -> V:
    """Gemm (transB, alpha/beta, C of several shapes), MatMul + bias on
    either side, or MatMul with the constant on the left (column layout)."""
    r = b.rng
    n = x.shape[-1]
    is_input = x.name == b.input_name
    kind = b.pick(["gemm", "gemm", "matmul", "matmul", "left"])
    if kind == "gemm":
        tb = int(r.random() < 0.5)
        w, mode = b.weights((m, n) if tb else (n, m), n, is_input)
        bias = b.bias(m, mode)
        if mode == "cancel" and b.anchor is not None:
            wm = w if tb else w.T
            bias = (-(wm.astype(np.float64) @ b.anchor.astype(np.float64))).astype(F32)
        attrs = {}
        if tb:
            attrs["transB"] = 1
            b.features.add("Gemm:transB")
        alpha = float(r.choice([1.0, 1.0, 1.0, 0.5, 2.0, -1.5, 0.1]))
        beta = float(r.choice([1.0, 1.0, 1.0, 0.0, 0.25, -3.0]))
        if alpha != 1.0:
            attrs["alpha"] = alpha
            b.features.add("Gemm:alpha")
        if beta != 1.0:
            attrs["beta"] = beta
            b.features.add("Gemm:beta")
        ins = [x.name, b.const(w)]
        cshape = r.choice(["vec", "vec", "row", "none", "scalar"])
        if cshape == "vec":
            ins.append(b.const(bias))
        elif cshape == "row":
            ins.append(b.const(bias.reshape(1, m)))
        elif cshape == "scalar":
            ins.append(b.const(bias[:1]))
        return V(b.node("Gemm", ins, **attrs), (1, m))
    w, mode = b.weights((n, m), n, is_input)
    bias = b.bias(m, mode)
    if mode == "cancel" and b.anchor is not None:
        bias = (-(b.anchor.astype(np.float64) @ w.astype(np.float64))).astype(F32)
    if kind == "matmul":
        y = b.node("MatMul", [x.name, b.const(w)])
        how = r.choice(["add", "add_left", "sub", "none"])
        if how == "add":
            y = b.node("Add", [y, b.const(bias)])
        elif how == "add_left":
            y = b.node("Add", [b.const(bias), y])
            b.features.add("Add:const-left")
        elif how == "sub":
            y = b.node("Sub", [y, b.const(-bias)])
        return V(y, (1, m))
    # constant on the left: [m, n] · [n, 1]
    b.features.add("MatMul:const-left")
    col = b.node("Reshape", [x.name, b.ints([n, 1])])
    y = b.node("MatMul", [b.const(np.ascontiguousarray(w.T)), col])
    if r.random() < 0.7:
        y = b.node("Add", [y, b.const(bias.reshape(m, 1))])
    return V(b.node("Reshape", [y, b.ints([1, m])]), (1, m))


def activation(b: Builder, x: V) -> V:
    r = b.rng
    op = b.pick(["Relu", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "Neg"])
    if op == "LeakyRelu":
        alpha = float(r.choice([0.01, 0.1, 0.5, 0.0, 1.0, 0.3]))
        return V(b.node("LeakyRelu", [x.name], alpha=alpha), x.shape)
    if op == "Clip":
        lo = F32(r.uniform(-1.0, 0.0))
        hi = F32(r.uniform(0.0, 1.5))
        form = r.choice(["both", "min", "max"])
        if b.opset < 11:
            attrs = {}
            if form != "max":
                attrs["min"] = float(lo)
            if form != "min":
                attrs["max"] = float(hi)
            return V(b.node("Clip", [x.name], **attrs), x.shape)
        ins = [x.name, b.init(np.array(lo)) if form != "max" else "", b.init(np.array(hi)) if form != "min" else ""]
        while ins and ins[-1] == "":
            ins.pop()
        b.features.add("Clip:" + form)
        return V(b.node("Clip", ins), x.shape)
    return V(b.node(op, [x.name]), x.shape)


def arith_const(b: Builder, x: V) -> V:
    """Add/Sub/Mul/Div with a scalar, per-channel or per-element constant
    on either side (Div by the network value is refused: 3% of the time)."""
    r = b.rng
    op = b.pick(["Add", "Sub", "Mul", "Div"])
    image = len(x.shape) == 4
    forms = ["scalar", "scalar1", "elem"] + (["chan", "chan4"] if image else ["vec"])
    form = r.choice(forms)
    if form == "scalar":
        shape = ()
    elif form == "scalar1":
        shape = (1,)
    elif form == "elem":
        shape = x.shape[1:] if r.random() < 0.5 else x.shape
    elif form == "chan":
        shape = (x.shape[1], 1, 1)
    elif form == "chan4":
        shape = (1, x.shape[1], 1, 1)
    else:
        shape = (x.shape[-1],)
    if op in ("Mul", "Div"):
        c = r.uniform(0.2, 3.0, size=shape) * r.choice([-1, 1], size=shape)
        if r.random() < 0.1:
            c = c * float(r.choice([1e20, 1e-20]))
            b.features.add(op + ":extreme-const")
    else:
        c = r.normal(0, 1, size=shape)
    c = np.asarray(c, dtype=F32)
    left = r.random() < 0.4
    if op == "Div" and left and r.random() > 0.1:
        left = False
    b.features.add(f"{op}:{form}:{'left' if left else 'right'}")
    ins = [b.const(c), x.name] if left else [x.name, b.const(c)]
    return V(b.node(op, ins), x.shape)


def batchnorm(b: Builder, x: V) -> V:
    r = b.rng
    c = x.shape[1]
    eps = float(r.choice([1e-5, 1e-5, 1e-3, 0.1]))
    scale = r.normal(1.0, 0.5, size=c).astype(F32)
    var = r.uniform(0.3, 2.0, size=c).astype(F32)
    if r.random() < 0.5:
        # Cancelling statistics: B ≈ mean·scale/sqrt(var + eps), so the
        # constant part (B − mean·m) nearly cancels.
        b.features.add("BatchNormalization:cancel")
        mean = r.uniform(5.0, 50.0, size=c).astype(F32) * r.choice([-1, 1], size=c).astype(F32)
        bb = (mean.astype(np.float64) * scale / np.sqrt(var.astype(np.float64) + eps)).astype(F32)
    else:
        mean = r.normal(0, 1, size=c).astype(F32)
        bb = r.normal(0, 0.5, size=c).astype(F32)
    ins = [x.name, b.init(scale), b.init(bb), b.init(mean), b.init(var)]
    return V(b.node("BatchNormalization", ins, epsilon=eps), x.shape)


def same_shape_branch(b: Builder, x: V) -> V:
    """A function of x with x's shape: activation, constant arithmetic, a
    square dense layer (flat) or a shape-keeping convolution (image)."""
    r = b.rng
    k = r.choice(["act", "arith", "lin"])
    if k == "act":
        return activation(b, x)
    if k == "arith":
        return arith_const(b, x)
    if len(x.shape) == 4:
        return conv(b, x, same=True)
    y = dense(b, V(x.name, (1, x.size)) if len(x.shape) != 2 else x, x.size)
    if len(x.shape) != 2:
        y = V(b.node("Reshape", [y.name, b.ints(list(x.shape))]), x.shape)
    return y


def residual(b: Builder, x: V) -> V:
    r = b.rng
    f = same_shape_branch(b, x)
    op = b.pick(["Add", "Sub"])
    ins = [x.name, f.name] if r.random() < 0.5 else [f.name, x.name]
    b.features.add(f"{op}:two-values")
    return V(b.node(op, ins), x.shape)


def maxmin(b: Builder, x: V) -> V:
    r = b.rng
    op = b.pick(["Max", "Min"])
    form = r.choice(["const", "two", "three"])
    image = len(x.shape) == 4
    if form == "const":
        shape = r.choice(["scalar", "chan"]) if image else r.choice(["scalar", "vec"])
        cs = () if shape == "scalar" else ((x.shape[1], 1, 1) if image else (x.shape[-1],))
        c = r.normal(0, 0.5, size=cs).astype(F32)
        ins = [x.name, b.const(c)]
        if r.random() < 0.5:
            ins.reverse()
    elif form == "two":
        ins = [x.name, same_shape_branch(b, x).name]
    else:
        ins = [x.name, same_shape_branch(b, x).name, b.const(np.asarray(r.normal(0, 0.5), dtype=F32))]
    b.features.add(f"{op}:{form}")
    return V(b.node(op, ins), x.shape)


def _factor(rng, n: int):
    fs = [a for a in range(2, n) if n % a == 0]
    if not fs:
        raise Skip
    a = int(rng.choice(fs))
    return a, n // a


def shape_ops(b: Builder, x: V) -> V:
    """Reshape/Transpose/Slice/Gather/Squeeze/Unsqueeze/Split/Concat/
    Identity/Dropout/Flatten on a flat value [1, n]."""
    r = b.rng
    n = x.shape[-1]
    k = b.pick(["transpose", "slice", "gather", "squeeze", "identity", "split", "concat", "flatten", "shape"])
    b.features.add("shape:" + k)
    if k == "transpose":
        a, c = _factor(r, n)
        y = b.node("Reshape", [x.name, b.ints([1, a, c])])
        y = b.node("Transpose", [y], perm=[0, 2, 1])
        if r.random() < 0.5:
            return V(b.node("Flatten", [y], axis=1), (1, n))
        return V(b.node("Reshape", [y, b.ints([1, -1])]), (1, n))
    if k == "slice":
        if n < 2:
            raise Skip
        step = int(r.choice([1, 1, 2, -1, -2]))
        if step > 0:
            s = int(r.integers(0, n - 1))
            e = int(r.integers(s + 1, n + 1))
            if r.random() < 0.3:
                e = 2**31  # out of range: clamped
            idx = list(range(s, min(e, n), step))
        else:
            s = int(r.integers(1, n))
            e = int(r.integers(-1, s))
            idx = list(range(s, e, step))
            if e < 0:
                e = -(n + 1)  # through index 0 (an end of -1 would mean the last element)
        if not idx:
            raise Skip
        ins = [x.name, b.ints([s]), b.ints([e]), b.ints([1]), b.ints([step])]
        return V(b.node("Slice", ins), (1, len(idx)))
    if k == "gather":
        m = int(r.integers(1, n + 1))
        idx = r.permutation(n)[:m]
        if b.pick(["once", "once", "twice"]) == "twice":  # an element taken twice
            idx = np.concatenate([idx, idx[: int(r.integers(1, m + 1))]])
            r.shuffle(idx)
            m = len(idx)
        if r.random() < 0.3:
            idx = np.where(idx > 0, idx - n, idx)  # negative indices
        return V(b.node("Gather", [x.name, b.ints(idx)], axis=1), (1, m))
    if k == "squeeze":
        y = _axes_input(b, "Unsqueeze", x.name, [0])
        y = _axes_input(b, "Squeeze", y, [0])
        return V(y, (1, n))
    if k == "identity":
        op = b.pick(["Identity", "Dropout"])
        return V(b.node(op, [x.name]), x.shape)
    if k == "split":
        if n < 2:
            raise Skip
        a = int(r.integers(1, n))
        if b.opset >= 13:
            p, q = b.node("Split", [x.name, b.ints([a, n - a])], outputs=2, axis=1)
        else:
            p, q = b.node("Split", [x.name], outputs=2, axis=1, split=[a, n - a])
        return V(b.node("Concat", [q, p], axis=1), (1, n))
    if k == "concat":
        f = same_shape_branch(b, x)
        if x.size * 2 > MAX_NEURONS:
            raise Skip
        return V(b.node("Concat", [f.name, x.name] if r.random() < 0.5 else [x.name, f.name], axis=-1), (1, 2 * n))
    if k == "flatten":
        y = b.node("Reshape", [x.name, b.ints([1, 1, n])])
        return V(b.node("Flatten", [y], axis=1), (1, n))
    # a reshape target computed by Shape → Gather → Concat on the network value
    s = b.node("Shape", [x.name])
    g = b.node("Gather", [s, b.ints([0])], axis=0)
    tgt = b.node("Concat", [g, b.ints([-1])], axis=0)
    return V(b.node("Reshape", [x.name, tgt]), (1, n))


# ---------------------------------------------------------------------------
# Blocks on images [1, C, H, W]


def conv(b: Builder, x: V, same: bool = False) -> V:
    r = b.rng
    _, c, h, w = x.shape
    if same:  # a shape-keeping convolution: M = C, stride 1, "same" pads
        m, k, s = c, int(r.choice([1, 3])), 1
        pads = [k // 2] * 4
    else:
        m = int(r.integers(1, 5))
        k = 2 if "dilated" in b.force else int(r.integers(1, min(3, max(h, w)) + 1))
        s = int(r.choice([1, 1, 2]))
        pads = [int(r.integers(0, 2)) if k > 1 else 0 for _ in range(4)]
    # Dilation 2 spreads a kernel of k taps over 2k - 1 pixels.
    d = 2 if not same and k > 1 and ("dilated" in b.force or r.random() < 0.2) else 1
    ke = (k - 1) * d + 1
    ho = (h + pads[0] + pads[2] - ke) // s + 1
    wo = (w + pads[1] + pads[3] - ke) // s + 1
    if ho < 1 or wo < 1 or m * ho * wo > MAX_NEURONS:
        raise Skip
    wt, mode = b.weights((m, c, k, k), c * k * k)
    attrs = {"kernel_shape": [k, k]}
    if d != 1:
        attrs["dilations"] = [d, d]
        b.features.add("Conv:dilations")
    if s != 1:
        attrs["strides"] = [s, s]
        b.features.add("Conv:stride")
    if any(pads):
        b.features.add("Conv:pads")
        if same and s == 1 and r.random() < 0.3:
            attrs["auto_pad"] = "SAME_UPPER"
            b.features.add("Conv:auto_pad")
        else:
            attrs["pads"] = pads
    ins = [x.name, b.const(wt)]
    if r.random() < 0.8:
        ins.append(b.const(b.bias(m, mode)))
    return V(b.node("Conv", ins, **attrs), (1, m, ho, wo))


def pool(b: Builder, x: V) -> V:
    r = b.rng
    _, c, h, w = x.shape
    op = b.pick(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
    if op.startswith("Global"):
        return V(b.node(op, [x.name]), (1, c, 1, 1))
    k = int(r.integers(1, min(h, w, 3) + 1))
    s = int(r.choice([1, 2]))
    pads = [0, 0, 0, 0]
    if op == "MaxPool" and k > 1 and r.random() < 0.5:
        pads = [int(r.integers(0, 2)) for _ in range(4)]
        b.features.add("MaxPool:pads")
    d = 1
    if op == "MaxPool" and k > 1 and ("dilated" in b.force or r.random() < 0.2):
        d = 2
        b.features.add("MaxPool:dilations")
    ext = (k - 1) * d + 1
    ho = (h + pads[0] + pads[2] - ext) // s + 1
    wo = (w + pads[1] + pads[3] - ext) // s + 1
    if ho < 1 or wo < 1:
        raise Skip
    attrs = {"kernel_shape": [k, k]}
    if d != 1:
        attrs["dilations"] = [d, d]
    if s != 1:
        attrs["strides"] = [s, s]
    if any(pads):
        attrs["pads"] = pads
    return V(b.node(op, [x.name], **attrs), (1, c, ho, wo))


def pad(b: Builder, x: V) -> V:
    r = b.rng
    _, c, h, w = x.shape
    p = [int(r.integers(0, 2)) for _ in range(4)]  # t, l, b, r
    if not any(p):
        p[0] = 1
    ho, wo = h + p[0] + p[2], w + p[1] + p[3]
    if c * ho * wo > MAX_NEURONS:
        raise Skip
    pads = [0, 0, p[0], p[1], 0, 0, p[2], p[3]]
    if b.opset >= 11:
        y = b.node("Pad", [x.name, b.ints(pads)], mode="constant")
    else:
        y = b.node("Pad", [x.name], pads=pads)
    return V(y, (1, c, ho, wo))


def concat_channels(b: Builder, x: V) -> V:
    f = conv(b, x, same=True)
    g = same_shape_branch(b, x)
    if 2 * x.size > MAX_NEURONS:
        raise Skip
    return V(b.node("Concat", [f.name, g.name], axis=1), (1, 2 * x.shape[1], x.shape[2], x.shape[3]))


def broadcast_copy(b: Builder, x: V) -> V:
    """Network values copied into a larger image: Concat with a constant on
    channels, Expand of a size-1 axis, or a Mul whose constant broadcasts
    the value over a size-1 axis."""
    r = b.rng
    _, c, h, w = x.shape
    mode = b.pick(["concat", "expand", "mul"])
    if mode == "concat":
        k = int(r.integers(1, 3))
        if (c + k) * h * w > MAX_NEURONS:
            raise Skip
        cst = b.const(r.uniform(-1, 1, (1, k, h, w)).astype(F32))
        parts = [cst, x.name] if r.random() < 0.5 else [x.name, cst]
        b.features.add("Concat:constant")
        return V(b.node("Concat", parts, axis=1), (1, c + k, h, w))
    ones = [a for a in (1, 2, 3) if x.shape[a] == 1]
    if not ones:
        raise Skip
    to = list(x.shape)
    to[int(r.choice(ones))] = int(r.integers(2, 4))
    if np.prod(to) > MAX_NEURONS:
        raise Skip
    if mode == "expand":
        b.features.add("Expand:network")
        return V(b.node("Expand", [x.name, b.ints(to)]), tuple(to))
    cshape = [1 if d == x.shape[k] else d for k, d in enumerate(to)]
    b.features.add("Mul:broadcast-network")
    return V(b.node("Mul", [x.name, b.const(r.uniform(-2, 2, cshape).astype(F32))]), tuple(to))


def conv_transpose(b: Builder, x: V) -> V:
    r = b.rng
    _, c, h, w = x.shape
    m = int(r.integers(1, 3))
    k = int(r.integers(1, 3))
    s = int(r.choice([1, 2]))
    ho, wo = s * (h - 1) + k, s * (w - 1) + k
    if m * ho * wo > MAX_NEURONS:
        raise Skip
    wt, _ = b.weights((c, m, k, k), c * k * k)
    attrs = {"kernel_shape": [k, k]}
    if s != 1:
        attrs["strides"] = [s, s]
    ins = [x.name, b.const(wt)]
    if r.random() < 0.6:
        ins.append(b.const(b.bias(m, None)))
    return V(b.node("ConvTranspose", ins, **attrs), (1, m, ho, wo))


def image_transpose(b: Builder, x: V) -> V:
    y = b.node("Transpose", [x.name], perm=[0, 1, 3, 2])
    return V(y, (1, x.shape[1], x.shape[3], x.shape[2]))


def to_flat(b: Builder, x: V) -> V:
    r = b.rng
    n = x.size
    k = b.pick(["flatten", "reshape", "shape"])
    b.features.add("flatten:" + k)
    if k == "flatten":
        return V(b.node("Flatten", [x.name], axis=1), (1, n))
    if k == "reshape":
        return V(b.node("Reshape", [x.name, b.ints([1, -1])]), (1, n))
    s = b.node("Shape", [x.name])
    g = b.node("Gather", [s, b.ints([0])], axis=0)
    tgt = b.node("Concat", [g, b.ints([-1])], axis=0)
    return V(b.node("Reshape", [x.name, tgt]), (1, n))


def dense_act(b: Builder, x: V) -> V:
    y = dense(b, x, int(b.rng.integers(1, 33)))
    return activation(b, y) if b.rng.random() < 0.6 else y


def softmax_inside(b: Builder, x: V) -> V:
    """Softmax inside the network (lowered: exponentials of differences,
    their sum, its reciprocal and the runtime's band), a dense layer after
    it so that it is never the last operation."""
    r = b.rng
    b.features.add("Softmax:inside")
    scaled = b.node("Mul", [x.name, b.const(np.array([r.uniform(0.5, 4)], dtype=F32))])
    y = V(b.node("Softmax", [scaled], axis=-1 if b.opset >= 13 else 1), x.shape)
    return dense(b, y, int(r.integers(1, 9)))


def matmul_rows(b: Builder, x: V) -> V:
    """MatMul of an image's rows (C·H rows of W values) by one matrix, a
    bias added at times: one block-diagonal layer."""
    r = b.rng
    n, m = x.shape[-1], int(r.integers(1, 5))
    b.features.add("MatMul:rows")
    y = b.node("MatMul", [x.name, b.const(r.uniform(-1, 1, size=(n, m)).astype(F32))])
    if r.random() < 0.5:
        y = b.node("Add", [y, b.const(r.uniform(-0.5, 0.5, size=m).astype(F32))])
    return V(y, x.shape[:-1] + (m,))


def reduce_sum(b: Builder, x: V) -> V:
    """ReduceSum or ReduceMean over a random nonempty set of the C, H, W axes, kept (so
    the value stays an image), the axes negative at times."""
    r = b.rng
    axes = sorted(int(a) for a in r.choice([1, 2, 3], size=int(r.integers(1, 4)), replace=False))
    if r.random() < 0.3:
        axes = [a - 4 for a in axes]
    op = b.pick(["ReduceSum", "ReduceMean"])
    b.features.add(op)
    if b.opset >= (13 if op == "ReduceSum" else 18):
        y = b.node(op, [x.name, b.ints(axes)], keepdims=1)
    else:
        y = b.node(op, [x.name], axes=list(axes), keepdims=1)
    shape = tuple(1 if k in [a % 4 for a in axes] else d for k, d in enumerate(x.shape))
    return V(y, shape)


def steps(b: Builder, x: V) -> V:
    """Steps of network values: a comparison with one constant cast back to
    float, Where between the value and a constant, a Cast to int64 (of a
    scaled value, plus an int64 0) or to bool and back to float, Sign."""
    r = b.rng
    mode = b.pick(["greater", "equal", "where", "cast_int", "cast_bool", "sign"])
    b.features.add("step:" + mode)
    if mode == "sign":
        return V(b.node("Sign", [x.name]), x.shape)
    t = b.const(np.array([r.uniform(-0.5, 0.5)], dtype=F32))
    if mode == "greater":
        ops = ["Greater", "Less"] + (["GreaterOrEqual", "LessOrEqual"] if b.opset >= 12 else [])
        op = str(r.choice(ops))
        c = b.node(op, [x.name, t] if r.random() < 0.7 else [t, x.name])
    elif mode == "equal":
        c = b.node("Equal", [b.node("Relu", [x.name]), b.const(np.zeros(1, dtype=F32))])
    elif mode == "where":
        cond = b.node(str(r.choice(["Greater", "Less"])), [x.name, t])
        k = b.const(np.array([r.uniform(-2, 2)], dtype=F32))
        return V(b.node("Where", [cond, x.name, k] if r.random() < 0.5 else [cond, k, x.name]), x.shape)
    elif mode == "cast_int":
        scaled = b.node("Mul", [x.name, b.const(np.array([r.uniform(1, 8)], dtype=F32))])
        i = b.node("Cast", [scaled], to=TensorProto.INT64)
        c = b.node("Add", [i, b.ints([0])]) if r.random() < 0.5 else i
    else:
        c = b.node("Cast", [x.name], to=TensorProto.BOOL)
    return V(b.node("Cast", [c], to=TensorProto.FLOAT), x.shape)


def powers(b: Builder, x: V) -> V:
    """Powers, products and quotients of network values: Pow with a constant
    exponent or base, Sqrt, Reciprocal, Mul and Div of two network values
    (a = relu(x) + c, c > 0, keeps fractional and negative powers defined)."""
    r = b.rng
    mode = b.pick(["square", "cube", "pow_neg", "exp", "sqrt", "reciprocal", "mul", "div"])
    b.features.add("power:" + mode)
    c = b.const(np.array([r.uniform(0.25, 1.0)], dtype=F32))
    a = b.node("Add", [b.node("Relu", [x.name]), c])
    if mode in ("square", "cube"):
        e = b.const(np.array([2.0 if mode == "square" else 3.0], dtype=F32))
        y = b.node("Pow", [x.name, e]) if mode == "cube" or r.random() < 0.5 else b.node("Mul", [x.name, x.name])
    elif mode == "pow_neg":
        y = b.node("Pow", [a, b.const(np.array([float(r.choice([-0.5, -1.0, -2.0, 0.5, 1.5]))], dtype=F32))])
    elif mode == "exp":
        y = b.node("Pow", [b.const(np.array([r.uniform(0.5, 3.0)], dtype=F32)), x.name])
    elif mode in ("sqrt", "reciprocal"):
        y = b.node("Sqrt" if mode == "sqrt" else "Reciprocal", [a])
    elif mode == "mul":
        y = b.node("Mul", [x.name, a] if r.random() < 0.5 else [a, x.name])
    else:
        y = b.node("Div", [x.name, a] if r.random() < 0.7 else [b.const(np.array([r.uniform(-2, 2)], dtype=F32)), a])
    return V(y, x.shape)


FLAT_BLOCKS = {
    "dense": dense_act,
    "softmax_inside": softmax_inside,
    "activation": activation,
    "arith": arith_const,
    "batchnorm": batchnorm,
    "residual": residual,
    "maxmin": maxmin,
    "shape": shape_ops,
    "steps": steps,
    "powers": powers,
}
IMAGE_BLOCKS = {
    "conv": conv,
    "pool": pool,
    "activation": activation,
    "arith": arith_const,
    "batchnorm": batchnorm,
    "pad": pad,
    "residual": residual,
    "maxmin": maxmin,
    "concat": concat_channels,
    "conv_transpose": conv_transpose,
    "transpose": image_transpose,
    "reduce_sum": reduce_sum,
    "broadcast_copy": broadcast_copy,
    "matmul_rows": matmul_rows,
}

IMAGE_SHAPES = [(1, 1, 4, 4), (1, 2, 2, 3), (1, 1, 3, 3), (1, 3, 2, 2), (1, 1, 2, 5), (1, 2, 3, 2), (1, 1, 2, 2)]


# Relative frequencies of the blocks (the others: 1).
WEIGHTS = {"dense": 3, "activation": 2, "conv": 3, "pool": 2, "shape": 2}


def _apply(b: Builder, x: V, table: dict, name: str) -> V:
    keys = list(table)
    p = np.array([WEIGHTS.get(k, 1) for k in keys], dtype=float)
    for _ in range(10):
        k = str(b.rng.choice(keys, p=p / p.sum()) if name is None else name)
        # roll back on Skip: blocks add nodes before they know they apply
        saved = (len(b.nodes), len(b.inits), b.k, set(b.features), b.extreme)
        try:
            return table[k](b, x)
        except Skip:
            del b.nodes[saved[0] :]
            del b.inits[saved[1] :]
            b.k, b.features, b.extreme = saved[2], saved[3], saved[4]
            if name is not None:
                raise
    return x


def nhwc_input(b: Builder, nchw):
    """An NHWC graph input transposed to NCHW by the first node (polycert
    permutes the input: counterexamples must come back in ONNX order)."""
    _, c, h, w = nchw
    in_shape = (1, h, w, c)
    b.features.add("input:NHWC")
    return V(b.node("Transpose", ["x"], perm=[0, 3, 1, 2]), nchw), in_shape


def random_net(rng: np.random.Generator, name: str, allow_big_softmax: bool = True) -> Net:
    """A small random network: an image part (convolutions, pools, ...)
    and/or a flat part, then usually a dense layer to 1..8 outputs and
    sometimes a final Softmax."""
    if allow_big_softmax and rng.random() < 0.04:
        return big_softmax_net(rng, name)
    opset = int(rng.choice([13] * 7 + [11, 17, 17]))
    b = Builder(rng, opset)
    image = rng.random() < 0.4
    in_shape = tuple(IMAGE_SHAPES[rng.integers(len(IMAGE_SHAPES))]) if image else (1, int(rng.integers(1, 17)))
    n_in = int(np.prod(in_shape))
    b.anchor = rng.uniform(-1, 1, size=n_in).astype(F32)
    b.extreme = rng.choice([None] * 6 + ["huge", "tiny", "subnormal", "cancel"])
    x = V("x", in_shape)
    if image and rng.random() < 0.2:
        x, in_shape = nhwc_input(b, in_shape)
    single = rng.random() < 0.3  # one op alone (with what its input shape needs)
    if image:
        for _ in range(1 if single else int(rng.integers(1, 4))):
            x = _apply(b, x, IMAGE_BLOCKS, None)
        if not single or rng.random() < 0.5:
            x = to_flat(b, x)
    if len(x.shape) == 2:
        for _ in range((0 if image else 1) if single else int(rng.integers(0, 4))):
            x = _apply(b, x, FLAT_BLOCKS, None)
        if not single and (x.size > 16 or rng.random() < 0.7):
            x = dense(b, x, int(rng.integers(1, 9)))
    softmax = False
    if rng.random() < 0.12 and len(x.shape) == 2 and x.size >= 2:
        softmax = True
        axis = -1 if opset >= 13 and rng.random() < 0.7 else 1
        x = V(b.node("Softmax", [x.name], axis=axis), x.shape)
        b.features.add("Softmax:final")
    model = b.model(V("x", in_shape), x, in_shape)
    net = Net(name, model, in_shape, x.shape, softmax=softmax, anchor=b.anchor, opset=opset)
    net.features = b.features
    net.ops = Counter(n.op_type for n in model.graph.node)
    return net


def big_softmax_net(rng: np.random.Generator, name: str, n_out: int | None = None) -> Net:
    """Gemm to 10^3..10^5 logits, most near the top and a few pairs 70..90
    below it, 6.1e-5 apart: their Softmax outputs are subnormal and tie."""
    b = Builder(rng, 13)
    n_in = int(rng.integers(1, 4))
    n = n_out or int(rng.choice([1000, 10000, 100000]))
    w = (rng.normal(0, 1e-3, size=(n_in, n))).astype(F32)
    bias = rng.normal(0, 0.01, size=n).astype(F32)
    for k in range(2):
        off = F32(rng.uniform(70, 90))
        bias[2 * k] = -off
        bias[2 * k + 1] = F32(-off + F32(6.1e-5))
        w[:, 2 * k : 2 * k + 2] = 0
    y = b.node("Gemm", ["x", b.init(w), b.init(bias)])
    y = b.node("Softmax", [y], axis=-1)
    b.features.add("Softmax:big")
    model = b.model(V("x", (1, n_in)), V(y, (1, n)), (1, n_in))
    net = Net(name, model, (1, n_in), (1, n), softmax=True, anchor=np.zeros(n_in, F32), opset=13)
    net.features = b.features
    net.ops = Counter(nd.op_type for nd in model.graph.node)
    return net
