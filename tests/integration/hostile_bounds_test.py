#!/usr/bin/python3
"""What a hostile tenant can make the real server hold, each bounded: a series query past
--max-series-points over a large stored series is refused before a point is read (the
server's peak RSS barely moves, while answering it costs it ~100 MiB); one caller cannot
hold every WatchJob stream (another token, another namespace still gets one); a probe of
more token ids than --max-probe-tokens is refused at submit. Real server and CLI
processes over loopback, with --auth tokens; nothing from the fixtures."""
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
import unittest

import grpc

from server_process import BIN, ServerProcess, create_token, process_bytes

WATCH = "/anisoscope.v1.JobService/WatchJob"


def peak_rss_mib(pid):
    """The process's peak resident set (VmHWM), in MiB."""
    return process_bytes(pid) / (1 << 20)


def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def insert_row(db, table, values):
    """Inserts `values` into `table`, filling its other NOT NULL columns with 0 or ''."""
    columns = db.execute(f"PRAGMA table_info({table})").fetchall()
    row = {}
    for _, name, kind, not_null, default, primary in columns:
        if name in values:
            row[name] = values[name]
        elif not_null and default is None and not primary:
            row[name] = 0 if kind.upper() in ("INTEGER", "REAL") else ""
    names = ", ".join(row)
    marks = ", ".join("?" * len(row))
    return db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})",
                      list(row.values())).lastrowid


class HostileBoundsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="anisoscope_hostile_")
        self.root = os.path.join(self.dir, "root")
        os.makedirs(self.root)
        self.db = os.path.join(self.dir, "team.db")
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def token(self, name, role, namespace):
        return create_token(self.db, name, role, namespace)

    def start(self, *extra):
        self.server = ServerProcess(self.db, [self.root], [
            "--workers", "0", "--auth", "tokens", *extra]).start()

    def restart(self, *extra):
        self.server.stop()
        self.start(*extra)

    def cli(self, token, *args):
        return subprocess.run([os.path.join(BIN, "anisoscope"), "--server", self.server.address,
                               *map(str, args)], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, ANISOSCOPE_TOKEN=token))

    def checkpoints(self, name):
        """A directory of one step whose files are never read (no worker runs)."""
        step = os.path.join(self.root, name, "step_1")
        os.makedirs(step)
        with open(os.path.join(step, "config.json"), "w") as f:
            f.write("{}")
        with open(os.path.join(step, "model.safetensors"), "wb") as f:
            f.write(b"w" * 1000)
        return os.path.dirname(step)

    def probe(self, name, lines, ids_per_line):
        path = os.path.join(self.root, name)
        with open(path, "w") as f:
            line = "[" + ", ".join(str(7 + i % 1000) for i in range(ids_per_line)) + "]\n"
            f.write(line * lines)
        return path

    def submit(self, token, run, *probe_args):
        return self.cli(token, "submit", "--run", run, "--checkpoints", self.checkpoints(run),
                        *probe_args)

    def store_series(self, steps, layers, heads):
        """A run 'big' in namespace 'nlp' with steps x layers x heads points of
        qk_mean_cosine, written into the database as the server stores them."""
        with sqlite3.connect(self.db) as db:
            run = insert_row(db, "runs", {
                "name": "big", "namespace": "nlp", "model_family": "bert",
                "num_layers": layers, "num_heads": heads, "head_dim": 64,
                "created_at": "2024-01-01T00:00:00Z"})
            probe_columns = [c[1] for c in db.execute("PRAGMA table_info(probes)")]
            probe = {"id": "p" + "0" * 32, "description": "probe", "num_samples": 1,
                     "num_tokens": 1}
            if "namespace" in probe_columns:
                probe["namespace"] = "nlp"
            insert_row(db, "probes", probe)
            metric = insert_row(db, "metrics", {"name": "qk_mean_cosine"})
            for step in range(steps):
                step_id = insert_row(db, "steps", {
                    "run_id": run, "probe_id": probe["id"], "step": step * 100,
                    "checkpoint_path": f"/data/step_{step}", "checkpoint_bytes": 1,
                    "seconds": 1.0, "stored_at": "2024-01-01T00:00:00Z"})
                db.executemany("INSERT INTO series VALUES (?, ?, ?, ?, ?)",
                               ((step_id, metric, layer, head, 0.001 * (layer + head + step))
                                for layer in range(layers) for head in range(heads)))

    def test_a_series_query_past_the_bound_is_refused_before_it_is_read(self):
        reader = self.token("dash", "reader", "nlp")
        self.start()  # creates the schema
        self.server.stop()
        self.store_series(steps=100, layers=100, heads=300)  # 3,000,000 points
        query = ("query", "--run", "big", "--metric", "qk_mean_cosine")

        self.start("--max-series-points", "1000000")
        before = peak_rss_mib(self.server.process.pid)
        refused = self.cli(reader, *query)
        refused_growth = peak_rss_mib(self.server.process.pid) - before
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("RESOURCE_EXHAUSTED", refused.stderr)
        self.assertIn("--max-series-points", refused.stderr)
        self.assertIn("3000000 points", refused.stderr)
        self.assertLess(refused_growth, 16, f"refused query grew the server {refused_growth} MiB")

        # The same query under a bound it fits is read: what the refusal saved.
        self.restart("--max-series-points", "4000000")
        before = peak_rss_mib(self.server.process.pid)
        self.cli(reader, *query)  # its answer passes the 64 MiB message limit; read anyway
        read_growth = peak_rss_mib(self.server.process.pid) - before
        print(f"\npeak RSS growth: refused {refused_growth:.1f} MiB, read {read_growth:.1f} MiB")
        self.assertGreater(read_growth, 64)

        # Downsampled, the same 3,000,000 points answer within the bound, read a layer at a time.
        self.restart("--max-series-points", "1000000")
        started = time.monotonic()
        downsampled = self.cli(reader, *query, "--max-points", "10", "--format", "csv")
        print(f"downsampled answer of 3,000,000 points in {time.monotonic() - started:.1f} s")
        self.assertEqual(downsampled.returncode, 0, downsampled.stderr)
        lines = len(downsampled.stdout.strip().splitlines())
        self.assertTrue(30000 * 2 < lines <= 1 + 30000 * 12, lines)

    def test_one_caller_cannot_hold_every_watch_stream(self):
        hog = self.token("hog", "writer", "nlp")
        neighbour = self.token("neighbour", "writer", "nlp")
        other = self.token("other", "writer", "vision")
        self.start("--max-watch-streams-per-caller", "4", "--max-watch-streams-per-namespace", "6",
                   "--max-watch-streams", "100")
        probe = self.probe("probe.jsonl", 2, 8)
        jobs = {}
        for name, token in (("hog", hog), ("other", other)):
            submitted = self.submit(token, f"run-{name}", "--probe-tokens", probe)
            self.assertEqual(submitted.returncode, 0, submitted.stderr)
            jobs[name] = int(submitted.stdout.split("job ")[1].split()[0])
        channel = grpc.insecure_channel(self.server.address)
        watch = channel.unary_stream(WATCH)
        streams = []

        def open_stream(token, job):
            """A WatchJob stream left open after its snapshot; None when refused (the
            refusal's details are kept in self.refusal)."""
            stream = watch(b"\x08" + varint(job), metadata=[("authorization", f"Bearer {token}")],
                           timeout=60)
            try:
                next(stream)
            except grpc.RpcError as error:
                self.refusal = (error.code(), error.details())
                return None
            streams.append(stream)
            return stream

        try:
            # The hog opens streams until refused: it holds 4, not all 100.
            held = 0
            while open_stream(hog, jobs["hog"]) is not None:
                held += 1
                self.assertLess(held, 100)
            self.assertEqual(held, 4)
            self.assertEqual(self.refusal[0], grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn("--max-watch-streams-per-caller", self.refusal[1])
            # Another token of its namespace still gets one; another namespace too.
            self.assertIsNotNone(open_stream(neighbour, jobs["hog"]), self.refusal)
            self.assertIsNotNone(open_stream(other, jobs["other"]), self.refusal)
        finally:
            for stream in streams:
                stream.cancel()
            channel.close()

    def test_a_huge_probe_is_refused_at_submit(self):
        writer = self.token("alice", "writer", "nlp")
        self.start()
        # 300,000 token ids in 3 lines: more than the default 128 x 2048.
        huge = self.probe("huge.jsonl", 3, 100_000)
        refused = self.submit(writer, "huge", "--probe-tokens", huge, "--samples", "3")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("RESOURCE_EXHAUSTED", refused.stderr)
        self.assertIn("--max-probe-tokens", refused.stderr)
        # More samples than token ids allowed: refused before the file is opened.
        small = self.probe("small.jsonl", 2, 8)
        many = self.submit(writer, "many", "--probe-tokens", small, "--samples", "1000000")
        self.assertIn("--max-probe-tokens", many.stderr)
        fits = self.submit(writer, "fits", "--probe-tokens", small)
        self.assertEqual(fits.returncode, 0, fits.stderr)
        # Nothing of the refused jobs was stored.
        with sqlite3.connect(self.db) as db:
            self.assertEqual(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0], 1)


if __name__ == "__main__":
    unittest.main()
