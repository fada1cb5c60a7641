#!/usr/bin/env bash
# The main job on the shipped defaults (no GPU, no download): plan a model on a shipped cluster
# with three schedules, simulate each, and print the summaries. Results land in results/main/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPETWIN_BIN:-build/pipetwin}
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

# With LibTorch: the same loop for real on this machine, ViT-tiny on its two cores, with the
# shipped profile: predict, run, and put the two side by side.
if "$bin" run --help >/dev/null 2>&1; then
  echo
  "$bin" plan --model vit:tiny --cluster local-cpu-2 -K 2 --schedule 1f1b -B 8 -M 4 \
    --partitioner balance-time --iterations 6 -o "$out/vit.plan.json" -q
  "$bin" simulate --plan "$out/vit.plan.json" --timeline "$out/vit.sim.trace.json" -q
  "$bin" run --plan "$out/vit.plan.json" --timeline "$out/vit.run.trace.json" -q
  "$bin" compare "$out/vit.sim.trace.json" "$out/vit.run.trace.json" --plan "$out/vit.plan.json"
fi
echo
echo "timelines (open in https://ui.perfetto.dev or chrome://tracing) and metrics are in $out/"
