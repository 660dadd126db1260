#!/usr/bin/python3
"""Real anisoscope-worker processes leasing from a real server over loopback, on a real
training run's checkpoints: several workers, a worker killed mid-step, SIGTERM, a server
killed and restarted under live workers, embedded and remote workers together, a worker's
own allowed roots, --max-units and --idle-exit. Each step must be stored exactly once."""
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import unittest

from server_process import BIN, ServerProcess, stored_steps, wait_for

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")


class WorkerProcess:
    """anisoscope-worker with a name, allowed roots and a log file of the test's."""

    def __init__(self, server, roots, name, log_dir, extra_args=()):
        self.name = name
        self.log_path = os.path.join(log_dir, f"{name}.log")
        args = [os.path.join(BIN, "anisoscope-worker"), "--server", server, "--name", name,
                "--threads", "1", *extra_args]
        for root in roots:
            args += ["--allow-root", root]
        self.log = open(self.log_path, "a")
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.process.stdout.readline()
        if f"worker {name} started" not in line:
            self.process.kill()
            raise RuntimeError(f"worker {name} did not start: {line!r}; log: {self.read_log()}")

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def signal(self, number):
        self.process.send_signal(number)

    def wait(self, timeout=60):
        return self.process.wait(timeout)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process.stdout.close()
        self.log.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.path.exists(os.path.join(FIXTURE, "probe.jsonl")),
                        f"fixture bert_run missing at {FIXTURE}")
        self.work = tempfile.mkdtemp(prefix="anisoscope_workers_")
        self.db = os.path.join(self.work, "metrics.db")
        self.workers = []
        self.server = None

    def tearDown(self):
        for worker in self.workers:
            worker.stop()
        if self.server:
            self.server.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def start_server(self, *extra):
        self.server = ServerProcess(self.db, [FIXTURE, self.work],
                                    ["--workers", "0", *extra]).start()
        return self.server

    def start_worker(self, name, *extra, roots=None):
        worker = WorkerProcess(self.server.address, roots or [FIXTURE, self.work], name,
                               self.work, extra)
        self.workers.append(worker)
        return worker

    def make_run(self, count, repeat):
        """`count` copies of a real checkpoint, and a probe of the fixture's `repeat` times."""
        run_dir = os.path.join(self.work, "run")
        steps = list(range(100, 100 * (count + 1), 100))
        for step in steps:
            shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                            os.path.join(run_dir, f"step_{step}"))
        probe = os.path.join(self.work, "probe.jsonl")
        with open(os.path.join(FIXTURE, "probe.jsonl")) as src, open(probe, "w") as dst:
            dst.write(src.read() * repeat)
        return run_dir, probe, steps

    def submit(self, run_dir, probe, run="r"):
        result = self.server.cli("submit", "--run", run, "--checkpoints", run_dir,
                                 "--probe-tokens", probe, "--samples", "100000", check=True)
        return int(result.stdout.split("job ")[1].split()[0])

    def checkpoints(self, job):
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT step, state, attempt, worker, error FROM checkpoints "
                              "WHERE job_id = ? ORDER BY step", (job,)).fetchall()

    def job_state(self, job):
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT state FROM jobs WHERE id = ?", (job,)).fetchone()[0]

    def wait_final(self, job, timeout=240):
        self.assertTrue(wait_for(lambda: self.job_state(job) not in ("queued", "running"),
                                 timeout=timeout, interval=0.2),
                        f"job {job} not final: {self.checkpoints(job)}")
        return self.job_state(job)

    def wait_running(self, job, worker):
        """The step `worker` is running (the first one it leased)."""
        found = []

        def running():
            found[:] = [row for row in self.checkpoints(job)
                        if row[1] == "running" and row[3] == worker]
            return bool(found)
        self.assertTrue(wait_for(running, timeout=60, interval=0.02), self.checkpoints(job))
        return found[0][0]

    def test_several_workers_share_a_job_and_store_each_step_once(self):
        self.start_server()
        run_dir, probe, steps = self.make_run(6, 4)
        for name in ("w1", "w2", "w3"):
            self.start_worker(name)
        job = self.submit(run_dir, probe)
        self.assertEqual(self.wait_final(job), "succeeded", self.checkpoints(job))
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in steps])
        rows = self.checkpoints(job)
        self.assertTrue(all(r[2] == 1 for r in rows), rows)
        self.assertGreaterEqual(len({r[3] for r in rows}), 2, rows)

    def test_a_killed_workers_lease_expires_and_another_worker_completes_it(self):
        self.start_server("--lease-timeout", "2")
        run_dir, probe, steps = self.make_run(2, 40)
        job = self.submit(run_dir, probe)
        doomed = self.start_worker("doomed")
        step = self.wait_running(job, "doomed")
        doomed.signal(signal.SIGKILL)
        doomed.wait()
        self.start_worker("rescuer")
        self.assertEqual(self.wait_final(job), "succeeded", self.checkpoints(job))
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in steps])
        row = next(r for r in self.checkpoints(job) if r[0] == step)
        self.assertEqual((row[1], row[2], row[3]), ("done", 2, "rescuer"), row)
        self.assertIn("lease expired", self.server.read_log())

    def test_sigterm_gives_the_lease_back_and_exits_0(self):
        self.start_server()
        run_dir, probe, steps = self.make_run(1, 40)
        job = self.submit(run_dir, probe)
        leaving = self.start_worker("leaving")
        self.wait_running(job, "leaving")
        leaving.signal(signal.SIGTERM)
        self.assertEqual(leaving.wait(30), 0, leaving.read_log())
        self.assertIn("given back by leaving", self.server.read_log())
        self.assertEqual(self.checkpoints(job)[0][1:3], ("pending", 0))
        self.start_worker("finisher")
        self.assertEqual(self.wait_final(job), "succeeded")
        self.assertEqual(self.checkpoints(job)[0][2:4], (1, "finisher"))
        self.assertEqual(stored_steps(self.db), [(steps[0], 1)])

    def test_a_server_killed_under_live_workers_comes_back_and_loses_nothing(self):
        port = free_port()
        listen = ["--listen", f"127.0.0.1:{port}", "--lease-timeout", "5"]
        self.start_server(*listen)
        run_dir, probe, steps = self.make_run(6, 10)
        job = self.submit(run_dir, probe)
        for name in ("w1", "w2"):
            self.start_worker(name)
        self.assertTrue(wait_for(lambda: any(r[1] == "done" for r in self.checkpoints(job)),
                                 timeout=120, interval=0.05))
        self.server.kill()
        time.sleep(1)  # workers find the server gone and back off
        self.start_server(*listen)
        self.assertEqual(self.wait_final(job), "succeeded", self.checkpoints(job))
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in steps])
        with sqlite3.connect(self.db) as db:
            self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")

    def test_embedded_and_remote_workers_work_side_by_side(self):
        self.server = ServerProcess(self.db, [FIXTURE, self.work], ["--workers", "1"]).start()
        run_dir, probe, steps = self.make_run(6, 4)
        self.start_worker("remote")
        job = self.submit(run_dir, probe)
        self.assertEqual(self.wait_final(job), "succeeded")
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in steps])
        self.assertEqual({r[3] for r in self.checkpoints(job)}, {"embedded-1", "remote"})

    def test_a_worker_refuses_paths_outside_its_own_roots(self):
        self.start_server()
        run_dir, probe, _ = self.make_run(1, 1)
        elsewhere = os.path.join(self.work, "elsewhere")
        os.makedirs(elsewhere)
        job = self.submit(run_dir, probe)
        self.start_worker("fenced", roots=[elsewhere])
        self.assertEqual(self.wait_final(job), "failed")
        error = self.checkpoints(job)[0][4]
        self.assertIn("worker 'fenced' refuses", error)
        self.assertIn(run_dir, error)
        self.assertEqual(stored_steps(self.db), [])

    def test_max_units_and_idle_exit_end_the_worker_with_status_0(self):
        self.start_server()
        run_dir, probe, steps = self.make_run(2, 1)
        job = self.submit(run_dir, probe)
        one = self.start_worker("one-unit", "--max-units", "1")
        self.assertEqual(one.wait(60), 0, one.read_log())
        idle = self.start_worker("idler", "--idle-exit", "1")
        self.assertEqual(idle.wait(60), 0, idle.read_log())
        self.assertEqual(self.wait_final(job), "succeeded")
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in steps])
        self.assertIn("idle for", idle.read_log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
