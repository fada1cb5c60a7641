#!/usr/bin/env bash
# The walk-through of docs/import-trace.md, end to end: PyTorch records the demo MLP
# (python/pipetwin_trace.py, micro-batches SIZES, default 16,32,64), `pipetwin import-trace` imports
# it, `plan` makes a 1F1B K=2 M=4 plan of batch 4 x the largest size from it, `simulate` predicts
# it, three `pipetwin run`s measure it and `compare` puts them side by side; then the same with a
# `pipetwin profile` of the zoo's mlp of the same sizes measured in the same run. The skip model
# is imported too (its edges). First, a trace recorded without the helper: the documentation's
# profiler recipe on a 5-child nn.Sequential (tests/data/traces/plain_recipe.py), imported with
# --layers 5 and, annotated with the helper's metadata, without flags, and planned.
#
# Usage: experiments/import_walkthrough.sh [OUT_DIR] [SIZES]
#        (default experiments/results/import-walkthrough, 16,32,64)
# Environment (the defaults are the CPU walk-through's):
#   PIPETWIN_BIN (build/pipetwin, a LibTorch build)   PYTHON (/usr/bin/python3, with torch)
#   DEVICE (cpu; cuda records, profiles and runs on the GPU: kernels' device time)
#   CLUSTER (local-cpu-2; on a GPU its one-GPU cluster, e.g. h100-1gpu)
#   WIDTH, INPUTS, CLASSES (256, 64, 10: the MLP's sizes)
#   PLAIN_ONLY (1: stop after the plain recipe, which needs no LibTorch build)
# A few minutes on the CPU VM.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-experiments/results/import-walkthrough}
sizes=${2:-16,32,64}
largest=${sizes##*,}
device=${DEVICE:-cpu}
cluster=${CLUSTER:-local-cpu-2}
width=${WIDTH:-256} inputs=${INPUTS:-64} classes=${CLASSES:-10}
python=${PYTHON:-/usr/bin/python3}
pt=${PIPETWIN_BIN:-$root/build/pipetwin}
[[ $pt == /* ]] || pt="$root/$pt"
model="mlp:layers=4,width=$width,input=$inputs,classes=$classes"
mkdir -p "$out"
cd "$out"
export OPENBLAS_NUM_THREADS=1
say() { printf '\n$ %s\n' "$*"; "$@"; }
traces() { for b in ${sizes//,/ }; do echo "traces/$1.mb$b.trace.json"; done; }
{
  echo "== $(date -u +%FT%TZ) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
    "device $device"
  recipe="$root/tests/data/traces/plain_recipe.py"
  say "$python" "$recipe" recipe.json
  say "$pt" import-trace recipe.json -o recipe.profile.json || true  # refused: no layers named
  say "$pt" import-trace recipe.json --layers 5 --micro-batch 32 -o recipe.profile.json
  say "$pt" plan --profile recipe.profile.json --cluster local-cpu-2 -K 2 --schedule 1f1b -B 128 \
    -M 4 --partitioner balance-time -o recipe.plan.json
  say "$python" "$recipe" annotated.json --annotate
  say "$pt" import-trace annotated.json -o annotated.profile.json
  say "$pt" plan --profile annotated.profile.json --cluster local-cpu-2 -K 2 --schedule 1f1b \
    -B 128 -M 4 --partitioner balance-time -o annotated.plan.json
  [[ ${PLAIN_ONLY:-0} == 1 ]] && exit 0
  say "$python" "$root/python/pipetwin_trace.py" --model mlp --width "$width" --inputs "$inputs" \
    --classes "$classes" --micro-batches "$sizes" --steps 7 --device "$device" --out-dir traces
  say "$pt" import-trace $(traces mlp) -o mlp.profile.json
  say "$python" "$root/python/pipetwin_trace.py" --model skip --width "$width" --inputs "$inputs" \
    --classes "$classes" --micro-batches "$sizes" --device "$device" --out-dir traces
  say "$pt" import-trace $(traces skip) -o skip.profile.json
  for side in imported native; do
    profile=mlp.profile.json
    if [[ $side == native ]]; then
      say "$pt" profile --model "$model" --micro-batch "$sizes" --device "$device" -q \
        -o native.profile.json
      profile=native.profile.json
    fi
    say "$pt" plan --model "$model" --profile "$profile" --cluster "$cluster" -K 2 \
      --schedule 1f1b -B $((4 * largest)) -M 4 --partitioner balance-time -o "$side.plan.json"
    say "$pt" simulate --plan "$side.plan.json" --timeline "$side.sim.trace.json"
    for k in 1 2 3; do
      say "$pt" run --plan "$side.plan.json" --device "$device" \
        --timeline "$side.run$k.trace.json" --iterations 20 -q
    done
    say "$pt" compare "$side.sim.trace.json" "$side.run1.trace.json" "$side.run2.trace.json" \
      "$side.run3.trace.json" --plan "$side.plan.json"
  done
} 2>&1 | tee walkthrough.log
