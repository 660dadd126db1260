"""A real single-node Slurm (Debian's slurm-wlm 22.05 and munge) for tests, run as root
without systemd or cgroups, everything in one temporary directory: munged with its own key
and socket, slurmctld and slurmd on free ports, one CPU node. Every Slurm command it runs
uses that configuration (SLURM_CONF)."""
import os
import re
import shutil
import socket
import subprocess
import time


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


class SlurmCluster:
    """`with SlurmCluster(workdir) as cluster:` starts munged, slurmctld and slurmd."""

    PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")

    def __init__(self, workdir, cpus=2):
        self.dir = os.path.join(workdir, "slurm")
        self.host = socket.gethostname().split(".")[0]
        self.cpus = cpus
        self.processes = []
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def __enter__(self):
        missing = [p for p in self.PROGRAMS if shutil.which(p) is None]
        if missing:
            raise RuntimeError(f"Slurm is not installed: {', '.join(missing)} not found "
                               "(apt-get install slurm-wlm munge; scripts/setup.sh does)")
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes = []

    def _start(self):
        os.makedirs(self.dir)
        key_dir = os.path.join(self.dir, "munge-key")      # mode 700, as munged insists
        socket_dir = os.path.join(self.dir, "munge-run")   # mode 755, reachable by clients
        os.makedirs(key_dir, mode=0o700)
        os.makedirs(socket_dir, mode=0o755)
        os.chmod(self.dir, 0o755)
        key = os.path.join(key_dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(socket_dir, "munge.socket.2")
        self._spawn("munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                               f"--socket={self.munge_socket}",
                               f"--pid-file={os.path.join(socket_dir, 'munged.pid')}",
                               f"--seed-file={os.path.join(key_dir, 'munge.seed')}",
                               f"--log-file={os.path.join(self.dir, 'munged.log')}"])
        self._wait(lambda: os.path.exists(self.munge_socket), 10, "munged")
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(self.dir, sub))
        with open(self.conf, "w") as f:
            f.write(self._config())
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self._spawn("slurmd", ["slurmd", "-D", "-f", self.conf])
        self._wait(self._node_idle, 30, "the node to be idle")

    def _config(self):
        d = self.dir
        return "\n".join([
            "ClusterName=anisoscope-test",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            "MpiDefault=none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=1000 "
            "State=UNKNOWN",
            f"PartitionName=test Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
            ""])

    def _spawn(self, name, args):
        log = open(os.path.join(self.dir, f"{name}.out"), "w")
        self.processes.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                               env=self.env))

    def _wait(self, predicate, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            for process in self.processes:
                if process.poll() is not None:
                    break
            time.sleep(0.2)
        raise RuntimeError(f"Slurm: waited {timeout} s for {what}; " + self.logs())

    def _node_idle(self):
        result = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def logs(self):
        return "; ".join(f"{name}: {_tail(os.path.join(self.dir, name))}"
                         for name in ("munged.log", "munged.out", "slurmctld.log",
                                      "slurmctld.out", "slurmd.log", "slurmd.out"))

    def run(self, args, check=True, env=None):
        result = subprocess.run(args, capture_output=True, text=True, timeout=60,
                                env=dict(self.env, **(env or {})))
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result

    def sbatch(self, args, env=None):
        """Submits; returns the job id."""
        out = self.run(["sbatch", "--parsable", *args], env=env).stdout.strip()
        return out.split(";")[0]

    def job_states(self, job_id):
        """{task id: state} of a job (array tasks by their array index), from scontrol."""
        result = self.run(["scontrol", "-o", "show", "job", job_id], check=False)
        states = {}
        for line in result.stdout.splitlines():
            state = re.search(r"JobState=(\S+)", line)
            task = re.search(r"ArrayTaskId=(\S+)", line)
            exit_code = re.search(r"ExitCode=(\S+)", line)
            if state:
                states[task.group(1) if task else "0"] = (state.group(1),
                                                          exit_code.group(1) if exit_code else "")
        return states

    def wait_all_done(self, job_id, count, timeout):
        """Waits until `count` tasks of the job have ended; returns their states."""
        deadline = time.time() + timeout
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
        states = {}
        while time.time() < deadline:
            states = self.job_states(job_id)
            ended = [s for s, _ in states.values() if s in final]
            if len(ended) >= count:
                return states
            time.sleep(0.5)
        raise RuntimeError(f"Slurm job {job_id} not done after {timeout} s: {states}; "
                           + self.logs())
