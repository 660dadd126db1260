#!/usr/bin/env bash
# The end-to-end demo, with nothing downloaded: trains a small BERT with masked-LM on the
# license texts every Debian machine has, saving Hugging Face checkpoints at several steps;
# starts a server on a temporary database; submits the run with a text probe; shows
# progress; prints per layer the mean Q/K cosine and attention entropy across steps; then
# keeps serving the dashboard (watch it fill in live while the job runs) until Ctrl-C.
#   ./scripts/demo.sh [--keep] [--no-serve] [--http HOST:PORT]
#     --keep             leave the work directory (checkpoints, database) in place
#     --no-serve         stop after printing the tables instead of serving the dashboard
#     --http HOST:PORT   where the dashboard listens (default 127.0.0.1:8080)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
keep=0
serve=1
http=127.0.0.1:8080
while (($#)); do
  case "$1" in
    --keep) keep=1 ;;
    --no-serve) serve=0 ;;
    --http) http="${2:?--http needs HOST:PORT}"; shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

./scripts/setup.sh

work=$(mktemp -d -t anisoscope-demo.XXXXXX)
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" && wait "$server_pid" || true
  fi
  if ((keep)); then echo "demo: work directory kept at $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "== 1. training a small BERT (4 layers x 4 heads, masked-LM) and saving checkpoints"
/usr/bin/python3 tests/fixtures/train_bert.py "$work/run" --formats bin --layers 4 --heads 4 \
  --hidden 64 --save-steps 0,50,100,200,400,800 | grep -E "saved"
mv "$work/run/bin" "$work/checkpoints"
probe=/usr/share/common-licenses/Apache-2.0

echo "== 2. starting anisoscope-server on a temporary database"
"$root/build/bin/anisoscope-server" --listen 127.0.0.1:0 --http-listen "$http" \
  --db "$work/demo.db" --allow-root "$work" --allow-root /usr/share/common-licenses \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
  grep -q "dashboard at" "$work/server.out" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.out" | head -1)
dashboard=$(sed -n 's/.*dashboard at \([^ ]*\).*/\1/p' "$work/server.out" | head -1)
echo "   gRPC on $address; dashboard at $dashboard (open it now to watch the job live)"
cli() { "$root/build/bin/anisoscope" --server "$address" "$@"; }

echo "== 3. submitting the run: 6 checkpoints, 32 windows of 64 tokens of $probe"
cli submit --run demo --checkpoints "$work/checkpoints" --probe-text "$probe" \
  --probe-mode windows --samples 32 --seq-len 64 --wait

echo "== 4. results"
cli runs
per_layer_mean() {  # CSV step,layer,head,value -> table of the mean over heads
  cli query --run demo --metric "$1" --format csv | awk -F, -v title="$2" '
    NR > 1 {  # rows come ordered by layer, head, step
      key = $1 SUBSEP $2; sum[key] += $4; n[key]++
      if (!($1 in seen_step)) { seen_step[$1]; steps[++ns] = $1 }
      if (!($2 in seen_layer)) { seen_layer[$2]; layers[++nl] = $2 }
    }
    END {
      printf "%s\n%8s", title, "step"
      for (j = 1; j <= nl; j++) printf "  layer %-3s", layers[j]
      printf "\n"
      for (i = 1; i <= ns; i++) {
        printf "%8s", steps[i]
        for (j = 1; j <= nl; j++) printf "  %9.4f", sum[steps[i], layers[j]] / n[steps[i], layers[j]]
        printf "\n"
      }
    }'
}
echo
per_layer_mean qk_mean_cosine "mean Q/K cosine (cos(mean q, mean k)), averaged over heads"
echo
per_layer_mean attn_entropy "attention entropy (nats), averaged over heads"
echo
if ((serve)); then
  echo "== 5. dashboard: $dashboard"
  echo "   (the paper's Figures 12-15 for this run; serving until Ctrl-C)"
  trap 'echo; echo "demo: stopping"; exit 0' INT TERM
  wait "$server_pid"
else
  echo "== 5. dashboard was at $dashboard; the server stops with the demo (--no-serve). Rerun with"
  echo "   --keep to keep the checkpoints and the database, then serve and query them again:"
  echo "   build/bin/anisoscope-server --db WORKDIR/demo.db --allow-root WORKDIR --http-listen $http &"
  echo "   build/bin/anisoscope query --run demo --metric q_anisotropy"
fi
