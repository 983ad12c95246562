"""Write the markdown report for vnncomp_check.py (standard library only).

    python3 report_md.py --out ../../bench/results/2026-11-29-vnncomp-2022-2023-verdicts-cpu.md \
        [--ce /tmp/vnncheck/ce_polycert.jsonl] [--notes NOTES.md]

--ce: output of ce_check.py polycert (optional); --notes: hand-written text inserted
under "Contradictions" (what was found when each was looked at).
"""

import argparse
import json
import os.path as op
import subprocess
from collections import Counter, defaultdict

import published
import vnncomp_check as V


def bench_commit(y):
    return subprocess.run(['git', '--git-dir=' + V.BENCH_MIRROR.format(y), 'rev-parse', 'HEAD'],
                          capture_output=True).stdout.decode().strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--work', default='/tmp/vnncheck')
    ap.add_argument('--bin', default='/tmp/polycert-check')
    ap.add_argument('--out', required=True)
    ap.add_argument('--ce')
    ap.add_argument('--notes')
    ap.add_argument('--csv', default='bench/results/raw/2026-11-29-vnncomp-2022-2023-verdicts-cpu.csv')
    a = ap.parse_args()
    rs = V.rows(a.work)
    sel = json.load(open(op.join(a.work, 'selected.json')))
    version = subprocess.run([a.bin, '--version'], capture_output=True).stdout.decode().strip()
    wall = sum(r['_run']['wall'] for r in rs)
    L = []
    L.append('# polycert verdicts vs. published VNN-COMP 2022 / 2023 results (CPU)\n')
    L.append('- Date: 2026-11-29')
    L.append('- Machine: 2-core CPU VM, no GPU (`--backend cpu`), shared with another job '
             '(polycert ran under `nice -n 19`, one instance at a time)')
    L.append(f'- Binary: `/tmp/polycert-check`, `--version`: `{version}`')
    L.append('- Benchmarks: ChristopherBrix/vnncomp2022_benchmarks @ ' + bench_commit('2022') +
             ', ChristopherBrix/vnncomp2023_benchmarks @ ' + bench_commit('2023'))
    L.append('- Published results: ChristopherBrix/vnncomp2022_results @ ' + published.commit('2022') +
             ', ChristopherBrix/vnncomp2023_results @ ' + published.commit('2023'))
    L.append('- Command per instance (CAP = min(instance timeout, 3) s; every instance here had CAP = 3):\n')
    L.append('  `nice -n 19 timeout $((CAP+20)) /tmp/polycert-check verify MODEL.onnx PROP.vnnlib '
             '--timeout CAP --backend cpu --json --result-file LOG.result`')
    L.append(f'- Instances run: {len(rs)}; polycert wall time in total {wall / 60:.1f} min '
             '(polycert_seconds in the CSV is the wall time of the whole process, model loading included).')
    L.append('- Scripts: `scripts/vnncomp_check/` (vnncomp_check.py: select / run / report; published.py: '
             'results parsing; ce_check.py: onnxruntime counterexample check; report_md.py: this file). '
             f'Raw rows: `{a.csv}`.\n')
    allc = Counter(r['_cls'] for r in rs)
    allv = Counter(r['verdict_check'] for r in rs)
    L.append('## Summary\n')
    L.append(f"{len(rs)} instances: polycert sat {allc['sat']}, unsat {allc['unsat']}, unknown/timeout "
             f"{allc['unknown']}, refused {allc['refused']}, error {allc['error']}. Against the published "
             f"answers: agrees {allv['agrees']}, contradicts {allv['contradicts']}, no published answer "
             f"{allv['no-published-answer']} (the `test` benchmark). No `unsat` of polycert meets an unmarked "
             "published `sat`; every polycert `sat` counterexample checks out with onnxruntime (below). Each "
             "contradiction is examined under Contradictions." if not any(r['_cls'] == 'unsat' and r['verdict_check'] == 'contradicts' for r in rs)
             else '')
    L.append('')
    L.append('## Method\n')
    L.append('Per benchmark and year, at most 12 rows of instances.csv, spread evenly over the rows whose model '
             'and property are obtainable from the mirrored benchmark repository (models over 200 MB skipped). '
             'Published answers: every tool\'s `sat` / `unsat` in `<tool>/<benchmark>/results.csv` of the same '
             'year; for 2022 benchmarks also the 2023 competition\'s re-run (`<tool>/2022_<benchmark>`, labelled '
             '`@2023`; those result CSVs name files of vnncomp2022_benchmarks). An answer counts as marked incorrect when the organisers\' SCORING/results.txt gives the '
             'tool a negative score for it, or, for `sat`, its counterexample was checked and found `no_ce`, '
             '`exec_doesnt_match` or `spec_not_violated` (2022 checked counterexamples only where tools '
             'disagreed; 2023 checked every `sat`). verdict_check: `agrees` = polycert\'s sat/unsat matches an '
             'unmarked published answer and no unmarked answer contradicts it; `contradicts` = polycert unsat '
             'with an unmarked published sat, or polycert sat with unmarked published unsat and no unmarked sat; '
             '`unknown` = polycert timeout/unknown; `refused` = exit code 2.\n')
    for y in ('2022', '2023'):
        L.append(f'## {y}\n')
        L.append('| benchmark | instances.csv rows | obtainable | run | sat | unsat | unknown | refused | error '
                 '| agrees | contradicts | no published answer |')
        L.append('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
        tot = Counter()
        for s in sel['summary']:
            if s['year'] != y:
                continue
            b = s['benchmark']
            br = [r for r in rs if r['year'] == y and r['benchmark'] == b]
            c = Counter(r['_cls'] for r in br)
            v = Counter(r['verdict_check'] for r in br)
            vals = [s['rows'], s['obtainable'], len(br), c['sat'], c['unsat'], c['unknown'], c['refused'],
                    c['error'], v['agrees'], v['contradicts'], v['no-published-answer']]
            for k, x in zip(range(len(vals)), vals):
                tot[k] += x
            L.append(f'| {b} | ' + ' | '.join(str(x) for x in vals) + ' |')
        L.append('| **total** | ' + ' | '.join(f'**{tot[k]}**' for k in range(11)) + ' |\n')
        notobt = [s for s in sel['summary'] if s['year'] == y and s['obtainable'] < s['rows']]
        if notobt:
            L.append('Rows not obtainable locally: ' + '; '.join(
                f"{s['benchmark']} {s['rows'] - s['obtainable']} ("
                + ', '.join(f'{k}: {n}' for k, n in s['not_obtainable'].items()) + ')' for s in notobt) + '.\n')
    # refusals
    ref = defaultdict(Counter)
    for r in rs:
        if r['_cls'] in ('refused', 'error'):
            msg = (r['_run']['stderr'].splitlines() or [''])[-1]
            i = r['_run']['cmd'].index('verify')
            msg = msg.replace(r['_run']['cmd'][i + 1], 'MODEL').replace(r['_run']['cmd'][i + 2], 'PROP')
            ref[(r['year'], r['benchmark'])][msg[:300]] += 1
    if ref:
        L.append('## Refusals and errors (last stderr line)\n')
        for (y, b), c in sorted(ref.items()):
            for m, n in c.items():
                L.append(f'- {y} {b} ({n}x): `{m}`')
        L.append('')
    # contradictions
    L.append('## Contradictions\n')
    con = [r for r in rs if r['verdict_check'] == 'contradicts']
    if not con:
        L.append('None.\n')
    for r in con:
        L.append(f"- {r['year']} {r['benchmark']} `{r['model']}` `{r['property']}` (timeout {r['timeout']} s): "
                 f"polycert `{r['polycert_result']}` in {r['polycert_seconds']} s; published sat: "
                 f"{r['published_sat_tools'] or 'none'}; published unsat: {r['published_unsat_tools'] or 'none'}.")
    if a.notes:
        L.append(open(a.notes).read().rstrip() + '\n')
    # verdicts against marked-incorrect answers only
    weak = [r for r in rs if r['_cls'] in ('sat', 'unsat') and r['verdict_check'] != 'contradicts' and any(
        x['incorrect'] and x['result'] != ('sat' if r['_cls'] == 'sat' else 'unsat') for x in r['_ans'])]
    L.append('## Verdicts that disagree only with answers marked incorrect\n')
    if not weak:
        L.append('None.\n')
    for r in weak:
        L.append(f"- {r['year']} {r['benchmark']} `{r['model']}` `{r['property']}`: polycert "
                 f"`{r['polycert_result']}`; published sat: {r['published_sat_tools'] or 'none'}; "
                 f"published unsat: {r['published_unsat_tools'] or 'none'} ({r['verdict_check']}).")
    L.append('')
    if a.ce:
        ces = [json.loads(l) for l in open(a.ce)]
        c = Counter(x.get('organisers_verdict', 'failure') for x in ces)
        ort = Counter(x.get('ort_y_violates') for x in ces)
        L.append("## polycert's own counterexamples\n")
        L.append(f'Every polycert `falsified` ({len(ces)}) was checked with ce_check.py (onnxruntime, the '
                 "organisers' VNN-LIB reader and tolerances): " + ', '.join(f'{k}: {n}' for k, n in c.items())
                 + f"; onnxruntime's own output violates the property in {ort[True]} of {len(ces)}.")
        bad = [x for x in ces if x.get('organisers_verdict') != 'correct' or not x.get('ort_y_violates')]
        for x in bad:
            L.append(f"- {x['id']}: {json.dumps({k: x.get(k) for k in ('organisers_verdict', 'exec_linf_diff', 'stated_y_violates', 'ort_y_violates', 'failure')})}")
        L.append('')
    open(a.out, 'w').write('\n'.join(L) + '\n')


if __name__ == '__main__':
    main()
