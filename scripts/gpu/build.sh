#!/usr/bin/env bash
# Builds pipetwin against the PyTorch wheel's LibTorch on the lent GPU machine (no package
# registry there): unpacks the Debian packages scripts/gpu/fetch_debs.sh saved in .gpu-debs/ into
# a private prefix (never into /), configures with that prefix and the wheel's CMake files, and
# builds the CLI and the executor tests. The build says "pipetwin: LibTorch has CUDA" when the
# CUDA path (exec/platform/cuda_device.cpp) is in. Usage: scripts/gpu/build.sh [BUILD_DIR] [targets...]
# Afterwards: export LD_LIBRARY_PATH=/tmp/pipetwin-deps/usr/lib/x86_64-linux-gnu (fmt, metis).
# PIPETWIN_EXTRA_CXXFLAGS adds compiler flags (session.sh: -DPIPETWIN_NO_FUSED_OPTIMIZERS).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(pipetwin exec_tests)
prefix=/tmp/pipetwin-deps
# gloo's headers go apart: LibTorch's ProcessGroupGloo.hpp must see the wheel's own gloo where the
# wheel bundles one, and Debian's (2022) only where it does not, so they are searched last
# (-idirafter), never through the prefix's include folder that the other packages' CMake files add.
gloo=/tmp/pipetwin-gloo
mkdir -p "$prefix" "$gloo"
for f in .gpu-debs/*.deb; do
  case "$f" in
    */libgloo-dev_*) dpkg -x "$f" "$gloo" ;;
    *) dpkg -x "$f" "$prefix" ;;
  esac
done
torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
echo "LibTorch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"
# fmt header-only: a TU that sees a newer fmt the wheel bundles (LibTorch's headers come first,
# cmake/torch.cmake) needs nothing from Debian's libfmt9 at link time.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$torch_cmake;$prefix/usr" \
  -DCMAKE_CXX_FLAGS="-idirafter $gloo/usr/include -DFMT_HEADER_ONLY=1 ${PIPETWIN_EXTRA_CXXFLAGS:-}" \
  -DPIPETWIN_WITH_TORCH=ON -DPIPETWIN_BUILD_BENCH=OFF
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
