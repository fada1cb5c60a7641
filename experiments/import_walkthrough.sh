#!/usr/bin/env bash
# The walk-through of docs/import-trace.md, end to end: Debian's python3-torch records the demo MLP
# (python/pipetwin_trace.py, micro-batches SIZES, default 16,32,64), `pipetwin import-trace` imports
# it, `plan` makes a 1F1B K=2 M=4 plan of batch 4 x the largest size on local-cpu-2 from it, `simulate` predicts it, three `pipetwin run`s
# measure it and `compare` puts them side by side; then the same with a `pipetwin profile` of the
# zoo's mlp measured in the same run. The skip model is imported too (its edges).
#
# Usage: experiments/import_walkthrough.sh [OUT_DIR] [SIZES]
#        (default experiments/results/import-walkthrough, 16,32,64)
# Needs build/pipetwin (the LibTorch build) and /usr/bin/python3 with torch. A few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-experiments/results/import-walkthrough}
sizes=${2:-16,32,64}
largest=${sizes##*,}
mkdir -p "$out"
cd "$out"
pt="$root/build/pipetwin"
export OPENBLAS_NUM_THREADS=1
say() { printf '\n$ %s\n' "$*"; "$@"; }
{
  echo "== $(date -u +%FT%TZ) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  say /usr/bin/python3 "$root/python/pipetwin_trace.py" --model mlp --inputs 64 --classes 10 \
    --micro-batches "$sizes" --steps 7 --out-dir traces
  say "$pt" import-trace $(for b in ${sizes//,/ }; do echo traces/mlp.mb$b.trace.json; done) \
    -o mlp.profile.json
  say /usr/bin/python3 "$root/python/pipetwin_trace.py" --model skip --micro-batches "$sizes" \
    --out-dir traces
  say "$pt" import-trace $(for b in ${sizes//,/ }; do echo traces/skip.mb$b.trace.json; done) \
    -o skip.profile.json
  for side in imported native; do
    profile=mlp.profile.json
    if [[ $side == native ]]; then
      say "$pt" profile --model mlp --micro-batch "$sizes" -q -o native.profile.json
      profile=native.profile.json
    fi
    say "$pt" plan --model mlp --profile "$profile" --cluster local-cpu-2 -K 2 --schedule 1f1b \
      -B $((4 * largest)) -M 4 --partitioner balance-time -o "$side.plan.json"
    say "$pt" simulate --plan "$side.plan.json" --timeline "$side.sim.trace.json"
    for k in 1 2 3; do
      say "$pt" run --plan "$side.plan.json" --timeline "$side.run$k.trace.json" --iterations 20 -q
    done
    say "$pt" compare "$side.sim.trace.json" "$side.run1.trace.json" "$side.run2.trace.json" \
      "$side.run3.trace.json" --plan "$side.plan.json"
  done
} 2>&1 | tee walkthrough.log
