"""Builds the anisoscope package, generating its gRPC stubs from ../proto with protoc.

The stubs land in anisoscope/v1/ (the proto package anisoscope.v1 is the Python package
anisoscope.v1, so the generated imports resolve unchanged): in the build directory for a
wheel, in the source tree for an editable install (ignored by git either way).
"""
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import ExecError, FileError

HERE = Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent / "proto"
PROTO = "anisoscope/v1/anisoscope.proto"


def find_tool(name, debian_package):
    """The path of executable `name`, or an error naming the Debian package that has it."""
    path = shutil.which(name)
    if path is None:
        raise ExecError(f"{name} not found on PATH: install Debian's {debian_package} "
                        f"(apt-get install {debian_package})")
    return path


def generate_stubs(out_dir):
    """Writes anisoscope/v1/anisoscope_pb2.py and anisoscope_pb2_grpc.py under out_dir."""
    if not (PROTO_ROOT / PROTO).is_file():
        raise FileError(f"{PROTO_ROOT / PROTO} not found: build the package from a checkout "
                        "of the anisoscope repository (pip install ./python)")
    protoc = find_tool("protoc", "protobuf-compiler")
    plugin = find_tool("grpc_python_plugin", "protobuf-compiler-grpc")
    command = [protoc, f"-I{PROTO_ROOT}", f"--python_out={out_dir}",
               f"--grpc_python_out={out_dir}", f"--plugin=protoc-gen-grpc_python={plugin}",
               str(PROTO_ROOT / PROTO)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise ExecError(f"protoc failed on {PROTO}: {result.stderr.strip()}")


class BuildPyWithStubs(build_py):
    """build_py, then the stubs next to the copied package sources."""

    def run(self):
        super().run()
        generate_stubs(HERE if self.editable_mode else Path(self.build_lib))


setup(cmdclass={"build_py": BuildPyWithStubs})
