#!/usr/bin/python3
"""`anisoscope follow` against the real server while a writer saves checkpoints slowly, in
small chunks, the way Hugging Face does (config.json first, weights last, shards one by
one): every step is analysed exactly once and never half written; --until-step ends the
job, Ctrl-C cancels it, and `submit --follow` is the same job without the CLI."""
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from server_process import BIN, ServerProcess

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import hf_io  # noqa: E402  (the fixtures' safetensors writer and sharding)

FIXTURES = os.environ.get("ANISOSCOPE_FIXTURES", "fixtures")
RUN = os.path.join(FIXTURES, "bert_run")
PROBE = os.path.join(RUN, "probe.jsonl")
CHUNK = 16 * 1024


def copy_slowly(source_dir, target_dir, pause=0.01):
    """Copies a checkpoint directory file by file, config.json first, each file in CHUNK
    pieces with a pause between them (a checkpoint being saved)."""
    os.makedirs(target_dir)
    names = sorted(os.listdir(source_dir), key=lambda name: (name != "config.json", name))
    for name in names:
        with open(os.path.join(source_dir, name), "rb") as source, \
                open(os.path.join(target_dir, name), "wb") as target:
            while chunk := source.read(CHUNK):
                target.write(chunk)
                target.flush()
                time.sleep(pause)


def stored_steps(db, run):
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT s.step, COUNT(*) FROM steps s JOIN runs r ON s.run_id = r.id "
            "WHERE r.name = ? GROUP BY s.step ORDER BY s.step", (run,)).fetchall()


def checkpoint_rows(db, job):
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT step, state, attempt FROM checkpoints WHERE job_id = ? ORDER BY step",
            (job,)).fetchall()


class FollowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.path.exists(PROBE), f"no fixture at {RUN}"

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="anisoscope_follow_")
        self.live = os.path.join(self.work, "live")
        os.makedirs(self.live)
        self.db = os.path.join(self.work, "metrics.db")
        self.server = ServerProcess(self.db, [self.work, RUN], ["--follow-interval", "0.1"])
        self.server.start()

    def tearDown(self):
        self.server.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def follow(self, run, *extra):
        return subprocess.Popen(
            [os.path.join(BIN, "anisoscope"), "--server", self.server.address, "follow",
             "--run", run, "--checkpoints", self.live, "--probe-tokens", PROBE, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_follows_slow_writers_and_analyses_each_step_once_never_half_written(self):
        # A checkpoint already there, then the rest written slowly while following:
        # safetensors and .bin by turns, and a directory that appears empty first.
        shutil.copytree(os.path.join(RUN, "safetensors", "step_0"),
                        os.path.join(self.live, "step_0"))
        cli = self.follow("live", "--until-step", "400")

        def write():
            for step, form in [(100, "bin"), (250, "safetensors"), (400, "bin")]:
                time.sleep(0.3)
                copy_slowly(os.path.join(RUN, form, f"step_{step}"),
                            os.path.join(self.live, f"step_{step}"))
            # A step past --until-step is ignored.
            copy_slowly(os.path.join(RUN, "safetensors", "step_400"),
                        os.path.join(self.live, "step_500"), pause=0)

        writer = threading.Thread(target=write)
        writer.start()
        out, err = cli.communicate(timeout=240)
        writer.join()
        self.assertEqual(cli.returncode, 0, err)
        job = re.search(r"job (\d+) follows", out).group(1)
        self.assertIn("1 whole checkpoint so far, until step 400", out)
        for step in (100, 250, 400):
            self.assertIn(f"step {step} written: queued", err)
        self.assertIn("succeeded: 4 done", out)
        # Each step once, on its first lease: a half-written file would have failed it.
        self.assertEqual(checkpoint_rows(self.db, job),
                         [(0, "done", 1), (100, "done", 1), (250, "done", 1), (400, "done", 1)])
        self.assertEqual(stored_steps(self.db, "live"), [(0, 1), (100, 1), (250, 1), (400, 1)])
        self.assertNotIn("truncated", self.server.read_log())

    def test_a_sharded_checkpoint_joins_only_once_every_shard_is_written(self):
        staging = os.path.join(self.work, "staging")
        os.makedirs(staging)
        source = os.path.join(RUN, "safetensors", "step_250")
        shutil.copy(os.path.join(source, "config.json"), staging)
        hf_io.write_sharded(staging, hf_io.load_state_dict(source), "safetensors",
                            hf_io.write_safetensors)
        cli = self.follow("sharded", "--until-step", "7")
        target = os.path.join(self.live, "checkpoint-7")
        os.makedirs(target)
        for name in ["config.json", "model.safetensors.index.json",
                     "model-00001-of-00002.safetensors"]:
            shutil.copy(os.path.join(staging, name), target)
        time.sleep(1.0)  # ten looks at the directory with a shard missing
        self.assertIsNone(cli.poll())
        self.assertEqual(checkpoint_rows(self.db, 1), [])
        with open(os.path.join(staging, "model-00002-of-00002.safetensors"), "rb") as f:
            shard = f.read()
        with open(os.path.join(target, "model-00002-of-00002.safetensors"), "wb") as f:
            f.write(shard[:len(shard) // 2])  # half the last shard: still not whole
            f.flush()
            time.sleep(0.5)
            self.assertEqual(checkpoint_rows(self.db, 1), [])
            f.write(shard[len(shard) // 2:])
        out, err = cli.communicate(timeout=120)
        self.assertEqual(cli.returncode, 0, err)
        self.assertEqual(checkpoint_rows(self.db, 1), [(7, "done", 1)])

    def test_ctrl_c_cancels_the_job_and_keeps_what_was_stored(self):
        shutil.copytree(os.path.join(RUN, "safetensors", "step_0"),
                        os.path.join(self.live, "step_0"))
        cli = self.follow("stopped")
        deadline = time.time() + 120
        while stored_steps(self.db, "stopped") == [] and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(stored_steps(self.db, "stopped"), [(0, 1)])
        cli.send_signal(signal.SIGINT)
        out, err = cli.communicate(timeout=60)
        self.assertEqual(cli.returncode, 0, err)
        self.assertIn("cancelled", out)
        status = self.server.cli("status", "1", check=True).stdout
        self.assertIn("cancelled", status)
        # No longer followed: a new step is not picked up.
        shutil.copytree(os.path.join(RUN, "safetensors", "step_100"),
                        os.path.join(self.live, "step_100"))
        time.sleep(0.5)
        self.assertEqual(checkpoint_rows(self.db, 1), [(0, "done", 1)])

    def test_submit_follow_is_a_server_side_job_that_survives_a_restart(self):
        result = self.server.cli("submit", "--run", "bg", "--checkpoints", self.live,
                                 "--probe-tokens", PROBE, "--follow", "--until-step", "100")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("job 1 submitted: 0 checkpoints", result.stdout)
        self.assertIn("queued", self.server.cli("status", "1", check=True).stdout)
        # The server restarts while the job waits for its first checkpoint.
        self.server.stop()
        self.server = ServerProcess(self.db, [self.work, RUN], ["--follow-interval", "0.1"])
        self.server.start()
        copy_slowly(os.path.join(RUN, "bin", "step_100"), os.path.join(self.live, "step_100"))
        watch = self.server.cli("watch", "1", timeout=120)
        self.assertEqual(watch.returncode, 0, watch.stderr)
        self.assertEqual(checkpoint_rows(self.db, 1), [(100, "done", 1)])

    def test_bad_follow_requests_are_usage_errors(self):
        cases = [
            (["submit", "--run", "x", "--checkpoint", f"0={self.live}", "--probe-tokens", PROBE,
              "--follow"], "follow watches checkpoints_dir: give checkpoints_dir"),
            (["submit", "--run", "x", "--checkpoints", self.live, "--probe-tokens", PROBE,
              "--until-step", "5"], "until_step applies to follow only"),
            (["follow", "--run", "x", "--checkpoints", "/etc", "--probe-tokens", PROBE],
             "PERMISSION_DENIED"),
        ]
        for args, message in cases:
            result = self.server.cli(*args)
            self.assertNotEqual(result.returncode, 0, args)
            self.assertIn(message, result.stderr)


if __name__ == "__main__":
    unittest.main()
