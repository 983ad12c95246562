#!/usr/bin/env bash
# The MNIST test set in test-set mode on the GPU machine (issue 44): `polycert verify --images` on the
# 10,000 t10k images at eps 0.03, default budget (twice) and larger budgets, per network. Needs
# carry/bin/polycert, carry/bench/mnist_fc and carry/data/t10k-*. BUDGETS and NETS override; EXTRA
# adds flags to every run (`--no-bab`), TAG names the runs, RUNS counts the default runs (2).
set -uo pipefail
OUT="${OUT:-out}"; mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt"
B="${BIN:-carry/bin/polycert}"; I=carry/data/t10k-images-idx3-ubyte.gz
run() {
    local name=$1 net=$2; shift 2
    /usr/bin/time -f "%e" -o "$OUT/$name.time" timeout 300 "$B" verify --backend cuda \
        --model "carry/bench/mnist_fc/$net.onnx" --images "$I" --eps 0.03 --count 10000 "$@" > "$OUT/$name.log" 2>&1
    echo "## $name ($net $*): $(tail -1 "$OUT/$name.time") s wall"
    grep -E "^(verified|falsified|unknown|timeout) |^first pass|^optimised|^branch|^not refined" "$OUT/$name.log"
}
for net in ${NETS:-mnist-net_256x6}; do
    # shellcheck disable=SC2086
    for k in $(seq 1 "${RUNS:-2}"); do run "${net}_${TAG:-default}_$k" "$net" ${EXTRA:-}; done
    # shellcheck disable=SC2086
    for b in ${BUDGETS:-}; do run "${net}_budget$b" "$net" --budget "$b" ${EXTRA:-}; done
done
