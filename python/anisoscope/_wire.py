"""The generated messages (`pb`) and stubs (`pb_grpc`), with a clear error when absent."""
try:
    from anisoscope.v1 import anisoscope_pb2 as pb
    from anisoscope.v1 import anisoscope_pb2_grpc as pb_grpc
except ImportError as error:
    raise ImportError(
        "anisoscope's gRPC stubs are missing: they are generated from proto/ when the package "
        "is built; install it with `pip install ./python` rather than importing the source "
        "tree") from error

__all__ = ["pb", "pb_grpc"]
