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


def _mem_total_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


def _tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


class SlurmCluster:
    """`with SlurmCluster(workdir) as cluster:` starts munged, slurmctld and slurmd."""

    PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "squeue",
                "scancel")
    PARTITION = "test"

    def __init__(self, workdir, cpus=None, memory_mb=None):
        self.dir = os.path.join(workdir, "slurm")
        self.host = socket.gethostname().split(".")[0]   # what `hostname -s` prints
        # The node's real CPUs and memory, or less: slurmd drains a node configured with more.
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.memory_mb = memory_mb or max(1, _mem_total_mb() - 512)
        self.processes, self._logs = [], []
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.start_seconds = None

    def __enter__(self):
        missing = [p for p in self.PROGRAMS if shutil.which(p) is None]
        if missing:
            raise RuntimeError(f"Slurm is not installed: {', '.join(missing)} not found "
                               "(apt-get install slurm-wlm munge; scripts/setup.sh does)")
        started = time.monotonic()
        try:
            self._start()
            self.start_seconds = time.monotonic() - started
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        """Cancels the jobs still queued or running (their processes live under slurmstepd,
        which outlives slurmd), then stops slurmd, slurmctld and munged, each by its own pid
        (SIGTERM, then SIGKILL)."""
        if self.processes and all(p.poll() is None for _, p in self.processes):
            try:
                if self.run(["squeue", "-h", "-o", "%i"], check=False).stdout.strip():
                    self.run(["scancel", f"--partition={self.PARTITION}"], check=False)
                    self._wait(lambda: not self.run(["squeue", "-h", "-o", "%i"],
                                                    check=False).stdout.strip(), 30, "scancel")
            except (RuntimeError, subprocess.SubprocessError):
                pass
        for _, process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in self._logs:
            log.close()
        self.processes, self._logs = [], []

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
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
            f"RealMemory={self.memory_mb} State=UNKNOWN",
            f"PartitionName={self.PARTITION} Nodes={self.host} Default=YES MaxTime=INFINITE "
            "State=UP",
            ""])

    def _spawn(self, name, args):
        log = open(os.path.join(self.dir, f"{name}.out"), "w")
        self._logs.append(log)
        self.processes.append((name, subprocess.Popen(args, stdout=log,
                                                      stderr=subprocess.STDOUT, env=self.env)))

    def _wait(self, predicate, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            for name, process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"Slurm: {name} exited with {process.returncode} "
                                       f"while waiting for {what}; " + self.logs())
            time.sleep(0.2)
        raise RuntimeError(f"Slurm: waited {timeout} s for {what}; " + self.logs())

    @property
    def pids(self):
        """{daemon: pid} of the daemons this cluster started."""
        return {name: process.pid for name, process in self.processes}

    @property
    def log_paths(self):
        """{name: path} of the daemons' log files (slurmctld.log, slurmd.log, munged.log)
        and their captured stdout/stderr (*.out)."""
        return {name: os.path.join(self.dir, name)
                for name in ("munged.log", "munged.out", "slurmctld.log", "slurmctld.out",
                             "slurmd.log", "slurmd.out")}

    def _node_idle(self):
        result = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def logs(self):
        """The tails of the daemons' logs, for error messages."""
        return "; ".join(f"{name}: {_tail(path)}" for name, path in self.log_paths.items())

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

    def job_state(self, job_id):
        """{task id: (state, exit code)} of a job from `scontrol show job`: array tasks by
        their index ("0", "1"; tasks still pending together appear as one range, "2-3"),
        a plain job as "0"; {} once Slurm has forgotten the job (MinJobAge, 300 s)."""
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

    FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
             "BOOT_FAIL", "DEADLINE", "PREEMPTED"}

    def wait_all_done(self, job_id, timeout, count=1):
        """Waits until every task of the job has ended (and at least `count` tasks are
        known); returns job_state(). Raises with the daemons' logs on timeout."""
        deadline = time.time() + timeout
        states = {}
        while time.time() < deadline:
            states = self.job_state(job_id)
            if len(states) >= count and all(s in self.FINAL for s, _ in states.values()):
                return states
            time.sleep(0.5)
        raise RuntimeError(f"Slurm job {job_id} not done after {timeout} s: {states}; "
                           + self.logs())
