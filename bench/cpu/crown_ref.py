"""Reference timing of auto_LiRPA CROWN on the 20 VNN-COMP 2021 mnist-net_256x6 instances.

Measures wall-clock time of one `compute_bounds(..., method='CROWN')` call per
property (batch 1, spec matrix C of shape (1, 9, 10) with rows e_label - e_j),
with torch limited to 2 threads. The BoundedModule is built once per network,
outside the timed region; the timed region runs from creating the BoundedTensor
to having the lower bound. One warm-up pass, then ROUNDS rounds over the 20
instances. Prints the median over instances of the per-instance minimum, the
per-round medians, and how many instances CROWN verifies (all lower bounds > 0).

Run (needs torch, onnx, auto_LiRPA, numpy):
    python bench/cpu/crown_ref.py [--bench-dir /work/shared/bench/mnist_fc] [--rounds 5] [--alpha]
--upper additionally times with bound_upper=True (the library default; the main
number uses bound_upper=False since only the lower bound of C·y is needed).
--alpha additionally times alpha-CROWN (method='CROWN-Optimized', default options, one
round after warm-up; slow: about 4 minutes on a 2-core machine).
"""
import argparse, csv, os, re, statistics, time

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from auto_LiRPA import BoundedModule, BoundedTensor
from auto_LiRPA.perturbations import PerturbationLpNorm


def load_onnx_mlp(path):
    """Flatten -> (Gemm [-> Relu])* ONNX graph as an nn.Sequential, plus the numpy weights."""
    g = onnx.load(path).graph
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    layers, np_layers = [], []
    for n in g.node:
        if n.op_type in ("Flatten", "Reshape"):
            layers.append(torch.nn.Flatten())
        elif n.op_type == "Gemm":
            a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            assert a.get("alpha", 1.0) == 1.0 and a.get("beta", 1.0) == 1.0 and not a.get("transA", 0)
            W, b = init[n.input[1]], init[n.input[2]]
            W = W if a.get("transB", 0) else W.T          # torch Linear wants (out, in)
            lin = torch.nn.Linear(W.shape[1], W.shape[0])
            lin.weight.data = torch.from_numpy(W.copy()); lin.bias.data = torch.from_numpy(b.copy())
            layers.append(lin); np_layers.append(("gemm", W, b))
        elif n.op_type == "Relu":
            layers.append(torch.nn.ReLU()); np_layers.append(("relu",))
        else:
            raise NotImplementedError(n.op_type)
    return torch.nn.Sequential(*layers).eval(), np_layers


def numpy_forward(np_layers, x):
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    for l in np_layers:
        x = x @ l[1].T.astype(np.float64) + l[2] if l[0] == "gemm" else np.maximum(x, 0)
    return x


def parse_vnnlib(path, n_in=784, n_out=10):
    """Input box and label for 'Y_label must exceed every other Y_j' properties."""
    lo, hi = np.full(n_in, -np.inf), np.full(n_in, np.inf)
    with open(path) as f:
        txt = f.read()
    for op, i, v in re.findall(r"\(assert \((<=|>=) X_(\d+) ([-+0-9.eE]+)\)\)", txt):
        (hi if op == "<=" else lo)[int(i)] = float(v)
    pairs = re.findall(r"\(>= Y_(\d+) Y_(\d+)\)", txt)
    labels = {int(b) for _, b in pairs}
    assert len(labels) == 1 and len(pairs) == n_out - 1 and np.isfinite(lo).all() and np.isfinite(hi).all()
    label = labels.pop()
    C = torch.zeros(1, n_out - 1, n_out)
    for r, j in enumerate(int(a) for a, _ in pairs):
        C[0, r, label] = 1.0; C[0, r, j] = -1.0
    return torch.tensor(lo, dtype=torch.float32)[None], torch.tensor(hi, dtype=torch.float32)[None], C


def run_once(model, lo, hi, C, method, upper=False):
    t0 = time.perf_counter()
    x = BoundedTensor((lo + hi) / 2, PerturbationLpNorm(x_L=lo, x_U=hi))
    if method == "CROWN":
        with torch.no_grad():
            lb, _ = model.compute_bounds(x=(x,), C=C, method=method, bound_upper=upper)
    else:  # alpha-CROWN optimises with gradients internally
        lb, _ = model.compute_bounds(x=(x,), C=C, method=method, bound_upper=upper)
    return (time.perf_counter() - t0) * 1e3, lb.detach()


def bench(method, insts, models, rounds, upper=False):
    for net, _, props in insts:  # warm-up
        run_once(models[net], *props, method, upper)
    times = [[0.0] * len(insts) for _ in range(rounds)]
    lbs = []
    for r in range(rounds):
        for k, (net, _, props) in enumerate(insts):
            times[r][k], lb = run_once(models[net], *props, method, upper)
            if r == 0: lbs.append(lb)
    per_min = [min(times[r][k] for r in range(rounds)) for k in range(len(insts))]
    verified = sum(bool((lb > 0).all()) for lb in lbs)
    method = method + (" (lower+upper)" if upper else "")
    print(f"[{method}] per-instance min ms: " + " ".join(f"{t:.2f}" for t in per_min))
    print(f"[{method}] median of per-instance min: {statistics.median(per_min):.3f} ms")
    print(f"[{method}] per-round medians (ms): " + ", ".join(f"{statistics.median(t):.3f}" for t in times))
    print(f"[{method}] verified (all lower bounds > 0): {verified}/{len(insts)}: "
          + " ".join(v for (_, v, _), lb in zip(insts, lbs) if (lb > 0).all()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-dir", default="/work/shared/bench/mnist_fc")
    ap.add_argument("--net", default="256x6")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--alpha", action="store_true")
    ap.add_argument("--upper", action="store_true", help="also time with bound_upper=True (library default)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    with open(os.path.join(args.bench_dir, "instances.csv")) as f:
        rows = [r for r in csv.reader(f) if r and args.net in r[0]]
    models, insts = {}, []
    for onnx_f, vnn_f, *_ in rows:
        if onnx_f not in models:
            net, np_layers = load_onnx_mlp(os.path.join(args.bench_dir, onnx_f))
            xr = np.random.default_rng(0).random((4, 784), dtype=np.float32)
            err = np.abs(net(torch.from_numpy(xr)).detach().numpy() - numpy_forward(np_layers, xr)).max()
            assert err < 1e-4, err
            print(f"{onnx_f}: torch vs numpy max abs diff {err:.2e}")
            models[onnx_f] = BoundedModule(net, torch.zeros(1, 784), device="cpu")
        insts.append((onnx_f, vnn_f, parse_vnnlib(os.path.join(args.bench_dir, vnn_f))))
    print(f"{len(insts)} instances, torch {torch.__version__}, threads {torch.get_num_threads()}")
    bench("CROWN", insts, models, args.rounds)
    if args.upper:
        bench("CROWN", insts, models, args.rounds, upper=True)
    if args.alpha:
        bench("CROWN-Optimized", insts, models, 1)


if __name__ == "__main__":
    main()
