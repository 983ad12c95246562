"""Check counterexamples by running the ONNX model with onnxruntime.

NOT standard library only: run it with a Python that has numpy, onnx and
onnxruntime, e.g. /tmp/vsat/bin/python.  It borrows the organisers' VNN-LIB reader
(SCORING/vnnlib.py of ChristopherBrix/vnncomp2023_results, read from the mirrored git
directory) and applies the organisers' test (SCORING/counterexamples.py): the CE's
outputs must match onnxruntime's within relative 1e-3, and X must lie in an input box
(abs tol 1e-4) whose output constraints the outputs satisfy (abs tol 1e-4).  It also
reports whether onnxruntime's own outputs (not the stated ones) violate the property.

Usage:
    /tmp/vsat/bin/python ce_check.py polycert [--work /tmp/vnncheck]
        every polycert `falsified` run in WORK/runs.jsonl (its --result-file)
    /tmp/vsat/bin/python ce_check.py file MODEL.onnx PROP.vnnlib CE_FILE[.gz]
        one counterexample file (e.g. a published <tool>/<cat>/<net>_<prop>.counterexample.gz)
Prints one JSON object per checked counterexample.
"""

import gzip
import json
import os.path as op
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

_tmp = tempfile.mkdtemp(prefix='vnnlib_')
_src = subprocess.run(['git', '--git-dir=/work/.mirror/ChristopherBrix+vnncomp2023_results/repo',
                       'show', 'HEAD:SCORING/vnnlib.py'], capture_output=True, check=True).stdout.decode()
# drop the organisers' on-disk cache decorator (package cachier), not needed here
_src = '\n'.join(l for l in _src.splitlines()
                 if not l.startswith('from cachier') and not l.startswith('@cachier'))
with open(op.join(_tmp, 'vnnlib.py'), 'w') as _f:
    _f.write(_src)
sys.path.insert(0, _tmp)
from vnnlib import read_vnnlib_simple, get_io_nodes  # noqa: E402

ort.set_default_logger_severity(3)

TOL = 1e-4
RTOL = 1e-3


def read_ce(path):
    raw = gzip.open(path).read() if path.endswith('.gz') else open(path, 'rb').read()
    txt = raw.decode()
    lines = txt.strip().splitlines()
    verdict = lines[0].strip() if lines and not lines[0].startswith('(') else None
    body = ' '.join(l for l in lines if l.strip() != verdict).replace('\n', ' ').strip()
    xs, ys = {}, {}
    for part in body.strip('()').split(')'):
        part = part.strip().lstrip('(').strip()
        if not part:
            continue
        name, num = part.split()
        (xs if name.startswith('X_') else ys)[int(name[2:])] = float(num)
    return verdict, [xs[i] for i in range(len(xs))], [ys[i] for i in range(len(ys))]


def spec_violated(boxes, x, y):
    for box, specs in boxes:
        if all(lb - TOL <= xi <= ub + TOL for (lb, ub), xi in zip(box, x)):
            for mat, rhs in specs:
                if np.all(mat.dot(np.array(y)) <= rhs + TOL):
                    return True
    return False


def check(model, prop, ce):
    verdict, x, y = read_ce(ce)
    m = onnx.load(model)
    inp, out, dtype = get_io_nodes(m)
    ishape = tuple(d.dim_value if d.dim_value != 0 else 1 for d in inp.type.tensor_type.shape.dim)
    oshape = tuple(d.dim_value if d.dim_value != 0 else 1 for d in out.type.tensor_type.shape.dim)
    sess = ort.InferenceSession(m.SerializeToString())
    xin = np.array(x, dtype=dtype).reshape(ishape)
    got = sess.run(None, {sess.get_inputs()[0].name: xin})[0].flatten()
    boxes = read_vnnlib_simple(prop, int(np.prod(ishape)), int(np.prod(oshape)))
    r = dict(model=model, property=prop, ce=ce, verdict=verdict, n_x=len(x), n_y=len(y))
    if y:
        diff = float(np.max(np.abs(got - np.array(y))))
        norm = float(np.max(np.abs(np.array(y))))
        r['exec_linf_diff'] = diff
        r['exec_matches'] = (diff / norm if norm >= 1e-6 else 0.0) <= RTOL
        r['stated_y_violates'] = spec_violated(boxes, x, y)
    r['ort_y_violates'] = spec_violated(boxes, x, got.tolist())
    r['organisers_verdict'] = ('correct' if y and r['exec_matches'] and r['stated_y_violates']
                               else 'no_ce' if not x else
                               'exec_doesnt_match' if y and not r['exec_matches'] else
                               'spec_not_violated')
    return r


def main():
    if sys.argv[1] == 'file':
        print(json.dumps(check(*sys.argv[2:5])))
        return
    work = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == '--work' else '/tmp/vnncheck'
    for line in open(op.join(work, 'runs.jsonl')):
        run = json.loads(line)
        if 'falsified' not in run['results']:
            continue
        i = run['cmd'].index('verify')
        model, prop = run['cmd'][i + 1], run['cmd'][i + 2]
        resf = run['cmd'][run['cmd'].index('--result-file') + 1]
        try:
            r = check(model, prop, resf)
        except Exception as e:  # noqa: BLE001
            r = dict(model=model, property=prop, ce=resf, failure=repr(e))
        r['id'] = run['id']
        print(json.dumps(r), flush=True)


if __name__ == '__main__':
    main()
