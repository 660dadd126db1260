#!/usr/bin/env bash
# Installs and builds (scripts/setup.sh), then runs every test and a short run of every
# fuzz target (scripts/fuzz.sh: the corpora replayed, then a few seconds each). What CI runs.
#   ./scripts/test.sh                 everything
#   ./scripts/test.sh -R storage      extra arguments go to ctest (and skip the fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
(cd build && ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@")
if (($# == 0)); then
  ./scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
fi
