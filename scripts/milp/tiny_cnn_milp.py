#!/usr/bin/env python3
"""Exact minimum margins of the shared tiny_cnn properties by MILP (HiGHS).

An independent reference for issue 45: the network (Conv 3x3 pad 1,
BatchNormalization, ReLU, MaxPool 2x2, Gemm, ReLU, Gemm) is encoded with
big-M constraints from interval bounds, and `Y_0 - Y_t` is minimised over
the property's box for each target t. The minimiser is run through
onnxruntime to confirm the value. Real arithmetic (f64), not a certificate:
it tells what polycert's answer must be, not a proof of it.

    pip install highspy onnx onnxruntime numpy
    python3 scripts/milp/tiny_cnn_milp.py ../shared/bench/tiny_cnn/cnn.onnx ../shared/bench/tiny_cnn/cnn_p0_eps0.05.vnnlib
"""
import re
import sys
import time

import highspy
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

INF = highspy.kHighsInf


def load(model_path, vnnlib_path):
    m = onnx.load(model_path)
    w = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    txt = open(vnnlib_path).read()
    lo, hi = np.zeros(64), np.zeros(64)
    for k, v in re.findall(r"\(>= X_(\d+) ([-\d.e]+)\)", txt):
        lo[int(k)] = float(v)
    for k, v in re.findall(r"\(<= X_(\d+) ([-\d.e]+)\)", txt):
        hi[int(k)] = float(v)
    return w, lo, hi


def conv_bn_matrix(w):
    """Conv (4x1x3x3, pad 1) and BatchNormalization as one 256x64 affine map."""
    wc, bc = w["Wc"], w["bc"]
    a, b = np.zeros((256, 64)), np.zeros(256)
    for o in range(4):
        for i in range(8):
            for j in range(8):
                r = o * 64 + i * 8 + j
                b[r] = bc[o]
                for di in range(3):
                    for dj in range(3):
                        ii, jj = i + di - 1, j + dj - 1
                        if 0 <= ii < 8 and 0 <= jj < 8:
                            a[r, ii * 8 + jj] += wc[o, 0, di, dj]
    scale = np.repeat(w["s"] / np.sqrt(w["vv"] + 1e-5), 64)
    return a * scale[:, None], (b - np.repeat(w["mm"], 64)) * scale + np.repeat(w["bb"], 64)


def interval(a, b, lo, hi):
    c, r = (lo + hi) / 2, (hi - lo) / 2
    return a @ c + b - np.abs(a) @ r, a @ c + b + np.abs(a) @ r


class Milp:
    def __init__(self):
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.n = 0

    def var(self, lo, hi, integer=False):
        self.h.addVar(lo, hi)
        if integer:
            self.h.changeColIntegrality(self.n, highspy.HighsVarType.kInteger)
        self.n += 1
        return self.n - 1

    def row(self, coefs, lo, hi):
        idx = np.array([c for c, _ in coefs], dtype=np.int32)
        self.h.addRow(lo, hi, len(coefs), idx, np.array([v for _, v in coefs]))

    def relu(self, z, zb, l, u):
        """y = relu(z + zb), z a list of (var, coef), with z + zb in [l, u]."""
        if u <= 0:
            return self.var(0, 0)
        y = self.var(max(l, 0), u)
        if l >= 0:
            self.row(z + [(y, -1.0)], -zb, -zb)
            return y
        d = self.var(0, 1, True)
        self.row(z + [(y, -1.0)], -INF, -zb)
        self.row([(y, 1.0), (d, -u)], -INF, 0)
        self.row([(y, 1.0)] + [(c, -v) for c, v in z] + [(d, -l)], -INF, zb - l)
        return y


def solve(w, lo, hi, target):
    a, b0 = conv_bn_matrix(w)
    z1l, z1h = interval(a, b0, lo, hi)
    r1l, r1h = np.maximum(z1l, 0), np.maximum(z1h, 0)
    wins = [[o * 64 + (2 * i + p) * 8 + 2 * j + q for p in (0, 1) for q in (0, 1)]
            for o in range(4) for i in range(4) for j in range(4)]
    pl = np.array([r1l[x].max() for x in wins])
    ph = np.array([r1h[x].max() for x in wins])
    w1, b1, w2, b2 = w["Wf1"], w["bf1"], w["Wf2"], w["bf2"]
    z2l, z2h = interval(w1, b1, pl, ph)
    m = Milp()
    x = [m.var(lo[k], hi[k]) for k in range(64)]
    r1 = [m.relu([(x[j], a[k, j]) for j in range(64) if a[k, j] != 0], b0[k], z1l[k], z1h[k]) for k in range(256)]
    pooled = []
    for q, win in enumerate(wins):
        y = m.var(pl[q], ph[q])
        ds = []
        for k in win:
            m.row([(y, 1.0), (r1[k], -1.0)], 0, INF)
            d = m.var(0, 1, True)
            ds.append(d)
            big = ph[q] - r1l[k]
            m.row([(y, 1.0), (r1[k], -1.0), (d, big)], -INF, big)
        m.row([(d, 1.0) for d in ds], 1, 1)
        pooled.append(y)
    r2 = [m.relu([(pooled[j], w1[k, j]) for j in range(64)], b1[k], z2l[k], z2h[k]) for k in range(16)]
    c = w2[0] - w2[target]
    for k in range(16):
        m.h.changeColCost(r2[k], c[k])
    t0 = time.time()
    m.h.run()
    info = m.h.getInfo()
    const = b2[0] - b2[target]
    xs = np.array(m.h.getSolution().col_value)[:64]
    return info.objective_function_value + const, info.mip_dual_bound + const, xs, time.time() - t0


def main():
    model, prop = sys.argv[1], sys.argv[2]
    w, lo, hi = load(model, prop)
    sess = ort.InferenceSession(model)
    for t in (1, 2):
        val, bound, xs, secs = solve(w, lo, hi, t)
        y = sess.run(None, {sess.get_inputs()[0].name: xs.astype(np.float32).reshape(1, 1, 8, 8)})[0][0]
        print(f"min Y_0 - Y_{t}: {val:.9g} (dual bound {bound:.9g}, {secs:.1f} s); onnxruntime at the minimiser: {y[0] - y[t]:.9g}")


if __name__ == "__main__":
    main()
