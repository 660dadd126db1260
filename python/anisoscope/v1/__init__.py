"""The wire contract anisoscope.v1: anisoscope_pb2 (messages) and anisoscope_pb2_grpc
(stubs), generated from proto/anisoscope/v1/anisoscope.proto when the package is built."""
