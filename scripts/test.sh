#!/usr/bin/env bash
# Installs and builds (scripts/setup.sh), then runs every test. What CI runs.
#   ./scripts/test.sh                 everything
#   ./scripts/test.sh -R storage      extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cd build
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
