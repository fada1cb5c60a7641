#!/usr/bin/env bash
# Sanitizer runs, each in its own build folder:
#   asan  build-fuzz/ (clang; build-asan/ with gcc where clang is missing): every suite without
#         LibTorch (core, sim, CLI) under AddressSanitizer + UndefinedBehaviorSanitizer; any
#         report fails the run.
#   tsan  build-tsan/: the executor's threaded suites (stage threads, copy streams, in-process
#         transport) under ThreadSanitizer. LibTorch itself is not instrumented;
#         scripts/tsan.supp silences reports whose every frame is inside it.
# Usage: scripts/sanitize.sh asan|tsan|all
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${PIPETWIN_JOBS:-$(nproc)}
what=${1:-all}

# With clang, the ASan + UBSan suites run from build-fuzz/, the build scripts/fuzz.sh fuzzes
# from (same flags: ASan + UBSan + coverage everywhere), so CI compiles that tree once.
run_asan() {
  local dir=build-asan
  local flags=(-DPIPETWIN_SANITIZE=address,undefined)
  if command -v clang++ >/dev/null; then
    dir=build-fuzz
    flags=(-DCMAKE_CXX_COMPILER=clang++ -DPIPETWIN_FUZZ=ON)
  fi
  cmake -S . -B "$dir" -G Ninja -DPIPETWIN_WITH_TORCH=OFF -DPIPETWIN_BUILD_BENCH=OFF \
    -DPIPETWIN_BUILD_TESTS=ON "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600 \
    -E '^Reproduce|^PartitionVsSim[.]'
  # The paper reproductions are left out here: each of their 18 tests re-runs a whole entry, ~23
  # minutes together under ASan + coverage on 2 cores, in code the other suites and the plain
  # build (scripts/test.sh step 1) already run. So are the two PartitionVsSim statistics (every
  # partitioner over 200-600 random chains x 3 clusters, each plan simulated): 277 s and 88 s
  # under ASan + coverage, 22 s and 7 s in the plain build, which runs them, over partitioners and
  # a simulator the other suites run under ASan.
}

run_tsan() {
  if [[ ! -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake && -z "${Torch_DIR:-}" ]]; then
    echo "sanitize: tsan skipped: LibTorch is not installed"
    return 0
  fi
  cmake -S . -B build-tsan -G Ninja -DPIPETWIN_WITH_TORCH=ON -DPIPETWIN_BUILD_BENCH=OFF \
    -DPIPETWIN_SANITIZE=thread >/dev/null
  cmake --build build-tsan -j "$jobs" --target exec_tsan_tests
  # Threads within one process: the in-process executor suites (multi-process runs are
  # covered by the plain and ASan builds).
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" \
    build-tsan/tests/exec_tsan_tests --gtest_filter="${PIPETWIN_TSAN_FILTER:-*SyncEqualsSingleProcess*:*AsyncUsesDeclaredVersions*:ExecDataParallel.*:ExecDropout.*:ExecErrors.*:*ExecSplitBackward.*}"
}

case "$what" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan && run_tsan ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan|all" >&2; exit 2 ;;
esac
