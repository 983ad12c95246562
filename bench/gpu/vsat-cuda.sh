#!/usr/bin/env bash
# Runs on the GPU machine: the vnnlib-satisfactory cases copied to carry/vsat
# (cases.txt: VNNLIB|expected|--network arguments) through
# `polycert verify PROP --network ... --backend cuda`, each verdict against the
# expected one. Prints one line per case and a tally.
set -uo pipefail
BIN="${BIN:-$PWD/carry/bin/polycert}"
cd carry/vsat
pass=0; wrong=0; unknown=0
while IFS='|' read -r prop want nets; do
    [ -n "$prop" ] || continue
    # shellcheck disable=SC2086
    got=$("$BIN" verify "$prop" $nets --backend "${BACKEND:-cuda}" --timeout 5 2>/dev/null </dev/null | head -1)
    case "$got" in
        "$want") pass=$((pass + 1)) ;;
        sat|unsat) wrong=$((wrong + 1)); echo "WRONG $prop: $got (want $want)" ;;
        *) unknown=$((unknown + 1)); echo "unknown $prop: '$got' (want $want)" ;;
    esac
done < cases.txt
echo "vsat on CUDA: $pass as expected, $wrong wrong, $unknown unknown"
