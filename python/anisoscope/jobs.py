"""SubmitJobRequest from Client.submit's arguments. Only what the request cannot say is
checked here (two arguments for one field, a probe_mode without a wire value, samples=0 or
seq_len=0, which the wire reads as the default); every rule of a job is the server's, whose
INVALID_ARGUMENT (anisoscope.Error) names the field at fault."""
import operator
import os
from collections.abc import Mapping
from pathlib import Path

from anisoscope._wire import pb
from anisoscope.sources import checkpoint_source

PROBE_MODES = {"windows": pb.PROBE_MODE_WINDOWS, "lines": pb.PROBE_MODE_LINES}


def absolute_path(path):
    """`path` against the current directory, normalized unless it has a '..' (as the CLI:
    the server resolves those itself against its allowed roots)."""
    full = os.path.join(os.getcwd(), os.fspath(path))
    return full if ".." in Path(full).parts else os.path.normpath(full)


def at_least_one(name, value):
    """`value` (an integer, or None for the server's default, sent as 0); ValueError with the
    CLI's message for --NAME below 1, since 0 on the wire means the default."""
    if value is None:
        return 0
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name}: must be at least 1, got {value}")
    return value


def add_checkpoints(request, checkpoints):
    """Adds {step: path} or (step, path) pairs to `request` (TypeError for a step that is not
    an integer; the server checks the steps)."""
    pairs = checkpoints.items() if isinstance(checkpoints, Mapping) else checkpoints
    for step, path in pairs:
        request.checkpoints.add(step=operator.index(step), path=absolute_path(path))


def submit_request(run, *, checkpoints_dir, checkpoints, probe_tokens, probe_text, probe_mode,
                   samples, seq_len, force, follow=False, until_step=None,
                   token_samples=None, hf_cache=None, dedupe=False, metrics=None, hub=None,
                   hub_repos=None, s3=None, revisions=None, glob=None, revision=None):
    """The SubmitJobRequest of Client.submit; ValueError names the argument at fault where
    the request cannot be built."""
    command = "follow" if follow else "submit"
    if checkpoints_dir is not None and hf_cache is not None:
        raise ValueError(f"{command}: give one of checkpoints_dir, hf_cache, checkpoints")
    source = checkpoint_source(
        command, hub=hub, hub_repos=hub_repos, s3=s3, revisions=revisions, glob=glob,
        revision=revision, others=(("checkpoints_dir", checkpoints_dir), ("hf_cache", hf_cache),
                                   ("checkpoints", checkpoints)))
    if hf_cache is not None:
        checkpoints_dir = hf_cache
    if probe_tokens is not None and probe_text is not None:
        raise ValueError("submit: give probe_tokens or probe_text, not both")
    samples, seq_len = at_least_one("samples", samples), at_least_one("seq_len", seq_len)
    if probe_mode is not None and probe_mode not in PROBE_MODES:
        raise ValueError(f"probe_mode: expected 'windows' or 'lines', got {probe_mode!r}")
    request = pb.SubmitJobRequest(run=run, force=force, follow=follow,
                                  hf_cache=hf_cache is not None, dedupe=dedupe)
    if until_step is not None:
        request.until_step = operator.index(until_step)
    if checkpoints_dir is not None:
        request.checkpoints_dir = absolute_path(checkpoints_dir)
    if checkpoints is not None:
        add_checkpoints(request, checkpoints)
    if source is not None:
        request.source.CopyFrom(source)
    if probe_tokens is None and probe_text is None:
        return request  # the server says what is missing
    probe = request.probe
    if probe_text is not None:
        probe.source, probe.path = pb.PROBE_SOURCE_TEXT, absolute_path(probe_text)
        probe.mode = PROBE_MODES[probe_mode or "windows"]
    else:
        probe.source, probe.path = pb.PROBE_SOURCE_TOKENS, absolute_path(probe_tokens)
        if probe_mode is not None:
            probe.mode = PROBE_MODES[probe_mode]
    probe.samples, probe.seq_len = samples, seq_len
    if token_samples is not None:
        probe.token_samples = operator.index(token_samples)
    if metrics is not None:
        probe.metrics = metrics if isinstance(metrics, str) else ",".join(metrics)
    return request
