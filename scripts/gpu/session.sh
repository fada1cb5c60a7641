#!/usr/bin/env bash
# What a session with the lent GPU machine does for the executor's CUDA path, as steps that fit
# the device tool's 10-minute call. Run from the repository root there, steps in order; a fresh
# machine needs `build` first. The issue's two runs (the machine stays warm between them, and with
# it build-gpu/):
#   run 1: PIPETWIN_GPU_DEADLINE=$(($(date +%s) + 540)) scripts/gpu/session.sh build check peer grid:vit:b16
#   run 2: PIPETWIN_GPU_DEADLINE=$(($(date +%s) + 540)) scripts/gpu/session.sh grid:bert:base grid:gpt2:124m profile
# (carry .gpu-debs; scripts/gpu/fetch_debs.sh fills it here). Other steps for other sessions:
#   scripts/gpu/session.sh build check validate profile handoff runs trace binary
# build     unpacks .gpu-debs (scripts/gpu/fetch_debs.sh, run here first; carry .gpu-debs) and
#           builds pipetwin and exec_tests into build-gpu/ against the wheel's LibTorch (build.sh);
#           where the fused optimizers (models/torch_compat.hpp, LibTorch 2.4+) do not compile it
#           builds again without them (-DPIPETWIN_NO_FUSED_OPTIMIZERS) and says so; on another
#           compile error it stops there and prints the first error with its line
# check     the executor's device and CUDA tests (CudaEqualsCpu: every schedule on the GPU equals
#           single-process CPU training, with no host wait per action since the stream sets hand
#           over by events; CudaDropout: the GPU's Philox masks keyed per micro-batch and site;
#           CudaMixedPrecision: bfloat16 and float16 against float32; CudaProfile), and the CPU
#           suites of dropout and host waits, with a backtrace (cuda-gdb) of a test that crashes
# peer      experiments/peer_pytorch.py on the GPU: vit:b16, bert:base and gpt2:124m in bfloat16,
#           B = 32, micro-batch 8, SGD with momentum: the image's PyTorch eager loop against
#           `pipetwin run` K=1, with K = 2 and 4 stream-set pipelines and the MFU of each; the rows
#           in peer.csv (model, dtype, batch, micro_batch, pipetwin_ms, peer_ms, ratio, mfu)
# grid:M    experiments/validate_gpu.py for model M at B = 32 in bfloat16: gpipe, 1f1b, pipedream,
#           zb-h1 and interleaved-1f1b, K = 2 and 4, M = 4 and 8 (20 points), its rows appended to
#           validation.csv and its table to validation.md, its points in validation-data.tgz
# runs      `run --device cuda` of every schedule on vit:tiny, K = 2 and 4 stream sets of the one
#           GPU, in bfloat16 and float16, two processes sharing the GPU (Gloo), a bad --device and
#           --dtype
# profile   profiles of the test models and of vit:b16, bert:base and gpt2:124m on the GPU, in
#           bfloat16 and float32 (PIPETWIN_GPU_DTYPES), packed into profiles.tgz (copy them into
#           traces/<device>/ here; the device and dtype are in them)
# validate  experiments/validate_gpu.py on <gpu>-1gpu (K stages as stream sets of the one GPU):
#           vit:b16, bert:base and gpt2:124m in bfloat16, gpipe/1f1b/pipedream, K = 2 and 4, M = 4
#           and 8; the table for docs/validation.md, and every point's plan, timelines and metrics in
#           validation-data.tgz (experiments/validate_gpu.py --replay re-predicts them here)
# handoff   experiments/handoff_latency.py: the same-gpu link's latency for the cluster file
# trace     docs/import-trace.md's walk-through on the GPU (experiments/import_walkthrough.sh with
#           DEVICE=cuda): the image's PyTorch records the demo MLP (width 2048, micro-batches 64,
#           128, 256) on the GPU, import-trace reads the kernels' device time, and the imported
#           profile's 1F1B K=2 M=4 plan on <gpu>-1gpu is predicted and run three times with
#           --device cuda, next to `pipetwin profile --device cuda`'s; everything in trace-data.tgz
# binary    the stripped pipetwin built here, xz-compressed (pipetwin.xz), for a later call that
#           carries it instead of building
# PIPETWIN_VALIDATE_ARGS adds options to validate_gpu.py (a smaller grid, say).
# PIPETWIN_GPU_STEP_S bounds each step's long commands (default 150 s), and PIPETWIN_GPU_DEADLINE
# (seconds since the epoch) stops starting long commands after it, so one call returns what it
# has. Everything printed goes to $OUT/session.log too; the files a step keeps go to $OUT (the
# device tool brings back at most 8: session.log, check.log, peer.csv, profiles.tgz,
# validation.md, validation.csv, validation-data.tgz, and one of trace-data.tgz or pipetwin.xz),
# or to results/gpu where OUT is unset. A step's files of the other run stay on the machine too
# (/tmp/pipetwin-session): run 2's validation.csv holds run 1's rows as well.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/gpu}
mkdir -p "$out"
exec > >(tee -a "$out/session.log") 2>&1
tmp=/tmp/pipetwin-session  # kept while the machine stays warm: run 2 adds to run 1's files
mkdir -p "$tmp"
deps=/tmp/pipetwin-deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1
bin=build-gpu/pipetwin
limit=${PIPETWIN_GPU_STEP_S:-150}
deadline=${PIPETWIN_GPU_DEADLINE:-0}
dtypes=(${PIPETWIN_GPU_DTYPES:-bfloat16 float32})
test_models=(mlp vit:tiny bert:tiny gpt2:tiny resnet20)
paper_models=(vit:b16 bert:base gpt2:124m)
# The one-GPU cluster of the GPU at hand (hardware/clusters/<gpu>-1gpu.json).
cluster=h100-1gpu
if nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H200; then
  cluster=h200-1gpu
