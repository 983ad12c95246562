#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root: starts or watches a full run that outlives the
# device tool's 10-minute calls. `bash bench/gpu/full_poll.sh SECONDS start [GPUS] [LISTS] [ACAS]`
# starts `full.sh GPUS LISTS` under setsid (rows in /tmp/polycert-full), and, when ACAS (an
# instances.csv) is given, runs it on the GPU whose list ends first. Without `start`, it watches the
# run. Either way it waits up to SECONDS for the run's end, prints each GPU's progress and the tally,
# and leaves one tarball of every row and log in $OUT (the tool brings back at most 8 files).
# Poll calls must not carry the folders the run reads (carrying replaces them).
set -uo pipefail
secs="${1:-0}"; mode="${2:-}"; gpus="${3:-4}"; lists="${4:-}"; acas="${5:-}"
run=/tmp/polycert-full; out="$run/out"
if [ "$mode" = start ]; then
  # full.sh's list for GPU k: LISTS/gK.csv, or the one it writes, carry/bench/full-gK.csv.
  prefix="${lists:+$lists/g}"; prefix="${prefix:-carry/bench/full-g}"
  mkdir -p "$out"
  { date -u; nproc; nvidia-smi -L; } > "$out/machine.txt" 2>&1
  cat > "$run/go.sh" <<GO
OUT="$out" bash bench/gpu/full.sh "$gpus" "$lists" > "$out/full.log" 2>&1 &
if [ -n "$acas" ]; then
  per=\$(( \$(nproc) / $gpus )); per=\$(( per > 0 ? per : 1 ))
  k=""
  while [ -z "\$k" ]; do
    sleep 2
    for ((g = 0; g < $gpus; g++)); do
      list="$prefix\$g.csv"; want=\$(( \$(wc -l < "\$list") + 1 ))
      have=\$(wc -l < "$out/full-g\$g.csv" 2>/dev/null || echo 0)
      if [ "\$have" -ge "\$want" ]; then k=\$g; break; fi
    done
  done
  CUDA_VISIBLE_DEVICES=\$k RAYON_NUM_THREADS=\$per taskset -c \$((per * k))-\$((per * k + per - 1)) \\
    "\${BIN:-carry/bin/polycert}" vnncomp --backend cuda --jobs 1 --resume --instances "$acas" \\
    --results "$out/acas.csv" > "$out/acas.log" 2>&1
  echo "acas on GPU \$k" > "$out/acas.done"
fi
wait
GO
  setsid nohup bash "$run/go.sh" > "$run/go.log" 2>&1 < /dev/null &
  sleep 5
fi
finished() { [ -f "$out/full.done" ] && { [ -z "$acas" ] || [ -f "$out/acas.done" ]; }; }
end=$(( $(date +%s) + secs ))
while ! finished && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
date -u; head -3 "$out/machine.txt"
for csv in "$out"/full-g*.csv; do
  [ -f "$csv" ] || continue
  echo "== $(basename "$csv" .csv): $(( $(wc -l < "$csv") - 1 )) rows"
  tail -n +2 "$csv" | cut -d, -f2-4 | tail -3
done
[ -f "$out/acas.csv" ] && echo "== acas: $(tail -n +2 "$out/acas.csv" | cut -d, -f3 | sort | uniq -c | tr '\n' ' ')"
cat "$out/full.done" "$out/acas.done" 2>/dev/null
[ -n "${OUT:-}" ] && tar czf "$OUT/full-run.tgz" -C "$run" out go.log 2>/dev/null
true
