"""Series read from where they live (the Hugging Face Hub, S3; docs/sources.md): the
CheckpointSource of Client.submit's and Client.audit's hub=, hub_repos=, s3= arguments, and
the DataFrame of an audit. Only what the request cannot say is checked here (two series at
once, a narrowing argument without its source); what a well-formed source is (a repo id, a
pattern with one "{}", an s3:// URL) is the server's rule, whose INVALID_ARGUMENT
(anisoscope.Error) names the field."""
import numpy as np
import pandas as pd

from anisoscope._wire import pb

SOURCE_ARGUMENTS = ("hub", "hub_repos", "s3")
AUDIT_COLUMNS = ["step", "name", "revision", "commit", "files", "size_bytes", "duplicate_of"]


def checkpoint_source(command, *, hub=None, hub_repos=None, s3=None, revisions=None, glob=None,
                      revision=None, others=()):
    """The CheckpointSource the arguments name, or None when none of hub, hub_repos, s3 is
    given. `others` are (name, value) of the arguments that name a series otherwise
    (checkpoints_dir, ...): ValueError "COMMAND: give one of ..." when a source comes with
    another series (the others among themselves are the server's to refuse), or when
    revisions, glob or revision come without the source they narrow.
    revisions: an iterable of names or one comma-separated string."""
    given = dict(hub=hub, hub_repos=hub_repos, s3=s3)
    named = [name for name, value in list(others) + list(given.items()) if value is not None]
    remote = [name for name in SOURCE_ARGUMENTS if given[name] is not None]
    if remote and len(named) > 1:
        choices = ", ".join([name for name, _ in others] + list(SOURCE_ARGUMENTS))
        raise ValueError(f"{command}: give one of {choices}; got {', '.join(named)}")
    if not remote:
        for name, value in (("revisions", revisions), ("glob", glob), ("revision", revision)):
            if value is not None:
                raise ValueError(f"{command}: {name} narrows hub, hub_repos or s3; none is given")
        return None
    if revision is not None and hub_repos is None:
        raise ValueError(f"{command}: revision is the revision of each repo of hub_repos "
                         "(with hub or s3, revisions names the steps)")
    if isinstance(revisions, str):
        revisions = revisions.split(",")
    source = pb.CheckpointSource(**{remote[0]: given[remote[0]]}, glob=glob or "",
                                 revision=revision or "")
    source.revisions.extend(revisions or [])
    return source


def audit_frame(response):
    """The DataFrame of an AuditSourceResponse: one row per step, ascending, AUDIT_COLUMNS
    (files: a list of {"path", "size", "sha256", "etag"} per step; duplicate_of: nullable
    Int64, <NA> unless an earlier step has the same weights). frame.attrs holds source,
    problems (a list of {"name", "step", "reason"}), without_step (the names that carry no
    step), requests (listing requests made) and seconds."""
    steps = response.steps
    frame = pd.DataFrame({
        "step": np.array([s.step for s in steps], dtype=np.int64),
        "name": [s.name for s in steps],
        "revision": [s.revision for s in steps],
        "commit": [s.commit for s in steps],
        "files": [[{"path": f.path, "size": f.size, "sha256": f.sha256, "etag": f.etag}
                   for f in s.files] for s in steps],
        "size_bytes": np.array([s.size_bytes for s in steps], dtype=np.int64),
        "duplicate_of": pd.array([s.duplicate_of if s.HasField("duplicate_of") else None
                                  for s in steps], dtype="Int64"),
    }, columns=AUDIT_COLUMNS)
    frame.attrs.update(
        source=response.source,
        problems=[{"name": p.name, "step": p.step, "reason": p.reason}
                  for p in response.problems],
        without_step=list(response.without_step), requests=response.requests,
        seconds=response.seconds)
    return frame


def describe_fetch(fetch):
    """A FetchProgress as the CLI's progress line says it: "fetching 1.2 GiB/3.4 GiB at
    180.0 MiB/s, cache 12.0 GiB"."""
    text = f"fetching {byte_size(fetch.bytes_done)}"
    if fetch.bytes_total > 0:
        text += f"/{byte_size(fetch.bytes_total)}"
    if fetch.bytes_per_second > 0:
        text += f" at {byte_size(fetch.bytes_per_second)}/s"
    return text + f", cache {byte_size(fetch.cache_bytes)}"


def byte_size(count):
    """Bytes for people, in binary units as the CLI writes them: "512 B", "1.5 KiB"."""
    if count < 1024:
        return f"{int(count)} B"
    count /= 1024
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        if count < 1024:
            return f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} PiB"
