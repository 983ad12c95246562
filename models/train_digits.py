"""Trains polycert's embedded default model: a small ReLU MLP on the
scikit-learn digits (8x8 images, BSD licence / UCI CC BY 4.0).

    pip install numpy scikit-learn onnx && python3 models/train_digits.py

Writes crates/cli/assets/digits_mlp.onnx and digits_test.csv (the 300
held-out images, ERAN-style CSV: label then 64 pixels 0-255). Deterministic.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits

rng = np.random.default_rng(0)
d = load_digits()
pix = np.round(d.data * 255.0 / 16.0).astype(np.int64)  # 0..255
x = (pix / 255.0).astype(np.float32)
y = d.target.astype(np.int64)
perm = rng.permutation(len(y))
x, y, pix = x[perm], y[perm], pix[perm]
n_test = 300
xtr, ytr, xte, yte = x[:-n_test], y[:-n_test], x[-n_test:], y[-n_test:]

sizes = [64, 32, 32, 10]
W = [rng.normal(0, np.sqrt(2.0 / a), (b, a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
B = [np.zeros(b, np.float32) for b in sizes[1:]]
m = [np.zeros_like(p) for p in W + B]
v = [np.zeros_like(p) for p in W + B]


def forward(xb):
    acts = [xb]
    h = xb
    for i, (w, b) in enumerate(zip(W, B)):
        h = h @ w.T + b
        if i < len(W) - 1:
            h = np.maximum(h, 0)
        acts.append(h)
    return acts


lr, b1, b2 = 1e-2, 0.9, 0.999
for step in range(1, 3001):
    idx = rng.integers(0, len(ytr), 128)
    xb = xtr[idx]
    # Light input noise makes the model easier to verify.
    xb = np.clip(xb + rng.uniform(-0.05, 0.05, xb.shape).astype(np.float32), 0, 1)
    acts = forward(xb)
    z = acts[-1]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    g = p
    g[np.arange(len(idx)), ytr[idx]] -= 1
    g /= len(idx)
    grads_w, grads_b = [], []
    for i in reversed(range(len(W))):
        grads_w.insert(0, g.T @ acts[i])
        grads_b.insert(0, g.sum(0))
        if i > 0:
            g = (g @ W[i]) * (acts[i] > 0)
    for j, (p_, g_) in enumerate(zip(W + B, grads_w + grads_b)):
        m[j] = b1 * m[j] + (1 - b1) * g_
        v[j] = b2 * v[j] + (1 - b2) * g_ * g_
        p_ -= lr * (m[j] / (1 - b1**step)) / (np.sqrt(v[j] / (1 - b2**step)) + 1e-8)

acc = (forward(xte)[-1].argmax(1) == yte).mean()
print(f"test accuracy on {n_test} held-out images: {acc:.4f}")

nodes, inits = [], []
prev = "input"
nodes.append(helper.make_node("Flatten", ["input"], ["flat"], name="flatten"))
prev = "flat"
for i, (w, b) in enumerate(zip(W, B)):
    inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"B{i}")]
    out = f"gemm{i}"
    nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"B{i}"], [out], name=out, transB=1))
    prev = out
    if i < len(W) - 1:
        nodes.append(helper.make_node("Relu", [prev], [f"relu{i}"], name=f"relu{i}"))
        prev = f"relu{i}"
graph = helper.make_graph(
    nodes,
    "digits_mlp",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 8, 8])],
    [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 10])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="polycert")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, "crates/cli/assets/digits_mlp.onnx")
with open("crates/cli/assets/digits_test.csv", "w") as f:
    for lab, row in zip(yte, pix[-n_test:]):
        f.write(",".join([str(lab)] + [str(int(p)) for p in row]) + "\n")
