#!/usr/bin/env bash
# Ours against the Hugging Face way, on the same checkpoint, probe, device and threads, in
# one command: build/bin/extract_bench (best of --repeats) and bench/hf_peer.py (the same
# checkpoint three times, the first a warm-up), then both figures and the ratio.
#
#   bench/peer_bench.sh CHECKPOINT_DIR PROBE.jsonl [--device cpu|cuda] [--threads N]
#                       [--repeats N] [--metrics GROUPS]
#
# hf_peer.py runs on transformers where it is installed, else on bench/hf_style_models.py
# (plain PyTorch written from Hugging Face's model code), with /usr/bin/python3's torch by
# default (PEER_PYTHON overrides). --metrics: the groups our job computes (default all; the
# peer computes the Godey et al. section 5 metrics, which `core` is). Run it on a quiet
# machine: the two run one after the other.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
checkpoint=$1 probe=$2
shift 2
device=cpu threads=$(nproc) repeats=3 metrics=all
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --metrics) metrics=$2; shift 2 ;;
    *) echo "peer_bench.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
PEER_PYTHON=${PEER_PYTHON:-/usr/bin/python3}
BENCH=${EXTRACT_BENCH:-$ROOT/build/bin/extract_bench}
[[ -x $BENCH ]] || { echo "peer_bench.sh: $BENCH is not built (./scripts/setup.sh)" >&2; exit 1; }

ours=$("$BENCH" "$checkpoint" "$probe" --device "$device" --threads "$threads" \
         --repeats "$repeats" --metrics "$metrics")
echo "$ours"
peer=$("$PEER_PYTHON" "$ROOT/bench/hf_peer.py" "$probe" "$checkpoint" "$checkpoint" "$checkpoint" \
         --device "$device" --threads "$threads" 2>&1)
echo "$peer"

ours_s=$(sed -n 's/^extract (load + forward + metrics): \([0-9.]*\) s.*/\1/p' <<<"$ours")
peer_s=$(sed -n 's/^hf_peer: [0-9]* timed checkpoint(s), \([0-9.]*\) s per checkpoint.*/\1/p' <<<"$peer")
[[ -n $ours_s && -n $peer_s ]] || { echo "peer_bench.sh: could not read both timings" >&2; exit 1; }
awk -v o="$ours_s" -v p="$peer_s" 'BEGIN {
  printf "peer_bench: ours %.3f s, peer %.3f s per checkpoint: the peer takes %.2f x ours\n", o, p, p / o }'
