"""GPU (CUDA) run of the CPU check's VNN-COMP 2022 / 2023 selection, and its join with the
published results.

Subcommands
-----------
``pack``: takes the instances of WORK/runs.jsonl (the CPU check, vnncomp_check.py) that were
   not refused (exit code 2), dedupes them by content (same model bytes, same property bytes,
   same cap: e.g. acasxu and test are identical in both years), gzips each distinct model and
   property once into OUT/d/<year>/<benchmark>/<path>.gz, and writes OUT/instances.csv
   (model,property,timeout; paths relative to OUT) with timeout = min(VNN-COMP timeout, CAP)
   and OUT/map.json (csv row -> instance ids). Order: benchmarks by an estimated cost
   (instances the CPU left open cost CAP each per (model, cap) group, others ~1 s), cheapest
   first; within a benchmark, one model's instances together (``polycert vnncomp`` batches
   consecutive instances of one network and timeout), groups the CPU solved first.
``join``: reads the GPU results CSV (``polycert vnncomp`` format polycert: onnx, vnnlib, result,
   seconds, counterexample, message), maps the rows back to instances through map.json, joins
   them with the published answers exactly as vnncomp_check.py does (published.py,
   vnncomp_check.check) and writes the raw CSV (vnncomp_check's columns plus cpu_3s_result and
   gpu_message). Instances with no GPU row (the run was cut off) get ``not-run``.

Usage (standard library only):
    python3 gpu_join.py pack --out /work/main/carry/vnn2223
    python3 gpu_join.py join --results RESULTS.csv --csv OUT.csv [--out /work/main/carry/vnn2223]
"""

import argparse
import csv
import gzip
import hashlib
import json
import os
import os.path as op
import re
import sys
from collections import defaultdict, OrderedDict

import published
import vnncomp_check as vc

CAP = 30.0


def sha(p, cache={}):
    if p not in cache:
        cache[p] = hashlib.sha1(open(p, 'rb').read()).hexdigest()
    return cache[p]


def load_runs(work):
    sel = json.load(open(op.join(work, 'selected.json')))['selected']
    S = {vc.inst_id(s): s for s in sel}
    runs = [json.loads(l) for l in open(op.join(work, 'runs.jsonl'))]
    return S, runs


def cpu_solved(r):
    return any(x in ('verified', 'falsified') for x in r['results'])


def cmd_pack(a):
    S, runs = load_runs(a.work)
    stored = {}  # content hash -> relative path under OUT
    uniq = OrderedDict()  # (mh, ph, cap) -> dict
    for r in runs:
        if r['rc'] == 2:
            continue
        s = S[r['id']]
        cap = min(s['timeout'], a.cap)
        rels = []
        for kind, lp in (('model', s['local_model']), ('prop', s['local_prop'])):
            h = sha(lp)
            if h not in stored:
                plain = s[kind if kind == 'model' else 'property']
                plain = plain[:-3] if plain.endswith('.gz') else plain
                rel = op.join('d', s['year'], s['benchmark'], plain) + '.gz'
                dst = op.join(a.out, rel)
                os.makedirs(op.dirname(dst), exist_ok=True)
                with open(lp, 'rb') as f, gzip.open(dst, 'wb', compresslevel=6) as g:
                    g.write(f.read())
                stored[h] = rel
            rels.append(stored[h])
        key = (sha(s['local_model']), sha(s['local_prop']), cap)
        u = uniq.setdefault(key, dict(model=rels[0], prop=rels[1], cap=cap, ids=[],
                                      bench=(s['year'], s['benchmark']), open=False))
        u['ids'].append(r['id'])
        u['open'] = u['open'] or not cpu_solved(r)
    # cost per benchmark (first occurrence's benchmark)
    by = defaultdict(list)
    for u in uniq.values():
        by[u['bench']].append(u)
    cost = {}
    for b, us in by.items():
        groups = defaultdict(list)
        for u in us:
            groups[(u['model'], u['cap'])].append(u)
        cost[b] = sum(g[0]['cap'] if any(x['open'] for x in g) else 1.0 + 0.5 * len(g)
                      for g in groups.values())
    order = []
    for b in sorted(by, key=lambda b: (cost[b], b)):
        groups = OrderedDict()
        for u in by[b]:
            groups.setdefault((u['model'], u['cap']), []).append(u)
        for g in sorted(groups.values(), key=lambda g: any(x['open'] for x in g)):
            order.extend(g)
    with open(op.join(a.out, 'instances.csv'), 'w', newline='') as f:
        w = csv.writer(f, lineterminator='\n')
        for u in order:
            w.writerow([u['model'], u['prop'], '%g' % u['cap']])
    json.dump([dict(row=i, model=u['model'], property=u['prop'], cap=u['cap'], ids=u['ids'],
                    cpu_open=u['open']) for i, u in enumerate(order)],
              open(op.join(a.out, 'map.json'), 'w'), indent=1)
    cum = 0.0
    for b in sorted(by, key=lambda b: (cost[b], b)):
        cum += cost[b]
        print(f'{b[0]} {b[1]:28s} unique {len(by[b]):3d} est {cost[b]:6.1f}s cum {cum:7.1f}s',
              file=sys.stderr)
    tot = sum(op.getsize(op.join(a.out, p)) for p in stored.values())
    print(f'{len(order)} unique instances ({sum(len(u["ids"]) for u in order)} runs), '
          f'{len(stored)} files, {tot / 2**20:.1f} MiB', file=sys.stderr)


