#!/usr/bin/python3
"""A team's server: tokens made on the host, TLS for gRPC and HTTPS with a CA made here by
openssl, a worker authenticated by its client certificate, the audit log, a backup taken
while a job runs, revocation, and --auth none refused off loopback. Real processes over
loopback, on a real training run's checkpoints."""
import json
import os
import shutil
import sqlite3
import ssl
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

from server_process import BIN, ServerProcess, stored_steps, wait_for
from worker_test import FIXTURE, WorkerProcess

SERVER = os.path.join(BIN, "anisoscope-server")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory, name):
    """A CA key and self-signed certificate: <name>.key, <name>.pem."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=directory)


def make_cert(directory, ca, name, san):
    """<name>.key and <name>.pem signed by CA `ca`, with subjectAltName `san`."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
    with open(os.path.join(directory, f"{name}.ext"), "w") as ext:
        ext.write(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem",
            cwd=directory)


class TeamTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(os.path.join(FIXTURE, "probe.jsonl")):
            raise AssertionError(f"fixture bert_run missing at {FIXTURE}")
        cls.work = tempfile.mkdtemp(prefix="anisoscope_team_")
        cls.pki = os.path.join(cls.work, "pki")
        os.makedirs(cls.pki)
        make_ca(cls.pki, "ca")
        make_ca(cls.pki, "other-ca")
        make_cert(cls.pki, "ca", "server", "IP:127.0.0.1,DNS:localhost")
        make_cert(cls.pki, "ca", "gpu-node-7", "DNS:gpu-node-7")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.work)
        self.db = os.path.join(self.dir, "team.db")
        self.server, self.workers = None, []

    def tearDown(self):
        for worker in self.workers:
            worker.stop()
        if self.server:
            self.server.stop()

    def host(self, *args, check=True):
        result = subprocess.run([SERVER, *args], capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"anisoscope-server {' '.join(args)}: {result.stderr}")
        return result

    def token(self, name, role, namespace="default"):
        result = self.host("tokens", "create", "--db", self.db, "--name", name, "--role", role,
                           "--namespace", namespace)
        token = result.stdout.strip()
        self.assertTrue(token.startswith("anis_"), result.stdout)
        self.assertIn("shown only now", result.stderr)
        return token

    def start_server(self, *extra):
        pki = self.pki
        self.server = ServerProcess(self.db, [FIXTURE, self.dir], [
            "--workers", "0", "--http-listen", "127.0.0.1:0", "--auth", "tokens",
            "--tls-cert", f"{pki}/server.pem", "--tls-key", f"{pki}/server.key",
            "--tls-client-ca", f"{pki}/ca.pem", *extra]).start()
        line = self.server.process.stdout.readline()
        self.assertIn("dashboard at https://", line)
        self.https = line.split("https://")[1].strip().rstrip("/")

    def cli(self, token, *args, ca="ca.pem"):
        env = dict(os.environ, ANISOSCOPE_TOKEN=token)
        return subprocess.run([os.path.join(BIN, "anisoscope"), "--server", self.server.address,
                               "--tls-ca", os.path.join(self.pki, ca), *map(str, args)],
                              capture_output=True, text=True, timeout=300, env=env)

    def get(self, path, token=None):
        context = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.pem"))
        request = urllib.request.Request(f"https://{self.https}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def make_run(self, count, repeat):
        run_dir = os.path.join(self.dir, "run")
        for step in range(100, 100 * (count + 1), 100):
            shutil.copytree(os.path.join(FIXTURE, "bin", "step_400"),
                            os.path.join(run_dir, f"step_{step}"))
        probe = os.path.join(self.dir, "probe.jsonl")
        with open(os.path.join(FIXTURE, "probe.jsonl")) as src, open(probe, "w") as dst:
            dst.write(src.read() * repeat)
        return run_dir, probe

    def job_state(self, job):
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT state FROM jobs WHERE id = ?", (job,)).fetchone()[0]

    def test_a_team_works_over_tls_with_tokens_and_the_audit_log_says_who(self):
        admin = self.token("root", "admin")
        writer = self.token("alice", "writer", "nlp")
        reader = self.token("dash", "reader", "nlp")
        outsider = self.token("bob", "writer", "vision")
        listed = self.host("tokens", "list", "--db", self.db).stdout
        self.assertIn("alice\tnlp\twriter", listed)
        self.assertNotIn(writer, listed)
        self.start_server()
        run_dir, probe = self.make_run(3, 8)

        submitted = self.cli(writer, "submit", "--run", "bert", "--checkpoints", run_dir,
                             "--probe-tokens", probe, "--samples", "100000")
        self.assertEqual(submitted.returncode, 0, submitted.stderr)
        job = int(submitted.stdout.split("job ")[1].split()[0])

        # Refusals: no token, a reader submitting, a wrong CA; none echoes the token.
        anonymous = self.cli("", "runs")
        self.assertEqual(anonymous.returncode, 1)
        self.assertIn("UNAUTHENTICATED", anonymous.stderr)
        denied = self.cli(reader, "cancel", job)
        self.assertEqual(denied.returncode, 1)
        self.assertIn("PERMISSION_DENIED", denied.stderr)
        self.assertNotIn(reader, denied.stderr)
        wrong_ca = self.cli(reader, "runs", ca="other-ca.pem")
        self.assertEqual(wrong_ca.returncode, 1)
        self.assertIn("cannot reach", wrong_ca.stderr)
        self.assertEqual(self.cli(outsider, "status", job).returncode, 1)

        # A worker with a client certificate and no token runs the job.
        worker = WorkerProcess(self.server.address, [FIXTURE, self.dir], "gpu-node-7", self.dir, [
            "--tls-ca", f"{self.pki}/ca.pem", "--tls-cert", f"{self.pki}/gpu-node-7.pem",
            "--tls-key", f"{self.pki}/gpu-node-7.key"])
        self.workers.append(worker)
        self.assertTrue(wait_for(lambda: self.job_state(job) == "succeeded", timeout=240),
                        self.job_state(job))

        runs = self.cli(reader, "runs")
        self.assertEqual(runs.returncode, 0, runs.stderr)
        self.assertIn("bert", runs.stdout)
        self.assertNotIn("bert", self.cli(outsider, "runs").stdout)
        status, body = self.get("/api/v1/series?run=bert&metric=qk_mean_cosine", reader)
        self.assertEqual(status, 200, body)
        self.assertEqual(len({p["step"] for p in body["points"]}), 3)
        self.assertEqual(self.get("/api/v1/runs")[0], 401)
        self.assertEqual(self.get("/api/v1/series?run=bert&metric=qk_mean_cosine",
                                  outsider)[0], 404)

        audit = self.cli(admin, "audit")
        self.assertEqual(audit.returncode, 0, audit.stderr)
        lines = audit.stdout.splitlines()
        self.assertTrue(any("\talice\tnlp\tsubmit\tjob 1\t" in line for line in lines), lines)
        self.assertEqual(sum("\tcert:gpu-node-7\tnlp\tcomplete\t" in line for line in lines), 3)
        self.assertTrue(any("\thost:" in line and "token.create" in line for line in lines))
        self.assertEqual(self.cli(reader, "audit").returncode, 1)

        self.host("tokens", "revoke", "--db", self.db, "--name", "dash")
        revoked = self.cli(reader, "runs")
        self.assertEqual(revoked.returncode, 1)
        self.assertIn("UNAUTHENTICATED", revoked.stderr)

    def test_a_backup_taken_while_a_job_runs_holds_every_step_stored_before_it(self):
        worker_token = self.token("cluster", "worker")
        writer = self.token("alice", "writer")
        self.start_server()
        run_dir, probe = self.make_run(16, 16)
        token_file = os.path.join(self.dir, "worker.token")
        with open(token_file, "w") as f:
            f.write(worker_token + "\n")
        job_line = self.cli(writer, "submit", "--run", "r", "--checkpoints", run_dir,
                            "--probe-tokens", probe, "--samples", "100000")
        self.assertEqual(job_line.returncode, 0, job_line.stderr)
        job = int(job_line.stdout.split("job ")[1].split()[0])
        self.workers.append(WorkerProcess(self.server.address, [FIXTURE, self.dir], "w1", self.dir,
                                          ["--tls-ca", f"{self.pki}/ca.pem",
                                           "--token-file", token_file]))
        self.assertTrue(wait_for(lambda: len(stored_steps(self.db)) >= 2, timeout=240))
        before = [step for step, _ in stored_steps(self.db)]
        backup = os.path.join(self.dir, "backup.db")
        result = self.host("backup", "--db", self.db, "--out", backup)
        self.assertIn("integrity_check ok", result.stdout)
        held = [step for step, count in stored_steps(backup)]
        self.assertTrue(set(before) <= set(held), (before, held))
        # The snapshot was taken mid-job: it lacks steps the job went on to store.
        self.assertLess(len(held), 16, "the backup did not overlap the job")
        with sqlite3.connect(backup) as db:
            self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        self.assertNotEqual(self.host("backup", "--db", self.db, "--out", backup,
                                      check=False).returncode, 0)
        self.assertTrue(wait_for(lambda: self.job_state(job) == "succeeded", timeout=240))

    def test_no_tokens_is_refused_off_loopback_and_a_bad_token_stops_a_worker(self):
        refused = subprocess.run([SERVER, "--listen", "0.0.0.0:0", "--auth", "none", "--db",
                                  self.db, "--allow-root", self.dir],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("--auth none is allowed only when every listen address is loopback",
                      refused.stderr)
        self.start_server()
        bad = os.path.join(self.dir, "bad.token")
        with open(bad, "w") as f:
            f.write("anis_not-a-real-token\n")
        worker = WorkerProcess(self.server.address, [self.dir], "w-bad", self.dir,
                               ["--tls-ca", f"{self.pki}/ca.pem", "--token-file", bad])
        self.workers.append(worker)
        self.assertEqual(worker.wait(60), 1)
        self.assertIn("refuses this worker", worker.read_log())
        self.assertNotIn("not-a-real-token", worker.read_log())


if __name__ == "__main__":
    unittest.main()
