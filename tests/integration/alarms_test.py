#!/usr/bin/python3
"""Training-health alarms on a real collapse: tests/fixtures/train_collapse.py trains a tiny
model into attention entropy collapse while `anisoscope follow` analyses each checkpoint as it
appears; the server's default rules fire no later than the step where the loss diverges, and
the alarm shows in the follow output, `anisoscope alarms`, GET /api/v1/alarms, /metrics and a
real webhook receiver (which fails its first delivery, so the retry is proven too). The same
model trained healthily fires no default rule. Rule files are refused at start naming the line.
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

from server_process import BIN, ServerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "fixtures", "train_collapse.py")
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
sys.path.insert(0, HERE)
from observability_test import parse_exposition  # noqa: E402


class WebhookReceiver(http.server.ThreadingHTTPServer):
    """A local HTTP receiver that answers its first POST 503 and every later one 200, keeping
    the JSON bodies it took."""

    def __init__(self):
        self.bodies, self.posts = [], 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts += 1
                if receiver.posts == 1:
                    self.send_response(503)
                else:
                    receiver.bodies.append(json.loads(body))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/hooks/anisoscope"


def train(out, lr, steps, pause=0.0):
    return subprocess.Popen([PYTHON, TRAIN, "--out", out, "--lr", str(lr), "--steps", str(steps),
                             "--pause", str(pause)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {seconds} s")


class AlarmsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="anisoscope_alarms_")
        cls.receiver = WebhookReceiver()
        cls.server = ServerProcess(os.path.join(cls.work, "alarms.db"), [cls.work], [
            "--follow-interval", "0.1", "--http-listen", "127.0.0.1:0",
            "--alarm-webhook", cls.receiver.url]).start()
        line = cls.server.process.stdout.readline()
        cls.base = re.match(r"dashboard at (http://\S+)/$", line.strip()).group(1)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.receiver.shutdown()
        shutil.rmtree(cls.work, ignore_errors=True)

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=10) as response:
            return response.read().decode()

    def alarms(self, run):
        result = self.server.cli("alarms", "--run", run, "--format", "json", check=True)
        return json.loads(result.stdout)

    def test_a_collapsing_run_alarms_no_later_than_its_loss_diverges_everywhere_the_team_looks(self):
        out = os.path.join(self.work, "collapse")
        trainer = train(out, 0.1, 10, pause=0.15)
        probe = os.path.join(out, "probe.jsonl")
        wait_for(lambda: os.path.exists(probe), 60, "probe from the trainer")
        follow = subprocess.Popen(
            [os.path.join(BIN, "anisoscope"), "--server", self.server.address, "follow", "--run",
             "collapse", "--checkpoints", out, "--probe-tokens", probe, "--until-step", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, trainer_err = trainer.communicate(timeout=300)
        self.assertEqual(trainer.returncode, 0, trainer_err)
        follow_out, follow_err = follow.communicate(timeout=300)
        self.assertEqual(follow.returncode, 0, follow_err)
        with open(os.path.join(out, "divergence.txt")) as f:
            divergence = int(f.read().split()[0])
        self.assertLessEqual(divergence, 6, "the fixture no longer diverges early")

        # The CLI: the collapse fired on a layer no later than the divergence.
        alarms = self.alarms("collapse")
        collapse = [a for a in alarms if a["rule"] == "attention_entropy_collapse"]
        self.assertTrue(collapse, alarms)
        first = min(int(a["step"]) for a in collapse)
        print(f"\n  collapse: loss diverges at step {divergence}; attention_entropy_collapse "
              f"fired at step {first} (layers {sorted({a['layer'] for a in collapse})}); "
              f"every alarm: {[(a['rule'], a['layer'], int(a['step'])) for a in alarms]}",
              file=sys.stderr)
        self.assertLessEqual(first, divergence)
        self.assertEqual(collapse[0]["severity"], "critical")
        self.assertIn("attention entropy", collapse[0]["summary"])
        # ... and live in the follow output (WatchJob's KIND_ALARM events).
        self.assertRegex(follow_err,
                         rf"ALARM \(critical\) at step {first}: attention_entropy_collapse layer")
        table = self.server.cli("alarms", "--run", "collapse", check=True).stdout
        self.assertIn("attention_entropy_collapse", table.splitlines()[1 + alarms.index(collapse[0])])

        # The HTTP API: the same alarms, in the same order; state filters.
        api = json.loads(self.get("/api/v1/alarms?run=collapse"))["alarms"]
        self.assertEqual([a["id"] for a in api], [a["id"] for a in alarms])
        firing = json.loads(self.get("/api/v1/alarms?run=collapse&state=firing"))["alarms"]
        self.assertTrue(all(a["state"] == "ALARM_STATE_FIRING" for a in firing))
        self.assertIn(collapse[0]["id"], [a["id"] for a in firing])

        # /metrics: the firing alarm and the run's summary gauges.
        families = parse_exposition(self.get("/metrics"))
        labels = [labels for _, labels, value in families["anisoscope_alarm_firing"]["samples"]
                  if labels["run"] == "collapse" and value == 1]
        self.assertIn({"namespace": "default", "run": "collapse",
                       "rule": "attention_entropy_collapse", "severity": "critical",
                       "layer": str(collapse[0]["layer"])}, labels)
        entropy = {labels["layer"]: value for _, labels, value in
                   families["anisoscope_run_min_attn_entropy"]["samples"]
                   if labels["run"] == "collapse"}
        self.assertEqual(sorted(entropy), ["0", "1"])
        self.assertLess(min(entropy.values()), 0.5)
        latest = [value for _, labels, value in
                  families["anisoscope_run_latest_step"]["samples"] if labels["run"] == "collapse"]
        self.assertEqual(latest, [10])

        # The webhook: every alarm fired or resolved, the first after a retry (503 first).
        changes = len(alarms) + sum(1 for a in alarms if a["state"] == "ALARM_STATE_RESOLVED")
        wait_for(lambda: len(self.receiver.bodies) >= changes, 20, f"{changes} webhook bodies")
        self.assertEqual(self.receiver.posts, changes + 1)
        delivered = {(body["alarm"]["id"], body["alarm"]["state"]) for body in self.receiver.bodies}
        self.assertIn((collapse[0]["id"], "ALARM_STATE_FIRING"), delivered)
        deliveries = parse_exposition(self.get("/metrics"))
        counts = {labels["outcome"]: value for _, labels, value in
                  deliveries["anisoscope_alarm_webhook_deliveries_total"]["samples"]}
        self.assertEqual(counts, {"delivered": changes, "failed": 0, "dropped": 0})

        # Re-submitted with --force: every step is stored and checked again, and each alarm
        # fires again in place: one row per event, as before, with a new revision (pollers see
        # it); the re-run's watchers are told, the webhook is not told again.
        last_revision = max(int(a["revision"]) for a in alarms)
        rerun = self.server.cli("submit", "--run", "collapse", "--checkpoints", out,
                                "--probe-tokens", probe, "--force", "--wait")
        self.assertEqual(rerun.returncode, 0, rerun.stderr)
        self.assertRegex(rerun.stderr,
                         rf"ALARM \(critical\) at step {first}: attention_entropy_collapse layer")
        again = self.alarms("collapse")
        event = lambda a: (a["rule"], a["layer"], int(a["step"]))  # noqa: E731
        self.assertEqual(len({event(a) for a in again}), len(again), again)
        self.assertEqual(sorted((event(a), a["id"], a["state"], a.get("resolvedStep"))
                                for a in again),
                         sorted((event(a), a["id"], a["state"], a.get("resolvedStep"))
                                for a in alarms))
        self.assertTrue(all(int(a["revision"]) > last_revision for a in again), again)
        table = self.server.cli("alarms", "--run", "collapse", check=True).stdout
        self.assertEqual(len(table.splitlines()), 1 + len(alarms), table)
        time.sleep(1)  # a webhook delivery would come from the local queue well within this
        self.assertEqual(len(self.receiver.bodies), changes)

    def test_a_healthy_run_fires_no_default_rule(self):
        out = os.path.join(self.work, "healthy")
        trainer = train(out, 0.003, 40)
        _, err = trainer.communicate(timeout=300)
        self.assertEqual(trainer.returncode, 0, err)
        result = self.server.cli("submit", "--run", "healthy", "--checkpoints", out,
                                 "--probe-tokens", os.path.join(out, "probe.jsonl"), "--wait")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("41 done", result.stdout)
        self.assertEqual(self.alarms("healthy"), [])
        self.assertEqual(json.loads(self.get("/api/v1/alarms?run=healthy"))["alarms"], [])

    def test_another_namespace_sees_no_alarm(self):
        self.assertEqual(json.loads(self.get("/api/v1/alarms?namespace=other"))["alarms"], [])

    def test_a_malformed_rule_stops_the_server_naming_its_line(self):
        rules = os.path.join(self.work, "bad_rules.toml")
        with open(rules, "w") as f:
            f.write('[[rule]]\nname = "ok"\nmetric = "attn_entropy"\nbelow = 0.5\n\n'
                    '[[rule]]\nname = "typo"\nmetric = "attn_entropy"\nbelow = 0.5\n'
                    'windw = 3\n')
        result = subprocess.run(
            [os.path.join(BIN, "anisoscope-server"), "--listen", "127.0.0.1:0", "--db",
             os.path.join(self.work, "bad.db"), "--allow-root", self.work, "--alarm-rules", rules],
            capture_output=True, text=True, timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"alarm rules {rules} line 10: 'windw' is not a rule key", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
