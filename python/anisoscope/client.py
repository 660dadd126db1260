"""Client: one connection to an anisoscope server (QueryService and JobService)."""
import operator
import os

import grpc

from anisoscope import frames
from anisoscope._wire import pb, pb_grpc
from anisoscope.errors import Error, JobFailedError
from anisoscope.jobs import absolute_path, submit_request
from anisoscope.progress import progress_display
from anisoscope.records import Job, Run, enum_word
from anisoscope.sources import audit_frame, checkpoint_source

DEFAULT_SERVER = "127.0.0.1:50051"


def _setting(value, variable):
    """`value` when given, else the environment variable (unset or empty: None)."""
    if value is None:
        value = os.environ.get(variable)
    return value or None


def _job_id(job):
    return job.id if isinstance(job, Job) else operator.index(job)


ALARM_STATES = {"firing": pb.ALARM_STATE_FIRING, "resolved": pb.ALARM_STATE_RESOLVED}


def _alarm_state_word(state):
    return enum_word(pb.AlarmState, state, "ALARM_STATE_")


def _set_step_range(request, steps, from_step, to_step):
    """Sets request.from_step/to_step to [from_step, to_step] narrowed to the span of the
    `steps` (a selection, or None) inside it; the caller still filters by `steps`. The
    server checks that from_step is not after to_step."""
    if steps is not None:
        inside = [step for step in steps if (from_step is None or step >= from_step)
                  and (to_step is None or step <= to_step)]
        if inside:  # else the range alone, which the caller's filter by `steps` empties
            from_step, to_step = min(inside), max(inside)
    if from_step is not None:
        request.from_step = from_step
    if to_step is not None:
        request.to_step = to_step


