#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root: `bash bench/gpu/each.sh LIST RESULTS` runs every
# row of LIST (an instances.csv: `onnx,vnnlib,timeout`, paths relative to LIST's folder) in its own
# `polycert vnncomp --backend cuda --jobs 1 --resume` process, appending to RESULTS. One process per
# instance: no DeepPoly batch joins instances, so a machine that goes back mid-run loses at most the
# instance under way, and a rerun with the same RESULTS skips the rows already written.
# BIN overrides carry/bin/polycert; RESULTS.time gets a line per instance.
set -uo pipefail
list="$1"; results="$2"; BIN="${BIN:-carry/bin/polycert}"
dir=$(dirname "$list"); one="$dir/.each-$$.csv"
trap 'rm -f "$one"' EXIT
while IFS= read -r row || [ -n "$row" ]; do
  [ -z "$row" ] && continue
  printf '%s\n' "$row" > "$one"
  "$BIN" vnncomp --backend cuda --jobs 1 --resume --instances "$one" --results "$results" >> "$results.log" 2>&1
  echo "$(date +%s) rc=$? $row" >> "$results.time"
done < "$list"
