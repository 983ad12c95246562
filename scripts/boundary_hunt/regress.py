"""Fixed regression cases: five situations where polycert (at 1977bae)
answered wrongly. Each is a (Net, [Prop]) pair; they run on every hunt,
`--short` included."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from exact import F32, decimal, exact_f32
from tour import simple_net
from gen_vnnlib import Atom, Disjunct, Prop

mk = helper.make_node


def _f(*v):
    return np.array(v, dtype=F32)


def _ev(net, x):
    s = ort.InferenceSession(net.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": np.asarray(x, F32).reshape(net.in_shape)})[0].reshape(-1)


def bn_cancel():
    """1. BatchNormalization whose constants cancel: onnxruntime gives 0.0
    at x = 0, so `Y_0 >= 0` is reached there."""
    net = simple_net(
        "R1_bn_cancel",
        [mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-5)],
        {"s": _f(0.33043706), "b": _f(11.895008), "m": _f(34.55842), "v": _f(0.92161816)},
        (1, 1),
        (1, 1),
    )
    net.features = {"BatchNormalization:cancel"}
    y0 = _ev(net, [0.0])
    props = [
        Prop("R1_point", [Disjunct(["0.0"], ["0.0"], [Atom(">=", [("var", None, 0)], [("const", "0.0")])])], kind="regression"),
        Prop(
            "R1_tiny",
            [Disjunct(["-0.000001"], ["0.000001"], [Atom(">=", [("var", None, 0)], [("const", "0.0")])])],
            kind="regression",
        ),
    ]
    for p in props:
        p.hints = [np.zeros(1, F32)]
    return net, props, f"onnxruntime at x=0: {exact_f32(y0[0])}"


def const_mul():
    """2. `y = x · Mul(A, B)` with float32 initialisers: the threshold is
    exactly onnxruntime's output at the point box."""
    net = simple_net(
        "R2_const_mul",
        [mk("Mul", ["A", "B"], ["C"]), mk("Mul", ["x", "C"], ["y"])],
        {"A": _f(1.4166163), "B": _f(1.4689666)},
        (1, 1),
        (1, 1),
    )
    net.features = {"const:mul"}
    x = _f(1.0215634)
    y = _ev(net, x)
    thr = exact_f32(y[0])
    xs = exact_f32(x[0])
    p = Prop("R2_point", [Disjunct([xs], [xs], [Atom(">=", [("var", None, 0)], [("const", thr)])])], kind="regression")
    p.hints = [x]
    note = f"X_0 = {xs}, onnxruntime Y_0 = {thr} (brief: 2.125834941864013671875)"
    return net, [p], note


def zero_sum():
    """3. `(+ (* 0.3 Y_0) (* -0.1 Y_0) (* -0.2 Y_0)) >= 0` is exactly
    `0 >= 0`: every input reaches it. Two networks, one with positive and
    one with negative outputs, so whatever sign a rounded coefficient gets,
    one of them shows it."""
    out = []
    for tag, bias in (("pos", 1.0), ("neg", -2.0)):
        net = simple_net(
            f"R3_zero_sum_{tag}",
            [mk("Gemm", ["x", "W", "b"], ["y"])],
            {"W": np.ones((1, 1), F32), "b": _f(bias)},
            (1, 1),
            (1, 1),
        )
        items = [("var", "0.3", 0), ("var", "-0.1", 0), ("var", "-0.2", 0)]
        p = Prop(f"R3_{tag}", [Disjunct(["0.0"], ["1.0"], [Atom(">=", items, [("const", "0.0")])])], kind="regression")
        p.hints = [_f(0.5)]
        out.append((net, [p], "0.3 − 0.1 − 0.2 = 0 exactly"))
    return out


def softmax_tie(n: int = 10**6):
    """4. A final Softmax over `n` outputs with two logits 6.1e-5 apart
    about 80 below the top: onnxruntime's outputs are subnormal and tie, so
    `s_1 <= s_0` is reached although y_1 > y_0."""
    # Find an offset (below 80) where onnxruntime ties, on a Softmax of the logits.
    g = helper.make_graph(
        [mk("Softmax", ["x"], ["y"], axis=-1)],
        "scan",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    logits = np.zeros((1, n), F32)
    chosen = None
    # just below 80 first (polycert at 1977bae takes logits within 80 of the
    # top as normal), then further down (fewer outputs need a larger gap)
    offsets = [79.9 + 0.00025 * k for k in range(400)] + [80.0 + 0.01 * k for k in range(1000)]
    for off in offsets:
        off = F32(off)
        logits[0, 0] = -off
        logits[0, 1] = F32(-off + F32(6.1e-5))
        y = s.run(None, {"x": logits})[0][0]
        if y[0] == y[1] and y[0] != 0:
            chosen = off
            break
    if chosen is None:
        chosen = F32(79.9)
        logits[0, 0] = -chosen
        logits[0, 1] = F32(-chosen + F32(6.1e-5))
    bias = logits[0].copy()
    net = simple_net(
        "R4_softmax_tie",
        [mk("Gemm", ["x", "W", "b"], ["z"]), mk("Softmax", ["z"], ["y"], axis=-1)],
        {"W": np.zeros((1, n), F32), "b": bias},
        (1, 1),
        (1, n),
        softmax=True,
    )
    net.features = {"Softmax:big", "Softmax:final"}
    y = _ev(net, [0.0])
    p = Prop("R4_point", [Disjunct(["0.0"], ["0.0"], [Atom("<=", [("var", None, 1)], [("var", None, 0)])])], kind="regression")
    p.hints = [np.zeros(1, F32)]
    note = (
        f"{n} outputs, logits y_0 = {float(bias[0])!r}, y_1 = {float(bias[1])!r}; onnxruntime s_0 = {float(y[0])!r}, "
        f"s_1 = {float(y[1])!r} ({'tie' if y[0] == y[1] else 'no tie'})"
    )
    return net, [p], note


def box_off_f32():
    """5. A box whose upper bound 1.000000119209289550781249 is one unit in
    the 25th digit below 1 + 2^-23: no float32 lies in [1.0000001, it], so
    any counterexample is wrong (polycert reported X_0 = 1 + 2^-23)."""
    net = simple_net(
        "R5_box_off_f32",
        [mk("Gemm", ["x", "W", "b"], ["y"])],
        {"W": np.ones((1, 1), F32), "b": _f(0.0)},
        (1, 1),
        (1, 1),
    )
    hi = "1.000000119209289550781249"
    props = []
    for tag, lo in (("a", "1.0000001"), ("b", hi)):
        props.append(
            Prop(f"R5_{tag}", [Disjunct([lo], [hi], [Atom(">=", [("var", None, 0)], [("const", "0.5")])])], kind="regression")
        )
    # and one whose box holds exactly one float32 (1.0), below the threshold
    props.append(
        Prop(
            "R5_c",
            [Disjunct(["1.0"], [hi], [Atom(">=", [("var", None, 0)], [("const", "1.00000011920928955078125")])])],
            kind="regression",
        )
    )
    assert decimal(Fraction(hi) + Fraction(1, 10**24)) == exact_f32(np.nextafter(F32(1), F32(2)))
    return net, props, f"upper bound {hi}; 1 + 2^-23 = {exact_f32(np.nextafter(F32(1), F32(2)))}"


def all_cases(softmax_n: int = 10**6):
    cases = [bn_cancel(), const_mul(), *zero_sum(), softmax_tie(softmax_n), box_off_f32()]
    for net, props, _ in cases:
        net.regression = net.name
        for p in props:
            p.kind = "regression"
    return cases


