"""Read the published VNN-COMP 2022 / 2023 results (ChristopherBrix/vnncomp{2022,2023}_results).

Layout of those repositories (read straight from their git directories):

* 2022: ``<tool>/<benchmark>/results.csv``; 2023: ``<tool>/<YEAR>_<benchmark>/results.csv``
  (the 2023 competition re-ran the 2022 benchmarks under ``2022_<benchmark>``).
  Rows: benchmark, model path, property path, prepare time, result, run time.
  Results are normalised as the organisers' SCORING/settings.py does: a result
  starting with ``unsat`` is unsat, one starting with ``sat`` is sat, anything
  else (timeout, error_*, unknown, empty, ...) gives no answer.
* ``SCORING/results.txt``: the output of the organisers' scoring script.  Per
  category it prints, per instance, ``were violated counterexamples valid?: {...}``
  (only where counterexamples were checked: in 2022 only where tools disagreed,
  in 2023 for every ``sat``), ``Row: ['<net stem>-<prop stem>', ...]`` and one
  ``<i>: <tool> score: <s>, ...`` line per tool; a negative score is the penalty
  for an incorrect result.

An answer is "marked incorrect" when its score is negative or, for ``sat``, when
its counterexample was checked and found anything but ``correct``.
"""

import ast
import csv
import re
import subprocess
from collections import defaultdict

MIRROR = '/work/.mirror/ChristopherBrix+vnncomp{}_results/repo'


def git(year, *args):
    r = subprocess.run(['git', '--git-dir=' + MIRROR.format(year)] + list(args),
                       capture_output=True, check=True)
    return r.stdout.decode('utf-8', 'replace')


def commit(year):
    return git(year, 'rev-parse', 'HEAD').strip()


def stem(path):
    """Path(p).stem after dropping a .gz suffix."""
    base = path.strip().replace('\\', '/').split('/')[-1]
    base = re.sub(r'\.gz$', '', base)
    return base.rsplit('.', 1)[0] if '.' in base else base


def norm_result(res):
    r = res.strip().lower()
    if r.startswith('unsat'):
        return 'unsat'
    if r.startswith('sat'):
        return 'sat'
    return r or 'unknown'


def parse_scoring(year):
    """{(category, instance_str): {'ce': {tool: status}, 'score': {tool: int}}}"""
    out = defaultdict(lambda: {'ce': {}, 'score': {}})
    cat = None
    pending_ce = {}
    cur = None
    for line in git(year, 'show', 'HEAD:SCORING/results.txt').splitlines():
        m = re.match(r'^Category (\S+):$', line)
        if m:
            cat = m.group(1)
            cur = None
            pending_ce = {}
            continue
        m = re.match(r'^were violated counterexamples valid\?: (\{.*\})$', line)
        if m:
            pending_ce = ast.literal_eval(m.group(1))
            continue
        m = re.match(r'^Row: (\[.*\])$', line)
        if m and cat:
            inst = ast.literal_eval(m.group(1))[0]
            cur = out[(cat, inst)]
            for t, s in pending_ce.items():
                cur['ce'][t] = s
            pending_ce = {}
            continue
        m = re.match(r'^\d+: (\S+) score: (-?\d+),', line)
        if m and cur is not None:
            t, s = m.group(1), int(m.group(2))
            cur['score'][t] = min(s, cur['score'].get(t, s))
    return out


def load(year):
    """Published answers from one results repository.

    Returns {(bench_year, benchmark, model_stem, prop_stem): [answer, ...]} where an
    answer is a dict(tool, result, source_year, incorrect: None or a reason).
    Only sat / unsat answers are kept.
    """
    scoring = parse_scoring(year)
    files = [p for p in git(year, 'ls-tree', '-r', '--name-only', 'HEAD').splitlines()
             if re.match(r'^[^/]+/[^/]+/results\.csv$', p) and not p.startswith('SCORING/')]
    res = defaultdict(list)
    for p in files:
        tool, cat, _ = p.split('/')
        if year == '2022':
            bench_year, bench = '2022', cat
        else:
            m = re.match(r'^(20\d\d)_(.+)$', cat)
            if not m:
                continue
            bench_year, bench = m.group(1), m.group(2)
        for row in csv.reader(git(year, 'show', 'HEAD:' + p).splitlines()):
            if len(row) < 6:
                continue
            r = norm_result(row[4])
            if r not in ('sat', 'unsat'):
                continue
            ms, ps = stem(row[1]), stem(row[2])
            sc = scoring.get((cat, f'{ms}-{ps}'), {'ce': {}, 'score': {}})
            incorrect = None
            score = sc['score'].get(tool)
            ce = sc['ce'].get(tool)
            if r == 'sat' and ce is not None and ce != 'correct':
                incorrect = f'counterexample {ce}'
            if score is not None and score < 0:
                incorrect = incorrect or ('penalised: valid counterexample exists' if r == 'unsat'
                                          else 'penalised')
            res[(bench_year, bench, ms, ps)].append(
                dict(tool=tool, result=r, source_year=year, incorrect=incorrect,
                     ce_checked=(ce == 'correct')))
    return res


def load_all():
    merged = defaultdict(list)
    for y in ('2022', '2023'):
        for k, v in load(y).items():
            merged[k].extend(v)
    return merged


if __name__ == '__main__':
    import collections
    allp = load_all()
    c = collections.Counter()
    for k, v in allp.items():
        for a in v:
            c[(k[0], a['source_year'], a['result'], bool(a['incorrect']))] += 1
    for k, n in sorted(c.items()):
        print(k, n)
