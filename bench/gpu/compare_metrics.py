#!/usr/bin/env python3
"""Largest deviation per metric between two metric files in the reference's JSON layout
(tests/reference/metrics_reference.py, extract_bench --metrics-json, hf_peer.py
--metrics-json). Cosines, entropies and anisotropies: absolute; norms and dots: relative;
mean vectors: per component, relative to the vector's norm (the reference tests'
tolerances, METRICS.md).

usage: compare_metrics.py GOT.json WANT.json [--label TEXT] [--check]
--check exits 1 when a deviation is past those tolerances (2e-4 absolute, 1e-3 relative).
"""
import argparse
import json
import math
import sys

ABSOLUTE = ["qk_mean_cosine", "attn_entropy", "q_anisotropy", "k_anisotropy"]
RELATIVE = ["q_mean_norm", "k_mean_norm", "qk_mean_dot"]
VECTORS = ["q_mean", "k_mean", "q_mean_pre_rotary", "k_mean_pre_rotary"]


def bad(*values):
    """A missing (null) or non-finite value: its deviation is infinite, never hidden."""
    return any(v is None or not math.isfinite(v) for v in values)


def absolute(a, b):
    return math.inf if bad(a, b) else abs(a - b)


def relative(a, b):
    return math.inf if bad(a, b) else abs(a - b) / max(abs(b), 1e-3)


def vector(got, want):
    if len(got) != len(want) or bad(*got, *want):
        return math.inf
    norm = math.sqrt(sum(x * x for x in want)) or 1.0
    return max((abs(a - b) for a, b in zip(got, want)), default=0.0) / norm


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("got")
    parser.add_argument("want")
    parser.add_argument("--label", default="")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    got, want = json.load(open(args.got)), json.load(open(args.want))
    if got["num_tokens"] != want["num_tokens"] or len(got["heads"]) != len(want["heads"]):
        sys.exit(f"{args.label}: different probes or shapes ({got['num_tokens']} vs "
                 f"{want['num_tokens']} tokens, {len(got['heads'])} vs {len(want['heads'])} heads)")
    if len(got["hidden_states"]) != len(want["hidden_states"]):
        sys.exit(f"{args.label}: {len(got['hidden_states'])} vs {len(want['hidden_states'])} "
                 "hidden states")
    worst = {}

    def note(name, value):
        worst[name] = max(worst.get(name, 0.0), value)

    for g, w in zip(got["heads"], want["heads"]):
        for name in ABSOLUTE:
            note(name, absolute(g[name], w[name]))
        for name in RELATIVE:
            note(name, relative(g[name], w[name]))
        for name in VECTORS:
            if name in g or name in w:
                note(name, vector(g.get(name, []), w.get(name, [None])))
    for g, w in zip(got["hidden_states"], want["hidden_states"]):
        note("hidden_anisotropy", absolute(g["anisotropy"], w["anisotropy"]))
        note("hidden_mean_norm", relative(g["mean_norm"], w["mean_norm"]))
    print(f"{args.label}: largest deviation per metric: " +
          ", ".join(f"{name} {value:.1e}" for name, value in worst.items()))
    limits = {name: 2e-4 for name in ABSOLUTE + ["hidden_anisotropy"]}
    past = [name for name, value in worst.items() if value > limits.get(name, 1e-3)]
    if args.check and past:
        print(f"{args.label}: past the tolerance: {', '.join(past)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
