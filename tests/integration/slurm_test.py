#!/usr/bin/python3
"""deploy/slurm/anisoscope-worker.sbatch under a real single-node Slurm (slurm_cluster.py):
the server on loopback with no embedded workers, a job of several checkpoints, the sbatch
script submitted as an array of two workers (its GPU request overridden for this CPU
node); every step must be stored exactly once, by the array's workers, which exit 0 when
idle. In CI a missing Slurm fails the test; elsewhere it skips."""
import os
import shutil
import sqlite3
import tempfile
import unittest

from server_process import BIN, ServerProcess, wait_for
from slurm_cluster import SlurmCluster

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, "deploy", "slurm", "anisoscope-worker.sbatch")


class SlurmTest(unittest.TestCase):
    def setUp(self):
        if shutil.which("slurmctld") is None and not os.environ.get("CI"):
            self.skipTest("Slurm is not installed (apt-get install slurm-wlm munge)")
        self.assertTrue(os.path.exists(os.path.join(FIXTURE, "probe.jsonl")),
                        f"fixture bert_run missing at {FIXTURE}")
        self.work = tempfile.mkdtemp(prefix="anisoscope_slurm_")
        os.chmod(self.work, 0o755)
        self.db = os.path.join(self.work, "metrics.db")
        self.cluster = SlurmCluster(self.work).__enter__()
        self.server = ServerProcess(self.db, [FIXTURE, self.work],
                                    ["--workers", "0", "--lease-timeout", "10"]).start()

    def tearDown(self):
        self.server.stop()
        self.cluster.__exit__(None, None, None)
        shutil.rmtree(self.work, ignore_errors=True)

    def worker_logs(self, array):
        texts = []
        for task in (0, 1):
            path = os.path.join(self.work, f"worker-{array}_{task}.out")
            if os.path.exists(path):
                with open(path) as f:
                    texts.append(f"task {task}: " + f.read()[-2000:])
        return " | ".join(texts) or "(no worker output)"

    def test_an_sbatch_array_of_workers_stores_every_step_once(self):
        run_dir = os.path.join(self.work, "run")
        steps = [100, 200, 300, 400, 500, 600]
        for step in steps:
            shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                            os.path.join(run_dir, f"step_{step}"))
        submitted = self.server.cli("submit", "--run", "slurm", "--checkpoints", run_dir,
                                    "--probe-tokens", os.path.join(FIXTURE, "probe.jsonl"),
                                    check=True)
        job = int(submitted.stdout.split("job ")[1].split()[0])

        output = os.path.join(self.work, "worker-%A_%a.out")
        array = self.cluster.sbatch(
            ["--array=0-1", "--gres=none", "--cpus-per-task=1", f"--output={output}", SCRIPT],
            env={"ANISOSCOPE_SERVER": self.server.address, "ANISOSCOPE_BIN": BIN,
                 "ANISOSCOPE_ALLOW_ROOTS": f"{FIXTURE}:{self.work}", "ANISOSCOPE_DEVICE": "cpu",
                 "ANISOSCOPE_IDLE_EXIT": "5"})

        def job_state():
            with sqlite3.connect(self.db) as db:
                return db.execute("SELECT state FROM jobs WHERE id = ?", (job,)).fetchone()[0]
        self.assertTrue(wait_for(lambda: job_state() == "succeeded", timeout=240, interval=0.5),
                        f"job {job} is {job_state()}; workers: {self.worker_logs(array)}; "
                        f"{self.cluster.logs()}")
        tasks = self.cluster.wait_all_done(array, 2, timeout=120)
        self.assertEqual(sorted(tasks), ["0", "1"], tasks)
        for task, (state, exit_code) in tasks.items():
            self.assertEqual((state, exit_code), ("COMPLETED", "0:0"), f"task {task}")

        with sqlite3.connect(self.db) as db:
            stored = db.execute("SELECT step, COUNT(*) FROM steps GROUP BY step "
                                "ORDER BY step").fetchall()
            workers = {row[0] for row in db.execute(
                "SELECT worker FROM checkpoints WHERE job_id = ?", (job,))}
        self.assertEqual(stored, [(s, 1) for s in steps])
        self.assertTrue(all(w.endswith(("_0", "_1")) and f"-{array}_" in w for w in workers),
                        workers)
        self.assertEqual(self.worker_logs(array).count("idle for"), 2, self.worker_logs(array))


if __name__ == "__main__":
    unittest.main(verbosity=2)
