#!/usr/bin/env bash
# Does `pipetwin import-trace` give the times `pipetwin profile` measures? Debian's python3-torch
# records the MLP and the skip model of python/pipetwin_trace.py (width 256, micro-batches 128 and
# 512), `import-trace` imports them, and `pipetwin profile` measures the same architectures built
# in models/ (the zoo's mlp and mlp:skip=1), three to twelve rounds interleaved, each side's least
# per layer (tests/trace_import_agreement_test.cpp; it asserts each layer within 20% and the sum
# over the layers within 10%). The same ctest suite scripts/test.sh runs; this keeps the logs of
# both passes. It runs twice: as the CPU dispatches, and with LibTorch's, oneDNN's and
# OpenBLAS's dispatch capped at AVX2 (what an AVX2-only machine runs; OpenBLAS's Haswell kernels
# are twice as fast here, so what is not a matmul weighs more).
#
# Usage: experiments/import_agreement.sh [OUT_DIR]   (default experiments/results/import-agreement)
# Needs the LibTorch build (build/pipetwin, build/tests/trace_import_agreement_tests) and
# /usr/bin/python3 with torch. Exit status: 0 when both runs hold the bounds.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-experiments/results/import-agreement}
bin=build/tests/trace_import_agreement_tests
mkdir -p "$out"
[[ -x "$bin" ]] || { echo "import_agreement: $bin is not built" >&2; exit 2; }
status=0
echo "== as dispatched ($(date -u +%FT%TZ))"
"$bin" 2>&1 | tee "$out/native.log" | grep -E "^(fc|head|total|after)|OK|FAILED" || true
[[ ${PIPESTATUS[0]} == 0 ]] || status=1
echo "== dispatch capped at AVX2"
ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell \
  "$bin" 2>&1 | tee "$out/avx2.log" | grep -E "^(fc|head|total|after)|OK|FAILED" || true
[[ ${PIPESTATUS[0]} == 0 ]] || status=1
exit $status
