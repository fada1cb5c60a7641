#!/usr/bin/env bash
# Rewrites this folder (the notebooks' test results, tests/notebooks_test.sh) with the pipetwin
# CLI. Usage: tests/data/notebook_results/regenerate.sh [PIPETWIN] (default build/pipetwin).
# vit.run.trace.json is a measurement: it is re-recorded only by a build with LibTorch, whose
# `pipetwin run` times the plan on this machine; otherwise the recorded one is kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../../../build/pipetwin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prediction next to measurement: ViT-tiny, 1F1B, K=2 on two CPU cores (scripts/main-job.sh).
if [[ ! -f $here/vit.plan.json ]]; then
  "$bin" plan --model vit:tiny --cluster local-cpu-2 -K 2 --schedule 1f1b -B 8 -M 4 \
    --partitioner balance-time --iterations 6 -o "$here/vit.plan.json" -q
fi
"$bin" simulate --plan "$here/vit.plan.json" -q \
  --timeline "$here/vit.sim.trace.json" --metrics "$here/vit.sim.metrics.json"
if ! "$bin" --help | grep -q "needs a build with LibTorch"; then
  "$bin" run --plan "$here/vit.plan.json" -q \
    --timeline "$here/vit.run.trace.json" --metrics "$here/vit.run.metrics.json"
fi

# Chunk count M per pipeline length K, two schedules.
rm -f "$here/chunks.sweep.csv" "$here/chunks.sweep.best.csv"
"$bin" sweep --model 'uniform:layers=8,fwd_ms=1,bwd_ms=2,act_kb=64' \
  --cluster pipetransformer-2x8-rtx5000 -B 32 \
  --grid 'stages=1,2,4,8;chunks=1,2,4,8,16,32;schedule=gpipe,1f1b' -o "$here/chunks.sweep.csv" -q
rm -f "$here/chunks.sweep.best.csv"

# Freeze rate alpha: every point a whole elastic run (5 epochs).
rm -f "$here/alpha.sweep.csv"
"$bin" sweep --model 'uniform:layers=12,fwd_ms=1,bwd_ms=2,act_kb=64,param_kb=4096' \
  --cluster pipetransformer-2x8-rtx5000 -B 32 -K 8 --samples 3200 --epochs 5 \
  --grid 'alpha=0.1:0.5:0.1;schedule=gpipe,1f1b' -o "$here/alpha.sweep.csv" -q
rm -f "$here/alpha.sweep.best.csv"

# Capacity plan: a model of 16 x 1.5 GiB layers (with gradients and Adam, 96 GiB) on the
# shipped priced catalog; one GPU cannot hold it.
"$bin" capacity \
  --model 'uniform:layers=16,fwd_ms=0.5,bwd_ms=1,act_kb=768,param_kb=1572864,optimizer_kb=3145728' \
  -B 64 --samples 100000 -o "$tmp/capacity" -q
mkdir -p "$here/capacity"
cp "$tmp/capacity/capacity.csv" "$here/capacity/capacity.csv"
echo "regenerated $here"
