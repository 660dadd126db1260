"""What Client.wait shows while a job runs: a tqdm bar, or one line per finished
checkpoint on stderr when tqdm is not installed, or nothing. Alarms a step fires or
resolves are written as lines either way (as the CLI prints them); event kinds this
version does not know are ignored."""
import sys

from anisoscope._wire import pb
from anisoscope.records import enum_word, final_values
from anisoscope.sources import describe_fetch

FINAL_STEP_STATES = final_values(pb.StepState)


def progress_display(progress):
    """The display for Client.wait's `progress`: True, False, or None (only on a tty)."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return Display()
    try:
        import tqdm
    except ImportError:
        return Lines(sys.stderr)
    return Bar(tqdm.tqdm)


def describe(checkpoint):
    """How a finished checkpoint ended, as the CLI's progress lines say it."""
    if checkpoint.state == pb.STEP_STATE_DONE:
        return f"done {checkpoint.seconds:.1f} s"
    if checkpoint.state == pb.STEP_STATE_SKIPPED:
        return "skipped (already stored)"
    if checkpoint.state == pb.STEP_STATE_FAILED:
        return f"FAILED: {checkpoint.error or '(no message)'}"
    return "cancelled"


def describe_alarm(alarm):
    """An alarm event's line, as the CLI's progress prints it."""
    layer = f" layer {alarm.layer}" if alarm.layer >= 0 else ""
    if alarm.state == pb.ALARM_STATE_RESOLVED:
        return f"alarm {alarm.id} resolved at step {alarm.resolved_step}: {alarm.rule}{layer}"
    return (f"ALARM ({alarm.severity}) at step {alarm.step}: {alarm.rule}{layer}: "
            f"{alarm.summary} [alarm {alarm.id}]")


class Display:
    """Shows nothing; the base of the others. A context manager taking JobEvents in show()."""

    def __init__(self):
        self._reported = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    def show(self, event):
        """Takes one JobEvent."""

    def close(self):
        """Ends the display."""

    def newly_finished(self, job):
        """The checkpoints of `job` that finished since the last call."""
        fresh = [c for c in job.checkpoints
                 if c.state in FINAL_STEP_STATES and c.step not in self._reported]
        self._reported.update(c.step for c in fresh)
        return fresh


class Lines(Display):
    """"[k/n] step S done 0.1 s" on `stream` per finished checkpoint, as the CLI prints."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream

    def show(self, event):
        if event.kind == pb.JobEvent.KIND_ALARM:
            print(describe_alarm(event.alarm), file=self._stream, flush=True)
        total = event.job.steps_total or len(event.job.checkpoints)
        for checkpoint in self.newly_finished(event.job):
            print(f"[{len(self._reported)}/{total}] step {checkpoint.step} "
                  f"{describe(checkpoint)}", file=self._stream, flush=True)


class Bar(Display):
    """A tqdm bar over the job's checkpoints, the running step and batch (or a remote
    step's download: bytes/s and the worker's cache) as its postfix, failed checkpoints
    written above it."""

    def __init__(self, tqdm):
        super().__init__()
        self._tqdm, self._bar = tqdm, None

    def close(self):
        if self._bar is not None:
            self._bar.close()

    def write(self, line):
        """`line` above the bar, on the bar's stream (tqdm.write's default is stdout)."""
        self._bar.write(line, file=self._bar.fp)

    def show(self, event):
        job = event.job
        if self._bar is None:
            self._bar = self._tqdm(total=job.steps_total or len(job.checkpoints),
                                   desc=f"job {job.id} {job.run}", unit="step")
        for checkpoint in self.newly_finished(job):
            if checkpoint.state == pb.STEP_STATE_FAILED:
                self.write(f"step {checkpoint.step} {describe(checkpoint)}")
        if event.kind == pb.JobEvent.KIND_ALARM:
            self.write(describe_alarm(event.alarm))
        if event.kind == pb.JobEvent.KIND_STEP_FETCHING:
            self._bar.set_postfix_str(f"step {event.checkpoint.step} {describe_fetch(event.fetch)}",
                                      refresh=False)
        elif event.kind in (pb.JobEvent.KIND_STEP_STARTED, pb.JobEvent.KIND_STEP_PROGRESS):
            batches = (f" batch {event.batches_done}/{event.batches_total}"
                       if event.batches_total else "")
            self._bar.set_postfix_str(f"step {event.checkpoint.step}{batches}", refresh=False)
        elif event.kind == pb.JobEvent.KIND_JOB_FINISHED:
            self._bar.set_postfix_str(enum_word(pb.JobState, job.state, "JOB_STATE_"),
                                      refresh=False)
        self._bar.n = job.steps_finished
        self._bar.refresh()
