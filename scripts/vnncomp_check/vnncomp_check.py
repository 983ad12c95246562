"""Check polycert's verdicts on VNN-COMP 2022 / 2023 instances against the published results.

What it does
------------
1. ``select``: reads each benchmark's instances.csv from the mirrored benchmark
   repositories (ChristopherBrix/vnncomp{2022,2023}_benchmarks), keeps the rows whose
   model and property are obtainable locally (model at most 200 MB), and picks at most
   12 rows per benchmark, spread evenly over the obtainable rows in instances.csv order.
   Files already extracted by the earlier survey under /tmp/vnnsurvey/data are reused;
   anything else is read from git (gunzipped) into WORK/data.
2. ``run``: runs polycert on the picked instances one at a time, round-robin over
   benchmarks (so a budget cut leaves an even spread), with
   ``nice -n 19 timeout CAP+20 BIN verify MODEL PROP --timeout CAP --backend cpu --json
   --result-file WORK/logs/<n>.result`` where CAP = min(instance timeout, 3) s.
   Results are appended to WORK/runs.jsonl; a rerun skips instances already done.
   Stops starting new instances once --budget seconds of polycert wall time are spent.
3. ``report``: joins the runs with the published answers (published.py) and writes the
   raw CSV; the markdown report is written by report_md.py.

verdict_check: agrees (polycert sat/unsat matches a published answer not marked
incorrect and none contradicts), contradicts (polycert unsat and some tool's sat not
marked incorrect, or polycert sat where tools said unsat, none marked incorrect, and no
valid sat), unknown (no verdict: unknown / timeout), refused (exit code 2), error,
no-published-answer.

How to run (Python 3, standard library only)
--------------------------------------------
    cd scripts/vnncomp_check
    python3 vnncomp_check.py select
    python3 vnncomp_check.py run --budget 2100
    python3 vnncomp_check.py report --csv ../../bench/results/raw/2026-11-29-vnncomp-2022-2023-verdicts-cpu.csv
    /tmp/vsat/bin/python ce_check.py polycert > /tmp/vnncheck/ce_polycert.jsonl   # needs onnxruntime
    python3 report_md.py --out ../../bench/results/2026-11-29-vnncomp-2022-2023-verdicts-cpu.md \
        --ce /tmp/vnncheck/ce_polycert.jsonl --notes NOTES.md   # NOTES.md: what each contradiction turned out to be

Options: --work DIR (default /tmp/vnncheck), --bin PATH (default /tmp/polycert-check).
"""

import argparse
import csv
import gzip
import json
import os
import os.path as op
import re
import subprocess
import sys
import time
from collections import defaultdict

import published

BENCH_MIRROR = '/work/.mirror/ChristopherBrix+vnncomp{}_benchmarks/repo'
SURVEY = '/tmp/vnnsurvey/data'
MAX_MODEL = 200 * 1000 * 1000
PER_BENCH = 12
CAP = 3.0


def git(year, *args, binary=False):
    r = subprocess.run(['git', '--git-dir=' + BENCH_MIRROR.format(year)] + list(args),
                       capture_output=True)
    return r


def tree(year):
    t = {}
    out = git(year, 'ls-tree', '-r', '-l', 'HEAD').stdout.decode()
    for line in out.splitlines():
        meta, path = line.split('\t', 1)
        mode, typ, sha, size = meta.split()
        t[path] = sha
    return t


def obtain(work, year, bench, rel, t, cache):
    """Local path of benchmarks/<bench>/<rel> (gunzipped), or (None, reason)."""
    rel = re.sub(r'^\./', '', rel)
    plain = re.sub(r'\.gz$', '', rel)
    for base in (SURVEY, op.join(work, 'data')):
        p = op.join(base, year, bench, plain)
        if op.exists(p):
            return p, 'ok'
    key = (year, bench, plain)
    if key in cache:
        return cache[key]
    bd = f'benchmarks/{bench}/'
    cand = [c for c in (bd + plain, bd + plain + '.gz') if c in t]
    if not cand:
        cache[key] = (None, 'not in repository tree')
        return cache[key]
    r = git(year, 'cat-file', 'blob', t[cand[0]])
    if r.returncode != 0:
        cache[key] = (None, 'blob absent from snapshot')
        return cache[key]
    data = r.stdout
    if cand[0].endswith('.gz'):
        try:
            data = gzip.decompress(data)
        except Exception as e:  # noqa: BLE001
            cache[key] = (None, f'gunzip failed: {e}')
            return cache[key]
    if data.startswith(b'version https://git-lfs'):
        cache[key] = (None, 'Git LFS pointer')
        return cache[key]
    p = op.join(work, 'data', year, bench, plain)
    os.makedirs(op.dirname(p), exist_ok=True)
    with open(p, 'wb') as f:
        f.write(data)
    cache[key] = (p, 'ok')
    return cache[key]


