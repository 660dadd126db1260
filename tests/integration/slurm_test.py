#!/usr/bin/python3
"""deploy/slurm/anisoscope-worker.sbatch under a real single-node Slurm (slurm_cluster.py):
the server on loopback with no embedded workers, a job of several checkpoints, the sbatch
script submitted as an array of two workers (its GPU request overridden for this CPU
node); every step must be stored exactly once, by the array's workers, which exit 0 when
idle. In CI a missing Slurm fails the test; elsewhere it skips."""
import os
import re
import shutil
import sqlite3
import tempfile
import unittest

from server_process import BIN, ServerProcess, stored_steps, wait_for
from slurm_cluster import SlurmCluster

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, "deploy", "slurm", "anisoscope-worker.sbatch")


class SlurmTest(unittest.TestCase):
    def setUp(self):
        missing = [p for p in SlurmCluster.PROGRAMS if shutil.which(p) is None]
        if missing and not os.environ.get("CI"):
            self.skipTest(f"Slurm is not installed ({', '.join(missing)} not found; "
                          "apt-get install slurm-wlm munge)")
        # In CI a missing program fails the test: SlurmCluster raises, naming it.
        self.assertTrue(os.path.exists(os.path.join(FIXTURE, "probe.jsonl")),
                        f"fixture bert_run missing at {FIXTURE}")
        self.work = tempfile.mkdtemp(prefix="anisoscope_slurm_")
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        os.chmod(self.work, 0o755)
        self.db = os.path.join(self.work, "metrics.db")
        # Cleanups run even when a later step of setUp fails: no daemon outlives the test.
        self.cluster = SlurmCluster(self.work).__enter__()
        self.addCleanup(self.cluster.__exit__, None, None, None)
        self.server = ServerProcess(self.db, [FIXTURE, self.work],
                                    ["--workers", "0", "--lease-timeout", "10"])
        self.addCleanup(self.server.stop)
        self.server.start()

    def worker_log(self, array, task):
        path = os.path.join(self.work, f"worker-{array}_{task}.out")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f.read()

    def worker_logs(self, array):
        return " | ".join(f"task {task}: {self.worker_log(array, task)[-2000:]}"
                          for task in (0, 1))

    def test_an_sbatch_array_of_workers_stores_every_step_once(self):
        run_dir = os.path.join(self.work, "run")
        steps = [100, 200, 300, 400, 500, 600]
        for step in steps:
            shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                            os.path.join(run_dir, f"step_{step}"))
        submitted = self.server.cli("submit", "--run", "slurm", "--checkpoints", run_dir,
                                    "--probe-tokens", os.path.join(FIXTURE, "probe.jsonl"),
                                    check=True)
        job = int(re.search(r"job (\d+)", submitted.stdout + submitted.stderr).group(1))

        output = os.path.join(self.work, "worker-%A_%a.out")
        array = self.cluster.sbatch(
            ["--array=0-1", "--gres=none", "--cpus-per-task=1", f"--output={output}", SCRIPT],
            env={"ANISOSCOPE_SERVER": self.server.address, "ANISOSCOPE_BIN": BIN,
                 "ANISOSCOPE_ALLOW_ROOTS": f"{FIXTURE}:{self.work}", "ANISOSCOPE_DEVICE": "cpu",
                 "ANISOSCOPE_IDLE_EXIT": "5"})

        def job_state():
            with sqlite3.connect(self.db) as db:
                return db.execute("SELECT state FROM jobs WHERE id = ?", (job,)).fetchone()[0]
        wait_for(lambda: job_state() in ("succeeded", "failed", "cancelled"), timeout=240,
                 interval=0.5)
        self.assertEqual(job_state(), "succeeded",
                         f"job {job}; workers: {self.worker_logs(array)}; {self.cluster.logs()}; "
                         f"Slurm: {self.cluster.job_state(array)}")
        # Idle for ANISOSCOPE_IDLE_EXIT=5 s, each worker exits 0 and its task completes.
        tasks = self.cluster.wait_all_done(array, timeout=120, count=2)
        self.assertEqual(sorted(tasks), ["0", "1"], tasks)
        for task, (state, exit_code) in tasks.items():
            self.assertEqual((state, exit_code), ("COMPLETED", "0:0"), f"task {task}")

        with sqlite3.connect(self.db) as db:
            workers = {row[0] for row in db.execute(
                "SELECT worker FROM checkpoints WHERE job_id = ?", (job,))}
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in steps])
        names = {f"{self.cluster.host}-{array}_{task}" for task in (0, 1)}
        self.assertTrue(workers and workers <= names, (workers, names))
        for task in (0, 1):
            log = self.worker_log(array, task)
            name = f"{self.cluster.host}-{array}_{task}"
            self.assertIn(f"worker {name} started", log, self.worker_logs(array))
            self.assertIn(f"worker {name}: idle for", log, self.worker_logs(array))


if __name__ == "__main__":
    unittest.main(verbosity=2)
