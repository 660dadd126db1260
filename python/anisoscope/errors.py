"""The exceptions of the client: every failed call raises an Error."""
import grpc


class Error(Exception):
    """A call to the server failed.

    `code` is the grpc.StatusCode (e.g. grpc.StatusCode.NOT_FOUND), or None when the error
    is not a gRPC status (a job that failed, a watch that ended early); `details` is the
    server's message. str() names the status first, as the `anisoscope` CLI prints it:
    "NOT_FOUND: run 'x' not found; known runs: seed0".
    """

    def __init__(self, code, details):
        self.code, self.details = code, details
        super().__init__(f"{code.name}: {details}" if code is not None else details)

    @classmethod
    def from_rpc(cls, error, address):
        """The Error for a grpc.RpcError of a call to the server at `address`."""
        code, details = error.code(), error.details() or ""
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            details = f"{details} (anisoscope server at {address})"
        return cls(code, details)


class JobFailedError(Error):
    """Client.wait: the job ended without every checkpoint done or skipped.

    `job` is the final Job (its checkpoints say which steps failed and why).
    """

    def __init__(self, job):
        self.job = job
        failures = [f"step {c.step}: {c.error or c.state}" for c in job.checkpoints
                    if c.state not in ("done", "skipped")]
        message = f"job {job.id} {job.state}"
        if job.error:
            message += f": {job.error}"
        if failures:
            message += f" ({'; '.join(failures)})"
        super().__init__(None, message)