fi
# Seconds left before the deadline (a large number without one).
left() { if ((deadline > 0)); then echo $((deadline - $(date +%s))); else echo 99999; fi; }
schedules=(naive gpipe 1f1b pipedream ddg feature-replay ftpipe-async)

step() { printf '\n== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

build_step() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  if ! scripts/gpu/build.sh build-gpu pipetwin exec_tests >"$tmp/build.log" 2>&1; then
    if grep -qE "_fused_(sgd|adam)_" "$tmp/build.log"; then
      echo "build: the fused optimizers do not compile here; again without them:"
      grep -m1 -B2 -A6 -E "error:" "$tmp/build.log" || true
      PIPETWIN_EXTRA_CXXFLAGS=-DPIPETWIN_NO_FUSED_OPTIMIZERS \
        scripts/gpu/build.sh build-gpu pipetwin exec_tests >"$tmp/build.log" 2>&1 || true
    fi
  fi
  if [[ ! -x $bin ]] || grep -qE "error:|FAILED:" "$tmp/build.log"; then
    echo "build: failed; the first error:"
    grep -m1 -B2 -A6 -E "error:|Error " "$tmp/build.log" || tail -60 "$tmp/build.log"
    exit 1
  fi
  grep -E "LibTorch|pipetwin:|Gloo|GLOO|warning:" "$tmp/build.log" | head -20 || true
}

