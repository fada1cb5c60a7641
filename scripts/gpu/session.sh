#!/usr/bin/env bash
# What a session with the lent GPU machine does for the executor's CUDA path, as steps that fit
# the device tool's 10-minute calls. Run from the repository root there, steps in order:
#   scripts/gpu/session.sh build check profile   # call 1: build, CUDA tests, GPU profiles
#   scripts/gpu/session.sh build validate         # call 2 (a fresh machine needs build again)
# build     unpacks .gpu-debs (scripts/gpu/fetch_debs.sh, run here first; carry .gpu-debs) and
#           builds pipetwin and exec_tests into build-gpu/ against the wheel's LibTorch (build.sh)
# check     the executor's device and CUDA tests (CudaEqualsCpu: GPipe/1F1B/checkpointing/DP on
#           the GPU equal single-process CPU training; CudaProfile), and one `run --device cuda`
# profile   profiles of the test models on the GPU (traces/cpu-core has their CPU ones), named
#           <model>.profile.json: copy them into traces/<device>/ here (the device is in them)
# validate  experiments/validate_executor.py and experiments/handoff_latency.py on h100-1gpu
#           (K stages as stream sets of the one GPU): the compare table for the README and the
#           same-gpu link's latency for hardware/clusters/h100-1gpu.json
# Everything printed goes to $OUT/session.log too; the files a step keeps go to $OUT (the device
# tool brings back at most 8 files: call 1 keeps 7, call 2 keeps 3), or to results/gpu where OUT
# is unset.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/gpu}
mkdir -p "$out"
exec > >(tee -a "$out/session.log") 2>&1
tmp=$(mktemp -d)
deps=/tmp/pipetwin-deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1
bin=build-gpu/pipetwin
models=(mlp vit:tiny bert:tiny gpt2:tiny resnet20)

step() { printf '\n== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

for what in "$@"; do
  case "$what" in
    build)
      step build
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
      scripts/gpu/build.sh build-gpu pipetwin exec_tests >"$tmp/build.log" 2>&1 ||
        { tail -60 "$tmp/build.log"; exit 1; }
      grep -E "LibTorch|pipetwin:|Gloo|GLOO" "$tmp/build.log" || true
      ;;
    check)
      step check
      # tests/exec_device_test.cpp's suites
      build-gpu/tests/exec_tests --gtest_filter='*CudaEqualsCpu*:CudaProfile.*:CpuDevice.*:MakeDevice.*:DeviceCli.*:CatalogNameForGpu.*' \
        >"$tmp/check.log" 2>&1 || echo "check: exec_tests failed"
      grep -E -A8 "^\[  (FAILED|PASSED|SKIPPED) |Failure$" "$tmp/check.log" | head -60 || true
      "$bin" plan --model vit:tiny --cluster h100-1gpu -K 2 --schedule 1f1b -B 8 -M 4 \
        --iterations 6 -q -o "$tmp/vit.plan.json"
      "$bin" run --plan "$tmp/vit.plan.json" --device cuda --timeline "$out/vit.run.trace.json"
      ;;
    profile)
      step profile
      for m in "${models[@]}"; do
        "$bin" profile --model "$m" --device cuda -q -o "$out/${m/:/-}.profile.json"
        echo "profiled $m"
      done
      ;;
    validate)
      step validate
      python3 experiments/validate_executor.py --pipetwin "$bin" --device cuda \
        --cluster h100-1gpu --out "$tmp/validation" || echo "validate: targets missed (exit $?)"
      cp "$tmp/validation/validation.md" "$tmp/validation/validation.csv" "$out/" || true
      python3 experiments/handoff_latency.py --pipetwin "$bin" --device cuda --cluster h100-1gpu
      ;;
    *)
      echo "session.sh: unknown step \"$what\" (build, check, profile, validate)" >&2
      exit 2
      ;;
  esac
done
step done
