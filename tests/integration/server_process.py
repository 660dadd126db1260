"""Starts and stops a real anisoscope-server process for the integration tests."""
import os
import re
import signal
import sqlite3
import subprocess
import time

BIN = os.environ.get("ANISOSCOPE_BIN", os.path.join(os.getcwd(), "bin"))


class ServerProcess:
    """anisoscope-server on 127.0.0.1:0 with a database and allowed roots of the test's."""

    def __init__(self, db, roots, extra_args=()):
        self.db, self.roots, self.extra_args = db, roots, list(extra_args)
        self.process, self.address, self.log_path = None, None, db + ".log"

    def start(self):
        args = [os.path.join(BIN, "anisoscope-server"), "--listen", "127.0.0.1:0",
                "--db", self.db, "--threads", "1", *self.extra_args]
        for root in self.roots:
            args += ["--allow-root", root]
        self.log = open(self.log_path, "a")
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"listening on (\S+)", line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"server did not start: {line!r}; log: {self.read_log()}")
        self.address = match.group(1)
        return self

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.process.stdout.close()
        self.log.close()

    def terminate(self, timeout=30):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.terminate()
            self.process.stdout.close()
        self.log.close()

    def cli(self, *args, check=False, timeout=300):
        """Runs the anisoscope CLI against this server; returns the CompletedProcess."""
        result = subprocess.run([os.path.join(BIN, "anisoscope"), "--server", self.address,
                                 *map(str, args)], capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"anisoscope {' '.join(map(str, args))} exited "
                                 f"{result.returncode}: {result.stderr}")
        return result


def host_command(*args):
    """`anisoscope-server ARGS` (tokens, namespaces, backup); its stdout. Fails on an error."""
    result = subprocess.run([os.path.join(BIN, "anisoscope-server"), *map(str, args)],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"anisoscope-server {' '.join(map(str, args))}: {result.stderr}")
    return result.stdout


def create_token(db, name, role, namespace="default"):
    """A new token of `role` in `namespace`, made on the host as an admin would."""
    return host_command("tokens", "create", "--db", db, "--name", name, "--role", role,
                        "--namespace", namespace).strip()


def stored_steps(db):
    """(step, rows stored) of every step in the database, ascending: exactly once is 1."""
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT step, COUNT(*) FROM steps GROUP BY step ORDER BY step").fetchall()


def process_bytes(pid, field="VmHWM"):
    """A memory field of /proc/PID/status (VmHWM: the peak resident set; VmData: the data
    segment that RLIMIT_DATA counts), in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")


def wait_for(predicate, timeout=120, interval=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
