#!/usr/bin/env bash
# The property parse's share of one-property latency: POLYCERT_PROFILE's `cli.vnnlib` (mean
# per instance) and the analysis phases, for BIN (default carry/bin/polycert) on the shared
# mnist_fc and cifar10_resnet instances with `--batch 1 --jobs 1 --no-bab` plus EXTRA (default
# GPUPoly's work), pinned to PIN (default 2-5) after a warm-up run.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
BIN="${BIN:-carry/bin/polycert}"
EXTRA="${EXTRA:---no-alpha --attack-steps 0}"
for b in mnist_fc cifar10_resnet; do
    run() {
        # shellcheck disable=SC2086
        taskset -c "${PIN:-2-5}" "$BIN" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --no-bab $EXTRA \
            --instances "carry/bench/$b/instances.csv" --results "$OUT/share_$b.csv" "$@"
    }
    run > /dev/null 2>&1
    echo "== $b"
    POLYCERT_PROFILE=1 run 2>&1 | grep -E "cli.vnnlib|refine_all|prove_output|forward_pass|median"
done
