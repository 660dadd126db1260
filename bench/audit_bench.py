#!/usr/bin/python3
"""The audit of a Pythia-shaped 154-branch Hub repo through the real service (issue 38's goal:
under 5 s, no weight byte read).

    bench/audit_bench.py DIR [--repeats N] [--bin build/bin]

DIR receives the repo when it is missing: bench/pythia-154, one branch per Pythia step name
(step0, step1, step2, ..., step512, step1000, ..., step143000: 154 branches) plus `main`,
each with a config.json, a tokenizer.json and a 256 KiB model.safetensors. As in
EleutherAI/pythia #205, 76 of the step branches serve `main`'s weights (symlinks, so the
listing's LFS sha256 is the same). tests/sources/servers/hub_server.py serves it on the
loopback; anisoscope-server (--allow-source hub:bench/*, --hub-endpoint that server) answers
`anisoscope audit --hub bench/pythia-154 --format json`, timed from the CLI's start to its
exit. One warm-up audit first (the local Hub hashes each file once, as the real Hub has
before anyone asks); then N timed ones. The Hub's request counters prove that no `resolve`
(a file download) was asked for.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "sources", "servers"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from hub_server import HubServer  # noqa: E402

REPO = "bench/pythia-154"
DUPLICATES = 76


def pythia_step_names():
    steps = [0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000))
    return [f"step{s}" for s in steps]


def write_branch(folder, weights):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4,
                   "num_hidden_layers": 2, "vocab_size": 128}, f)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}}, f)
    target = os.path.join(folder, "model.safetensors")
    if isinstance(weights, bytes):
        with open(target, "wb") as f:
            f.write(weights)
    else:
        os.symlink(weights, target)


def make_repo(root):
    repo = os.path.join(root, REPO)
    names = pythia_step_names()
    if os.path.isdir(repo) and len(os.listdir(repo)) == len(names) + 1:
        return repo, names
    shutil.rmtree(repo, ignore_errors=True)
    write_branch(os.path.join(repo, "main"), os.urandom(256 << 10))
    main_weights = os.path.join(repo, "main", "model.safetensors")
    for index, name in enumerate(names):
        # The last DUPLICATES steps serve main's weights, as pythia-2.8b's late branches do.
        duplicate = index >= len(names) - DUPLICATES
        write_branch(os.path.join(repo, name), main_weights if duplicate else os.urandom(256 << 10))
    return repo, names


def start_server(binary_dir, hub_url, db, allowed_root):
    args = [os.path.join(binary_dir, "anisoscope-server"), "--listen", "127.0.0.1:0",
            "--db", db, "--threads", "1", "--workers", "0", "--allow-root", allowed_root,
            "--allow-source", "hub:bench/*", "--hub-endpoint", hub_url]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise SystemExit(f"audit_bench: the server did not start: {line!r}")
    return process, line.split("listening on ")[1].split()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()
    repo, names = make_repo(os.path.abspath(args.dir))
    work = tempfile.mkdtemp(prefix="audit_bench.")
    with HubServer(os.path.abspath(args.dir)) as hub:
        server, address = start_server(args.bin, hub.url, os.path.join(work, "db.sqlite"), work)
        try:
            command = [os.path.join(args.bin, "anisoscope"), "--server", address, "audit",
                       "--hub", REPO, "--format", "json"]
            subprocess.run(command, check=True, capture_output=True)  # warm-up
            hub.reset_stats()
            seconds = []
            for _ in range(args.repeats):
                start = time.monotonic()
                result = subprocess.run(command, check=True, capture_output=True, text=True)
                seconds.append(time.monotonic() - start)
            audit = json.loads(result.stdout)
        finally:
            server.terminate()
            server.wait(30)
        stats = hub.stats()
    shutil.rmtree(work, ignore_errors=True)
    downloads = sum(entry["requests"] for listener in stats.values()
                    for path, entry in listener.items() if "/resolve/" in path)
    cdn = sum(entry["requests"] for entry in stats.get("cdn", {}).values())
    steps = audit.get("steps", [])
    duplicates = sum(1 for step in steps if "duplicateOf" in step or "duplicate_of" in step)
    print(f"repo {REPO}: {len(names)} step branches + main, {DUPLICATES} serving main's weights")
    print(f"steps listed {len(steps)}, duplicates flagged {duplicates}, "
          f"names without a step {len(audit.get('withoutStep', audit.get('without_step', [])))}")
    print("audit seconds (CLI start to exit): " + ", ".join(f"{s:.2f}" for s in seconds) +
          f"; best {min(seconds):.2f} (goal < 5)")
    print(f"file downloads asked for: {downloads} resolve, {cdn} CDN (goal 0)")


if __name__ == "__main__":
    main()
