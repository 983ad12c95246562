#!/usr/bin/env bash
# Scale runs on the GPU machine: generates the CIFAR-shaped ResNets of
# ../shared/tools/gen_resnets.py there (numpy + onnx are installed on it) and
# verifies each at eps 1e-4, recording time and peak GPU memory.
# Also times the shared benchmarks with the PGD attack off (pure analysis).
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT" /tmp/scale
C=carry
nets="${NETS:-resnet10_w16 resnet18_w16 resnet34_w16 resnet34_w32 resnet18_w64 resnet34_w64}"
python3 "$C/tools/gen_resnets.py" --out /tmp/scale --only "$(echo $nets | tr ' ' ',')" > "$OUT/gen.log" 2>&1 || { tail "$OUT/gen.log"; exit 1; }
echo "net,eps,result,seconds,peak_gpu_mib" > "$OUT/scale.csv"
for n in $nets; do
    for eps in 1e-4; do
        ( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.2; done ) > /tmp/mem.txt 2>/dev/null &
        mon=$!
        "$C/bin/polycert" verify --backend cuda --precision f64 --attack-steps 0 --timeout "${TIMEOUT:-120}" --json \
            --model /tmp/scale/$n.onnx --vnnlib /tmp/scale/${n}_eps$eps.vnnlib > /tmp/r.json 2>> "$OUT/scale.log"
        kill $mon 2>/dev/null
        peak=$(sort -n /tmp/mem.txt | tail -1)
        res=$(python3 -c "import json;d=json.loads(open('/tmp/r.json').readline());print(d['result'],d['seconds'],sep=',')" 2>/dev/null || echo "error,0")
        echo "$n,$eps,$res,$peak" | tee -a "$OUT/scale.csv"
    done
done
if [ -z "${SKIP_SHARED:-}" ]; then
    for b in mnist_fc cifar10_resnet; do
        "$C/bin/polycert" vnncomp --overwrite --backend cuda --precision f64 --attack-steps 0 --instances "$C/bench/$b/instances.csv" \
            --results "$OUT/${b}_cuda_f64_noattack.csv" > /dev/null 2>&1
        echo "$b no-attack: $(tail -n +2 "$OUT/${b}_cuda_f64_noattack.csv" | cut -d, -f3 | sort | uniq -c | tr '\n' ' ')"
    done
fi
