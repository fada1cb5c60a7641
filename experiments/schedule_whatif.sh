#!/usr/bin/env bash
# Which pipeline schedule should I use, and at what micro-batch count? For GPT-2 1.5B on one
# DGX H100 (8 x H100 80 GB, NVLink), K = 8 pipeline stages, a global batch of 192 sequences of
# 1024 tokens, bfloat16 mixed precision with Adam: every schedule pipetwin has
# (1f1b, zb-h1, zb-h2, interleaved-1f1b, zbv, dualpipev) at M = K ... 8K micro-batches, simulated
# (`pipetwin sweep`, the analytic roofline of the zoo model), then the fastest schedule that fits
# in memory at each M and where that choice flips (`pipetwin report`'s "Schedule choice by
# micro-batch count", report/schedule_choice.hpp).
#
# Why these inputs. The model and the machine are the paper-size case people ask about: 1.5 B
# parameters with Adam in mixed precision is ~25 GB of weights, gradients and optimizer state
# over 8 stages, leaving most of the 80 GiB for activations. The global batch is fixed, so a
# larger M means smaller micro-batches: less activation memory per micro-batch in flight, a
# smaller bubble, but less efficient kernels. At B = 192 memory binds across the whole range: at
# M <= 24 (8 or more sequences per micro-batch) no schedule fits; zb-h2, the fastest schedule at
# every M from 16 up, keeps up to 2K - 1 micro-batches' activations (and deferred weight
# gradients) alive and fits only from M = 64; zbv, almost as fast with 1F1B's memory, wins where
# zb-h2 does not fit. So the answer is not "the schedule with the smallest bubble" but depends
# on M, which is what the table shows. bfloat16 + Adam is how such a model is trained (float32
# fits nowhere in this range). M = 40 and 56 do not divide 192: those points cannot run and the
# report lists them as left out; the other rows of the grid show how they are handled. With
# MICRO_BATCH=4 instead, the micro-batch is fixed and the batch grows with M (Megatron's way of
# counting): the choice then flips from zb-h1 (M = 8, where zbv cannot run: it needs M >= 2K - 1)
# to zbv at M = 16, zb-h2 needing 86 GiB from there on.
# interleaved-1f1b runs with v = 1 and v = 2 model chunks per device (the sweep's virtual_stages
# knob, when the binary has it; v = 1 is plain 1f1b); zbv and dualpipev with their V of 2.
#
# Usage: experiments/schedule_whatif.sh [OUT_DIR]   (default experiments/results/schedule-whatif)
# Environment: PIPETWIN_BIN (default build/pipetwin), MODEL, CLUSTER, STAGES, BATCH,
# MICRO_BATCH (instead of BATCH), DTYPE, OPTIMIZER, CHUNKS (a grid value list), JOBS.
# Writes OUT_DIR/sweep.csv (+ sweep.best.csv) and OUT_DIR/report.html, prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPETWIN_BIN:-build/pipetwin}
out=${1:-experiments/results/schedule-whatif}
model=${MODEL:-gpt2:1.5b}
cluster=${CLUSTER:-dgx-h100}
stages=${STAGES:-8}
dtype=${DTYPE:-bfloat16}
optimizer=${OPTIMIZER:-adam}
chunks=${CHUNKS:-$stages:$((8 * stages)):$stages}  # M = K ... 8K
schedules=1f1b,zb-h1,zb-h2,interleaved-1f1b,zbv,dualpipev

if [[ -n ${MICRO_BATCH:-} ]]; then
  size=(--micro-batch "$MICRO_BATCH")
else
  size=(-B "${BATCH:-192}")
fi
grid="schedule=$schedules;chunks=$chunks"
if "$bin" sweep --help | grep -q virtual_stages; then
  grid="schedule=$schedules;virtual_stages=1,2;chunks=$chunks"
else
  echo "note: this pipetwin has no virtual_stages knob: interleaved-1f1b runs with v = 1" >&2
fi

mkdir -p "$out"
rm -f "$out/sweep.csv" "$out/sweep.best.csv"  # a fresh sweep, not a resumed one
jobs=()
[[ -n ${JOBS:-} ]] && jobs=(-j "$JOBS")
"$bin" sweep --model "$model" --cluster "$cluster" -K "$stages" "${size[@]}" --dtype "$dtype" \
  --optimizer "$optimizer" --grid "$grid" "${jobs[@]}" -q -o "$out/sweep.csv"
"$bin" report "$out" -o "$out/report.html" --title "Schedule choice: $model on $cluster, K = $stages"
echo
echo "$model on $cluster, K = $stages, ${size[*]}, $dtype, $optimizer:"
"$bin" report --schedule-choice "$out/sweep.csv"
