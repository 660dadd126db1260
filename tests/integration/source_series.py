"""What the remote-source tests (issue 38) share: a tiny trained series (the bert_run
fixture's safetensors steps) laid out as Hub branches for tests/sources/servers/hub_server.py
and put under an S3 prefix of s3_server.py, the real server started with the source flags,
a remote anisoscope-worker that sees only its cache folder, and readers of what the server
stored. The servers run in this process (threads; s3rver is a node child process)."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys

from server_process import BIN, ServerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sources", "servers"))
import prerequisites  # noqa: E402
from hub_server import HubServer  # noqa: E402
from s3_server import S3Server  # noqa: E402

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
SERIES = os.path.join(FIXTURE, "safetensors")  # step_0, step_100, step_250, step_400
PROBE = os.path.join(FIXTURE, "probe.jsonl")
STEPS = [0, 100, 250, 400]
ORG = "anisotest"
REPO = f"{ORG}/bert-tiny"              # one branch per step, and main
DUPES = f"{ORG}/bert-tiny-dupes"       # the same, plus step_500 = step_400 and "notes"
BUCKET = "anisoscope-test"
PREFIX = "runs/bert-tiny/"
S3_URL = f"s3://{BUCKET}/{PREFIX}"
HUB_TOKEN = "hf_anisoscope_test_reader"
CACHE_BYTES = 64 * 1024 * 1024


def require_servers():
    """node, s3rver's npm modules and s3cmd: missing fails under CI, skips elsewhere."""
    prerequisites.node()
    prerequisites.npm_module("s3rver")
    prerequisites.s3cmd()


def require_fixture():
    if not os.path.exists(PROBE):
        prerequisites.require(False, f"fixture bert_run missing at {FIXTURE}")


def link_step(source, target):
    """A branch folder whose files are links to the fixture step's (no copy, same bytes),
    made under a hidden name and renamed into place: hub_server.py never lists half of it."""
    staging = os.path.join(os.path.dirname(target), "." + os.path.basename(target))
    os.makedirs(staging)
    for name in sorted(os.listdir(source)):
        os.symlink(os.path.join(source, name), os.path.join(staging, name))
    os.rename(staging, target)


def make_hub_root(root, steps=STEPS):
    """REPO: a branch per step plus main (the last step's files: a name without a step);
    DUPES: the same, plus step_500 holding step_400's bytes and a `notes` branch."""
    for repo in (REPO, DUPES):
        base = os.path.join(root, repo)
        for step in steps:
            link_step(os.path.join(SERIES, f"step_{step}"), os.path.join(base, f"step_{step}"))
        link_step(os.path.join(SERIES, f"step_{steps[-1]}"), os.path.join(base, "main"))
    base = os.path.join(root, DUPES)
    link_step(os.path.join(SERIES, f"step_{steps[-1]}"), os.path.join(base, "step_500"))
    link_step(os.path.join(SERIES, f"step_{steps[0]}"), os.path.join(base, "notes"))
    return root


def start_hub(work, **options):
    return HubServer(make_hub_root(os.path.join(work, "hub")), tokens=[HUB_TOKEN],
                     **options).start()


def start_s3():
    s3 = S3Server(bucket=BUCKET).start()
    s3.put_tree(SERIES, PREFIX)
    return s3


def commit_of(hub, repo, branch):
    return hub.store.snapshot(repo, branch).commit


def lfs_sha256(hub, repo, branch, path="model.safetensors"):
    return hub.store.snapshot(repo, branch).files[path].sha256


def source_flags(hub=None, s3=None, allow=None):
    """The server's (or a worker's, without --allow-source) endpoint flags."""
    flags = []
    if hub is not None:
        flags += ["--hub-endpoint", hub.url]
    if s3 is not None:
        flags += ["--s3-endpoint", s3.url, "--s3-region", "us-east-1"]
    for source in allow or ():
        flags += ["--allow-source", source]
    return flags


def source_env(s3=None, hub_token=None):
    """The process environment for a server or worker: S3's keys, no stray Hub token."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_TOKEN", "HF_ENDPOINT", "AWS_PROFILE")}
    if s3 is not None:
        env.update({"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                    "AWS_REGION": "us-east-1"})
    if hub_token is not None:
        env["HF_TOKEN"] = hub_token
    return env


class SourceServer(ServerProcess):
    """anisoscope-server with the source flags, in an environment of the test's."""

    def __init__(self, db, roots, extra_args=(), env=None):
        super().__init__(db, roots, extra_args)
        self.env = env

    def start(self):
        saved = dict(os.environ)
        if self.env is not None:
            os.environ.clear()
            os.environ.update(self.env)
        try:
            return super().start()
        finally:
            os.environ.clear()
            os.environ.update(saved)


