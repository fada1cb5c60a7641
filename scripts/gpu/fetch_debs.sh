#!/usr/bin/env bash
# Saves the Debian packages that pipetwin's build needs besides LibTorch into .gpu-debs/ (ignored
# by git), for a machine with no package registry: the lent GPU machine, which has the PyTorch
# wheel's LibTorch (with CUDA), CMake, ninja and nvcc. Carry .gpu-debs there and run
# scripts/gpu/build.sh. About 13 MB. Run here, on Debian 12, from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpu-debs/' "$exclude" 2>/dev/null || echo '/.gpu-debs/' >>"$exclude"
mkdir -p .gpu-debs
cd .gpu-debs
apt-get download \
  libboost1.74-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 \
  libmetis-dev libmetis5 zlib1g-dev libgtest-dev libgmock-dev libgloo-dev
ls -la