class Client:
    """A connection to one anisoscope server.

    Arguments left out come from the environment, as for the `anisoscope` CLI:
    address from ANISOSCOPE_SERVER (else 127.0.0.1:50051), token from ANISOSCOPE_TOKEN,
    tls_ca from ANISOSCOPE_TLS_CA, namespace from ANISOSCOPE_NAMESPACE.

    address: HOST:PORT of the server.
    token: bearer token, sent as `authorization: Bearer TOKEN` with every call.
    tls_ca: PEM file of the CA of the server's certificate: connect over TLS.
    namespace: act in this namespace (admins, or any caller of a server without tokens).
    timeout: seconds each call may take (not wait(), which follows a job to its end).

    Every failed call raises anisoscope.Error naming the gRPC status. One channel, safe to
    share between threads; close() it, or use the client as a context manager.
    """

    def __init__(self, address=None, *, token=None, tls_ca=None, namespace=None, timeout=60.0):
        self.address = _setting(address, "ANISOSCOPE_SERVER") or DEFAULT_SERVER
        self.timeout = timeout
        token = _setting(token, "ANISOSCOPE_TOKEN")
        namespace = _setting(namespace, "ANISOSCOPE_NAMESPACE")
        tls_ca = _setting(tls_ca, "ANISOSCOPE_TLS_CA")
        self._metadata = tuple(
            ([("authorization", f"Bearer {token}")] if token else [])
            + ([("anisoscope-namespace", namespace)] if namespace else []))
        options = [("grpc.max_receive_message_length", -1)]  # long series are legitimate
        if tls_ca:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(self.address, credentials, options)
        else:
            self._channel = grpc.insecure_channel(self.address, options)
        self._queries = pb_grpc.QueryServiceStub(self._channel)
        self._jobs = pb_grpc.JobServiceStub(self._channel)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    def close(self):
        """Closes the channel; the client cannot be used afterwards."""
        self._channel.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise Error.from_rpc(error, self.address) from None

    # ---- Queries ---------------------------------------------------------------------

    def runs(self):
        """Every run visible to the caller, as a list of Run."""
        response = self._call(self._queries.ListRuns, pb.ListRunsRequest())
        return [Run.from_proto(run) for run in response.runs]

    def series(self, run, metric, *, layers=None, heads=None, steps=None, from_step=None,
               to_step=None, since_step=None, max_points=0, probe=None):
        """One metric of a run over training steps, as a long pandas DataFrame.

        Columns step, layer, head, value, one row per point, ordered by layer, head, step;
        head is -1 for per-hidden-state metrics (see anisoscope.frames). Reshape it with
        anisoscope.wide (step x (layer, head)) or anisoscope.layer_means (step x layer).

        metric: a scalar of the catalogue (Client.metrics(), kind "scalar"): scope "head"
            (one series per layer and head), "hidden_state" (layer: the hidden state, 0
            the embeddings), "block" (derived per layer) or "checkpoint" (layer -1).
        layers, heads, steps: an int, an iterable of ints, or None for all.
        from_step, to_step: only steps in [from_step, to_step].
        since_step: only steps after this one (incremental polling).
        max_points: at most about this many points per (layer, head), keeping each
            bucket's min and max (0: every point).
        probe: the probe id (None: the run's only probe).

        frame.attrs holds run, metric, probe_id and downsampled.
        """
        layers = frames.selection(layers, "layers")
        heads = frames.selection(heads, "heads")
        steps = frames.selection(steps, "steps")
        request = pb.QuerySeriesRequest(run=run, metric=metric, probe_id=probe or "",
                                        max_points=max_points)
        if layers is not None and len(layers) == 1:
            request.layer = next(iter(layers))
        if heads is not None and len(heads) == 1:
            request.head = next(iter(heads))
        _set_step_range(request, steps, from_step, to_step)
        if since_step is not None:
            request.since_step = since_step
        response = self._call(self._queries.QuerySeries, request)
        frame = frames.series_frame(response.points)
        for column, chosen in (("layer", layers), ("head", heads), ("step", steps)):
            if chosen is not None:
                frame = frame[frame[column].isin(chosen)]
        frame = frame.reset_index(drop=True)
        frame.attrs.update(run=run, metric=response.metric or metric,
                           probe_id=response.probe_id, downsampled=response.downsampled)
        return frame

    def vectors(self, run, kind, layer, head, *, steps=None, from_step=None, to_step=None,
                probe=None):
        """One head's mean query or key vector at each step, as anisoscope.Vectors.

        kind: a vector kind of the catalogue (Client.metrics(), kind "vector"): scope
            "head" (layer and head), "hidden_state" (layer: the hidden state's index, head
            ignored) or "checkpoint" (layer and head ignored); token samples are
            M x head_dim, row-major.
        Returns Vectors(steps, values): steps int64 [n], values float64 [n, size].
        steps: an int, an iterable of ints, or None for all; from_step, to_step: a range.
        """
        chosen = frames.selection(steps, "steps")
        request = pb.QueryVectorsRequest(run=run, kind=kind, layer=layer, head=head,
                                         probe_id=probe or "")
        _set_step_range(request, chosen, from_step, to_step)
        points = self._call(self._queries.QueryVectors, request).points
        if chosen is not None:
            points = [p for p in points if p.step in chosen]
        return frames.vectors_arrays(points)

    def trajectory(self, run, layer, head, *, probe=None):
        """One head's Q̄ and K̄ at each step projected on their top two right singular
        vectors (Godey et al., Figure 12), as a DataFrame: step, q_x, q_y, k_x, k_y.

        frame.attrs holds probe_id, singular_values (descending), explained_variance (the
        plane's share of the stack) and basis (the projection in words, for labels).
        """
        request = pb.QueryTrajectoryRequest(run=run, layer=layer, head=head,
                                            probe_id=probe or "")
        response = self._call(self._queries.QueryTrajectory, request)
        frame = frames.trajectory_frame(response.points)
        frame.attrs.update(probe_id=response.probe_id,
                           singular_values=list(response.singular_values),
                           explained_variance=response.explained_variance, basis=response.basis)
        return frame

    def token_cloud(self, run, layer, head, *, basis="union", probe=None):
        """One head's Q and K token samples at every step projected on one plane (Godey et
        al., Figure 11 and Appendix C), as a DataFrame: step, token, q_x, q_y, k_x, k_y.

        basis: "union" (the SVD of every Q and K sample), "q" or "k" (Q or K samples only);
        both clouds are projected on it. frame.attrs holds probe_id, basis, token_samples,
        singular_values, explained_variance and description.
        """
        request = pb.QueryTokenCloudRequest(run=run, layer=layer, head=head, basis=basis,
                                            probe_id=probe or "")
        response = self._call(self._queries.QueryTokenCloud, request)
        frame = frames.token_cloud_frame(response.steps)
        frame.attrs.update(probe_id=response.probe_id, basis=response.basis,
                           token_samples=response.token_samples,
                           singular_values=list(response.singular_values),
                           explained_variance=response.explained_variance,
                           description=response.description)
        return frame

    def correlation(self, run, *, from_step=None, to_step=None, probe=None):
        """Per step, over the hidden states: Spearman's and Pearson's tests of
        hidden_mean_norm against hidden_anisotropy (Godey et al., Figures 5 and 16), as a
        DataFrame: step, hidden_states, spearman_rho, spearman_p, pearson_r, pearson_p.
        """
        request = pb.QueryCorrelationRequest(run=run, probe_id=probe or "")
        _set_step_range(request, None, from_step, to_step)
        response = self._call(self._queries.QueryCorrelation, request)
        frame = frames.correlation_frame(response.points)
        frame.attrs.update(probe_id=response.probe_id, x_metric=response.x_metric,
                           y_metric=response.y_metric)
        return frame

    def metrics(self):
        """The server's metric catalogue: every metric (series) and vector kind (vectors),
        as a DataFrame with one row each, in the catalogue's order (docs/metrics.md).

        Columns: name, scope ("head", "hidden_state", "block" or "checkpoint"), kind
        ("scalar" or "vector"), group, families ("all" or "rotary"), token_sample,
        derived, may_be_undefined, baseline ("head", "hidden" or ""), label, unit,
        definition, meaning. frame.attrs["groups"] maps each metric group, in order, to
        {"summary": ..., "metrics": [...]}.
        """
        response = self._call(self._queries.ListMetrics, pb.ListMetricsRequest())
        frame = frames.metrics_frame(response.metrics)
        frame.attrs["groups"] = {group.name: {"summary": group.summary,
                                              "metrics": list(group.metrics)}
                                 for group in response.groups}
        return frame

    def isotropic_baseline(self, dimension):
        """The 95th percentile of the cosine of two independent isotropic Gaussian vectors
        in R^dimension: the line above which a mean cosine is anisotropy."""
        request = pb.QueryIsotropicBaselineRequest(dimension=dimension)
        return self._call(self._queries.QueryIsotropicBaseline, request).cosine_p95

    def alarms(self, run=None, *, state=None, since_revision=None, limit=None):
        """The training-health alarms the server's rules (--alarm-rules) fired, as a
        DataFrame with one row per alarm, ordered by revision (oldest change first).

        Columns: id, namespace, run, probe_id, rule, metric, layer (-1: the rule is over
        every layer), step (where it fired), value (the rule's aggregate there), reference
        (the threshold, or the earlier value compared with), state ("firing" or
        "resolved"), resolved_step (Int64, <NA> while firing), fired_at, resolved_at (UTC
        timestamps, NaT while firing), severity, summary, revision.

        run: only this run's alarms (None: every run of the namespace); a run the caller
            cannot see: Error NOT_FOUND, as for series().
        state: "firing" or "resolved" (None: both).
        since_revision: only alarms fired or resolved after this revision (polling: pass
            the largest revision seen).
        limit: at most this many alarms (None: the server's 1000; at most 10000).
        frame.attrs["more"] is True when more alarms matched than the limit.
        """
        if state is not None and state not in ALARM_STATES:
            raise ValueError(f"state: expected 'firing' or 'resolved', got {state!r}")
        request = pb.ListAlarmsRequest(run=run or "",
                                       state=ALARM_STATES.get(state, pb.ALARM_STATE_UNSPECIFIED))
        if since_revision is not None:
            request.since_revision = operator.index(since_revision)
        if limit is not None:
            request.limit = operator.index(limit)
        response = self._call(self._queries.ListAlarms, request)
        frame = frames.alarms_frame(response.alarms, _alarm_state_word)
        frame.attrs.update(more=response.more)
        return frame

    # ---- Jobs ------------------------------------------------------------------------

    def submit(self, run, *, checkpoints_dir=None, checkpoints=None, probe_tokens=None,
               probe_text=None, probe_mode=None, samples=None, seq_len=None, force=False,
               follow=False, until_step=None, token_samples=None, hf_cache=None,
               dedupe=False, metrics=None, hub=None, hub_repos=None, s3=None, revisions=None,
               glob=None, revision=None):
        """Queues a job analysing checkpoints of `run` with a probe; returns its Job.

        checkpoints_dir: a directory whose subdirectories are the steps; or
        hf_cache: a Hugging Face cache repository (hub/models--ORG--NAME) whose refs
            (revisions such as "step1000") name the steps; or
        checkpoints: {step: path} or (step, path) pairs; or a series where it lives,
            listed by the server (its endpoints, within its --allow-source) and fetched by
            the worker that computes each step (docs/sources.md):
        hub: "ORG/NAME", a Hub repo: every branch whose name carries a step; or
        hub_repos: "ORG/NAME{}", a repo per step, "{}" standing for the step's part
            ("google/multiberts-seed_0-step_{}k"), each at `revision` (None: "main"); or
        s3: "s3://BUCKET/PREFIX/", one folder per step under the prefix.
        revisions: only these branches, folders or "{}" values (a list, or "a,b");
        glob: only the names that match this fnmatch pattern.
        probe_tokens: JSON lines of token ids, used verbatim; or
        probe_text: text tokenized with each checkpoint's own tokenizer, cut into
            probe_mode "windows" (default) or "lines".
        samples: probe samples (None: 128); seq_len: tokens per sample (None: the smaller
            of 2048 and the model's maximum); each at least 1 when given (ValueError).
        token_samples: M, the probe tokens whose Q and K are kept per head and step for
            token_cloud() (None: 128; 0: none).
        metrics: the metric groups to compute, "core,spectra" or ["core", "spectra"]
            (None: all; core is always computed; the groups are listed by `anisoscope
            submit --help`); a step stored without a group lacks its metrics.
        force: recompute and replace steps already stored for this probe.
        dedupe: skip a step whose weights equal an earlier stored step's (same
            fingerprint); either way such a step's CheckpointStatus names it in
            duplicate_of.
        follow: keep watching checkpoints_dir: each new step directory joins the job once
            it is whole, until step until_step (when given) is analysed or the job is
            cancelled (a run being trained; see `anisoscope follow`); on a remote source,
            the server polls its refs or prefix instead.
        Relative paths are made absolute against the current directory; the server reads
        them and refuses paths outside its allowed roots (PERMISSION_DENIED).
        """
        request = submit_request(run, checkpoints_dir=checkpoints_dir, checkpoints=checkpoints,
                                 probe_tokens=probe_tokens, probe_text=probe_text,
                                 probe_mode=probe_mode, samples=samples, seq_len=seq_len,
                                 force=force, follow=follow, until_step=until_step,
                                 token_samples=token_samples, hf_cache=hf_cache,
                                 dedupe=dedupe, metrics=metrics, hub=hub, hub_repos=hub_repos,
                                 s3=s3, revisions=revisions, glob=glob, revision=revision)
        return Job.from_proto(self._call(self._jobs.SubmitJob, request))

    def audit(self, *, hub=None, hub_repos=None, s3=None, checkpoints_dir=None, revisions=None,
              glob=None, revision=None):
        """Lists a series before anything is computed on it, reading no weight byte: a
        DataFrame with one row per step, ascending (anisoscope.sources.AUDIT_COLUMNS: step,
        name, revision, commit, files, size_bytes, duplicate_of).

        Exactly one of hub, hub_repos, s3 (as for submit(), narrowed by revisions, glob and
        revision) or checkpoints_dir (a folder on the server, within its allowed roots).
        duplicate_of (Int64, <NA> for none) names an earlier step whose weights are the
        same bytes, from the listing's hashes (none for a folder). frame.attrs holds source
        (what was listed), problems (a list of {"name", "step", "reason"}: missing or
        unreadable steps), without_step (names that carry no step), requests and seconds.
        Needs a writer's token, as submit() does.
        """
        source = checkpoint_source("audit", hub=hub, hub_repos=hub_repos, s3=s3,
                                   revisions=revisions, glob=glob, revision=revision,
                                   others=(("checkpoints_dir", checkpoints_dir),))
        if source is None and checkpoints_dir is None:
            raise ValueError("audit: give one of checkpoints_dir, hub, hub_repos, s3")
        request = pb.AuditSourceRequest()
        if source is not None:
            request.source.CopyFrom(source)
        else:
            request.checkpoints_dir = absolute_path(checkpoints_dir)
        return audit_frame(self._call(self._jobs.AuditSource, request))

    def wait(self, job, *, progress=None, timeout=None):
        """Follows a job (a Job or its id) until it ends and returns the final Job.

        progress: True shows a tqdm bar on stderr (lines per checkpoint without tqdm),
            False nothing, None (default) the bar only when stderr is a terminal.
        timeout: seconds to follow before giving up (DEADLINE_EXCEEDED); None: no limit.
        Raises JobFailedError unless every checkpoint was done or skipped. Interrupting
        the wait does not cancel the job (see cancel()).
        """
        job_id = _job_id(job)
        call = self._jobs.WatchJob(pb.WatchJobRequest(id=job_id), timeout=timeout,
                                   metadata=self._metadata)
        last = None
        with progress_display(progress) as display:
            try:
                for event in call:
                    display.show(event)
                    last = event.job
            except grpc.RpcError as error:
                raise Error.from_rpc(error, self.address) from None
            finally:
                call.cancel()
        final = Job.from_proto(last) if last is not None else None
        if final is None or not final.finished:
            raise Error(None, f"the server ended the watch of job {job_id} before it finished")
        if not final.succeeded:
            raise JobFailedError(final)
        return final

    def job(self, job):
        """The Job of a Job or id as it stands now."""
        return Job.from_proto(self._call(self._jobs.GetJob, pb.GetJobRequest(id=_job_id(job))))

    def jobs(self, *, run=None, limit=0):
        """Recent jobs, newest first; only `run`'s when given; limit 0: the server's 100."""
        request = pb.ListJobsRequest(run=run or "", limit=limit)
        return [Job.from_proto(job) for job in self._call(self._jobs.ListJobs, request).jobs]

    def cancel(self, job):
        """Cancels a queued or running job (a Job or its id); returns the Job after it.
        A job that has already ended: Error FAILED_PRECONDITION."""
        request = pb.CancelJobRequest(id=_job_id(job))
        return Job.from_proto(self._call(self._jobs.CancelJob, request))
