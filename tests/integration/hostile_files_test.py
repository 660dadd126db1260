#!/usr/bin/python3
"""The file walls, tried as a hostile writer would, against a real server with --auth tokens,
real workers (remote and embedded), real symbolic links and real sockets. Namespace a reads
beneath a/, namespace b beneath b/; a secret lies outside both. Every attack here worked
before the file gate (docs/security.md): the secret came back in an error, namespace b's
checkpoint was stored in namespace a."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

from server_process import (BIN, ServerProcess, create_token, host_command, process_bytes,
                            stored_steps, wait_for)
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


class ServerWithWorkersTest(unittest.TestCase):
    """A test's server (self.server), its remote workers (self.workers) and its folder
    (self.work), stopped and removed after each test."""

    def tearDown(self):
        for worker in self.workers:
            worker.stop()
        self.server.stop()
        shutil.rmtree(self.work, ignore_errors=True)


class HostileTokenizerAndProbeTest(ServerWithWorkersTest):
    """Issue 37, the tokenizer and probe readers, tried against a real server: a tokenizer.json
    whose Split regex backtracks made its step stay RUNNING for ever (now: FAILED within
    seconds, naming the file and the pattern's field); a probe-tokens file of 16 lines of 8 MB
    cost the server +653 MiB per submit (now: each line cut to --seq-len as read, or refused
    at --max-probe-tokens, with the server's peak memory up by less than 64 MiB). The server
    answers queries throughout."""

    def setUp(self):
        self.assertTrue(os.path.exists(os.path.join(FIXTURE, "bin", "step_400")),
                        f"fixture bert_run missing at {FIXTURE}")
        self.work = tempfile.mkdtemp(prefix="anisoscope_hostile_tokenizer_")
        self.run_dir = os.path.join(self.work, "run")
        shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                        os.path.join(self.run_dir, "step_100"))
        self.db = os.path.join(self.work, "hostile.db")
        self.server = ServerProcess(self.db, [self.work], [
            "--workers", "0", "--lease-timeout", "10"]).start()
        self.workers = []


    def answers(self):
        listed = self.server.cli("jobs", timeout=30)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        return True

    def peak_rss(self):
        return process_bytes(self.server.process.pid)

    def step_of(self, job):
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT state, error FROM checkpoints WHERE job_id = ?",
                              (job,)).fetchone()

    def test_a_backtracking_split_regex_fails_its_step_within_seconds(self):
        step = os.path.join(self.run_dir, "step_100")
        os.remove(os.path.join(step, "vocab.txt"))  # the step's tokenizer is its tokenizer.json
        split = {"type": "Split", "pattern": {"Regex": "a*a*(?:c|$)"}, "behavior": "Isolated",
                 "invert": False}
        with open(os.path.join(step, "tokenizer.json"), "w") as f:
            json.dump({"version": "1.0", "added_tokens": [], "normalizer": None,
                       "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split]},
                       "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "aa": 3},
                                 "merges": ["a a"]}}, f)
        probe = os.path.join(self.work, "probe.txt")
        with open(probe, "w") as f:
            f.write(("a" * 2500 + "b\n") * 4)  # O(n^3) a line: ~50 s a search, unbounded
        submitted = self.server.cli("submit", "--run", "r", "--checkpoints", self.run_dir,
                                    "--probe-text", probe, "--probe-mode", "lines",
                                    "--seq-len", "16")
        self.assertEqual(submitted.returncode, 0, submitted.stderr)
        job = int(submitted.stdout.split("job ")[1].split()[0])
        started = time.time()
        self.workers.append(WorkerProcess(self.server.address, [self.work], "w1", self.work))
        self.assertTrue(wait_for(lambda: self.answers() and self.step_of(job)[0] == "failed",
                                 timeout=60, interval=0.5), self.step_of(job))
        self.assertLess(time.time() - started, 30)
        error = self.step_of(job)[1]
        self.assertIn("tokenizer.json", error)
        self.assertIn("pre_tokenizer.pretokenizers[0].pattern", error)
        self.assertIn("budget", error)
        self.assertNotIn("aaaa", error)
        self.assertTrue(self.answers())

    def test_a_probe_of_huge_lines_costs_the_server_only_the_ids_it_keeps(self):
        probe = os.path.join(self.work, "huge.jsonl")
        line = "[" + "1," * 3999999 + "1]\n"  # 8 MB, 4M ids
        with open(probe, "w") as f:
            for _ in range(16):
                f.write(line)
        del line
        before = self.peak_rss()
        cut = self.server.cli("submit", "--run", "cut", "--checkpoints", self.run_dir,
                              "--probe-tokens", probe, "--seq-len", "64", timeout=120)
        self.assertEqual(cut.returncode, 0, cut.stderr)
        self.assertTrue(self.answers())
        whole = self.server.cli("submit", "--run", "whole", "--checkpoints", self.run_dir,
                                "--probe-tokens", probe, timeout=120)
        self.assertNotEqual(whole.returncode, 0)
        self.assertIn("huge.jsonl line 1", whole.stderr)
        self.assertIn("--max-probe-tokens", whole.stderr)
        growth = self.peak_rss() - before
        self.assertLess(growth, 64 << 20, f"the server's peak RSS grew by {growth >> 20} MiB")
        self.assertTrue(self.answers())


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import hostile_checkpoints  # noqa: E402


class HostileCheckpointContentTest(ServerWithWorkersTest):
    """Issue 37's checkpoint findings, each in a step run by a real remote worker: the step
    fails with an error naming the file and what is wrong, and the worker's peak RSS grows
    no more than 64 MiB beyond that of a legitimate checkpoint (plus the file's own size,
    which a legitimate checkpoint maps)."""
    baseline = None  # the worker's VmHWM after a legitimate step

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="anisoscope_hostile_content_")
        self.db = os.path.join(self.work, "metrics.db")
        self.server = ServerProcess(self.db, [FIXTURE, self.work], ["--workers", "0"]).start()
        self.workers = []


    def run_step(self, name, files=None, config=None):
        """One step: the fixture's BERT step with `files` (name -> bytes) in place of its
        weights and `config` (a dict) in place of its config.json, run by a fresh worker.
        Returns (submit result, state, error, the worker's VmHWM)."""
        step = os.path.join(self.work, name, "step_100")
        shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"), step)
        if files:
            os.remove(os.path.join(step, "pytorch_model.bin"))
            for file, data in files.items():
                with open(os.path.join(step, file), "wb") as f:
                    f.write(data)
        if config is not None:
            with open(os.path.join(step, "config.json"), "w") as f:
                json.dump(config, f)
        submitted = self.server.cli("submit", "--run", name, "--checkpoints",
                                    os.path.dirname(step), "--probe-tokens",
                                    os.path.join(FIXTURE, "probe.jsonl"))
        if submitted.returncode != 0:
            return submitted, None, None, None
        job = int(submitted.stdout.split("job ")[1].split()[0])
        worker = WorkerProcess(self.server.address, [FIXTURE, self.work], name, self.work)
        self.workers.append(worker)

        def row():
            with sqlite3.connect(self.db) as db:
                return db.execute("SELECT state, error FROM checkpoints WHERE job_id = ?",
                                  (job,)).fetchone()
        self.assertTrue(wait_for(lambda: row()[0] in ("done", "failed"), timeout=60,
                                 interval=0.1), row())
        state, error = row()
        return submitted, state, error, process_bytes(worker.process.pid)

    def legitimate_peak(self):
        if HostileCheckpointContentTest.baseline is None:
            _, state, error, peak = self.run_step("legitimate")
            self.assertEqual(state, "done", error)
            HostileCheckpointContentTest.baseline = peak
        return HostileCheckpointContentTest.baseline

    def assert_bounded(self, peak, file_size):
        allowed = self.legitimate_peak() + file_size + (64 << 20)
        self.assertLessEqual(peak, allowed, f"worker peak {peak >> 20} MiB, allowed "
                             f"{allowed >> 20} MiB")

    def test_a_header_of_400k_entries_fails_in_seconds(self):
        data = hostile_checkpoints.header_flood()
        start = time.time()
        _, state, error, peak = self.run_step("flood", {"model.safetensors": data})
        self.assertLess(time.time() - start, 30)  # ~8 minutes when the parse was quadratic
        self.assertEqual(state, "failed")
        self.assertIn("model.safetensors: header lists more than 65536 tensors", error)
        self.assert_bounded(peak, len(data))

    def test_tensors_overlapping_a_misaligned_span_are_refused_uncopied(self):
        data = hostile_checkpoints.overlapping_misaligned()
        _, state, error, peak = self.run_step("overlap", {"model.safetensors": data})
        self.assertEqual(state, "failed")  # was DONE, after +735 MiB of copies
        self.assertIn("model.safetensors: tensor 'w", error)
        self.assertIn("overlaps tensor", error)
        self.assert_bounded(peak, len(data))

    def test_a_pickle_of_empty_lists_is_refused_within_its_budget(self):
        data = hostile_checkpoints.torch_zip(hostile_checkpoints.empty_list_pickle())
        _, state, error, peak = self.run_step("lists", {"pytorch_model.bin": data})
        self.assertEqual(state, "failed")  # after +1.4 GiB, before the budget
        self.assertIn("pytorch_model.bin: pickle builds more objects", error)
        self.assert_bounded(peak, len(data))

    def test_a_head_dim_of_2_27_is_refused_before_anything_is_sized_by_it(self):
        submitted, state, error, peak = self.run_step(
            "head_dim", config=hostile_checkpoints.llama_config())
        message = submitted.stderr if submitted.returncode != 0 else error
        self.assertIn("config.json: field 'head_dim' must be a positive integer of at most",
                      message)
        if submitted.returncode == 0:  # refused by the worker, not at submit
            self.assertEqual(state, "failed")
            self.assert_bounded(peak, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
