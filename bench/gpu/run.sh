#!/bin/bash
# bench/gpu/run.sh: the GPU path on any CUDA machine with PyTorch 2.x (whose LibTorch we
# build against), CMake and ninja, in one command:
#   bench/gpu/pack.sh                 # once, on a Debian 12 host: fills .gpu/
#   bench/gpu/run.sh [STAGE...]       # on the GPU machine, from the checkout with .gpu/
# Stages (default: all, in this order):
#   build    unpack .gpu/deps.tar.xz, configure against the CUDA LibTorch, build the server,
#            the worker, the CLI, extract_bench and the engine's tests
#   test     make the fixtures (tests/fixtures, with this machine's PyTorch) and run the
#            reference suites on cuda:0 (ANISOSCOPE_TEST_DEVICE=cuda), then the deviation of
#            TF32 and bfloat16 from the float64 references
#   bench    ours (extract_bench) against the Hugging Face way (hf_peer.py) per checkpoint on
#            BERT-base, Pythia-160m, GPT-2 small and Pythia-1b shapes, probes 16 x 128 and
#            128 x 512, their metrics compared; then a 28-step BERT-base series
#   workers  a server and two anisoscope-worker processes sharing cuda:0 on that series
# summary.log and the logs that matter go to $ANISOSCOPE_GPU_OUT (default: $OUT where set,
# else /tmp/anisoscope-gpu/out), each as soon as its stage ends; the rest stay in
# /tmp/anisoscope-gpu/logs.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${ANISOSCOPE_GPU_WORK:-/tmp/anisoscope-gpu}
LOGS=${ANISOSCOPE_GPU_OUT:-${OUT:-$WORK/out}}
PREFIX=$WORK/deps
BUILD=$WORK/build
BIN=$BUILD/bin
PY=${PYTHON:-python3}
STAGES=${*:-build test bench workers}
DETAIL=$WORK/logs
SHAPES="bert gpt_neox gpt2 pythia_1b"
mkdir -p "$WORK" "$LOGS" "$DETAIL"

log() { echo "== $(date +%T) $*" | tee -a "$LOGS/summary.log"; }
keep() { for file in "$@"; do [ -f "$DETAIL/$file" ] && cp "$DETAIL/$file" "$LOGS/"; done; true; }
die() { log "FAILED: $*"; exit 1; }

TORCH_DIR=$($PY -c 'import os, torch; print(os.path.dirname(torch.__file__))') ||
  die "$PY has no PyTorch"
export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu:$TORCH_DIR/lib:${LD_LIBRARY_PATH:-}
export PATH=$PREFIX/usr/bin:$PATH
export ANISOSCOPE_SHARED_DATA=$WORK/shared/data
export ANISOSCOPE_FIXTURES=$WORK/fixtures
export ANISOSCOPE_SOURCE_DIR=$ROOT ANISOSCOPE_BIN=$BIN

unpack_deps() {
  [ -f "$ROOT/.gpu/deps.tar.xz" ] || die ".gpu/deps.tar.xz is missing: run bench/gpu/pack.sh on a Debian 12 host"
  rm -rf "$PREFIX" && mkdir -p "$PREFIX" "$WORK/shared"
  tar -xJf "$ROOT/.gpu/deps.tar.xz" -C "$PREFIX"
  tar -xJf "$ROOT/.gpu/shared-data.tar.xz" -C "$WORK/shared"
  # Debian 12 is merged-/usr: files under /lib belong in /usr/lib.
  if [ -d "$PREFIX/lib" ]; then cp -a "$PREFIX/lib/." "$PREFIX/usr/lib/" && rm -rf "$PREFIX/lib"; fi
  # The packages name /usr and /lib; here they live under $PREFIX/usr.
  find "$PREFIX" -name '*.pc' -exec sed -i -E "s@(=| -L| -I)/usr/@\\1$PREFIX/usr/@g; s@^prefix=/usr\$@prefix=$PREFIX/usr@" {} +
  find "$PREFIX" -type l -lname '/*' | while read -r link; do
    local target
    target=$(readlink "$link")
    for candidate in "$PREFIX$target" "$PREFIX/usr$target"; do
      if [ -e "$candidate" ]; then ln -sf "$candidate" "$link"; break; fi
    done
  done
}

