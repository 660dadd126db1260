"""Python client of the anisoscope service: a run's per-layer/per-head metric time series
as pandas DataFrames, its mean Q/K vectors as numpy arrays, and jobs submitted and
followed.

    import anisoscope
    client = anisoscope.Client("127.0.0.1:50051")
    cosines = client.series("seed0", "qk_mean_cosine")
"""
from anisoscope.client import Client
from anisoscope.errors import Error, JobFailedError
from anisoscope.frames import Vectors, layer_means, wide
from anisoscope.records import Checkpoint, Job, Origin, Probe, ProbeSpec, Run

__version__ = "0.1.0"

__all__ = ["Checkpoint", "Client", "Error", "Job", "JobFailedError", "Origin", "Probe",
           "ProbeSpec", "Run", "Vectors", "layer_means", "wide"]