def cmd_select(a):
    sel, summary = [], []
    cache = {}
    for year in ('2022', '2023'):
        t = tree(year)
        benches = sorted({p.split('/')[1] for p in t
                          if re.match(r'^benchmarks/[^/]+/instances\.csv$', p)})
        for b in benches:
            txt = git(year, 'show', f'HEAD:benchmarks/{b}/instances.csv').stdout.decode()
            rows = [r for r in csv.reader(txt.splitlines()) if len(r) >= 3]
            ok, why = [], defaultdict(int)
            for i, (m, p, to) in enumerate((r[0].strip(), r[1].strip(), r[2].strip()) for r in rows):
                mp, mr = obtain(a.work, year, b, m, t, cache)
                if mp is None:
                    why['model ' + mr] += 1
                    continue
                if op.getsize(mp) > MAX_MODEL:
                    why['model over 200 MB'] += 1
                    continue
                pp, pr = obtain(a.work, year, b, p, t, cache)
                if pp is None:
                    why['property ' + pr] += 1
                    continue
                ok.append(dict(year=year, benchmark=b, row=i, model=re.sub(r'^\./', '', m),
                               property=re.sub(r'^\./', '', p), timeout=float(to),
                               local_model=mp, local_prop=pp))
            k = min(PER_BENCH, len(ok))
            pick = [ok[(j * len(ok)) // k] for j in range(k)] if k else []
            sel.extend(pick)
            summary.append(dict(year=year, benchmark=b, rows=len(rows), obtainable=len(ok),
                                picked=len(pick), not_obtainable=dict(why)))
            print(year, b, len(rows), len(ok), len(pick), dict(why), file=sys.stderr)
    os.makedirs(a.work, exist_ok=True)
    json.dump(dict(selected=sel, summary=summary), open(op.join(a.work, 'selected.json'), 'w'),
              indent=1)


def inst_id(s):
    return f"{s['year']}|{s['benchmark']}|{s['row']}"


def fmt_cap(x):
    return ('%g' % x)


def cmd_run(a):
    d = json.load(open(op.join(a.work, 'selected.json')))
    runs_path = op.join(a.work, 'runs.jsonl')
    done, spent = set(), 0.0
    if op.exists(runs_path):
        for line in open(runs_path):
            r = json.loads(line)
            done.add(r['id'])
            spent += r['wall']
    # round-robin over benchmarks
    by = defaultdict(list)
    for s in d['selected']:
        by[(s['year'], s['benchmark'])].append(s)
    order = []
    for j in range(PER_BENCH):
        for k in sorted(by):
            if j < len(by[k]):
                order.append(by[k][j])
    os.makedirs(op.join(a.work, 'logs'), exist_ok=True)
    with open(runs_path, 'a') as out:
        for n, s in enumerate(order):
            iid = inst_id(s)
            if iid in done:
                continue
            if spent >= a.budget:
                print(f'budget spent ({spent:.0f} s); stopping', file=sys.stderr)
                break
            cap = min(s['timeout'], CAP)
            tag = f"{s['year']}_{s['benchmark']}_{s['row']}"
            resf = op.join(a.work, 'logs', tag + '.result')
            cmd = ['nice', '-n', '19', 'timeout', str(int(cap + 20)), a.bin, 'verify',
                   s['local_model'], s['local_prop'], '--timeout', fmt_cap(cap),
                   '--backend', 'cpu', '--json', '--result-file', resf]
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True)
            wall = time.time() - t0
            spent += wall
            so, se = p.stdout.decode('utf-8', 'replace'), p.stderr.decode('utf-8', 'replace')
            objs = []
            for line in so.splitlines():
                line = line.strip()
                if line.startswith('{'):
                    try:
                        objs.append(json.loads(line))
                    except ValueError:
                        pass
            with open(op.join(a.work, 'logs', tag + '.out'), 'w') as f:
                f.write(so)
            with open(op.join(a.work, 'logs', tag + '.err'), 'w') as f:
                f.write(se)
            rec = dict(id=iid, **{k: s[k] for k in ('year', 'benchmark', 'row', 'model',
                                                     'property', 'timeout')},
                       cap=cap, rc=p.returncode, wall=wall, cmd=cmd,
                       results=[o.get('result') for o in objs],
                       seconds=[o.get('seconds') for o in objs],
                       stderr=se.strip()[-2000:])
            out.write(json.dumps(rec) + '\n')
            out.flush()
            print(f"[{spent:7.1f}s] {iid} {s['model']} {s['property']} rc={p.returncode} "
                  f"{rec['results']} {wall:.1f}s", file=sys.stderr)


def polycert_result(r):
    """(result string for the CSV, class: sat/unsat/unknown/refused/error)."""
    if r['rc'] == 2:
        return 'refused', 'refused'
    if r['rc'] in (124, 137):
        return 'killed-by-timeout', 'error'
    res = r['results']
    if r['rc'] != 0 or not res:
        return f"error(rc={r['rc']})", 'error'
    if any(x == 'falsified' for x in res):
        return 'falsified', 'sat'
    if all(x == 'verified' for x in res):
        return 'verified', 'unsat'
    if all(x in ('unknown', 'timeout', 'verified') for x in res):
        return [x for x in res if x != 'verified'][0], 'unknown'
    return 'error(' + ','.join(map(str, res)) + ')', 'error'


def fmt_tools(answers, result):
    out = []
    for x in answers:
        if x['result'] != result:
            continue
        s = f"{x['tool']}@{x['source_year']}"
        if x['incorrect']:
            s += f" [marked incorrect: {x['incorrect']}]"
        out.append(s)
    return '; '.join(out)


def check(cls, answers):
    if cls in ('refused', 'error', 'unknown'):
        return cls
    vs = [x for x in answers if x['result'] == 'sat' and not x['incorrect']]
    vu = [x for x in answers if x['result'] == 'unsat' and not x['incorrect']]
    if cls == 'unsat':
        if vs:
            return 'contradicts'
        return 'agrees' if vu else 'no-published-answer'
    if vs:
        return 'agrees'
    return 'contradicts' if vu else 'no-published-answer'


COLS = ['year', 'benchmark', 'model', 'property', 'timeout', 'cap', 'polycert_result',
        'polycert_seconds', 'published_sat_tools', 'published_unsat_tools', 'verdict_check']


def rows(work):
    pub = published.load_all()
    out = []
    for line in open(op.join(work, 'runs.jsonl')):
        r = json.loads(line)
        key = (r['year'], r['benchmark'], published.stem(r['model']), published.stem(r['property']))
        ans = pub.get(key, [])
        res, cls = polycert_result(r)
        out.append(dict(year=r['year'], benchmark=r['benchmark'], model=r['model'],
                        property=r['property'], timeout='%g' % r['timeout'],
                        cap='%g' % r['cap'], polycert_result=res,
                        polycert_seconds='%.2f' % r['wall'],
                        published_sat_tools=fmt_tools(ans, 'sat'),
                        published_unsat_tools=fmt_tools(ans, 'unsat'),
                        verdict_check=check(cls, ans), _cls=cls, _run=r, _ans=ans))
    return out


def cmd_report(a):
    rs = rows(a.work)
    os.makedirs(op.dirname(op.abspath(a.csv)), exist_ok=True)
    with open(a.csv, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=COLS, extrasaction='ignore')
        w.writeheader()
        for r in rs:
            w.writerow(r)
    print(f'wrote {len(rs)} rows to {a.csv}', file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--work', default='/tmp/vnncheck')
    ap.add_argument('--bin', default='/tmp/polycert-check')
    sp = ap.add_subparsers(dest='cmd', required=True)
    sp.add_parser('select')
    r = sp.add_parser('run')
    r.add_argument('--budget', type=float, default=2100.0,
                   help='seconds of polycert wall time after which no new instance starts')
    rp = sp.add_parser('report')
    rp.add_argument('--csv', required=True)
    a = ap.parse_args()
    {'select': cmd_select, 'run': cmd_run, 'report': cmd_report}[a.cmd](a)


if __name__ == '__main__':
    main()
