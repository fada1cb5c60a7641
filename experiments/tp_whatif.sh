#!/usr/bin/env bash
# Which layout trains a GPT model fastest on the GPUs I could buy: how much tensor parallelism
# (t), how long a pipeline (K), how many data-parallel replicas (dp)? For GPT-2 1.5B (with 32
# heads, so that t = 2, 4, 8 divide them: the published 25 do not) and Megatron-LM's 8.3B, on
# one DGX H100 (8 GPUs, NVLink) and two HGX H200 nodes (16 GPUs, InfiniBand between them):
# every t x K x dp that uses at most the cluster's GPUs, 1F1B, a global batch of 512 sequences
# of 1024 tokens in micro-batches of 2 (M = 256 / dp, as Megatron-LM runs such models), bfloat16
# with Adam, with and without sequence parallelism and the distributed optimizer (one sweep per
# dp, since M follows from it). `pipetwin sweep` plans and
# simulates each point from the zoo's analytic profile sharded per t
# (profiles/zoo/tensor_parallel.hpp); the summary lists the fastest layout that fits per
# (t, K, dp) and the fastest overall (experiments/tp_whatif_summary.py).
#
# Usage: experiments/tp_whatif.sh [OUT_DIR]   (default experiments/results/tp-whatif)
# Environment: PIPETWIN_BIN (default build/pipetwin), MODELS, CLUSTERS (space-separated), BATCH,
# MICRO_BATCH, JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPETWIN_BIN:-build/pipetwin}
out=${1:-experiments/results/tp-whatif}
models=${MODELS:-"gpt2:1.5b,heads=32 gpt2:8.3b"}
clusters=${CLUSTERS:-"dgx-h100 hgx-h200-2node"}
batch=${BATCH:-512}
micro=${MICRO_BATCH:-2}
jobs=${JOBS:-2}
mkdir -p "$out"
for model in $models; do
  for cluster in $clusters; do
    name="$(echo "$model" | tr ':,=' '---')-$cluster"
    for dp in 1 2 4 8 16; do
      chunks=$((batch / (dp * micro)))
      "$bin" sweep --model "$model" --cluster "$cluster" -B "$batch" --dp "$dp" -M "$chunks" \
        --schedule 1f1b --dtype bfloat16 --optimizer adam --jobs "$jobs" \
        --grid "tp=1,2,4,8;stages=1,2,4,8,16;sequence_parallel=no,yes;distributed_optimizer=no,yes" \
        -o "$out/$name-dp$dp.csv" > /dev/null 2>&1
    done
    /usr/bin/python3 experiments/tp_whatif_summary.py "$out/$name"-dp*.csv
  done
done
