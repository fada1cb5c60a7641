#!/usr/bin/env bash
# Installs every Debian 12 package pipetwin needs to build, test and run.
# Idempotent: packages already present are skipped; `apt-get update` runs once.
# Usage (as root): scripts/bootstrap.sh [--minimal]
#   --minimal  only what the build without LibTorch needs (no LibTorch, no notebooks, no Python
#              module (pybind11-dev, python3-dev) or its tests (python3-pytest), no browser)
set -euo pipefail

CORE_PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libmetis-dev zlib1g-dev python3
)
FULL_PKGS=(
  libtorch-dev libgloo-dev libopenblas0-pthread
  python3-sklearn python3-torch
  jupyter-nbconvert python3-ipykernel python3-matplotlib python3-pandas
  pybind11-dev python3-dev python3-pytest
  chromium
  clang libclang-rt-14-dev
)

pkgs=("${CORE_PKGS[@]}")
if [[ "${1:-}" != "--minimal" ]]; then pkgs+=("${FULL_PKGS[@]}"); fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "bootstrap: installing ${#missing[@]} package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "bootstrap: all ${#pkgs[@]} packages present"
fi
