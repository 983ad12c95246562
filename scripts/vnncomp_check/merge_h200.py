"""Merges the two H200 calls' `polycert vnncomp` results (carry/vnn2223/results-h200.csv and the
second call's /tmp/vr/restK.csv) into carry/vnn2223/results-h200-all.csv, checking that each of the
199 distinct instances of carry/vnn2223/instances.csv appears once and copying the counterexample
files beside it. A working script of 2026-11-29 (paths as on that machine); see
bench/results/2026-11-29-vnncomp-2022-2023-verdicts-h200.md."""
import csv, os, shutil, os.path as op, collections
C = '/work/main/carry/vnn2223'
OUT = op.join(C, 'results-h200-all.csv')
CEX = OUT + '.cex'
os.makedirs(CEX, exist_ok=True)
inst = [tuple(r[:2]) for r in csv.reader(open(op.join(C, 'instances.csv')))]
assert len(inst) == 199 and len(set(inst)) == 199
srcs = [(op.join(C, 'results-h200.csv'), op.join(C, 'results-h200.csv.cex'), 'call1')]
srcs += [(f'/tmp/vr/rest{k}.csv', f'/tmp/vr/rest{k}.csv.cex', f'call2/rest{k}') for k in range(6)]
rows = {}; origin = {}
for f, cexd, tag in srcs:
    for r in csv.DictReader(open(f, newline='')):
        key = (r['onnx'], r['vnnlib'])
        assert key not in rows, ('dup', key)
        if r['counterexample']:
            b = op.basename(r['counterexample'])
            src = op.join(cexd, b)
            assert op.isfile(src), src
            dst = op.join(CEX, b)
            assert not op.exists(dst) or open(dst,'rb').read() == open(src,'rb').read()
            shutil.copyfile(src, dst)
            r['counterexample'] = op.join(op.basename(CEX), b)
        else:
            assert r['result'] != 'sat', key
        rows[key] = r; origin[key] = tag
# rest files match the remaining instances exactly
for k in range(6):
    want = [tuple(x[:2]) for x in csv.reader(open(op.join(C, f'rest{k}.csv')))]
    got = [key for key, t in origin.items() if t == f'call2/rest{k}']
    assert sorted(want) == sorted(got), k
assert set(rows) == set(inst), (len(rows), set(inst) - set(rows), set(rows) - set(inst))
with open(OUT, 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=['onnx','vnnlib','result','seconds','counterexample','message'], lineterminator='\n')
    w.writeheader()
    for key in inst:
        w.writerow(rows[key])
print(len(rows), collections.Counter(r['result'] for r in rows.values()))
for t in ('call1','call2'):
    print(t, collections.Counter(rows[k]['result'] for k in rows if origin[k].startswith(t)))
print(len(os.listdir(CEX)), 'cex files')
