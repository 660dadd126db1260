#!/usr/bin/python3
"""Crash consistency (issue 15): a real server and two remote workers run a stream of jobs
on a real training run's checkpoints while backups are taken beside them, and the server
is killed with SIGKILL at random moments (0.05 to 2.5 s after each restart: while leasing,
while a step is written, while a backup reads the file) and restarted each time. At the end every job has finished, every
step of every run is stored exactly once, PRAGMA integrity_check is "ok" on the database
and on every backup that completed.

  crash_consistency.py [--kills N] [--seed S]     prints the figures (docs/reliability.md's)

crash_consistency_test.py runs it with 10 kills in ./scripts/test.sh."""
import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import BIN, ServerProcess, wait_for  # noqa: E402
from worker_test import WorkerProcess, free_port  # noqa: E402

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
STEPS_PER_RUN = 12


class Backups:
    """`anisoscope-server backup` of the database in a loop, each to a new file."""

    def __init__(self, db, out_dir):
        self.db, self.out_dir = db, out_dir
        self.done, self.failed = [], []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        index = 0
        while not self.stopping.is_set():
            out = os.path.join(self.out_dir, f"backup-{index}.db")
            index += 1
            result = subprocess.run([os.path.join(BIN, "anisoscope-server"), "backup",
                                     "--db", self.db, "--out", out],
                                    capture_output=True, text=True, timeout=120)
            (self.done if result.returncode == 0 else self.failed).append(
                out if result.returncode == 0 else result.stderr.strip())
            time.sleep(0.3)

    def stop(self):
        self.stopping.set()
        self.thread.join(150)


def integrity(path):
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def run(kills, seed, work):
    """Returns the figures; raises AssertionError when anything was lost, duplicated or
    damaged."""
    rng = random.Random(seed)
    db = os.path.join(work, "metrics.db")
    checkpoints = os.path.join(work, "run")
    for step in range(100, 100 * (STEPS_PER_RUN + 1), 100):
        shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                        os.path.join(checkpoints, f"step_{step}"))
    probe = os.path.join(work, "probe.jsonl")
    with open(os.path.join(FIXTURE, "probe.jsonl")) as src, open(probe, "w") as dst:
        dst.write(src.read() * 3)
    port = free_port()
    server_args = ["--workers", "0", "--listen", f"127.0.0.1:{port}", "--lease-timeout", "3"]

    def start_server():
        return ServerProcess(db, [FIXTURE, work], server_args).start()

    server = start_server()
    workers = [WorkerProcess(server.address, [FIXTURE, work], name, work)
               for name in ("w1", "w2")]
    backups_dir = os.path.join(work, "backups")
    os.makedirs(backups_dir)
    backups = Backups(db, backups_dir)
    backups.thread.start()
    runs = []

    def submit():
        name = f"run{len(runs)}"
        result = server.cli("submit", "--run", name, "--checkpoints", checkpoints,
                            "--probe-tokens", probe, "--samples", "100000")
        if result.returncode == 0:
            runs.append(name)
        return result.returncode == 0

    def open_jobs():
        with sqlite3.connect(db, timeout=30) as connection:
            return connection.execute("SELECT COUNT(*) FROM jobs WHERE state IN "
                                      "('queued', 'running')").fetchone()[0]

    def leases_in_flight():
        with sqlite3.connect(db, timeout=30) as connection:
            return connection.execute("SELECT COUNT(*) FROM checkpoints WHERE state = "
                                      "'running'").fetchone()[0]

    start = time.time()
    busy_kills = 0
    try:
        submit()
        for kill in range(kills):
            # Keep work queued so that every kill lands in a busy server.
            if open_jobs() == 0:
                submit()
            time.sleep(rng.uniform(0.05, 2.5))
            busy_kills += leases_in_flight() > 0
            server.kill()
            server = start_server()
        kill_seconds = time.time() - start
        with sqlite3.connect(db, timeout=30) as connection:
            stored_under_kills = connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        backups.stop()
        finished = wait_for(lambda: open_jobs() == 0, timeout=600, interval=0.2)
        assert finished, "jobs did not finish after the last restart"
        with sqlite3.connect(db) as connection:
            states = connection.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")
            states = dict(states.fetchall())
            stored = connection.execute(
                "SELECT r.name, s.step, COUNT(*) FROM steps s JOIN runs r ON r.id = s.run_id "
                "GROUP BY r.name, s.step").fetchall()
        assert set(states) == {"succeeded"}, f"job states {states}"
        expected = {(name, step) for name in runs
                    for step in range(100, 100 * (STEPS_PER_RUN + 1), 100)}
        got = {(name, step) for name, step, _ in stored}
        duplicated = [(name, step, n) for name, step, n in stored if n != 1]
        assert got == expected, f"missing {sorted(expected - got)}, extra {sorted(got - expected)}"
        assert not duplicated, f"stored more than once: {duplicated}"
        assert integrity(db) == "ok", integrity(db)
        bad_backups = [b for b in backups.done if integrity(b) != "ok"]
        assert not bad_backups, f"damaged backups: {bad_backups}"
        return {"kills": kills, "kills_with_steps_leased": busy_kills,
                "seconds": round(kill_seconds, 1),
                "steps_stored_while_killing": stored_under_kills, "runs": len(runs),
                "steps": len(expected), "jobs": states.get("succeeded", 0),
                "backups": len(backups.done), "backups_failed": len(backups.failed)}
    finally:
        backups.stop()
        for worker in workers:
            worker.stop()
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="anisoscope_crash_")
    try:
        figures = run(args.kills, args.seed, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(" ".join(f"{key}={value}" for key, value in figures.items()))


if __name__ == "__main__":
    main()
