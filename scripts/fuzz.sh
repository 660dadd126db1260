#!/usr/bin/env bash
# Fuzzes the parsers that read outside input (fuzz/, libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, clang 14): builds fuzz/ into build-fuzz/, writes the seed
# corpora (fuzz/make_seeds.py), then runs every target for SECONDS (default 60) on its
# corpus: the seeds, the regression inputs (fuzz/regressions/TARGET) and what earlier runs
# found (build-fuzz/corpus/TARGET). SECONDS 0 replays the corpora once. Prints the executions
# of each target and their total; exits non-zero on any crash, leak, timeout or
# out-of-memory, the input kept as build-fuzz/crashes/TARGET-*: add it to the target's
# regression inputs (fuzz/regressions/TARGET/).
#
# Amplification is a crash too (issue 37). For every input of every target:
#   time   more than a second (-timeout=1);
#   heap   more than K bytes per byte of the input plus C, held at once while it runs
#          (fuzz/amplification_guard.h, the one home of K and C; by default K = 64 and
#          C = 1 MiB; the tokenizers K = 256 (tokenizer.json) and 512 (encoding), the
#          pickle readers K = 16 and C = 32 MiB (the unpickler's own budget, doubled), probes
#          K = 1 and C = 2 MiB, safetensors and zip K = 32, complete_work K = 128,
#          model_config C = 2 MiB);
#   size   more than MAX_LEN bytes: 4 KiB, 1 MiB for the checkpoint and probe readers, whose
#          hostile inputs need size to show (a pickle of empty lists, overlapping tensors, a
#          header of many entries, long probe lines).
# libFuzzer's own limits are absolute, derived from the same bound at MAX_LEN: no allocation
# above K * MAX_LEN + C (-malloc_limit_mb), and no process above 1 GiB (LibTorch, ASan's
# quarantine, the corpus) plus that (-rss_limit_mb).
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

# -max_len per target; the others take 4 KiB.
declare -A MAX_LEN=([token_probe_fuzzer]=1048576 [safetensors_fuzzer]=1048576
                    [torch_zip_fuzzer]=1048576 [pickle_fuzzer]=1048576)
MIB=1048576

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
  max_len=${MAX_LEN[$target]:-4096}
  # K and C from the target itself (fuzz/amplification_guard.h).
  read -r per_byte constant < <(ANISOSCOPE_FUZZ_PRINT_BOUNDS=1 "$BUILD/bin/$target" |
                                awk -v target="$target" '$1 == target {print $2, $3}')
  bound_mb=$(((per_byte * max_len + constant + MIB - 1) / MIB))
  options=(-timeout=1 "-malloc_limit_mb=$bound_mb" "-rss_limit_mb=$((1024 + bound_mb))"
           "-max_len=$max_len" -print_final_stats=1 "-artifact_prefix=$BUILD/crashes/$target-")
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