class Worker:
    """anisoscope-worker with a name, its own allowed roots and cache, and a log file."""

    def __init__(self, server, name, log_dir, roots, extra_args=(), env=None):
        self.name = name
        self.log_path = os.path.join(log_dir, f"{name}.log")
        args = [os.path.join(BIN, "anisoscope-worker"), "--server", server, "--name", name,
                "--threads", "1", "--batch-size", "8", *extra_args]
        for root in roots:
            args += ["--allow-root", root]
        self.log = open(self.log_path, "a")
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True, env=env)
        line = self.process.stdout.readline()
        if f"worker {name} started" not in line:
            self.stop()
            raise RuntimeError(f"worker {name} did not start: {line!r}; log: {self.read_log()}")

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process.stdout.close()
        self.log.close()


def stop_all(*processes):
    """Stops each of a test's workers and servers, in order; None (one not started) is
    passed over."""
    for process in processes:
        if process is not None:
            process.stop()


def run_values(db, run):
    """Every stored value of `run`: ({(step, metric, layer, head): value},
    {(step, kind, layer, head): (dim, bytes)}), read from SQLite."""
    with sqlite3.connect(db) as connection:
        series = connection.execute(
            "SELECT s.step, m.name, v.layer, v.head, v.value FROM series v "
            "JOIN steps s ON s.id = v.step_id JOIN runs r ON r.id = s.run_id "
            "JOIN metrics m ON m.id = v.metric_id WHERE r.name = ?", (run,)).fetchall()
        vectors = connection.execute(
            "SELECT s.step, v.kind, v.layer, v.head, v.dim, v.data FROM vectors v "
            "JOIN steps s ON s.id = v.step_id JOIN runs r ON r.id = s.run_id "
            "WHERE r.name = ?", (run,)).fetchall()
    return ({row[:4]: row[4] for row in series},
            {row[:4]: (row[4], bytes(row[5])) for row in vectors})


def run_steps(db, run):
    """(step, rows stored) of `run`, ascending."""
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT s.step, COUNT(*) FROM steps s JOIN runs r ON s.run_id = r.id "
            "WHERE r.name = ? GROUP BY s.step ORDER BY s.step", (run,)).fetchall()


def series_rows_per_step(db, run):
    """{step: number of series rows}: a step stored whole has as many as any other."""
    with sqlite3.connect(db) as connection:
        return dict(connection.execute(
            "SELECT s.step, COUNT(*) FROM series v JOIN steps s ON s.id = v.step_id "
            "JOIN runs r ON r.id = s.run_id WHERE r.name = ? GROUP BY s.step", (run,)))


def job_checkpoints(db, job):
    """{step: {"state", "error", "worker", "attempt", "path"}} of a job, from SQLite."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT step, state, error, worker, attempt, path FROM checkpoints "
            "WHERE job_id = ? ORDER BY step", (int(job),)).fetchall()
    return {r[0]: {"state": r[1], "error": r[2], "worker": r[3], "attempt": r[4],
                   "path": r[5]} for r in rows}


def job_state(db, job):
    with sqlite3.connect(db) as connection:
        row = connection.execute("SELECT state, error FROM jobs WHERE id = ?",
                                 (int(job),)).fetchone()
    return row


def incomplete_files(cache_dir):
    """Every `.incomplete` download left under the cache."""
    found = []
    for dirpath, _, names in os.walk(cache_dir):
        found += [os.path.join(dirpath, n) for n in names if n.endswith(".incomplete")]
    return found


def empty_cache(cache_dir):
    """Drops the cached repos (models--*, s3--*) of an idle worker's cache; keeps .locks."""
    if not os.path.isdir(cache_dir):
        return
    for name in os.listdir(cache_dir):
        if name.startswith(("models--", "s3--")):
            shutil.rmtree(os.path.join(cache_dir, name), ignore_errors=True)


def requests_matching(stats, predicate):
    """(requests, bytes) over every listener's paths for which predicate(listener, path)."""
    count = nbytes = 0
    for listener, paths in stats.items():
        for path, entry in paths.items():
            if predicate(listener, path):
                count += entry["requests"]
                nbytes += entry["bytes"]
    return count, nbytes


def json_field(value, *names, default=None):
    """A field of the proto JSON mapping under any of its spellings (snake or camel case)."""
    for name in names:
        if name in value:
            return value[name]
    return default


def parse_json(text):
    return json.loads(text)
