#!/usr/bin/python3
"""The real server and the real CLI over loopback, on checkpoints of a real training run,
compared with the float64 reference (tests/reference); bad input; kill and restart."""
import csv
import io
import json
import os
import re
import shutil
import tempfile
import unittest

import numpy

from server_process import ServerProcess, stored_steps, wait_for

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
STEPS = [0, 100, 250, 400]


def reference(step):
    with open(os.path.join(FIXTURE, "reference", f"step_{step}.json")) as f:
        return json.load(f)


def projected_token_cloud(heads, basis):
    """METRICS "Token samples", in numpy: the clouds of `heads` (one reference head per step)
    on the top two right singular vectors of the uncentered stack `basis` names, each
    oriented so that the stack's coordinates sum to >= 0. Rows (q_x, q_y, k_x, k_y) by step,
    then token."""
    q = [numpy.array(head["q_sample"], dtype=numpy.float64) for head in heads]
    k = [numpy.array(head["k_sample"], dtype=numpy.float64) for head in heads]
    stack = numpy.concatenate({"union": q + k, "q": q, "k": k}[basis])
    v = numpy.linalg.svd(stack, full_matrices=False)[2][:2].T
    v *= numpy.where((stack @ v).sum(axis=0) < 0, -1.0, 1.0)
    return [list(qi @ v) + list(ki @ v) for qs, ks in zip(q, k) for qi, ki in zip(qs, ks)]


def make_long_run(work, count=12):
    """`count` copies of a real checkpoint and a probe slow enough to interrupt a job."""
    run_dir = os.path.join(work, "run")
    steps = list(range(100, 100 * (count + 1), 100))
    for step in steps:
        shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                        os.path.join(run_dir, f"step_{step}"))
    probe = os.path.join(work, "probe.jsonl")
    with open(os.path.join(FIXTURE, "probe.jsonl")) as src, open(probe, "w") as dst:
        dst.write(src.read() * 20)
    return run_dir, probe, steps


def job_id(output):
    return re.search(r"job (\d+)", output).group(1)


class EndToEndTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.path.exists(os.path.join(FIXTURE, "probe.jsonl")),
                        f"fixture bert_run missing at {FIXTURE}")
        self.work = tempfile.mkdtemp(prefix="anisoscope_e2e_")
        self.db = os.path.join(self.work, "metrics.db")
        self.server = ServerProcess(self.db, [FIXTURE, self.work]).start()

    def tearDown(self):
        self.server.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def submit(self, run, checkpoints, *extra):
        return self.server.cli("submit", "--run", run, "--checkpoints", checkpoints,
                               "--probe-tokens", os.path.join(FIXTURE, "probe.jsonl"), *extra)

    def test_submit_wait_then_query_matches_reference(self):
        result = self.submit("seed0", os.path.join(FIXTURE, "safetensors"), "--wait")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("step 400", result.stderr)

        per_head = {"qk_mean_cosine": 2e-4, "attn_entropy": 2e-4, "q_anisotropy": 2e-4,
                    "k_anisotropy": 2e-4}
        for metric, tolerance in per_head.items():
            rows = list(csv.DictReader(io.StringIO(self.server.cli(
                "query", "--run", "seed0", "--metric", metric, "--format", "csv",
                check=True).stdout)))
            self.assertEqual(len(rows), len(STEPS) * 3 * 4, metric)
            for row in rows:
                want = reference(int(row["step"]))["heads"][int(row["layer"]) * 4 + int(row["head"])]
                self.assertAlmostEqual(float(row["value"]), want[metric], delta=tolerance)
        for metric in ("q_mean_norm", "qk_mean_dot"):
            rows = csv.DictReader(io.StringIO(self.server.cli(
                "query", "--run", "seed0", "--metric", metric, "--format", "csv",
                check=True).stdout))
            for row in rows:
                want = reference(int(row["step"]))["heads"][int(row["layer"]) * 4 + int(row["head"])]
                self.assertLess(abs(float(row["value"]) - want[metric]),
                                1e-3 * max(abs(want[metric]), 1e-3), (metric, row))

        rows = list(csv.DictReader(io.StringIO(self.server.cli(
            "query", "--run", "seed0", "--metric", "hidden_anisotropy", "--layer", "3",
            "--from-step", "100", "--format", "csv", check=True).stdout)))
        self.assertEqual([int(r["step"]) for r in rows], [100, 250, 400])
        for row in rows:
            self.assertEqual(row["head"], "")
            want = reference(int(row["step"]))["hidden_states"][3]["anisotropy"]
            self.assertAlmostEqual(float(row["value"]), want, delta=2e-4)

        vectors = json.loads(self.server.cli("vectors", "--run", "seed0", "--kind", "k_mean",
                                             "--layer", "2", "--head", "1", check=True).stdout)
        self.assertEqual([v["step"] for v in vectors], STEPS)
        for entry in vectors:
            want = reference(entry["step"])["heads"][2 * 4 + 1]["k_mean"]
            scale = max(abs(x) for x in want)
            for got, expected in zip(entry["values"], want):
                self.assertLess(abs(got - expected), 1e-3 * scale)

        table = self.server.cli("query", "--run", "seed0", "--metric", "attn_entropy",
                                "--layer", "0", check=True).stdout
        self.assertIn("400", table)
        self.check_second_wave_through_the_cli()
        self.check_derived_analyses_through_the_cli()

    def check_second_wave_through_the_cli(self):
        """The second-wave scalars and vectors of each scope, stored and served as measured."""
        cases = [(["--metric", "attn_first_token_mass", "--layer", "1", "--head", "2"],
                  lambda ref: ref["heads"][1 * 4 + 2]["attn_first_token_mass"]),
                 (["--metric", "hidden_isoscore", "--layer", "2"],
                  lambda ref: ref["hidden_states"][2]["isoscore"]),
                 (["--metric", "embed_partition_isotropy"],
                  lambda ref: ref["embed_partition_isotropy"])]
        for args, want in cases:
            rows = list(csv.DictReader(io.StringIO(self.server.cli(
                "query", "--run", "seed0", *args, "--format", "csv", check=True).stdout)))
            self.assertEqual([int(r["step"]) for r in rows], STEPS, args)
            for row in rows:
                self.assertAlmostEqual(float(row["value"]), want(reference(int(row["step"]))),
                                       delta=2e-4, msg=args)
        self.assertIn("value", self.server.cli("query", "--run", "seed0", "--metric",
                                               "embed_partition_isotropy", check=True).stdout)
        vector_cases = [(["--kind", "hidden_spectrum", "--layer", "3"],
                         lambda ref: ref["hidden_states"][3]["spectrum"]),
                        (["--kind", "final_norm_gain"], lambda ref: ref["final_norm_gain"]),
                        (["--kind", "q_sample", "--layer", "0", "--head", "3"],
                         lambda ref: [x for row in ref["heads"][3]["q_sample"] for x in row])]
        for args, want in vector_cases:
            vectors = json.loads(self.server.cli("vectors", "--run", "seed0", *args,
                                                 check=True).stdout)
            self.assertEqual([v["step"] for v in vectors], STEPS, args)
            for entry in vectors:
                expected = want(reference(entry["step"]))
                self.assertEqual(len(entry["values"]), len(expected), args)
                scale = max(abs(x) for x in expected)
                for got, value in zip(entry["values"], expected):
                    self.assertLess(abs(got - value), 1e-3 * scale, args)
        result = self.server.cli("vectors", "--run", "seed0", "--kind", "hidden_spectrum")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--layer is required for --kind hidden_spectrum", result.stderr)

    def csv_rows(self, *args):
        return list(csv.DictReader(io.StringIO(self.server.cli(*args, "--format", "csv",
                                                               check=True).stdout)))

    def check_derived_analyses_through_the_cli(self):
        """What the query core derives from stored metrics, against the float64 reference:
        qk_mean_cosine_concat, the correlation tests, the isotropic baseline, token clouds."""
        rows = self.csv_rows("query", "--run", "seed0", "--metric", "qk_mean_cosine_concat")
        self.assertEqual(len(rows), len(STEPS) * 3)
        for row in rows:
            self.assertEqual(row["head"], "")
            want = reference(int(row["step"]))["layers"][int(row["layer"])]
            self.assertAlmostEqual(float(row["value"]), want["qk_mean_cosine_concat"], delta=2e-4)

        rows = self.csv_rows("correlation", "--run", "seed0")
        self.assertEqual([int(r["step"]) for r in rows], STEPS)
        for row in rows:
            want = reference(int(row["step"]))["correlation"]
            self.assertEqual(int(row["hidden_states"]), 4)
            for key, value in want.items():
                self.assertAlmostEqual(float(row[key]), value,
                                       delta=max(2e-4, 1e-3 * abs(value)), msg=(row, key))

        baseline = reference(0)["isotropic_p95"]
        for dimension, key in ((16, "head_dim"), (64, "hidden_size")):
            got = self.server.cli("isotropic-baseline", "--dimension", str(dimension),
                                  check=True).stdout
            self.assertAlmostEqual(float(got), baseline[key], delta=1e-9)

        for basis in ("union", "q", "k"):
            rows = self.csv_rows("token-cloud", "--run", "seed0", "--layer", "1", "--head", "2",
                                 "--basis", basis)
            want = projected_token_cloud([reference(step)["heads"][1 * 4 + 2] for step in STEPS],
                                         basis)
            self.assertEqual(len(rows), len(want), basis)
            scale = max(abs(x) for point in want for x in point)
            for row, expected in zip(rows, want):
                got = [float(row[key]) for key in ("q_x", "q_y", "k_x", "k_y")]
                for value, wanted in zip(got, expected):
                    self.assertLess(abs(value - wanted), 1e-3 * scale, (basis, row))

    def test_token_samples_are_set_per_job(self):
        checkpoints = os.path.join(FIXTURE, "bin")
        self.assertEqual(self.submit("few", checkpoints, "--token-samples", "3",
                                     "--wait").returncode, 0)
        rows = self.csv_rows("token-cloud", "--run", "few", "--layer", "0", "--head", "0")
        self.assertEqual([(int(r["step"]), int(r["token"])) for r in rows],
                         [(step, j) for step in STEPS for j in range(3)])
        self.assertEqual(self.submit("none", checkpoints, "--token-samples", "0",
                                     "--wait").returncode, 0)
        result = self.server.cli("token-cloud", "--run", "none", "--layer", "0", "--head", "0")
        self.assertEqual(result.returncode, 1)
        self.assertIn("no token samples", result.stderr)
        self.assertIn("--token-samples 0", result.stderr)

    def test_a_core_job_stores_only_the_core_metrics(self):
        checkpoints = os.path.join(FIXTURE, "bin")
        refused = self.submit("core", checkpoints, "--metrics", "core,shiny")
        self.assertEqual(refused.returncode, 2)  # the request is wrong
        self.assertIn('probe.metrics: unknown metric group "shiny"', refused.stderr)
        result = self.submit("core", checkpoints, "--metrics", "core", "--wait")
        self.assertEqual(result.returncode, 0, result.stderr)
        status = self.server.cli("status", job_id(result.stdout + result.stderr), check=True)
        self.assertIn("metrics core", status.stdout)
        rows = self.csv_rows("query", "--run", "core", "--metric", "attn_entropy")
        self.assertEqual(len(rows), len(STEPS) * 3 * 4)
        for metric in ("attn_max_prob", "hidden_isoscore", "embed_partition_isotropy"):
            lacking = self.server.cli("query", "--run", "core", "--metric", metric)
            self.assertEqual(lacking.returncode, 2, metric)
            self.assertIn(f"run 'core' stores no '{metric}' values", lacking.stderr)
        lacking = self.server.cli("vectors", "--run", "core", "--kind", "hidden_spectrum",
                                  "--layer", "0")
        self.assertEqual(lacking.returncode, 2)
        self.assertIn("run 'core' has no 'hidden_spectrum' vectors", lacking.stderr)

    def test_resubmit_skips_and_force_replaces_without_duplicates(self):
        checkpoints = os.path.join(FIXTURE, "bin")
        self.assertEqual(self.submit("r", checkpoints, "--wait").returncode, 0)
        again = self.submit("r", checkpoints, "--wait")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stderr.count("skipped"), len(STEPS), again.stderr)
        forced = self.submit("r", checkpoints, "--wait", "--force")
        self.assertEqual(forced.returncode, 0, forced.stderr)
        self.assertNotIn("skipped", forced.stderr)
        self.assertEqual(stored_steps(self.db), [(s, 1) for s in STEPS])

    def test_corrupt_checkpoint_fails_only_its_step(self):
        run_dir = os.path.join(self.work, "run")
        shutil.copytree(os.path.join(FIXTURE, "bin"), run_dir)
        weights = os.path.join(run_dir, "step_250", "pytorch_model.bin")
        with open(weights, "r+b") as f:
            f.truncate(os.path.getsize(weights) // 3)
        with open(os.path.join(run_dir, "step_100", "config.json"), "w") as f:
            f.write("{not json")
        result = self.submit("broken", run_dir, "--wait")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("pytorch_model.bin", result.stderr)
        self.assertIn("config.json", result.stderr)
        self.assertEqual(stored_steps(self.db), [(0, 1), (400, 1)])
        job = job_id(result.stdout + result.stderr)
        status = self.server.cli("status", job)
        self.assertIn("failed", status.stdout.lower())

    def test_paths_outside_allowed_roots_are_refused(self):
        result = self.submit("escape", "/etc")
        self.assertEqual(result.returncode, 1)
        self.assertIn("PERMISSION_DENIED", result.stderr)
        os.symlink("/usr", os.path.join(self.work, "link"))
        result = self.submit("escape", os.path.join(self.work, "link"))
        self.assertIn("PERMISSION_DENIED", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_malformed_probe_is_refused_at_submit(self):
        bad = os.path.join(self.work, "bad.jsonl")
        with open(bad, "w") as f:
            f.write("[2, 5, 3]\n{\"ids\": [1]}\n")
        result = self.server.cli("submit", "--run", "p", "--checkpoints",
                                 os.path.join(FIXTURE, "bin"), "--probe-tokens", bad)
        self.assertEqual(result.returncode, 2)  # the request is wrong
        self.assertIn("INVALID_ARGUMENT", result.stderr)
        self.assertIn("bad.jsonl line 2", result.stderr)
        self.assertNotIn(" p ", self.server.cli("jobs", check=True).stdout)
        text = self.server.cli("submit", "--run", "p", "--checkpoints",
                               os.path.join(FIXTURE, "bin"), "--probe-text", bad,
                               "--seq-len", "2")
        self.assertIn("at least 3", text.stderr)

    def test_queries_that_cannot_match_are_errors_not_empty_answers(self):
        self.assertEqual(self.submit("seed0", os.path.join(FIXTURE, "safetensors"),
                                     "--wait").returncode, 0)
        cases = [  # (arguments, what the one-line error says): 3 layers, 4 heads
            (["query", "--metric", "qk_mean_cosine", "--layer", "3"], "layers 0..2"),
            (["query", "--metric", "qk_mean_cosine", "--head", "4"], "heads 0..3"),
            (["query", "--metric", "hidden_anisotropy", "--layer", "4"], "hidden states 0..3"),
            (["query", "--metric", "hidden_anisotropy", "--head", "0"], "not per head"),
            (["query", "--metric", "nosuch"], "unknown metric 'nosuch'"),
            (["vectors", "--kind", "q_mean", "--layer", "0", "--head", "5"], "heads 0..3"),
            (["vectors", "--kind", "q_mean_pre_rotary", "--layer", "0", "--head", "0"],
             "has no 'q_mean_pre_rotary' vectors; its kinds: final_norm_gain, hidden_spectrum, "
             "k_mean, k_sample, q_mean, q_sample"),
            (["trajectory", "--layer", "9", "--head", "0"], "layers 0..2"),
        ]
        for args, message in cases:
            result = self.server.cli(args[0], "--run", "seed0", *args[1:])
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertIn("INVALID_ARGUMENT", result.stderr)
            self.assertIn(message, result.stderr)
            self.assertEqual(result.stdout, "", args)
        # The last hidden state is a layer of a per-hidden-state metric; a step range with
        # no points is an empty answer, not an error.
        self.assertEqual(self.server.cli("query", "--run", "seed0", "--metric",
                                         "hidden_anisotropy", "--layer", "3").returncode, 0)
        empty = self.server.cli("query", "--run", "seed0", "--metric", "qk_mean_cosine",
                                "--from-step", "100000")
        self.assertEqual(empty.returncode, 0, empty.stderr)
        self.assertIn("(no points)", empty.stdout)

    def test_unknown_run_and_job_are_clear_errors(self):
        result = self.server.cli("query", "--run", "nope", "--metric", "attn_entropy")
        self.assertEqual(result.returncode, 1)
        self.assertIn("NOT_FOUND", result.stderr)
        self.assertIn("NOT_FOUND", self.server.cli("status", "999").stderr)

    def test_explicit_checkpoints_runs_and_jobs(self):
        result = self.server.cli(
            "submit", "--run", "explicit",
            "--checkpoint", f"7={os.path.join(FIXTURE, 'bin', 'step_0')}",
            "--checkpoint", f"9={os.path.join(FIXTURE, 'legacy', 'step_400')}",
            "--probe-tokens", os.path.join(FIXTURE, "probe.jsonl"), "--wait")
        self.assertEqual(result.returncode, 0, result.stderr)
        points = json.loads(self.server.cli("query", "--run", "explicit", "--metric",
                                            "attn_entropy", "--format", "json",
                                            check=True).stdout)
        self.assertEqual(sorted({p["step"] for p in points}), [7, 9])
        runs = self.server.cli("runs", check=True).stdout
        self.assertRegex(runs, r"explicit\s+bert\s+3x4")
        self.assertRegex(self.server.cli("jobs", check=True).stdout, r"explicit\s+succeeded")

    def test_cancel_stops_a_running_job(self):
        run_dir, probe, steps = make_long_run(self.work)
        job = job_id(self.server.cli("submit", "--run", "c", "--checkpoints", run_dir,
                                     "--probe-tokens", probe, "--samples", "240",
                                     check=True).stdout)
        self.assertTrue(wait_for(lambda: len(stored_steps(self.db)) >= 1, timeout=300))
        self.assertEqual(self.server.cli("cancel", job).returncode, 0)
        self.assertNotEqual(self.server.cli("watch", job).returncode, 0)
        self.assertIn("cancelled", self.server.cli("status", job, check=True).stdout.lower())
        stored = stored_steps(self.db)
        self.assertLess(len(stored), len(steps))
        self.assertTrue(all(count == 1 for _, count in stored))

    def test_sigterm_drains_and_exits_cleanly(self):
        self.assertEqual(self.server.terminate(), 0, self.server.read_log())


class KillAndRestartTest(unittest.TestCase):
    """SIGKILL in the middle of a job; the restarted server resumes it; nothing lost or
    duplicated."""

    def test_killed_server_resumes_without_lost_or_duplicated_steps(self):
        work = tempfile.mkdtemp(prefix="anisoscope_restart_")
        try:
            run_dir, probe, steps = make_long_run(work)
            db = os.path.join(work, "metrics.db")
            server = ServerProcess(db, [work], ["--batch-size", "1"]).start()
            submitted = server.cli("submit", "--run", "long", "--checkpoints", run_dir,
                                   "--probe-tokens", probe, "--samples", "240", check=True)
            job = job_id(submitted.stdout)
            self.assertTrue(wait_for(lambda: len(stored_steps(db)) >= 2, timeout=300))
            server.kill()
            before = stored_steps(db)
            self.assertLess(len(before), len(steps), "the job finished before the kill")

            server = ServerProcess(db, [work]).start()
            watched = server.cli("watch", job, timeout=600)
            self.assertEqual(watched.returncode, 0, watched.stderr + server.read_log())
            self.assertEqual(stored_steps(db), [(s, 1) for s in steps])
            self.assertIn("succeeded", server.cli("status", job, check=True).stdout.lower())
            server.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