stage_build() {
  log "build: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
  log "build: torch $($PY -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)'), $(cmake --version | head -1), $(c++ --version | head -1)"
  [ "$($PY -c 'import torch; print(torch._C._GLIBCXX_USE_CXX11_ABI)')" = True ] ||
    die "this PyTorch uses the pre-C++11 string ABI; Debian's libraries need the C++11 one"
  unpack_deps
  make_fixtures &
  [ -n "${BUILD_TARGETS:-}" ] || for family in $SHAPES; do make_checkpoint "$WORK/ckpt/$family" "$family" & done
  local standard=17
  grep -q '202002L' "$TORCH_DIR/include/c10/macros/Macros.h" 2>/dev/null && standard=20
  export PKG_CONFIG_PATH=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig
  rm -f "$BUILD/CMakeCache.txt"  # pkg-config results are cached; the prefix may have moved
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_STANDARD=$standard \
    -DCMAKE_PREFIX_PATH="$($PY -c 'import torch.utils; print(torch.utils.cmake_prefix_path)');$PREFIX/usr" \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DPKG_CONFIG_EXECUTABLE="$PREFIX/usr/bin/pkgconf" \
    -DProtobuf_INCLUDE_DIR="$PREFIX/usr/include" \
    -DProtobuf_LIBRARY="$PREFIX/usr/lib/x86_64-linux-gnu/libprotobuf.so" \
    -DProtobuf_PROTOC_EXECUTABLE="$PREFIX/usr/bin/protoc" \
    > "$DETAIL/configure.log" 2>&1 || { tail -40 "$DETAIL/configure.log"; keep configure.log; die "configure"; }
  grep -E '^(Protobuf|protobuf|gRPC)_[A-Z_]*(DIR|LIBRARY|EXECUTABLE|VERSION)' "$BUILD/CMakeCache.txt" |
    tee -a "$LOGS/summary.log"
  ninja -C "$BUILD" -k 0 ${BUILD_TARGETS:-anisoscope-server anisoscope-worker anisoscope \
    extract_bench extractor_test models_test} > "$DETAIL/build.log" 2>&1 ||
    { grep -E -A5 'error|FAILED' "$DETAIL/build.log" | head -80; keep build.log; die "build"; }
  log "build: done"
}

# The fixtures (tests/fixtures) made with this machine's PyTorch, both at once; a marker
# file says each generator finished (a killed run leaves none, and is redone).
make_fixtures() {
  mkdir -p "$ANISOSCOPE_FIXTURES"
  [ -f "$ANISOSCOPE_FIXTURES/bert_run.done" ] ||
    { rm -rf "$ANISOSCOPE_FIXTURES/bert_run" &&
      $PY "$ROOT/tests/fixtures/make_bert_run.py" "$ANISOSCOPE_FIXTURES/bert_run" \
        > "$DETAIL/fixtures_bert.log" 2>&1 && touch "$ANISOSCOPE_FIXTURES/bert_run.done"; } &
  [ -f "$ANISOSCOPE_FIXTURES/causal_runs.done" ] ||
    { rm -rf "$ANISOSCOPE_FIXTURES/causal_runs" &&
      $PY "$ROOT/tests/fixtures/make_causal_runs.py" "$ANISOSCOPE_FIXTURES/causal_runs" \
        --shared-data "$ANISOSCOPE_SHARED_DATA" > "$DETAIL/fixtures_causal.log" 2>&1 &&
      touch "$ANISOSCOPE_FIXTURES/causal_runs.done"; } &
  wait
}

