"""Plain-Python views of the wire messages that runs(), submit() and wait() return.

Enum values become lowercase words of their wire names, as the CLI prints them:
JOB_STATE_SUCCEEDED -> "succeeded", STEP_STATE_SKIPPED -> "skipped".
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from anisoscope._wire import pb



def enum_word(enum, value, prefix):
    """The wire name of `value` in `enum` without `prefix`, lowercase; "unknown" if new."""
    try:
        return enum.Name(value)[len(prefix):].lower()
    except ValueError:
        return "unknown"


def final_values(enum):
    """The values of a wire enum (JobState, StepState) that the proto marks final_state: no
    other state follows them. The proto is the one home of that fact."""
    return frozenset(value.number for value in enum.DESCRIPTOR.values
                     if value.GetOptions().Extensions[pb.final_state])


FINAL_JOB_STATES = tuple(enum_word(pb.JobState, value, "JOB_STATE_")
                         for value in sorted(final_values(pb.JobState)))


@dataclass(frozen=True)
class Probe:
    """A probe a run was analysed with."""
    id: str
    description: str  # the server's label: "probe.jsonl · 128 x 512" (docs/api.md)
    num_samples: int
    num_tokens: int


@dataclass(frozen=True)
class Run:
    """A run: its model's shape, its probes and its stored steps (ascending)."""
    name: str
    model_family: str
    num_layers: int
    num_heads: int
    head_dim: int
    probes: List[Probe]
    steps: List[int]
    created_at: str
    namespace: str
    # {step: earlier step with the same weights}: steps a suite served under a second name.
    duplicates: Dict[int, int] = field(default_factory=dict)
    # {step: Origin}: where each step read from a remote source came from.
    origins: Dict[int, "Origin"] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, run):
        return cls(run.name, run.model_family, run.num_layers, run.num_heads, run.head_dim,
                   [Probe(p.id, p.description, p.num_samples, p.num_tokens) for p in run.probes],
                   list(run.steps), run.created_at, run.namespace,
                   {d.step: d.duplicate_of for d in run.duplicates},
                   {o.step: Origin(o.source, o.revision, o.commit) for o in run.origins})


@dataclass(frozen=True)
class Origin:
    """Where a stored step was read from: source "hub:ORG/NAME" or "s3://BUCKET", the
    branch (Hub) or folder prefix (S3), and the Hub commit (empty on S3)."""
    source: str
    revision: str
    commit: str


@dataclass(frozen=True)
class ProbeSpec:
    """The probe of a job: source "tokens" or "text", mode "windows" or "lines"."""
    source: str
    path: str
    mode: str
    samples: int  # 0: 128
    seq_len: int  # 0: the smaller of 2048 and the model's maximum
    metrics: str = "all"  # the metric groups computed: "all" or "core,spectra"

    @classmethod
    def from_proto(cls, probe):
        return cls(enum_word(pb.ProbeSource, probe.source, "PROBE_SOURCE_"), probe.path,
                   "lines" if probe.mode == pb.PROBE_MODE_LINES else "windows",
                   probe.samples, probe.seq_len, probe.metrics or "all")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a job; state: pending, running, done, skipped, failed, cancelled."""
    step: int
    path: str
    size_bytes: int
    state: str
    error: str
    probe_id: str
    seconds: float
    attempt: int
    worker: str
    fingerprint: str = ""  # of the weight files, once analysed ("xxh3-128:…")
    duplicate_of: Optional[int] = None  # an earlier step of the run with the same weights
    revision: str = ""  # a remote step's branch or folder prefix ("" for a folder's)
    commit: str = ""  # the Hub commit a remote step was listed at

    @classmethod
    def from_proto(cls, c):
        return cls(c.step, c.path, c.size_bytes, enum_word(pb.StepState, c.state, "STEP_STATE_"),
                   c.error, c.probe_id, c.seconds, c.attempt, c.worker, c.fingerprint,
                   c.duplicate_of if c.HasField("duplicate_of") else None, c.revision, c.commit)


@dataclass(frozen=True)
class Job:
    """A job; state: queued, running, succeeded, failed or cancelled."""
    id: int
    run: str
    state: str
    probe: ProbeSpec
    force: bool
    checkpoints: List[Checkpoint]
    error: str
    created_at: str
    updated_at: str
    steps_total: int
    steps_finished: int  # done + skipped + failed + cancelled
    namespace: str
    follow: bool = False  # watching its checkpoints directory for new steps
    until_step: Optional[int] = None  # with follow: the job ends after this step
    dedupe: bool = False  # steps with an earlier step's weights are skipped
    # A remote series (None for a folder): {"hub"|"hub_repos"|"s3": ..., "revisions": [...],
    # "glob": ..., "revision": ...}, as submitted.
    source: Optional[dict] = None

    @property
    def finished(self):
        """Whether the job reached a final state."""
        return self.state in FINAL_JOB_STATES

    @property
    def succeeded(self):
        """Whether the job succeeded with every checkpoint done or skipped."""
        return self.state == "succeeded" and all(
            c.state in ("done", "skipped") for c in self.checkpoints)

    @classmethod
    def from_proto(cls, job):
        return cls(job.id, job.run, enum_word(pb.JobState, job.state, "JOB_STATE_"),
                   ProbeSpec.from_proto(job.probe), job.force,
                   [Checkpoint.from_proto(c) for c in job.checkpoints], job.error,
                   job.created_at, job.updated_at, job.steps_total, job.steps_finished,
                   job.namespace, job.follow,
                   job.until_step if job.HasField("until_step") else None, job.dedupe,
                   source_dict(job.source) if job.HasField("source") else None)


def source_dict(source):
    """A CheckpointSource as a plain dict: its kind's field, revisions, glob, revision."""
    kind = source.WhichOneof("kind")
    return {kind or "none": getattr(source, kind) if kind else "",
            "revisions": list(source.revisions), "glob": source.glob,
            "revision": source.revision}
