#!/usr/bin/python3
"""The HTTP/JSON API of the real server process on the bert_run fixture: its series equal
the gRPC CLI's, and its trajectory equals an independent torch.linalg.svd (float64) of the
vectors it serves."""
import json
import os
import re
import shutil
import tempfile
import unittest
import urllib.error
import urllib.request

import torch

from server_process import ServerProcess

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
STEPS = [0, 100, 250, 400]


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.path.exists(os.path.join(FIXTURE, "probe.jsonl")), f"no fixture at {FIXTURE}"
        cls.work = tempfile.mkdtemp(prefix="anisoscope_http_")
        cls.server = ServerProcess(os.path.join(cls.work, "metrics.db"), [FIXTURE], [
            "--http-listen", "127.0.0.1:0", "--web-dir", os.path.join(cls.work, "no_web")])
        cls.server.start()
        line = cls.server.process.stdout.readline()
        match = re.match(r"dashboard at (http://127\.0\.0\.1:\d+)/$", line.strip())
        assert match, f"no dashboard line: {line!r}"
        cls.base = match.group(1)
        result = cls.server.cli("submit", "--run", "seed0", "--checkpoints",
                                os.path.join(FIXTURE, "safetensors"), "--probe-tokens",
                                os.path.join(FIXTURE, "probe.jsonl"), "--wait")
        assert result.returncode == 0, result.stderr

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    def get(self, path):
        """(status, parsed JSON or text) of GET path."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=10) as response:
                status, body, kind = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            status, body, kind = error.code, error.read(), error.headers
        if kind.get("Content-Type", "").startswith("application/json"):
            return status, json.loads(body)
        return status, body.decode()

    def cli_json(self, *args):
        return json.loads(self.server.cli(*args, "--format", "json", check=True).stdout)

    def assert_series_equal(self, http_points, cli_points):
        self.assertEqual(len(http_points), len(cli_points))
        for got, want in zip(http_points, cli_points):
            self.assertEqual(int(got["step"]), want["step"])  # int64: a JSON string
            self.assertEqual(got["layer"], want["layer"])
            self.assertEqual(got["head"], -1 if want["head"] is None else want["head"])
            self.assertEqual(got["value"], want["value"])

    def test_series_equal_the_grpc_cli_query(self):
        for metric, extra in [("qk_mean_cosine", []), ("attn_entropy", ["--layer", "1"]),
                              ("hidden_anisotropy", [])]:
            query = f"/api/v1/series?run=seed0&metric={metric}" + "".join(
                f"&{extra[i][2:]}={extra[i + 1]}" for i in range(0, len(extra), 2))
            status, body = self.get(query)
            self.assertEqual(status, 200, body)
            self.assertFalse(body["downsampled"])
            cli = self.cli_json("query", "--run", "seed0", "--metric", metric, *extra)
            self.assert_series_equal(body["points"], cli)
        # Polling and downsampling agree too (3 steps after 0, max 2 points: 1 bucket).
        status, body = self.get("/api/v1/series?run=seed0&metric=qk_mean_cosine&since_step=0"
                                "&max_points=2")
        self.assertEqual(status, 200, body)
        self.assertTrue(body["downsampled"])
        self.assertTrue(all(int(p["step"]) > 0 for p in body["points"]))
        cli = self.cli_json("query", "--run", "seed0", "--metric", "qk_mean_cosine",
                            "--since-step", "0", "--max-points", "2")
        self.assert_series_equal(body["points"], cli)

    def test_trajectory_equals_torch_svd_of_the_served_vectors(self):
        for layer, head in [(0, 0), (2, 3)]:
            rows = {}
            for kind in ("q_mean", "k_mean"):
                status, body = self.get(
                    f"/api/v1/vectors?run=seed0&kind={kind}&layer={layer}&head={head}")
                self.assertEqual(status, 200, body)
                self.assertEqual([int(p["step"]) for p in body["points"]], STEPS)
                rows[kind] = [p["values"] for p in body["points"]]
            m = torch.tensor(rows["q_mean"] + rows["k_mean"], dtype=torch.float64)
            _, s, vh = torch.linalg.svd(m, full_matrices=False)
            basis = []
            for v in vh[:2]:
                basis.append(v if float((m @ v).sum()) >= 0 else -v)  # documented orientation
            coords = torch.stack([m @ basis[0], m @ basis[1]], dim=1)
            scale = float(coords.abs().max())

            status, body = self.get(f"/api/v1/trajectory?run=seed0&layer={layer}&head={head}")
            self.assertEqual(status, 200, body)
            self.assertIn("singular vectors", body["basis"])
            self.assertAlmostEqual(body["explainedVariance"],
                                   float((s[:2] ** 2).sum() / (s ** 2).sum()), delta=1e-9)
            for got, want in zip(body["singularValues"], s.tolist()):
                self.assertAlmostEqual(got, want, delta=1e-9 * float(s[0]))
            self.assertEqual([int(p["step"]) for p in body["points"]], STEPS)
            n = len(STEPS)
            for i, point in enumerate(body["points"]):
                for name, want in [("qX", coords[i, 0]), ("qY", coords[i, 1]),
                                   ("kX", coords[n + i, 0]), ("kY", coords[n + i, 1])]:
                    self.assertAlmostEqual(point[name], float(want), delta=1e-9 * scale,
                                           msg=(layer, head, i, name))
            cli = self.cli_json("trajectory", "--run", "seed0", "--layer", layer, "--head", head)
            self.assertEqual([[c["step"], c["q_x"], c["q_y"], c["k_x"], c["k_y"]] for c in cli],
                             [[int(p["step"]), p["qX"], p["qY"], p["kX"], p["kY"]]
                              for p in body["points"]])

    def test_runs_jobs_and_errors(self):
        status, body = self.get("/api/v1/runs")
        self.assertEqual(status, 200)
        run = body["runs"][0]
        self.assertEqual((run["name"], run["numLayers"], run["numHeads"]), ("seed0", 3, 4))
        self.assertEqual(run["steps"], [str(s) for s in STEPS])
        status, body = self.get("/api/v1/jobs?run=seed0")
        self.assertEqual(status, 200)
        self.assertEqual(body["jobs"][0]["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(body["jobs"][0]["stepsFinished"], len(STEPS))
        status, job = self.get(f"/api/v1/jobs/{body['jobs'][0]['id']}")
        self.assertEqual((status, job["run"]), (200, "seed0"))
        status, body = self.get("/api/v1/series?run=nope&metric=qk_mean_cosine")
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["status"], "NOT_FOUND")
        status, body = self.get("/api/v1/series?run=seed0&metric=qk_mean_cosine&bogus=1")
        self.assertEqual((status, body["error"]["message"]), (400, "unknown parameter 'bogus'"))
        status, text = self.get("/")
        self.assertEqual(status, 503)
        self.assertIn("not built", text)


if __name__ == "__main__":
    unittest.main()
