#!/usr/bin/python3
"""The file walls, tried as a hostile writer would, against a real server with --auth tokens,
real workers (remote and embedded), real symbolic links and real sockets. Namespace a reads
beneath a/, namespace b beneath b/; a secret lies outside both. Every attack here worked
before the file gate (docs/security.md): the secret came back in an error, namespace b's
checkpoint was stored in namespace a."""
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

from server_process import (BIN, ServerProcess, create_token, host_command, stored_steps,
                            wait_for)
from worker_test import FIXTURE, WorkerProcess

SECRET = "deadbeefcafe0123"  # hex, so that a lax reader would take it for a commit


class HostileFilesTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.path.exists(os.path.join(FIXTURE, "probe.jsonl")),
                        f"fixture bert_run missing at {FIXTURE}")
        self.work = tempfile.mkdtemp(prefix="anisoscope_hostile_files_")
        self.a, self.b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        for root in (self.a, self.b):
            shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                            os.path.join(root, "run", "step_100"))
            shutil.copy(os.path.join(FIXTURE, "probe.jsonl"), os.path.join(root, "probe.jsonl"))
        self.secret = os.path.join(self.work, "secret.txt")
        with open(self.secret, "w") as f:
            f.write(SECRET + "\n")
        self.db = os.path.join(self.work, "team.db")
        host_command("namespaces", "set", "--db", self.db, "--namespace", "a", "--allow-root", self.a)
        host_command("namespaces", "set", "--db", self.db, "--namespace", "b", "--allow-root", self.b)
        self.alice = create_token(self.db, "alice", "writer", "a")
        self.worker_token = os.path.join(self.work, "worker.token")
        with open(self.worker_token, "w") as f:
            f.write(create_token(self.db, "cluster", "worker", "*") + "\n")
        self.server, self.workers = None, []

    def tearDown(self):
        for worker in self.workers:
            worker.stop()
        if self.server:
            self.server.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def start_server(self, workers=0):
        # The server may read all of the work folder: only the namespaces' roots fence a and b.
        self.server = ServerProcess(self.db, [self.work], [
            "--workers", str(workers), "--auth", "tokens", "--lease-timeout", "10"]).start()

    def submit(self, checkpoints, probe=None, *extra):
        env = dict(os.environ, ANISOSCOPE_TOKEN=self.alice)
        return subprocess.run(
            [os.path.join(BIN, "anisoscope"), "--server", self.server.address, "submit",
             "--run", "r", "--checkpoints", checkpoints, "--probe-tokens",
             probe or os.path.join(self.a, "probe.jsonl"), *extra],
            capture_output=True, text=True, timeout=120, env=env)

    def job_of(self, submitted):
        self.assertEqual(submitted.returncode, 0, submitted.stderr)
        return int(submitted.stdout.split("job ")[1].split()[0])

    def steps_of(self, job):
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT step, state, error FROM checkpoints WHERE job_id = ?",
                              (job,)).fetchall()

    def wait_failed(self, job):
        self.assertTrue(wait_for(lambda: all(row[1] == "failed" for row in self.steps_of(job)),
                                 timeout=120, interval=0.2), self.steps_of(job))
        return self.steps_of(job)[0][2]

    def swap_for_link_to_b(self):
        """namespace a's queued step becomes a link to namespace b's checkpoint."""
        step = os.path.join(self.a, "run", "step_100")
        shutil.rmtree(step)
        os.symlink(os.path.join(self.b, "run", "step_100"), step)

    def test_a_cache_ref_linked_to_a_secret_never_quotes_it(self):
        self.start_server()
        cache = os.path.join(self.a, "models--org--m")
        os.makedirs(os.path.join(cache, "refs"))
        os.makedirs(os.path.join(cache, "snapshots", SECRET))
        os.symlink(self.secret, os.path.join(cache, "refs", "step100"))
        leaked = self.submit(cache)
        self.assertEqual(leaked.returncode, 2, leaked.stderr)  # INVALID_ARGUMENT
        self.assertIn("'step100'", leaked.stderr)
        self.assertNotIn("deadbeef", leaked.stderr)
        os.remove(os.path.join(cache, "refs", "step100"))
        with open(os.path.join(cache, "refs", "step200"), "w") as f:
            f.write("a" * (64 << 20))  # a 64 MiB ref: refused unread
        huge = self.submit(cache)
        self.assertEqual(huge.returncode, 2, huge.stderr)
        self.assertIn("1024 bytes", huge.stderr)

    def test_a_missing_path_and_one_outside_every_root_get_the_same_answer(self):
        self.start_server()
        run = os.path.join(self.a, "run")
        answers = []
        for probe in (os.path.join(self.a, "missing.jsonl"), self.secret,
                      os.path.join(self.b, "probe.jsonl"), os.path.join(self.a, "..", "b",
                                                                        "probe.jsonl")):
            refused = self.submit(run, probe)
            self.assertEqual(refused.returncode, 1)
            answers.append(refused.stderr.replace(os.path.normpath(probe), "PATH"))
        self.assertEqual(len(set(answers)), 1, answers)
        self.assertIn("PERMISSION_DENIED", answers[0])

    def test_a_step_swapped_for_a_link_after_submit_is_refused_by_the_remote_worker(self):
        self.start_server()
        job = self.job_of(self.submit(os.path.join(self.a, "run")))
        self.swap_for_link_to_b()
        self.workers.append(WorkerProcess(self.server.address, [self.work], "w1", self.work,
                                          ["--token-file", self.worker_token]))
        error = self.wait_failed(job)
        self.assertIn("beneath an allowed root", error)
        self.assertEqual(stored_steps(self.db), [])

    def test_a_step_swapped_for_a_link_is_refused_by_an_embedded_worker_too(self):
        self.start_server()
        job = self.job_of(self.submit(os.path.join(self.a, "run")))
        self.swap_for_link_to_b()
        self.server.stop()
        self.start_server(workers=1)  # the job resumes on the server's own worker
        error = self.wait_failed(job)
        self.assertIn("beneath an allowed root", error)
        self.assertEqual(stored_steps(self.db), [])

    def test_a_weight_file_swapped_for_a_link_inside_the_step_is_refused(self):
        self.start_server()
        job = self.job_of(self.submit(os.path.join(self.a, "run")))
        weights = os.path.join(self.a, "run", "step_100", "pytorch_model.bin")
        os.remove(weights)
        os.symlink(os.path.join(self.b, "run", "step_100", "pytorch_model.bin"), weights)
        self.workers.append(WorkerProcess(self.server.address, [self.work], "w1", self.work,
                                          ["--token-file", self.worker_token]))
        self.wait_failed(job)
        self.assertEqual(stored_steps(self.db), [])

    def test_a_worker_whose_roots_miss_the_namespace_refuses_the_unit(self):
        self.start_server()
        job = self.job_of(self.submit(os.path.join(self.a, "run")))
        self.workers.append(WorkerProcess(self.server.address, [self.b], "fenced", self.work,
                                          ["--token-file", self.worker_token]))
        error = self.wait_failed(job)
        self.assertIn("worker 'fenced' refuses", error)
        self.assertEqual(stored_steps(self.db), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