stage_test() {
  wait  # the fixtures and checkpoints the build stage started
  [ -f "$ANISOSCOPE_FIXTURES/bert_run.done" ] && [ -f "$ANISOSCOPE_FIXTURES/causal_runs.done" ] ||
    make_fixtures
  cat "$DETAIL"/fixtures_*.log > "$DETAIL/fixtures.log" 2>/dev/null; keep fixtures.log
  log "test: reference suites on cuda"
  ANISOSCOPE_TEST_DEVICE=cuda "$BIN/extractor_test" \
    --gtest_filter='*Reference*:*Variants*:*Batching*:*Progress*' > "$DETAIL/cuda_tests.log" 2>&1
  log "test: extractor_test on cuda exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$DETAIL/cuda_tests.log" | tr '\n' ' '))"
  grep -E 'largest deviation' "$DETAIL/cuda_tests.log" | tee -a "$LOGS/summary.log"
  # The suites that do not take ANISOSCOPE_TEST_DEVICE (bad input, text probes) on the CPU of
  # this LibTorch, in a process of their own.
  "$BIN/extractor_test" --gtest_filter='-*Reference*:*Variants*:*Batching*:*Progress*' \
    >> "$DETAIL/cuda_tests.log" 2>&1
  log "test: extractor_test's other suites on this LibTorch's CPU exit $?"
  keep cuda_tests.log
  local bert=$ANISOSCOPE_FIXTURES/bert_run causal=$ANISOSCOPE_FIXTURES/causal_runs
  for variant in "float32:" "float32:--allow-tf32" "bfloat16:" "float16:"; do
    local dtype=${variant%%:*} flag=${variant#*:}
    for run in "bert:$bert/bin/step_400:$bert/probe.jsonl:$bert/reference/step_400.json" \
               "pythia:$causal/pythia/step300:$causal/probe.jsonl:$causal/reference/pythia/step300.json" \
               "crfm:$causal/crfm/checkpoint-300:$causal/probe.jsonl:$causal/reference/crfm/checkpoint-300.json"; do
      IFS=: read -r name checkpoint probe reference <<< "$run"
      rm -f "$WORK/deviation.json"
      "$BIN/extract_bench" "$checkpoint" "$probe" --device cuda --dtype "$dtype" $flag --repeats 1 \
        --metrics-json "$WORK/deviation.json" > /dev/null 2>> "$DETAIL/deviation.log" &&
        $PY "$ROOT/bench/gpu/compare_metrics.py" "$WORK/deviation.json" "$reference" \
          --label "cuda $dtype ${flag:-exact} $name vs float64 reference" 2>&1 |
        tee -a "$LOGS/summary.log" ||
        log "FAILED: cuda $dtype ${flag:-exact} $name (deviation.log)"
    done
  done
  keep deviation.log
}

make_checkpoint() {  # DIR FAMILY: weights and both probes, once (the 128 x 512 probe is last)
  [ -f "$1/probe_128x512.jsonl" ] && return
  rm -rf "$1"
  $PY "$ROOT/bench/make_bench_checkpoint.py" "$1" --family "$2" > /dev/null
  $PY "$ROOT/bench/make_bench_checkpoint.py" "$1" --family "$2" --probe-only --probe-samples 128 \
    --probe-length 512 > /dev/null
}

