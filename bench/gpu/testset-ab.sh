#!/usr/bin/env bash
# The MNIST test set (256x6, eps 0.03, 10,000 images) with two builds alternated on one machine
# (issue 44): the new build's first process on the machine profiled (POLYCERT_PROFILE=1), then
# ROUNDS (default 2) alternated rounds of the default command and of `--no-bab`, then one profiled
# `--no-bab` run of each build. BIN_A is the base (default carry/base/polycert), BIN_B the new
# build (default carry/bin/polycert). Needs carry/bench/mnist_fc and carry/data/t10k-*.
set -uo pipefail
OUT="${OUT:-out}"; mkdir -p "$OUT"
A="${BIN_A:-carry/base/polycert}"; B="${BIN_B:-carry/bin/polycert}"
I=carry/data/t10k-images-idx3-ubyte.gz; M=carry/bench/mnist_fc/mnist-net_256x6.onnx
run() {
    local name=$1 bin=$2; shift 2
    /usr/bin/time -f "%e" -o "$OUT/$name.time" timeout 120 "$bin" verify --backend cuda --model "$M" --images "$I" \
        --eps 0.03 --count 10000 "$@" > "$OUT/$name.log" 2>&1
    printf '%-16s %6s s  %s | %s\n' "$name" "$(tail -1 "$OUT/$name.time")" \
        "$(grep -E '^(verified|falsified) ' "$OUT/$name.log" | awk '{printf "%s %s  ", $1, $2}')" \
        "$(grep -E '^first pass' "$OUT/$name.log" | awk '{print $4}')"
}
POLYCERT_PROFILE=1 run B_cold "$B"
grep -E "^ +(cli\.|attack_after|pgd\.check|refine_all|forward_pass)[a-z_.]*: .*calls" "$OUT/B_cold.log"
for r in $(seq 1 "${ROUNDS:-2}"); do
    run "A_default_$r" "$A"; run "B_default_$r" "$B"
    run "A_nobab_$r" "$A" --no-bab; run "B_nobab_$r" "$B" --no-bab
done
for v in A B; do
    bin=$A; [ $v = B ] && bin=$B
    POLYCERT_PROFILE=1 run "${v}_nobab_profile" "$bin" --no-bab
    grep -E "^ +(cli\.|attack_after|pgd\.|refine_all|forward_pass)[a-z_.]*: .*calls" "$OUT/${v}_nobab_profile.log"
done
