#!/usr/bin/env bash
# One-property latency of two variants on one instances file (INST), alternated over ROUNDS
# (default 6) after a warm-up, each run pinned to the cores in PIN (default 2-5: the
# host thread's wanderings were the largest noise): `--batch 1 --jobs 1 --no-bab` plus EXTRA
# (default GPUPoly's work). A is BIN, B is BIN_B and/or `--set $B`. Prints each round's
# median and the median of all rounds' instance times (ms) per variant.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
BIN="${BIN:-carry/bin/polycert}"
BIN_B="${BIN_B:-$BIN}"
INST="${INST:?set INST}"
EXTRA="${EXTRA:---no-alpha --attack-steps 0}"
PIN="${PIN:-2-5}"
: "${B:=}"
run() {
    local tag=$1 bin=$BIN set=()
    [ "${tag:0:1}" = B ] && bin=$BIN_B && [ -n "$B" ] && set=(--set "$B")
    # shellcheck disable=SC2086
    taskset -c "$PIN" "$bin" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --no-bab $EXTRA "${set[@]}" \
        --instances "$INST" --results "$OUT/ab_$tag.csv" > /dev/null 2>&1
}
run warm
for r in $(seq 1 "${ROUNDS:-6}"); do run "A$r"; run "B$r"; done
python3 - "$OUT" "${ROUNDS:-6}" <<'PY'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for v in 'AB':
    allt, meds = [], []
    for r in range(1, rounds + 1):
        t = [float(row['seconds']) * 1e3 for row in csv.DictReader(open(f'{out}/ab_{v}{r}.csv'))]
        allt += t; meds.append(statistics.median(t))
    print(v, 'rounds', ' '.join('%.2f' % m for m in meds), '| all %.2f ms' % statistics.median(allt))
PY
