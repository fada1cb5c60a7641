#!/usr/bin/env bash
# Runs every test suite of the build in build/ (GoogleTest suites, CLI checks).
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "${PIPETWIN_JOBS:-$(nproc)}" --timeout 600