stage_bench() {
  wait
  for family in $SHAPES; do make_checkpoint "$WORK/ckpt/$family" "$family"; done
  for family in $SHAPES; do
    local dir=$WORK/ckpt/$family
    for probe in probe.jsonl probe_128x512.jsonl; do
      log "bench: $family $probe"
      rm -f "$WORK/ours.json" "$WORK/peer.json"
      "$BIN/extract_bench" "$dir" "$dir/$probe" --device cuda --repeats 2 \
        --metrics-json "$WORK/ours.json" 2>&1 | tee -a "$DETAIL/bench.log" |
        grep -E 'extract|forward|load|read|peak' | tee -a "$LOGS/summary.log"
      [ "$family" = bert ] && "$BIN/extract_bench" "$dir" "$dir/$probe" --device cuda --repeats 2 --allow-tf32 2>&1 |
        tee -a "$DETAIL/bench.log" | grep -E 'extract \(|forward only' | sed 's/^/TF32 /' | tee -a "$LOGS/summary.log"
      $PY "$ROOT/bench/hf_peer.py" "$dir/$probe" "$dir" "$dir" \
        --metrics-json "$WORK/peer.json" 2>&1 | tee -a "$DETAIL/bench.log" | grep 'hf_peer' | tail -2 | tee -a "$LOGS/summary.log"
      if [ -f "$WORK/ours.json" ] && [ -f "$WORK/peer.json" ]; then
        $PY "$ROOT/bench/gpu/compare_metrics.py" "$WORK/ours.json" "$WORK/peer.json" \
          --label "ours vs peer, $family $probe" 2>&1 | tee -a "$LOGS/summary.log"
      else
        log "FAILED: $family $probe: ours or the peer wrote no metrics (bench.log)"
      fi
      keep bench.log
    done
  done
  log "bench: 28-step BERT-base series, 128 x 512"
  mkdir -p "$WORK/series"
  for step in $(seq 0 27); do
    [ -d "$WORK/series/step_$step" ] || cp -r "$WORK/ckpt/bert" "$WORK/series/step_$step"
  done
  cat "$WORK"/series/*/model.safetensors > /dev/null  # a warm page cache, as the issue states
  "$BIN/extract_bench" "$WORK/series/step_0" "$WORK/ckpt/bert/probe_128x512.jsonl" --device cuda \
    --repeats 1 --series $(ls -d "$WORK"/series/step_* | sort -V) 2>&1 | tee -a "$DETAIL/bench.log" |
    grep -E 'series' | tee -a "$LOGS/summary.log"
  keep bench.log
}

stage_workers() {
  log "workers: server + two anisoscope-worker on cuda:0, 28 steps of 128 x 512"
  local port=50151 db=$WORK/workers.db
  rm -f "$db"*
  "$BIN/anisoscope-server" --db "$db" --allow-root "$WORK" --listen 127.0.0.1:$port --workers 0 \
    > "$DETAIL/server.log" 2>&1 &
  local server=$!
  sleep 2
  for name in gpu0-a gpu0-b; do
    "$BIN/anisoscope-worker" --server 127.0.0.1:$port --device cuda:0 --allow-root "$WORK" \
      --name $name --idle-exit 5 > "$DETAIL/worker-$name.log" 2>&1 &
  done
  local start=$(date +%s%N)
  local job
  job=$(timeout 240 "$BIN/anisoscope" --server 127.0.0.1:$port submit --run bert-series \
    --checkpoints "$WORK/series" --probe-tokens "$WORK/ckpt/bert/probe_128x512.jsonl" \
    --samples 128 --seq-len 512 --wait 2> "$DETAIL/workers-progress.log")
  local millis=$((($(date +%s%N) - start) / 1000000))
  log "workers: $(echo "$job" | tail -1); ${millis} ms wall for the job"
  # submit prints "job N submitted: …" first.
  "$BIN/anisoscope" --server 127.0.0.1:$port status "$(echo "$job" | head -1 | grep -o '[0-9]\+' | head -1)" \
    > "$DETAIL/workers-status.log" 2>&1
  awk '/gpu0-a/ {a++} /gpu0-b/ {b++} END {print "workers: steps by gpu0-a " a+0 ", by gpu0-b " b+0}' \
    "$DETAIL/workers-status.log" | tee -a "$LOGS/summary.log"
  wait $(jobs -p | grep -v "^$server\$") 2>/dev/null
  kill -TERM $server; wait $server
  cat "$DETAIL/workers-status.log" "$DETAIL"/worker-*.log "$DETAIL/server.log" > "$DETAIL/workers.log"
  keep workers.log
}

for stage in $STAGES; do
  case $stage in
    build) stage_build ;;
    test) stage_test ;;
    bench) stage_bench ;;
    workers) stage_workers ;;
    *) die "unknown stage '$stage' (build, test, bench, workers)" ;;
  esac
done
log "done: $STAGES"
