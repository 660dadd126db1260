#!/usr/bin/env bash
# Installs the Debian packages anisoscope needs (idempotent: quick when they are there)
# and builds everything into build/ (binaries in build/bin).
#   ./scripts/setup.sh            install + Release build
#   BUILD_TYPE=Debug ./scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-openmp   # LibTorch (CPU); OpenBLAS: without it ~60x slower
  python3-torch                      # /usr/bin/python3 fixtures and the reference
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libsqlite3-dev nlohmann-json3-dev libicu-dev
  libgtest-dev libgmock-dev
)

missing=()
for package in "${PACKAGES[@]}"; do
  [[ "$package" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
# The pthread OpenBLAS variant must not sit beside the OpenMP one.
if dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q "install ok installed"; then
  echo "setup: warning: libopenblas0-pthread is installed beside libopenblas0-openmp" >&2
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build build -j "$(nproc)"
