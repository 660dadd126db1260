#!/usr/bin/env bash
# Fuzzes the parsers that read outside input (fuzz/, libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, clang 14): builds fuzz/ into build-fuzz/, writes the seed
# corpora (fuzz/make_seeds.py), then runs every target for SECONDS (default 60) on its
# corpus: the seeds plus what earlier runs found (build-fuzz/corpus/TARGET). SECONDS 0
# replays the corpora once. Prints the executions of each target and their total; exits
# non-zero on any crash, leak, timeout or out-of-memory, the input kept as
# build-fuzz/crashes/TARGET-*: add it to the target's regression inputs (fuzz/regressions/).
#   ./scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
BUILD=build-fuzz
TARGETS=(tokenizer_json_fuzzer tokenizer_encode_fuzzer sentencepiece_model_fuzzer
         vocab_files_fuzzer token_probe_fuzzer step_discovery_fuzzer zip_archive_fuzzer
         safetensors_fuzzer
         torch_zip_fuzzer pickle_fuzzer model_config_fuzzer query_params_fuzzer
         complete_work_fuzzer)

cmake -S fuzz -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$BUILD" -- -j "$(nproc)" >"$BUILD/build.log" 2>&1 ||
  { cat "$BUILD/build.log" >&2; exit 1; }
/usr/bin/python3 fuzz/make_seeds.py "$BUILD/seeds"
# model_config_fuzzer's tiny checkpoints (written by make_seeds.py).
export ANISOSCOPE_FUZZ_WEIGHTS="$PWD/$BUILD/weights"
mkdir -p "$BUILD/crashes"

total=0
failed=0
for target in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$target"
  mkdir -p "$corpus"
  inputs=("$corpus" "$BUILD/seeds/$target")
  [ -d "fuzz/regressions/$target" ] && inputs+=("fuzz/regressions/$target")
  options=(-timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1
           "-artifact_prefix=$BUILD/crashes/$target-")
  dictionary="fuzz/dictionaries/${target%_fuzzer}.dict"
  [ -f "$dictionary" ] && options+=("-dict=$dictionary")
  if [ "$SECONDS_EACH" -gt 0 ]; then
    options+=("-max_total_time=$SECONDS_EACH")
  else
    options+=(-runs=0)
  fi
  log="$BUILD/$target.log"
  if "$BUILD/bin/$target" "${options[@]}" "${inputs[@]}" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
  fi
  runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  runs=${runs:-0}
  total=$((total + runs))
  printf '%-28s %12s executions  %s\n' "$target" "$runs" "$status"
  [ "$status" = ok ] || tail -40 "$log"
done
printf '%-28s %12s executions\n' total "$total"
exit "$failed"