def gpu_class(res):
    res = (res or '').strip()
    if res == 'sat':
        return 'falsified', 'sat'
    if res == 'unsat':
        return 'verified', 'unsat'
    if res in ('unknown', 'timeout'):
        return res, 'unknown'
    if res == '':
        return 'not-run', 'not-run'
    return 'error(' + res + ')', 'error'


COLS = vc.COLS + ['cpu_3s_result', 'counterexample', 'gpu_message']


def cmd_join(a):
    S, runs = load_runs(a.work)
    R = {r['id']: r for r in runs}
    m = json.load(open(op.join(a.out, 'map.json')))
    got = {}
    with open(a.results, newline='') as f:
        for row in csv.DictReader(f):
            got[(row['onnx'], row['vnnlib'])] = row
    pub = published.load_all()
    out = []
    for u in m:
        g = got.get((u['model'], u['property']))
        for iid in u['ids']:
            r = R[iid]
            key = (r['year'], r['benchmark'], published.stem(r['model']),
                   published.stem(r['property']))
            ans = pub.get(key, [])
            res, cls = gpu_class(g['result'] if g else '')
            vcheck = 'not-run' if cls == 'not-run' else vc.check(cls, ans)
            out.append(dict(year=r['year'], benchmark=r['benchmark'], model=r['model'],
                            property=r['property'], timeout='%g' % r['timeout'],
                            cap='%g' % u['cap'], polycert_result=res,
                            polycert_seconds=(g['seconds'] if g else ''),
                            published_sat_tools=vc.fmt_tools(ans, 'sat'),
                            published_unsat_tools=vc.fmt_tools(ans, 'unsat'),
                            verdict_check=vcheck, cpu_3s_result=vc.polycert_result(r)[0],
                            counterexample=re.sub(r'^.*/(?=[^/]+\.cex/)', '',
                                                  g.get('counterexample', '') if g else ''),
                            gpu_message=(g.get('message', '') if g else ''),
                            local_model=S[iid]['local_model'], local_prop=S[iid]['local_prop'],
                            id=iid))
    out.sort(key=lambda x: (x['year'], x['benchmark'], int(x['id'].split('|')[2])))
    with open(a.csv, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=COLS, extrasaction='ignore')
        w.writeheader()
        for x in out:
            w.writerow(x)
    if a.jsonl:
        with open(a.jsonl, 'w') as f:
            for x in out:
                f.write(json.dumps(x) + '\n')
    print(f'wrote {len(out)} rows to {a.csv}', file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--work', default='/tmp/vnncheck')
    ap.add_argument('--out', default='/work/main/carry/vnn2223')
    ap.add_argument('--cap', type=float, default=CAP)
    sp = ap.add_subparsers(dest='cmd', required=True)
    sp.add_parser('pack')
    j = sp.add_parser('join')
    j.add_argument('--results', required=True)
    j.add_argument('--csv', required=True)
    j.add_argument('--jsonl', help='also the joined rows with local paths, one JSON a line')
    a = ap.parse_args()
    {'pack': cmd_pack, 'join': cmd_join}[a.cmd](a)


if __name__ == '__main__':
    main()
