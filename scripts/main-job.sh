#!/usr/bin/env bash
# The main job on the shipped defaults (no GPU, no download): plan a model on a shipped cluster
# with three schedules, simulate each, and print the summaries. Results land in results/main/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/pipetwin
out=results/main
mkdir -p "$out"
model='uniform:layers=16,fwd_ms=0.5,bwd_ms=1,act_kb=768,param_kb=28672,optimizer_kb=57344'
for schedule in gpipe 1f1b pipedream; do
  "$bin" plan --model "$model" --cluster pipetransformer-2x8-rtx5000 -K 8 --dp 2 \
    --schedule "$schedule" -B 128 -M auto -o "$out/$schedule.plan.json" -q
  echo
  "$bin" simulate --plan "$out/$schedule.plan.json" --timeline "$out/$schedule.trace.json" \
    --metrics "$out/$schedule.metrics.json"
done
echo
echo "timelines (open in https://ui.perfetto.dev or chrome://tracing) and metrics are in $out/"