# Runs the CUDA tests; where the binary dies (a signal), the first unfinished test again under
# cuda-gdb for its backtrace.
check_tests() {
  local filter='*Cuda*:CpuDevice.*:MakeDevice.*:DeviceCli.*:DtypeCli.*:CatalogNameForGpu.*:Host.*:BatchSource.*:*ExecDropout*:*HostWaits*'
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
      "$bin" plan --model vit:tiny --cluster "$cluster" -K "$K" --schedule "$sched" -B 32 -M 4 \
        --iterations 4 -q -o "$tmp/p.json" 2>&1 || { echo "plan $sched K=$K failed"; continue; }
      if timeout 30 "$bin" run --plan "$tmp/p.json" --device cuda --metrics "$tmp/m.json" -q \
        >"$tmp/run.log" 2>&1; then
        echo "run cuda $sched K=$K: ok $(python3 -c "import json;m=json.load(open('$tmp/m.json'));print(m.get('iteration_time_s', m))" 2>/dev/null | head -c 200)"
      else
        echo "run cuda $sched K=$K: FAILED"; tail -5 "$tmp/run.log"
      fi
    done
  done
  "$bin" plan --model vit:tiny --cluster "$cluster" -K 2 --schedule 1f1b -B 32 -M 4 \
    --iterations 6 -q -o "$tmp/vit.plan.json"
  timeout 90 "$bin" run --plan "$tmp/vit.plan.json" --device cuda --nproc 2 \
    --timeline "$out/vit-nproc2.run.trace.json" 2>&1 | tail -12 || echo "run --nproc 2: FAILED"
  local dtype
  for dtype in bfloat16 float16; do
    if timeout 60 "$bin" run --plan "$tmp/vit.plan.json" --device cuda --dtype "$dtype" -q \
      --metrics "$tmp/m.json" >"$tmp/run.log" 2>&1; then
      echo "run cuda 1f1b K=2 $dtype: ok"
    else
      echo "run cuda 1f1b K=2 $dtype: FAILED"; tail -5 "$tmp/run.log"
    fi
  done
  "$bin" run --plan "$tmp/vit.plan.json" --device cuda --dtype int8 2>&1 | head -3 || true
  "$bin" run --plan "$tmp/vit.plan.json" --device cuda:x 2>&1 | head -3 || true
  "$bin" run --plan "$tmp/vit.plan.json" --device cuda:7 2>&1 | head -3 || true
}

profile_step() {
  mkdir -p "$tmp/profiles"
  local m sizes dtype f
  for dtype in "${dtypes[@]}"; do
    for m in "${paper_models[@]}" "${test_models[@]}"; do
      f="$tmp/profiles/${m/:/-}-$dtype.profile.json"
      # validate's profile of a paper model, where it made one, is this profile.
      [[ -e $f ]] && continue
      if (($(left) < 30)); then echo "profile $m $dtype: skipped (deadline)"; continue; fi
      # The paper-size models at the micro-batches their papers train with.
      sizes=()
      [[ " ${paper_models[*]} " == *" $m "* ]] && sizes=(--micro-batch 4,8)
      if timeout "$limit" "$bin" profile --model "$m" --device cuda --dtype "$dtype" -q "${sizes[@]}" \
        -o "$f" 2>"$tmp/profile.err"; then
        echo "profiled $m $dtype"
      else
        echo "profile $m $dtype: FAILED or over ${limit} s"; tail -3 "$tmp/profile.err"
      fi
    done
  done
  tar -C "$tmp/profiles" -czf "$out/profiles.tgz" .
}

peer_step() {
  local m
  for m in "${paper_models[@]}"; do
    if (($(left) < 40)); then echo "peer $m: skipped (deadline)"; continue; fi
    timeout "$limit" python3 experiments/peer_pytorch.py --pipetwin "$bin" --device cuda \
      --model "$m" --dtype bfloat16 -B 32 --micro-batch 8 --optimizer sgd --cluster "$cluster" \
      --csv "$tmp/peer.csv" || echo "peer $m: failed or over ${limit} s (exit $?)"
  done
  cp "$tmp/peer.csv" "$out/" 2>/dev/null || true
}

