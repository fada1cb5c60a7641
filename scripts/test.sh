#!/usr/bin/env bash
# Runs every check CI runs (.ci/run calls this after scripts/build.sh):
#   0. the layer order of the includes (scripts/check_layers.py; docs/design.md "Layout");
#   1. every test suite of build/ (GoogleTest suites, CLI checks, report page, notebooks), then
#      the executor's and models' suites again with the CPU dispatch capped at AVX2;
#   2. the suites without LibTorch under AddressSanitizer + UndefinedBehaviorSanitizer
#      (build-fuzz/, shared with step 3), and the executor's threaded suites under
#      ThreadSanitizer (build-tsan/; PIPETWIN_TSAN=0 skips it);
#   3. a short libFuzzer run of every input parser (build-fuzz/, PIPETWIN_FUZZ_SECONDS each,
#      default 10, two at a time; scripts/fuzz.sh 600 is the full 10-minute run).
# PIPETWIN_QUICK=1 runs step 1 only (for a quick local check), the AVX2 pass included.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${PIPETWIN_JOBS:-$(nproc)}
step() { printf '\n== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

step "layer order (scripts/check_layers.py)"
python3 scripts/check_layers.py

step "tests"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600

# The executor's and the models' suites (and import-trace's agreement with `pipetwin profile`) once more with LibTorch's, oneDNN's and OpenBLAS's CPU dispatch capped
# at AVX2, so that a machine with AVX-512 also checks the path an AVX2-only machine takes (oneDNN
# picks other convolution kernels there, with other workspaces: core/memory.hpp). On an
# AVX2-only machine the cap changes nothing.
if ctest --test-dir build -N -L exec_tests | grep -q "Total Tests: [1-9]"; then
  step "executor and models suites, CPU dispatch capped at AVX2"
  ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell \
    ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 -L "exec_tests|models_tests|trace_import_agreement_tests"
fi
if [[ "${PIPETWIN_QUICK:-0}" == 1 ]]; then exit 0; fi

step "AddressSanitizer + UndefinedBehaviorSanitizer"
./scripts/sanitize.sh asan
# ThreadSanitizer: a second LibTorch build of exec/ and the threaded suites (8 min on 2 cores cold;
# PIPETWIN_TSAN=0 skips it).
if [[ "${PIPETWIN_TSAN:-1}" == 1 ]]; then
  step "ThreadSanitizer"
  ./scripts/sanitize.sh tsan
fi
if command -v clang++ >/dev/null; then
  step "fuzz, ${PIPETWIN_FUZZ_SECONDS:-10} s per parser"
  PIPETWIN_FUZZ_LANES=${PIPETWIN_FUZZ_LANES:-2} ./scripts/fuzz.sh "${PIPETWIN_FUZZ_SECONDS:-10}"
else
  echo "test: fuzzing skipped: clang is not installed (scripts/bootstrap.sh installs it)"
fi
step "all checks passed"
