"""SubmitJobRequest from Client.submit's arguments, checked as the CLI's `submit` checks them."""
import operator
import os
from collections.abc import Mapping
from pathlib import Path

from anisoscope._wire import pb

PROBE_MODES = {"windows": pb.PROBE_MODE_WINDOWS, "lines": pb.PROBE_MODE_LINES}


def absolute_path(path):
    """`path` against the current directory, normalized unless it has a '..' (as the CLI:
    the server resolves those itself against its allowed roots)."""
    full = os.path.join(os.getcwd(), os.fspath(path))
    return full if ".." in Path(full).parts else os.path.normpath(full)


def add_checkpoints(request, checkpoints):
    """Adds {step: path} or (step, path) pairs to `request`; ValueError on a bad step."""
    pairs = checkpoints.items() if isinstance(checkpoints, Mapping) else checkpoints
    steps = set()
    for step, path in pairs:
        step = operator.index(step)
        if step < 0:
            raise ValueError(f"checkpoints: step {step} is negative")
        if step in steps:
            raise ValueError(f"checkpoints: step {step} given twice")
        steps.add(step)
        request.checkpoints.add(step=step, path=absolute_path(path))
    if not steps:
        raise ValueError("checkpoints: no checkpoint given")


def submit_request(run, *, checkpoints_dir, checkpoints, probe_tokens, probe_text, probe_mode,
                   samples, seq_len, force, follow=False, until_step=None,
                   token_samples=None, hf_cache=None, dedupe=False):
    """The SubmitJobRequest of Client.submit; ValueError names the argument at fault."""
    sources = [checkpoints_dir, hf_cache, checkpoints]
    if sum(source is not None for source in sources) != 1:
        raise ValueError("submit: give one of checkpoints_dir, hf_cache, checkpoints"
                         if any(source is not None for source in sources)
                         else "submit: checkpoints_dir, hf_cache or checkpoints is required")
    if hf_cache is not None:
        checkpoints_dir = hf_cache
    if (probe_tokens is None) == (probe_text is None):
        raise ValueError("submit: give probe_tokens or probe_text, not both"
                         if probe_text is not None
                         else "submit: probe_tokens or probe_text is required")
    if probe_mode is not None and probe_text is None:
        raise ValueError("probe_mode: applies only to probe_text")
    if probe_mode is not None and probe_mode not in PROBE_MODES:
        raise ValueError(f"probe_mode: expected 'windows' or 'lines', got {probe_mode!r}")
    if follow and checkpoints_dir is None:
        raise ValueError("follow: watches a directory: give checkpoints_dir")
    if until_step is not None and not follow:
        raise ValueError("until_step: applies to follow")
    request = pb.SubmitJobRequest(run=run, force=force, follow=follow,
                                  hf_cache=hf_cache is not None, dedupe=dedupe)
    if until_step is not None:
        request.until_step = operator.index(until_step)
    if checkpoints_dir is not None:
        request.checkpoints_dir = absolute_path(checkpoints_dir)
    else:
        add_checkpoints(request, checkpoints)
    probe = request.probe
    if probe_text is not None:
        probe.source, probe.path = pb.PROBE_SOURCE_TEXT, absolute_path(probe_text)
        probe.mode = PROBE_MODES[probe_mode or "windows"]
    else:
        probe.source, probe.path = pb.PROBE_SOURCE_TOKENS, absolute_path(probe_tokens)
    probe.samples, probe.seq_len = samples, seq_len
    if token_samples is not None:
        probe.token_samples = operator.index(token_samples)
    return request
