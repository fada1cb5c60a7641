#!/usr/bin/env bash
# Builds pipetwin against the PyTorch wheel's LibTorch on the lent GPU machine (no package
# registry there): unpacks the Debian packages scripts/gpu/fetch_debs.sh saved in .gpu-debs/ into
# a private prefix (never into /), configures with that prefix and the wheel's CMake files, and
# builds the CLI and the executor tests. The build says "pipetwin: LibTorch has CUDA" when the
# CUDA path (exec/cuda_device.cpp) is in. Usage: scripts/gpu/build.sh [BUILD_DIR] [targets...]
# Afterwards: export LD_LIBRARY_PATH=/tmp/pipetwin-deps/usr/lib/x86_64-linux-gnu (fmt, metis).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(pipetwin exec_tests)
prefix=/tmp/pipetwin-deps
mkdir -p "$prefix"
for f in .gpu-debs/*.deb; do dpkg -x "$f" "$prefix"; done
torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
echo "LibTorch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"
# The prefix's headers come after the wheel's (its c10d headers name their own gloo first).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$torch_cmake;$prefix/usr" \
  -DCMAKE_CXX_FLAGS="-idirafter $prefix/usr/include" \
  -DPIPETWIN_WITH_TORCH=ON -DPIPETWIN_BUILD_BENCH=OFF
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
