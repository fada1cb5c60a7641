#!/usr/bin/env bash
# What a session with the lent GPU machine does for the executor's CUDA path, as steps that fit
# the device tool's 10-minute call. Run from the repository root there, steps in order; a fresh
# machine needs `build` first:
#   scripts/gpu/session.sh build check profile validate
# build     unpacks .gpu-debs (scripts/gpu/fetch_debs.sh, run here first; carry .gpu-debs) and
#           builds pipetwin and exec_tests into build-gpu/ against the wheel's LibTorch (build.sh);
#           on a compile error it stops there and prints the first error with its line
# check     the executor's device and CUDA tests (CudaEqualsCpu: every schedule on the GPU equals
#           single-process CPU training; CudaProfile), with a backtrace (cuda-gdb) of a test that
#           crashes; then `run --device cuda` of every schedule on vit:tiny, K = 2 and 4 stream
#           sets of the one GPU, two processes sharing the GPU (Gloo), and a bad --device
# profile   profiles of the test models and of vit:base, bert:base and gpt2:small on the GPU,
#           packed into profiles.tgz (copy them into traces/<device>/ here; the device is in them)
# validate  experiments/validate_executor.py on h100-1gpu (K stages as stream sets of the one
#           GPU): the compare table for the README; experiments/handoff_latency.py: the same-gpu
#           link's latency for hardware/clusters/h100-1gpu.json
# PIPETWIN_VALIDATE_ARGS adds options to validate_executor.py (a smaller grid, say).
# PIPETWIN_GPU_STEP_S bounds each step's long commands (default 150 s), so one call returns what
# it has. Everything printed goes to $OUT/session.log too; the files a step keeps go to $OUT (the
# device tool brings back at most 8: session.log, check.log, profiles.tgz, validation.md,
# validation.csv, *.trace.json are 6), or to results/gpu where OUT is unset.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/gpu}
mkdir -p "$out"
exec > >(tee -a "$out/session.log") 2>&1
tmp=$(mktemp -d)
deps=/tmp/pipetwin-deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1
bin=build-gpu/pipetwin
limit=${PIPETWIN_GPU_STEP_S:-150}
test_models=(mlp vit:tiny bert:tiny gpt2:tiny resnet20)
paper_models=(vit:base bert:base gpt2:small)
schedules=(naive gpipe 1f1b pipedream ddg feature-replay ftpipe-async)

step() { printf '\n== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

build_step() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  if ! scripts/gpu/build.sh build-gpu pipetwin exec_tests >"$tmp/build.log" 2>&1; then
    echo "build: failed; the first error:"
    grep -m1 -B2 -A6 -E "error:|Error " "$tmp/build.log" || tail -60 "$tmp/build.log"
    exit 1
  fi
  grep -E "LibTorch|pipetwin:|Gloo|GLOO|warning:" "$tmp/build.log" | head -20 || true
}

# Runs the CUDA tests; where the binary dies (a signal), the first unfinished test again under
# cuda-gdb for its backtrace.
check_tests() {
  local filter='*Cuda*:CpuDevice.*:MakeDevice.*:DeviceCli.*:CatalogNameForGpu.*'
  local rc=0
  timeout "$limit" build-gpu/tests/exec_tests --gtest_filter="$filter" >"$out/check.log" 2>&1 ||
    rc=$?
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure$" "$out/check.log" | head -40 || true
  echo "exec_tests exit $rc"
  if ((rc > 128)); then
    local last
    last=$(grep -E "^\[ RUN +\]" "$out/check.log" | tail -1 | awk '{print $NF}')
    echo "check: exec_tests died in $last; its backtrace:"
    timeout 120 cuda-gdb -batch -ex run -ex bt -ex "thread apply all bt 8" \
      --args build-gpu/tests/exec_tests --gtest_filter="$last" 2>&1 | tail -80 || true
  fi
}

check_runs() {
  local K sched
  for K in 2 4; do
    for sched in "${schedules[@]}"; do
      "$bin" plan --model vit:tiny --cluster h100-1gpu -K "$K" --schedule "$sched" -B 32 -M 4 \
        --iterations 4 -q -o "$tmp/p.json" 2>&1 || { echo "plan $sched K=$K failed"; continue; }
      if timeout 30 "$bin" run --plan "$tmp/p.json" --device cuda --metrics "$tmp/m.json" -q \
        >"$tmp/run.log" 2>&1; then
        echo "run cuda $sched K=$K: ok $(python3 -c "import json;m=json.load(open('$tmp/m.json'));print(m.get('iteration_time_s', m))" 2>/dev/null | head -c 200)"
      else
        echo "run cuda $sched K=$K: FAILED"; tail -5 "$tmp/run.log"
      fi
    done
  done
  "$bin" plan --model vit:tiny --cluster h100-1gpu -K 2 --schedule 1f1b -B 32 -M 4 \
    --iterations 6 -q -o "$tmp/vit.plan.json"
  timeout 90 "$bin" run --plan "$tmp/vit.plan.json" --device cuda --nproc 2 \
    --timeline "$out/vit-nproc2.run.trace.json" 2>&1 | tail -12 || echo "run --nproc 2: FAILED"
  "$bin" run --plan "$tmp/vit.plan.json" --device cuda:x 2>&1 | head -3 || true
  "$bin" run --plan "$tmp/vit.plan.json" --device cuda:7 2>&1 | head -3 || true
}

profile_step() {
  mkdir -p "$tmp/profiles"
  local m sizes
  for m in "${test_models[@]}" "${paper_models[@]}"; do
    # The paper-size models at the micro-batches their papers train with (the profiler's default
    # sizes run GPT-2's 50257-word logits out of an 80 GB GPU).
    sizes=()
    [[ " ${paper_models[*]} " == *" $m "* ]] && sizes=(--micro-batch 4,8)
    if timeout "$limit" "$bin" profile --model "$m" --device cuda -q "${sizes[@]}" \
      -o "$tmp/profiles/${m/:/-}.profile.json"; then
      echo "profiled $m"
    else
      echo "profile $m: FAILED or over ${limit} s"
    fi
  done
  tar -C "$tmp/profiles" -czf "$out/profiles.tgz" .
}

for what in "$@"; do
  case "$what" in
    build) step build; build_step ;;
    check) step check; check_tests; check_runs ;;
    profile) step profile; profile_step ;;
    validate)
      step validate
      timeout "$((limit * 2))" python3 experiments/validate_executor.py --pipetwin "$bin" \
        --device cuda --cluster h100-1gpu --out "$tmp/validation" ${PIPETWIN_VALIDATE_ARGS:-} ||
        echo "validate: targets missed or out of time (exit $?)"
      cp "$tmp/validation/validation.md" "$tmp/validation/validation.csv" "$out/" 2>/dev/null || true
      timeout "$limit" python3 experiments/handoff_latency.py --pipetwin "$bin" --device cuda \
        --cluster h100-1gpu || echo "handoff_latency: failed (exit $?)"
      ;;
    *)
      echo "session.sh: unknown step \"$what\" (build, check, profile, validate)" >&2
      exit 2
      ;;
  esac
done
step done
