#!/usr/bin/env bash
# Configures and builds pipetwin in build/ (RelWithDebInfo, Ninja, ccache when present).
# Usage: scripts/build.sh [extra cmake -D options]
# Builds with LibTorch (exec/, models/) when Debian's libtorch-dev is installed, else core/sim only.
set -euo pipefail
cd "$(dirname "$0")/.."
torch=OFF
if [[ -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake || -n "${Torch_DIR:-}" ]]; then torch=ON; fi
jobs=${PIPETWIN_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DPIPETWIN_WITH_TORCH="$torch" "$@"
cmake --build build -j "$jobs"
