#!/usr/bin/env bash
# Rewrites the golden simulator outputs in tests/data/golden/ on purpose, after a change that is
# meant to move the simulator's predictions; review `git diff tests/data/golden` before committing.
#
# For every golden <name>: `pipetwin plan` writes <name>.plan.json (a synthetic model with unequal
# layers, so a partition or cost change shows, on a shipped cluster), `pipetwin simulate` writes
# <name>.metrics.json, and golden_tests in update mode (PIPETWIN_UPDATE_GOLDEN=1) writes the
# timeline digest <name>.digest.txt and checks that the metrics it computes equal the CLI's.
# golden_tests (tests/golden_test.cpp) compares all three with a fresh simulation in CI.
#
# Environment: PIPETWIN_BUILD (default build) is the build folder; PIPETWIN_NO_BUILD=1 uses the
# binaries there as they are instead of building `pipetwin` and `golden_tests` first.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PIPETWIN_BUILD:-build}
out=tests/data/golden
if [[ "${PIPETWIN_NO_BUILD:-0}" != 1 ]]; then
  cmake --build "$build" --target pipetwin golden_tests
fi
cli="$build/pipetwin"
export PIPETWIN_DATA="$PWD"

# Six layers whose forward, backward, optimizer, activation and parameter figures all differ.
model='uniform:fwd_ms=1/1.5/2/0.5/1.25/0.75,bwd_ms=2/3.5/4/1/2.5/1.5,overhead_ms=0.05'
model+=',act_kb=64/128/32/96/64/16,param_kb=1024/2048/512/4096/1024/256'
model+=',opt_ms=0.1/0.2/0.1/0.3/0.1/0.05,opt_new_ms=0.15/0.3/0.15/0.45/0.15/0.075'

# golden NAME CLUSTER PLAN-OPTIONS...
golden() {
  local name=$1 cluster=$2
  shift 2
  "$cli" plan --model "$model" --cluster "$cluster" "$@" -q -o "$out/$name.plan.json"
  "$cli" simulate --plan "$out/$name.plan.json" --metrics "$out/$name.metrics.json" -q
  echo "update-golden: $name"
}

mkdir -p "$out"
rm -f "$out"/*.plan.json "$out"/*.metrics.json "$out"/*.digest.txt
# Synchronous schedules: steady from the second step, so two steps.
golden naive dgx-h100 --schedule naive -K 3 -B 16 -M 4 --iterations 2
golden gpipe dgx-h100 --schedule gpipe -K 4 -B 32 -M 4 --iterations 2
golden gpipe-checkpoint dgx-h100 --schedule gpipe -K 3 -B 16 -M 4 --checkpoint --iterations 2
golden 1f1b dgx-h100 --schedule 1f1b -K 3 -B 16 -M 4 --iterations 2
# Data parallelism: two 2-stage replicas, two all-reduce buckets per stage.
golden 1f1b-dp2 dgx-h100 --schedule 1f1b -K 2 --dp 2 -B 32 -M 4 --iterations 2
# Two stages as stream sets of one GPU (h100-1gpu: shared compute and memory, 165 us hand-off);
# a synthetic model's contention is 1, so overlapping compute is not slowed here.
golden 1f1b-shared-gpu h100-1gpu --schedule 1f1b -K 2 -B 16 -M 4 --iterations 2
# Split backward (I and W) and virtual stages: the six layers as 6 stages, two per device on
# three devices, interleaved (stage s on device s mod 3) or in a V (device d: stages d, 5 - d);
# zbv needs M >= 2D - 1 = 5, dualpipev M >= 2D = 6, interleaved M a multiple of D = 3.
golden interleaved-1f1b dgx-h100 --schedule interleaved-1f1b --virtual-stages 2 -K 3 -B 12 -M 6 \
  --iterations 2
golden zb-h1 dgx-h100 --schedule zb-h1 -K 3 -B 16 -M 4 --iterations 2
golden zb-h2 dgx-h100 --schedule zb-h2 -K 3 -B 16 -M 4 --iterations 2
golden zbv dgx-h100 --schedule zbv -K 3 -B 12 -M 6 --iterations 2
golden dualpipev dgx-h100 --schedule dualpipev -K 3 -B 12 -M 6 --iterations 2
# Asynchronous schedules: K fill and K drain steps around a steady window of two.
for schedule in pipedream ddg feature-replay ftpipe-async; do
  golden "$schedule" dgx-h100 --schedule "$schedule" -K 2 -B 16 -M 4 --iterations 6
done

PIPETWIN_UPDATE_GOLDEN=1 "$build/tests/golden_tests" --gtest_brief=1
if command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1; then
  git status --short -- "$out"
fi
