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
  libblas-dev                        # CBLAS: the spectra's Gram matrices by dsyrk (analysis/metrics/gram_update.cc)
  python3-torch python3-scipy        # /usr/bin/python3 fixtures and the reference (scipy.stats)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libsqlite3-dev nlohmann-json3-dev libicu-dev
  libgtest-dev libgmock-dev
  libcpp-httplib-dev                 # the HTTP/JSON API (server/http/http_server.cc)
  libcli11-dev                       # anisoscope-worker's and the server host commands' flags
  libtomlplusplus-dev                # the server's alarm rules (server/alarms/alarm_rules.cc)
  libeigen3-dev                      # the projections' SVD (server/queries/trajectory_projection.cc)
  libboost-dev                       # Boost.Math: the correlation tests' p-values (server/queries/correlation_statistics.cc)
  libxxhash-dev                      # XXH3: the checkpoints' fingerprints, the API answers' ETags
  zlib1g-dev                         # gzip of the API's answers (server/http/encoded_response.cc)
  libcurl4-openssl-dev               # sources/transfer: Hub and S3 downloads; bench/: the load benchmarks' HTTP pollers
  libpugixml-dev                     # sources/listing: S3's ListObjectsV2 XML
  libonig-dev                        # Oniguruma, the tokenizers' Split regexes as Hugging Face runs them
  libsentencepiece-dev               # tests: the reference for the converted SentencePiece tokenizer.model
  libssl-dev openssl                 # token hashes, TLS; the team test's CA and certificates
  slurm-wlm munge                    # the Slurm deployment test (a real single-node Slurm)
  s3cmd                              # tests/sources/servers: puts the S3 fixtures into s3rver
  python3-yaml                       # the Kubernetes manifest test
  prometheus                         # promtool: deploy/prometheus/'s rule checks and unit tests
  python3-grpcio grpc-proto          # the reflection test (a v1alpha client from grpc-proto)
  python3-protobuf python3-pandas python3-numpy      # the Python client (python/) and its test
  python3-setuptools python3-wheel python3-pip       # `pip install ./python` (no build isolation)
  python3-tqdm python3-matplotlib                    # Client.wait's progress bar; examples/
  nodejs chromium                    # dashboard assets (npm) and its browser test
  clang-14 libclang-rt-14-dev        # the fuzz targets (fuzz/, scripts/fuzz.sh): libFuzzer, ASan, UBSan
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

# The dashboard's ECharts (web/), the browser test's playwright-core (tests/web/) and the
# source tests' s3rver and @huggingface/hub (tests/sources/servers/), from the npm registry
# at the versions their package-lock.json pins; reinstalled when node_modules is missing or
# older than the lock file.
if ! command -v npm >/dev/null; then
  echo "setup: installing npm" >&2
  $([[ $(id -u) -ne 0 ]] && echo sudo) env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
for dir in web tests/web tests/sources/servers; do
  if [[ ! -d "$dir/node_modules" || "$dir/package-lock.json" -nt "$dir/node_modules" ]]; then
    echo "setup: npm ci in $dir" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error && touch node_modules)
  fi
done

# In CI (CI=true bash .ci/run) any warning in the project's own code fails the build; elsewhere
# it is printed and the build goes on (a newer compiler may warn about more).
werror=OFF
if [[ -n "${CI:-}" && "${CI}" != false ]]; then
  werror=ON
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DANISOSCOPE_WERROR="$werror" >/dev/null
cmake --build build -j "$(nproc)"
