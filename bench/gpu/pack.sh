#!/bin/bash
# bench/gpu/pack.sh: run on a Debian 12 host (the CI image). Gathers what bench/gpu/run.sh
# needs on a GPU machine that has CUDA, CMake, ninja and PyTorch 2.x but none of our Debian
# libraries, into .gpu/ (git-ignored, about 25 MiB; copy it beside the checkout there):
#   .gpu/deps.tar.xz         the files of our build dependencies' Debian packages (gRPC,
#                            protobuf, Abseil, spdlog, CLI11, SQLite, GoogleTest, ICU, libcurl
#                            and the libraries it loads, pugixml, ...),
#                            unpacked, without docs and unneeded static libraries
#   .gpu/shared-data.tar.xz  ../shared/data (tokenizers and corpora for the fixtures)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${ANISOSCOPE_SHARED_DATA:-$ROOT/../shared/data}
PACKAGES=(
  libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 protobuf-compiler-grpc
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
  libabsl-dev libabsl20220623 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libcpp-httplib-dev libcpp-httplib0.11 libcli11-dev libeigen3-dev
  libsqlite3-dev libsqlite3-0 libgtest-dev libgmock-dev libre2-dev libre2-9
  libc-ares-dev libc-ares2 libssl-dev libssl3 zlib1g-dev zlib1g libicu-dev libicu72
  libbrotli1 libbrotli-dev pkgconf pkgconf-bin libpkgconf3 libxxhash-dev libxxhash0
  libonig-dev libonig5 libsentencepiece-dev libsentencepiece0
  libcurl4-openssl-dev libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5
  libpugixml-dev libpugixml1v5)

[ -d "$SHARED" ] || { echo "pack.sh: $SHARED is missing (set ANISOSCOPE_SHARED_DATA)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "${PACKAGES[@]}" >/dev/null)
mkdir -p "$tmp/root"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/root"; done
rm -rf "$tmp/root/usr/share/doc" "$tmp/root/usr/share/man" "$tmp/root/usr/share/lintian"
find "$tmp/root" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
mkdir -p "$ROOT/.gpu"
tar -C "$tmp/root" -cf - . | xz -T0 -6 > "$ROOT/.gpu/deps.tar.xz"
tar -C "$(dirname "$SHARED")" -cf - "$(basename "$SHARED")" | xz -T0 -6 > "$ROOT/.gpu/shared-data.tar.xz"
du -sh "$ROOT"/.gpu/*
