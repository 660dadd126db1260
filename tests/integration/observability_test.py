#!/usr/bin/python3
"""What operators reach the real server with: a Prometheus scrape of /metrics (parsed as
the text exposition format 0.0.4) after a job through a remote worker, and gRPC server
reflection (v1alpha, what grpcurl and grpc_cli use) listing the services and calling one
with messages built only from the descriptors the server sent."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

from server_process import BIN, ServerProcess

FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
STEPS = 4  # checkpoints in the fixture's safetensors series
REFLECTION_PROTO = "/usr/share/grpc-proto/grpc/reflection/v1alpha/reflection.proto"  # grpc-proto
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """{name: {"type": str, "samples": [(labels dict, float)]}}; asserts the format."""
    families, current = {}, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            current = families.setdefault(name, {"type": kind, "samples": []})
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels = match.group(1), dict(LABEL.findall(match.group(3) or ""))
        base = re.sub(r"_(bucket|sum|count)$", "", name) if current["type"] == "histogram" \
            else name
        assert current is not None and base in families, f"sample before its TYPE: {line!r}"
        families[base]["samples"].append((name, labels, float(match.group(4))))
    return families


def sample(families, name, **labels):
    family = families[re.sub(r"_(bucket|sum|count)$", "", name)]
    found = [value for sample_name, sample_labels, value in family["samples"]
             if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name} {labels}: {found}"
    return found[0]


class ObservabilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.path.exists(os.path.join(FIXTURE, "probe.jsonl")), f"no fixture at {FIXTURE}"
        cls.work = tempfile.mkdtemp(prefix="anisoscope_observability_")
        cls.server = ServerProcess(os.path.join(cls.work, "metrics.db"), [FIXTURE], [
            "--http-listen", "127.0.0.1:0", "--workers", "0"]).start()
        line = cls.server.process.stdout.readline()
        cls.base = re.match(r"dashboard at (http://\S+)/$", line.strip()).group(1)
        cls.worker_log = open(os.path.join(cls.work, "worker.log"), "w")
        cls.worker = subprocess.Popen(
            [os.path.join(BIN, "anisoscope-worker"), "--server", cls.server.address,
             "--allow-root", FIXTURE, "--name", "observer-0", "--threads", "1"],
            stdout=subprocess.DEVNULL, stderr=cls.worker_log)
        result = cls.server.cli("submit", "--run", "seed0", "--checkpoints",
                                os.path.join(FIXTURE, "safetensors"), "--probe-tokens",
                                os.path.join(FIXTURE, "probe.jsonl"), "--wait")
        assert result.returncode == 0, result.stderr
        cls.server.cli("query", "--run", "seed0", "--metric", "qk_mean_cosine", check=True)
        with urllib.request.urlopen(cls.base + "/api/v1/series?run=seed0&metric=qk_mean_cosine",
                                    timeout=10) as response:
            response.read()

    @classmethod
    def tearDownClass(cls):
        cls.worker.terminate()
        cls.worker.wait(30)
        cls.worker_log.close()
        cls.server.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    def scrape(self):
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as response:
            self.assertEqual(response.status, 200)
            self.assertTrue(response.headers["Content-Type"].startswith(
                "text/plain; version=0.0.4"), response.headers["Content-Type"])
            return parse_exposition(response.read().decode())

    def test_scrape_counts_the_job_the_worker_and_the_queries(self):
        families = self.scrape()
        self.assertEqual(sample(families, "anisoscope_jobs", state="succeeded"), 1)
        self.assertEqual(sample(families, "anisoscope_jobs", state="failed"), 0)
        self.assertEqual(sample(families, "anisoscope_queued_steps"), 0)
        self.assertEqual(sample(families, "anisoscope_active_leases"), 0)
        # The worker is long-polling for its next unit.
        self.assertEqual(sample(families, "anisoscope_workers"), 1)
        self.assertGreater(sample(families, "anisoscope_database_bytes"), 4096)
        # This scrape's own connection holds a request thread.
        self.assertGreaterEqual(sample(families, "anisoscope_http_threads"), 1)
        self.assertGreaterEqual(sample(families, "anisoscope_http_busy_threads"), 1)
        self.assertEqual(sample(families, "anisoscope_http_waiting_connections"), 0)
        labels = {"family": "bert", "device": "cpu"}
        self.assertEqual(families["anisoscope_checkpoints_analysed_total"]["type"], "counter")
        self.assertEqual(sample(families, "anisoscope_checkpoints_analysed_total", **labels),
                         STEPS)
        self.assertEqual(families["anisoscope_checkpoint_seconds"]["type"], "histogram")
        self.assertEqual(sample(families, "anisoscope_checkpoint_seconds_count", **labels), STEPS)
        self.assertEqual(sample(families, "anisoscope_checkpoint_seconds_bucket", le="+Inf",
                                **labels), STEPS)
        self.assertGreater(sample(families, "anisoscope_checkpoint_seconds_sum", **labels), 0)
        buckets = [value for name, sample_labels, value in
                   families["anisoscope_checkpoint_seconds"]["samples"]
                   if name.endswith("_bucket")]
        self.assertEqual(buckets, sorted(buckets), "buckets are cumulative")
        self.assertGreaterEqual(sample(families, "anisoscope_query_seconds_count", api="grpc",
                                       method="QuerySeries"), 1)
        self.assertGreaterEqual(sample(families, "anisoscope_query_seconds_count", api="http",
                                       method="/api/v1/series"), 1)
        # The series was read from a folder: no remote step was fetched.
        for name in ("anisoscope_source_steps_fetched_total", "anisoscope_source_cache_hits_total",
                     "anisoscope_source_bytes_fetched_total",
                     "anisoscope_source_fetch_retries_total",
                     "anisoscope_source_fetch_seconds_total"):
            self.assertEqual(families[name]["type"], "counter", name)
            self.assertEqual(sample(families, name), 0, name)

    def test_reflection_lists_the_services_and_calls_one_from_its_descriptors(self):
        out = tempfile.mkdtemp(dir=self.work)
        subprocess.run(["protoc", f"-I{os.path.dirname(REFLECTION_PROTO)}", f"--python_out={out}",
                        f"--grpc_python_out={out}",
                        "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                        REFLECTION_PROTO], check=True)
        sys.path.insert(0, out)
        import grpc
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        import reflection_pb2
        import reflection_pb2_grpc

        channel = grpc.insecure_channel(self.server.address)
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        def ask(**request):
            responses = list(stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(**request)]), timeout=10))
            self.assertEqual(len(responses), 1)
            return responses[0]

        services = {s.name for s in ask(list_services="").list_services_response.service}
        self.assertLessEqual({"anisoscope.v1.JobService", "anisoscope.v1.QueryService",
                              "anisoscope.v1.WorkerService", "anisoscope.v1.AdminService",
                              "grpc.reflection.v1alpha.ServerReflection"}, services)
        files = ask(file_containing_symbol="anisoscope.v1.QueryService")
        pool = descriptor_pool.DescriptorPool()
        # The proto's own options extend google/protobuf/descriptor.proto (final_state).
        pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
        for raw in files.file_descriptor_response.file_descriptor_proto:
            pool.Add(descriptor_pb2.FileDescriptorProto.FromString(raw))
        service = pool.FindServiceByName("anisoscope.v1.QueryService")
        self.assertEqual({m.name for m in service.methods},
                         {"ListRuns", "QuerySeries", "QueryVectors", "QueryTrajectory",
                          "QueryTokenCloud", "QueryCorrelation", "QueryIsotropicBaseline",
                          "ListAlarms", "ListMetrics"})
        method = service.FindMethodByName("ListRuns")
        request_class = message_factory.MessageFactory(pool).GetPrototype(method.input_type)
        response_class = message_factory.MessageFactory(pool).GetPrototype(method.output_type)
        call = channel.unary_unary("/anisoscope.v1.QueryService/ListRuns",
                                   request_serializer=request_class.SerializeToString,
                                   response_deserializer=response_class.FromString)
        response = call(request_class(), timeout=10)
        self.assertEqual([run.name for run in response.runs], ["seed0"])
        self.assertEqual(len(response.runs[0].steps), STEPS)
        channel.close()


if __name__ == "__main__":
    unittest.main()
