#!/usr/bin/env bash
# GPU time per kernel of one property's analysis (GPUPoly's work: `--no-bab --no-alpha
# --attack-steps 0`), from ncu (`gpu__time_duration.sum`, clocks as they are): INST names an
# instances file holding one instance three times (the first pays the warm-up). Prints the
# kernels' count and summed time of the last run, and the largest kernels. BIN as in latency-ab.sh.
set -u
OUT="${OUT:-out}"
mkdir -p "$OUT"
BIN="${BIN:-carry/bin/polycert}"
INST="${INST:?set INST}"
tag=$(basename "$(dirname "$INST")")
ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$BIN" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --no-bab --no-alpha --attack-steps 0 \
    --instances "$INST" --results "$OUT/k_$tag.csv" > "$OUT/k_$tag.txt" 2> "$OUT/k_$tag.err"
python3 - "$OUT/k_$tag.txt" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; i = h.index('Metric Value'); k = h.index('Kernel Name'); u = h.index('Metric Unit')
ids = [int(r[h.index('ID')]) for r in rows[1:]]
runs = [r for r in rows[1:]]
# The last third of the launches: the third run of the instance.
last = runs[len(runs) * 2 // 3:]
tot = 0.0; by = collections.Counter(); cnt = collections.Counter()
for r in last:
    v = float(r[i].replace(',', '')) * {'nsecond': 1e-6, 'usecond': 1e-3, 'msecond': 1}.get(r[u], 1)
    tot += v; by[r[k][:48]] += v; cnt[r[k][:48]] += 1
print(sys.argv[1], 'kernels (last third)', len(last), 'GPU ms', round(tot, 3))
for name, v in by.most_common(14):
    print('   %-48s %7.3f ms %5d launches' % (name, v, cnt[name]))
PY
