#!/usr/bin/python3
"""Issue 38 end to end: a tiny trained series (the bert_run fixture) served as Hub branches
by hub_server.py and as an S3 prefix by s3_server.py (s3rver behind a SigV4-checking proxy)
is submitted through the real server and computed by a remote anisoscope-worker that sees
only its cache folder; every stored value equals the same series read from the folder.
Also: `audit` lists each step with its commit and hashes and flags a duplicate and names
without a step; `--dedupe` skips the duplicate before its download; `runs` shows each step's
origin; a second job over cached steps downloads no weight byte; a source outside
--allow-source is refused, naming it. Without node, s3rver or s3cmd the test fails under CI
and skips elsewhere."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import urllib.parse
import urllib.request

import source_series as ss
from server_process import BIN, wait_for

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                    "sources.md")


def job_id(output):
    return re.search(r"job (\d+)", output).group(1)


class SourcesEndToEndTest(unittest.TestCase):
    """One server, one Hub, one S3 for every case (their start is most of the cost)."""

    @classmethod
    def setUpClass(cls):
        ss.require_fixture()
        ss.require_servers()
        cls.work = tempfile.mkdtemp(prefix="anisoscope_sources_e2e_")
        cls.hub = cls.s3 = cls.server = None
        cls.workers = []
        try:
            cls.hub = ss.start_hub(cls.work)
            cls.s3 = ss.start_s3()
            cls.db = os.path.join(cls.work, "metrics.db")
            cls.env = ss.source_env(cls.s3)
            allow = [f"hub:{ss.ORG}/*", ss.S3_URL]
            cls.server = ss.SourceServer(
                cls.db, [ss.FIXTURE], ["--workers", "0", "--http-listen", "127.0.0.1:0",
                                       "--follow-interval", "0.2",
                                       *ss.source_flags(cls.hub, cls.s3, allow)],
                env=cls.env).start()
            line = cls.server.process.stdout.readline()
            cls.base = re.match(r"dashboard at (http://\S+)/$", line.strip()).group(1)
            cls.folder_values = cls.compute_folder_series()
            cls.cache = os.path.join(cls.work, "cache")
            os.makedirs(cls.cache)
            # The remote worker: no --allow-root of the fixture, only its cache.
            cls.remote = cls.start_worker("remote", roots=[cls.cache], extra=[
                "--cache-dir", cls.cache, "--cache-max-bytes", str(ss.CACHE_BYTES),
                *ss.source_flags(cls.hub, cls.s3)])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        ss.stop_all(*cls.workers, cls.server, cls.s3, cls.hub)
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def start_worker(cls, name, roots, extra=()):
        worker = ss.Worker(cls.server.address, name, cls.work, roots, extra, env=cls.env)
        cls.workers.append(worker)
        return worker

    @classmethod
    def compute_folder_series(cls):
        """Run "folder": the series from its folder, by a worker that may read it, started
        for this job only (so that the remote worker takes every remote step)."""
        local = cls.start_worker("local", roots=[ss.FIXTURE])
        try:
            result = cls.server.cli("submit", "--run", "folder", "--checkpoints", ss.SERIES,
                                    "--probe-tokens", ss.PROBE, "--wait")
            assert result.returncode == 0, result.stderr + cls.server.read_log()
        finally:
            local.stop()
            cls.workers.remove(local)
        return ss.run_values(cls.db, "folder")

    # helpers
    def submit(self, run, *source, wait=True):
        args = ["submit", "--run", run, *source, "--probe-tokens", ss.PROBE]
        return self.server.cli(*args, *(["--wait"] if wait else []))

    def assert_same_values(self, run):
        """Every stored value of `run` equals the folder's, bit for bit: the scalar series
        through the CLI, then every series row and vector through the database."""
        names = sorted({key[1] for key in self.folder_values[0]})
        self.assertGreater(len(names), 5)
        for name in names:
            folder = self.server.cli("query", "--run", "folder", "--metric", name,
                                     "--format", "json")
            self.assertEqual(folder.returncode, 0, folder.stderr)
            remote = self.server.cli("query", "--run", run, "--metric", name, "--format",
                                     "json", check=True)
            strip = [{k: v for k, v in p.items() if k != "run"} for p in
                     json.loads(folder.stdout)]
            got = [{k: v for k, v in p.items() if k != "run"} for p in
                   json.loads(remote.stdout)]
            self.assertEqual(got, strip, f"{run}: metric {name}")
        series, vectors = ss.run_values(self.db, run)
        want_series, want_vectors = self.folder_values
        self.assertTrue(want_series and want_vectors)
        self.assertEqual(len(series), len(want_series))
        self.assertEqual(series, want_series, run)
        self.assertEqual(vectors, want_vectors, run)

    def source_metrics(self):
        """The anisoscope_source_* counters of the server's /metrics."""
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as response:
            text = response.read().decode()
        return {m.group(1): float(m.group(2)) for m in
                re.finditer(r"^(anisoscope_source_\w+) (\S+)$", text, re.M)}

    def remote_worker_did_every_step(self, job):
        rows = ss.job_checkpoints(self.db, job)
        self.assertEqual(sorted(rows), ss.STEPS, rows)
        for step, row in rows.items():
            self.assertEqual(row["state"], "done", (step, row))
            self.assertEqual(row["worker"], self.remote.name, (step, row))

    # cases
    def test_hub_branches_give_the_folders_values_through_a_remote_worker(self):
        self.hub.reset_stats()
        result = self.submit("hub", "--hub", ss.REPO)
        self.assertEqual(result.returncode, 0, result.stderr + self.remote.read_log())
        self.remote_worker_did_every_step(job_id(result.stdout + result.stderr))
        self.assertEqual(ss.run_steps(self.db, "hub"), [(s, 1) for s in ss.STEPS])
        self.assert_same_values("hub")
        # The token-less worker's downloads: each step's files, the weights through the CDN.
        stats = self.hub.stats()
        for step in ss.STEPS:
            sha = ss.lfs_sha256(self.hub, ss.REPO, f"step_{step}")
            count, nbytes = ss.requests_matching(
                stats, lambda listener, path: listener == "cdn" and path.endswith(sha))
            self.assertGreaterEqual(count, 1, (step, stats.get("cdn")))
            self.assertEqual(nbytes, os.path.getsize(
                os.path.join(ss.SERIES, f"step_{step}", "model.safetensors")))

        # Where each step came from: the run names the source, the job each step's revision
        # (branch) and commit.
        runs = self.server.cli("runs", check=True).stdout
        self.assertRegex(runs, rf"\bhub\s.*hub:{ss.REPO} \(4 steps\)")
        status = self.server.cli("status", job_id(result.stdout + result.stderr),
                                 check=True).stdout
        self.assertIn(f"hub:{ss.REPO}", status)
        for step in ss.STEPS:
            commit = ss.commit_of(self.hub, ss.REPO, f"step_{step}")
            self.assertRegex(status, rf"(?m)^\s*{step}\s+done\s.*\bstep_{step}\s+{commit[:12]}",
                             status)

        # The same steps again (a new run): every file from the warm cache, no weight byte,
        # no file request at all; /metrics counts the hits.
        self.hub.reset_stats()
        before = self.source_metrics()
        again = self.submit("hub-warm", "--hub", ss.REPO)
        self.assertEqual(again.returncode, 0, again.stderr)
        stats = self.hub.stats()
        resolves, _ = ss.requests_matching(stats, lambda listener, path: "/resolve/" in path)
        cdn, cdn_bytes = ss.requests_matching(stats, lambda listener, path: listener == "cdn")
        self.assertEqual((resolves, cdn, cdn_bytes), (0, 0, 0), stats)
        self.assertEqual(ss.run_steps(self.db, "hub-warm"), [(s, 1) for s in ss.STEPS])
        after = self.source_metrics()
        self.assertEqual(after["anisoscope_source_cache_hits_total"]
                         - before["anisoscope_source_cache_hits_total"], len(ss.STEPS), after)
        self.assertEqual(after["anisoscope_source_bytes_fetched_total"],
                         before["anisoscope_source_bytes_fetched_total"])
        self.assertGreaterEqual(before["anisoscope_source_bytes_fetched_total"], sum(
            os.path.getsize(os.path.join(ss.SERIES, f"step_{s}", "model.safetensors"))
            for s in ss.STEPS))
        self.assertEqual(ss.incomplete_files(self.cache), [])
        # The cache is the Hugging Face layout: refs name each branch's commit.
        refs = os.path.join(self.cache, "models--anisotest--bert-tiny", "refs")
        for step in ss.STEPS:
            with open(os.path.join(refs, f"step_{step}")) as f:
                self.assertEqual(f.read().strip(),
                                 ss.commit_of(self.hub, ss.REPO, f"step_{step}"))

    def test_s3_prefix_gives_the_folders_values_through_a_remote_worker(self):
        result = self.submit("s3", "--s3", ss.S3_URL)
        self.assertEqual(result.returncode, 0, result.stderr + self.remote.read_log())
        self.remote_worker_did_every_step(job_id(result.stdout + result.stderr))
        self.assertEqual(ss.run_steps(self.db, "s3"), [(s, 1) for s in ss.STEPS])
        self.assert_same_values("s3")
        runs = self.server.cli("runs", check=True).stdout
        self.assertRegex(runs, rf"\bs3\s.*s3://{ss.BUCKET} \(4 steps\)")
        # Every request the worker made was signed (the proxy refuses any other).
        stats = self.s3.stats()
        for path, entry in stats.get("s3", {}).items():
            self.assertNotIn(403, entry["statuses"], (path, entry))

        self.s3.reset_stats()
        again = self.submit("s3-warm", "--s3", ss.S3_URL)
        self.assertEqual(again.returncode, 0, again.stderr)
        objects, nbytes = ss.requests_matching(
            self.s3.stats(), lambda listener, path: path.endswith((".safetensors", ".json",
                                                                   ".txt")))
        self.assertEqual((objects, nbytes), (0, 0), self.s3.stats())

    def test_audit_lists_commits_hashes_duplicates_and_names_without_a_step(self):
        self.hub.reset_stats()
        result = self.server.cli("audit", "--hub", ss.DUPES, "--format", "json", check=True)
        audit = json.loads(result.stdout)
        steps = {int(s["step"]): s for s in audit["steps"]}
        self.assertEqual(sorted(steps), ss.STEPS + [500])
        for step, entry in steps.items():
            branch = f"step_{step}"
            self.assertEqual(entry["name"], branch)
            self.assertEqual(entry["commit"], ss.commit_of(self.hub, ss.DUPES, branch))
            files = {f["path"]: f for f in entry["files"]}
            self.assertIn("model.safetensors", files)
            self.assertIn("config.json", files)
            self.assertEqual(files["model.safetensors"]["sha256"],
                             ss.lfs_sha256(self.hub, ss.DUPES, branch))
            self.assertEqual(int(files["model.safetensors"]["size"]), os.path.getsize(
                os.path.join(ss.SERIES, f"step_{min(step, 400)}", "model.safetensors")))
        self.assertEqual(int(ss.json_field(steps[500], "duplicateOf", "duplicate_of")), 400)
        for step in ss.STEPS:
            self.assertIsNone(ss.json_field(steps[step], "duplicateOf", "duplicate_of"), step)
        self.assertEqual(sorted(ss.json_field(audit, "withoutStep", "without_step")),
                         ["main", "notes"])
        # No weight byte was read: no file request at all.
        resolves, _ = ss.requests_matching(self.hub.stats(),
                                           lambda listener, path: "/resolve/" in path
                                           or listener == "cdn")
        self.assertEqual(resolves, 0, self.hub.stats())

        table = self.server.cli("audit", "--hub", ss.DUPES, check=True).stdout
        self.assertRegex(table, r"500\s+step_500\s+step_500\s+[0-9a-f]{12}\s+\d+\s+.*\s400\b")
        self.assertIn("names without a step", table)
        self.assertIn("--dedupe skips it", table)

        # The same series from S3 and from the folder.
        s3 = json.loads(self.server.cli("audit", "--s3", ss.S3_URL, "--format", "json",
                                        check=True).stdout)
        self.assertEqual(sorted(int(s["step"]) for s in s3["steps"]), ss.STEPS)
        folder = json.loads(self.server.cli("audit", "--checkpoints", ss.SERIES, "--format",
                                            "json", check=True).stdout)
        self.assertEqual(sorted(int(s["step"]) for s in folder["steps"]), ss.STEPS)
        # The HTTP API's answer is the CLI's JSON (but for the time it took).
        query = urllib.parse.urlencode({"hub": ss.DUPES})
        with urllib.request.urlopen(f"{self.base}/api/v1/audit?{query}", timeout=30) as r:
            http = json.load(r)
        for answer in (http, audit):
            answer.pop("seconds", None)
        self.assertEqual(http, audit)

    def test_dedupe_skips_the_duplicate_before_its_download(self):
        self.hub.reset_stats()
        result = self.submit("dedupe", "--hub", ss.DUPES, "--revisions", "step_400,step_500",
                             "--dedupe")
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = ss.job_checkpoints(self.db, job_id(result.stdout + result.stderr))
        self.assertEqual(rows[400]["state"], "done", rows)
        self.assertEqual(rows[500]["state"], "skipped", rows)
        self.assertEqual(ss.run_steps(self.db, "dedupe"), [(400, 1)])
        commit = ss.commit_of(self.hub, ss.DUPES, "step_500")
        fetched, _ = ss.requests_matching(
            self.hub.stats(), lambda listener, path: "/resolve/" in path and
            ("step_500" in path or commit in path))
        self.assertEqual(fetched, 0, self.hub.stats())

    def test_follow_adds_each_new_branch_once(self):
        live = os.path.join(self.work, "hub", ss.ORG, "live")
        ss.link_step(os.path.join(ss.SERIES, "step_0"), os.path.join(live, "step_0"))
        follow = subprocess.Popen(
            [os.path.join(BIN, "anisoscope"), "--server", self.server.address, "follow",
             "--run", "live", "--hub", f"{ss.ORG}/live", "--probe-tokens", ss.PROBE,
             "--until-step", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(wait_for(lambda: ss.run_steps(self.db, "live") == [(0, 1)],
                                     timeout=60), follow.poll())
            # A branch pushed while the job follows the repo joins it, and ends it.
            ss.link_step(os.path.join(ss.SERIES, "step_100"), os.path.join(live, "step_100"))
            out, err = follow.communicate(timeout=60)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.communicate()
        self.assertEqual(follow.returncode, 0, err)
        self.assertIn("step 100 written", err)
        self.assertEqual(ss.run_steps(self.db, "live"), [(0, 1), (100, 1)])
        series = ss.run_values(self.db, "live")[0]
        want = {k: v for k, v in self.folder_values[0].items() if k[0] in (0, 100)}
        self.assertEqual(series, want)

    def test_docs_name_what_the_binaries_and_metrics_offer(self):
        """docs/sources.md's flags and /metrics series are the binaries' own (one home each:
        the binaries' --help and the server's /metrics)."""
        with open(DOCS) as f:
            docs = f.read()
        flags = docs[docs.index("## Flags"):]
        helps = {name: subprocess.run([os.path.join(BIN, name), *extra, "--help"],
                                      capture_output=True, text=True, timeout=30).stdout
                 for name, extra in (("anisoscope-server", []), ("anisoscope-worker", []))}
        named = re.findall(r"^\| `(--[a-z0-9-]+)", flags, re.M)
        self.assertGreaterEqual(len(named), 7, named)
        for flag in named:
            on = re.search(rf"^\| `{flag}[^|]*\| ([^|]+)\|", flags, re.M).group(1)
            for binary, text in helps.items():
                if ("worker" in binary and "worker" in on) or ("server" in binary and
                                                                "server" in on):
                    self.assertRegex(text, rf"\s{flag}\b", (binary, flag))
        for command, wanted in (("submit", ["--hub", "--hub-repos", "--s3", "--revisions",
                                            "--glob", "--revision", "--dedupe"]),
                                ("follow", ["--hub", "--hub-repos", "--s3"]),
                                ("audit", ["--hub", "--hub-repos", "--s3", "--checkpoints",
                                           "--format"])):
            text = self.server.cli(command, "--help").stdout
            for flag in wanted:
                self.assertRegex(text, rf"\s{flag}\b", (command, flag))
        documented = set(re.findall(r"anisoscope_source_\w+", docs))
        self.assertEqual(documented, set(self.source_metrics()))

    def test_a_missing_revision_fails_only_its_step(self):
        # DUPES, so that REPO's steps are not in the cache before the Hub test downloads them.
        result = self.submit("missing", "--hub", ss.DUPES, "--revisions", "step_0,step_9")
        self.assertEqual(result.returncode, 1, result.stderr)
        rows = ss.job_checkpoints(self.db, job_id(result.stdout + result.stderr))
        self.assertEqual(rows[0]["state"], "done", rows)
        self.assertEqual(rows[9]["state"], "failed", rows)
        self.assertIn(ss.DUPES, rows[9]["error"])
        self.assertIn("step_9", rows[9]["error"])
        self.assertIn("step_9", result.stderr)
        self.assertEqual(ss.run_steps(self.db, "missing"), [(0, 1)])

    def test_a_source_outside_allow_source_is_refused_naming_it(self):
        cases = [(["--hub", "someone/else"], "hub:someone/else"),
                 (["--s3", f"s3://{ss.BUCKET}/secret/"], f"s3://{ss.BUCKET}/secret/"),
                 (["--hub-repos", "google/multiberts-seed_0-step_{}k"],
                  "hub:google/multiberts-seed_0-step_{}k")]
        for source, named in cases:
            self.hub.reset_stats()
            result = self.submit("refused", *source, wait=False)
            self.assertEqual(result.returncode, 1, (source, result.stderr))
            self.assertIn("PERMISSION_DENIED", result.stderr)
            self.assertIn(named, result.stderr)
            self.assertIn("is not allowed by the server's --allow-source", result.stderr)
            audit = self.server.cli("audit", *source)
            self.assertIn("PERMISSION_DENIED", audit.stderr, source)
            self.assertEqual(self.hub.stats(), {}, "a refused source was listed")
        self.assertNotIn("refused", self.server.cli("jobs", check=True).stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
