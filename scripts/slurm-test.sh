#!/usr/bin/env bash
# A real Slurm run of deploy/slurm/polycert-array.sbatch (issue 47): installs Debian's Slurm
# and munge (as root, where missing), starts a one-node cluster on this machine (munged,
# slurmctld and slurmd in the foreground of background processes, no systemd, all state
# in a temporary folder), submits the array script for three shards of a vnncomp run on the
# CPU backend and three of a verify --images run, waits, merges, and checks that the merged
# rows give exactly the verdicts of one unsharded run. Not part of .ci/run (it needs root and
# Debian's packages); about a minute once the packages and the release build are there.
#
#   bash scripts/slurm-test.sh            # builds target/release/polycert if it is missing
#   POLYCERT=path/to/polycert bash scripts/slurm-test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "slurm-test: $*"; }
fail() { say "FAILED: $*"; exit 1; }

if ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
    say "installing slurmctld, slurmd, slurm-client and munge"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        slurmctld slurmd slurm-client munge > /dev/null
fi
bin="${POLYCERT:-$root/target/release/polycert}"
if [ ! -x "$bin" ]; then
    say "building $bin"
    (cd "$root" && cargo build --release -q -p polycert-cli)
fi
bin=$(realpath "$bin")

work=$(mktemp -d /tmp/polycert-slurm.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    wait 2> /dev/null || true
}
trap cleanup EXIT
host=$(hostname -s)
mkdir -p "$work"/{state,spool,munge,run,job}
chmod 700 "$work/munge"

# munge: a key of our own, its socket in our folder.
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/socket" \
    --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed"
pids+=("$(cat "$work/munge/munged.pid")")

cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
cat > "$work/slurm.conf" << CONF
ClusterName=polycert-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
slurmctld -D -i > "$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D > "$work/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
    sinfo -h -o %T 2> /dev/null | grep -qE '^idle' && break
    sleep 1
done
sinfo -h -o %T | grep -qE '^idle' || { tail -20 "$work"/slurm*.log "$work"/*.out; fail "the node did not come up"; }
say "one-node cluster up ($host, $cpus CPUs)"

# The inputs: seven properties of the embedded digits MLP on two networks, and its test images.
data="$work/data"
mkdir -p "$data"
cp "$root/crates/cli/assets/digits_mlp.onnx" "$data/a.onnx"
cp "$root/crates/cli/assets/digits_mlp.onnx" "$data/b.onnx"
python3 - "$root/crates/cli/assets/digits_test.csv" "$data" << 'PY'
import sys
rows = [list(map(float, l.split(","))) for l in open(sys.argv[1]).read().split("\n") if l]
lines = []
for k, eps in enumerate([0.001, 0.5, 0.002, 0.3, 0.004, 0.05, 0.01]):
    img = rows[k]; label = int(img[0])
    s = "".join(f"(declare-const X_{i} Real)\n" for i in range(64))
    s += "".join(f"(declare-const Y_{j} Real)\n" for j in range(10))
    for i, v in enumerate(img[1:]):
        x = v / 255.0
        s += f"(assert (<= X_{i} {min(x + eps, 1.0)}))\n(assert (>= X_{i} {max(x - eps, 0.0)}))\n"
    s += "(assert (or\n" + "".join(f"  (and (>= Y_{j} Y_{label}))\n" for j in range(10) if j != label) + "))\n"
    open(f"{sys.argv[2]}/p{k}.vnnlib", "w").write(s)
    lines.append(f"{'ab'[k % 2]}.onnx,p{k}.vnnlib,60")
open(f"{sys.argv[2]}/instances.csv", "w").write("\n".join(lines) + "\n")
PY
images="$root/crates/cli/assets/digits_test.csv"
vnn=(vnncomp --instances "$data/instances.csv" --backend cpu)
ver=(verify "$data/a.onnx" --images "$images" --count 60 --backend cpu --no-bab --no-alpha)

submit() { # name, then the polycert arguments
    local name=$1
    shift
    (cd "$work/job" && POLYCERT="$bin" POLYCERT_OUT="$work/$name" sbatch --parsable --wait --array=1-3 \
        --cpus-per-task=1 --output="$work/job/$name-%a.out" "$root/deploy/slurm/polycert-array.sbatch" "$@")
}
t0=$(date +%s)
submit vnn "${vnn[@]}" > "$work/vnn.job" &
a=$!
submit ver "${ver[@]}" > "$work/ver.job" &
b=$!
wait $a || { cat "$work"/job/vnn-*.out; fail "the vnncomp array failed"; }
wait $b || { cat "$work"/job/ver-*.out; fail "the verify array failed"; }
say "both arrays done in $(($(date +%s) - t0)) s (jobs $(cat "$work/vnn.job") and $(cat "$work/ver.job"))"

# Merge, and compare with one unsharded run of each.
verdicts() { python3 -c 'import csv,sys; [print(*r[:3], sep=",") for r in list(csv.reader(open(sys.argv[1])))[1:]]' "$1"; }
"$bin" merge "$work"/vnn/shard-{1,2,3}.csv --out "$work/vnn-merged.csv"
"$bin" merge "$work"/ver/shard-{1,2,3}.csv --out "$work/ver-merged.csv"
"$bin" "${vnn[@]}" --results "$work/vnn-whole.csv" > /dev/null 2>&1 || [ $? -eq 1 ]
"$bin" "${ver[@]}" --results "$work/ver-whole.csv" > /dev/null 2>&1 || [ $? -eq 1 ]
for r in vnn ver; do
    diff <(verdicts "$work/$r-merged.csv") <(verdicts "$work/$r-whole.csv") > /dev/null \
        || fail "$r: the merged verdicts differ from one run (see $work)"
    say "$r: $(verdicts "$work/$r-merged.csv" | wc -l) merged rows equal one unsharded run's"
done
grep -q "shard 2/3 on" "$work/job/vnn-2.out" || fail "no log line of shard 2/3"
rm -rf "$work"
say "passed"
