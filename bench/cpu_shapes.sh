#!/usr/bin/env bash
# The CPU forward's rate per model size, in one run: BERT-base (float32), Pythia-1b's shape
# (float16) and LLaMA-7B's (bfloat16, 13.5 GB), each a `core` job through
# build/bin/extract_bench, then one table of GFLOP/s, the kernel's share of the CPU time and
# the anonymous memory peak, each shape's rate also as a share of BERT-base's in this run.
#
#   bench/cpu_shapes.sh DIR [--skip-7b] [--repeats N]
#
# The checkpoints and probes are written under DIR by bench/make_bench_checkpoint.py when
# missing (about 16 GB of disk; the 7B takes a few minutes). BERT-base and Pythia-1b run
# 16 x 128 tokens, the 7B 4 x 128 and 16 x 128; --repeats (default 3) is for the small
# shapes, the 7B runs once (a forward takes minutes). Run it on a quiet machine: the rates
# are compared across shapes measured minutes apart. Every extract_bench output goes to
# DIR/*.log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
dir=$1
shift
with_7b=1 repeats=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --skip-7b) with_7b=0; shift ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "cpu_shapes.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
BENCH=${EXTRACT_BENCH:-$ROOT/build/bin/extract_bench}
[[ -x $BENCH ]] || { echo "cpu_shapes.sh: $BENCH is not built (./scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$dir"

# make FAMILY: the checkpoint DIR/FAMILY with its 16 x 128 probe, and a 4 x 128 one.
make() {
  local family=$1 out=$dir/$1
  if [[ ! -f $out/config.json ]]; then
    /usr/bin/python3 "$ROOT/bench/make_bench_checkpoint.py" "$out" --family "$family" >&2
  fi
  if [[ ! -f $out/probe_4x128.jsonl ]]; then
    /usr/bin/python3 "$ROOT/bench/make_bench_checkpoint.py" "$out" --family "$family" \
      --probe-only --probe-samples 4 >&2
  fi
}

# run LABEL FAMILY PROBE REPEATS: one extract_bench, its output kept in DIR/LABEL.log.
run() {
  local label=$1 family=$2 probe=$3 runs=$4
  echo "cpu_shapes: $label ..." >&2
  "$BENCH" "$dir/$family" "$dir/$family/$probe" --metrics core --repeats "$runs" \
    > "$dir/$label.log"
}

make bert
make pythia_1b
run bert-base_16x128 bert probe.jsonl "$repeats"
run pythia-1b_16x128 pythia_1b probe.jsonl "$repeats"
if ((with_7b)); then
  make llama_7b
  run llama-7b_4x128 llama_7b probe_4x128.jsonl 1
  run llama-7b_16x128 llama_7b probe.jsonl 1
fi

# One row per log: the figures extract_bench printed, and the rate as a share of BERT-base's.
/usr/bin/python3 - "$dir" <<'EOF'
import glob, os, re, sys
rows = []
for log in sorted(glob.glob(os.path.join(sys.argv[1], "*.log")), key=os.path.getmtime):
    text = open(log).read()
    forward = re.search(r"forward only .*?:\s+([\d.]+) s, ([\d.]+) GFLOP, ([\d.]+) GFLOP/s", text)
    kernel = re.search(r"forward ([\d.]+) % \((\d+) page faults\), extract ([\d.]+) %", text)
    anon = re.search(r"peak: +extract ([\d.]+) MiB, forward ([\d.]+) MiB", text)
    extract = re.search(r"extract \(load \+ forward \+ metrics\): ([\d.]+) s", text)
    if not (forward and kernel and anon and extract):
        continue
    rows.append((os.path.basename(log)[:-4], float(forward[3]), float(forward[1]),
                 float(extract[1]), float(kernel[1]), float(kernel[3]), float(anon[1])))
base = next((r[1] for r in rows if r[0].startswith("bert-base")), None)
print(f"{'shape':<18} {'GFLOP/s':>8} {'of BERT':>8} {'forward s':>10} {'step s':>8} "
      f"{'kernel fwd':>10} {'kernel step':>11} {'anon MiB':>9}")
for name, rate, forward, step, kernel_forward, kernel_step, anon in rows:
    share = f"{100 * rate / base:.0f} %" if base else "-"
    print(f"{name:<18} {rate:>8.1f} {share:>8} {forward:>10.2f} {step:>8.2f} "
          f"{kernel_forward:>9.1f}% {kernel_step:>10.1f}% {anon:>9.0f}")
EOF