# One model's validation grid (the issue's five schedules, K = 2 and 4, M = 4 and 8), added to
# the session's validation.csv / .md.
grid_step() {
  local model=$1 v="$tmp/validation"
  local d=$(($(left) - 30))
  ((d > 0)) || d=1
  mkdir -p "$v/$model" "$v/profiles"
  timeout "$((limit * 3))" python3 experiments/validate_gpu.py --pipetwin "$bin" --device cuda \
    --cluster "$cluster" --models "$model@32" --schedules gpipe,1f1b,pipedream,zb-h1,interleaved-1f1b \
    --stages 2,4 --chunks 4,8 --dtype bfloat16 --out "$v/$model" --deadline-s "$d" \
    ${PIPETWIN_VALIDATE_ARGS:-} || echo "grid $model: targets missed or out of time (exit $?)"
  if [[ -f $v/$model/validation.csv ]]; then
    if [[ -f $tmp/validation.csv ]]; then
      tail -n +2 "$v/$model/validation.csv" >>"$tmp/validation.csv"
    else
      cp "$v/$model/validation.csv" "$tmp/validation.csv"
    fi
    cat "$v/$model/validation.md" >>"$tmp/validation.md" 2>/dev/null || true
  fi
  cp "$tmp/validation.csv" "$tmp/validation.md" "$out/" 2>/dev/null || true
  mkdir -p "$tmp/profiles"
  cp "$v/$model"/profiles/*.profile.json "$tmp/profiles/" 2>/dev/null || true
  tar -C "$v" -czf "$out/validation-data.tgz" --exclude='*.err' . || true
}

validate_step() {
  local v="$tmp/validation"
  mkdir -p "$v/profiles"
  local d=$(($(left) - 60))
  ((d > 0)) || d=1
  timeout "$((limit * 3))" python3 experiments/validate_gpu.py --pipetwin "$bin" --device cuda \
    --cluster "$cluster" --out "$v" --deadline-s "$d" ${PIPETWIN_VALIDATE_ARGS:-} ||
    echo "validate: targets missed or out of time (exit $?)"
  cp "$v/validation.md" "$v/validation.csv" "$out/" 2>/dev/null || true
  # The paper models' bfloat16 profiles are profile's too.
  mkdir -p "$tmp/profiles"
  cp "$v"/profiles/*.profile.json "$tmp/profiles/" 2>/dev/null || true
  tar -C "$v" -czf "$out/validation-data.tgz" --exclude='*.err' . || true
}

for what in "$@"; do
  if [[ $what != build && $what != binary ]] && (($(left) < 20)); then
    step "$what: skipped (deadline)"
    continue
  fi
  case "$what" in
    build) step build; build_step ;;
    check) step check; check_tests ;;
    runs) step runs; check_runs ;;
    profile) step profile; profile_step ;;
    peer) step peer; peer_step ;;
    grid:*) step "$what"; grid_step "${what#grid:}" ;;
    validate) step validate; validate_step ;;
    trace)
      step trace
      DEVICE=cuda CLUSTER="$cluster" WIDTH=2048 INPUTS=2048 CLASSES=2048 PYTHON=python3 \
        PIPETWIN_BIN="$bin" timeout "$((limit * 2))" experiments/import_walkthrough.sh \
        "$tmp/trace" 64,128,256 | grep -E "^\$ |error|iteration time|spread" ||
        echo "trace: failed or out of time (exit $?)"
      tar -C "$tmp/trace" -czf "$out/trace-data.tgz" --exclude='*.run*.trace.json' . || true
      ;;
    handoff)
      step handoff
      timeout 60 python3 experiments/handoff_latency.py --pipetwin "$bin" --device cuda \
        --cluster "$cluster" || echo "handoff_latency: failed (exit $?)"
      ;;
    binary)
      step binary
      strip -o "$tmp/pipetwin" "$bin" && xz -T0 -c "$tmp/pipetwin" >"$out/pipetwin.xz" &&
        ls -la "$out/pipetwin.xz"
      ;;
    *)
      echo "session.sh: unknown step \"$what\" (build, check, peer, grid:MODEL, runs, profile, validate, handoff, trace, binary)" >&2
      exit 2
      ;;
  esac
done
step done
