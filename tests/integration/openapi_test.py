#!/usr/bin/python3
"""docs/openapi.yaml against the server it describes. Without a server: the document is
complete (operation ids, parameter examples, resolvable references, path keys on lines the
C++ route test reads), every operation's parameters are exactly the scalar fields of its
proto request message, and every schema mirrors its proto message or enum in the protobuf
JSON mapping. Against the real server process (tokens on, the bert_run fixture stored):
every operation's example request answers 200 with a body its schema accepts, no field
undocumented; other paths under /api/v1 are "no such endpoint"; every documented error
status is produced with the error schema; every documented parameter is one the server
knows; defaults and minimums hold. In CI a missing fixture or binary fails the server
tests; elsewhere they skip."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.parse
import urllib.request

import yaml

from server_process import BIN, ServerProcess

SOURCE_DIR = os.environ.get("ANISOSCOPE_SOURCE_DIR",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OPENAPI = os.path.join(SOURCE_DIR, "docs", "openapi.yaml")
PROTO = os.path.join(SOURCE_DIR, "proto", "anisoscope", "v1", "anisoscope.proto")
FIXTURE = os.path.join(os.environ.get("ANISOSCOPE_FIXTURES", "fixtures"), "bert_run")
# Schemas of the protobuf JSON mapping itself, not of a proto message.
JSON_MAPPING_SCHEMAS = {"Int64", "Double", "Error"}
# Schemas only a series read from the Hub or S3 fills (a run's step origins, a job's source,
# a step's download in progress):
# tests/integration/sources_end_to_end_test.py checks those answers against real servers.
REMOTE_ONLY_SCHEMAS = {"StepOrigin", "CheckpointSource", "FetchProgress"}
# Statuses no request of a test can provoke (a busy database, an internal error).
UNPROVOKED_STATUSES = {"500", "503"}
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def load_openapi():
    with open(OPENAPI, encoding="utf-8") as f:
        return yaml.safe_load(f)


def json_name(field):
    """The protobuf JSON name of a proto field name (q_x -> qX)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), field)


# ---- A minimal proto3 reader ------------------------------------------------------------

SCALAR_TYPES = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
                "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"}


def parse_proto(text):
    """({message: [(label, type, name)]}, {enum: [value names]}); nested messages and enums
    by their dotted names (JobEvent.Kind); the fields of a oneof belong to its message, labelled
    "optional" (printed only when set)."""
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)
    tokens = re.findall(r'"[^"]*"|[A-Za-z_][\w.]*|-?\d+|[{}=;<>,()\[\]]', text)
    messages, enums, stack, statement = {}, {}, [], []
    for token in tokens:
        if token not in ("{", "}", ";"):
            statement.append(token)
            continue
        if token == "{":
            kind = statement[0] if statement else ""
            name = statement[1] if len(statement) > 1 else ""
            scope = [n for k, n in stack if k in ("message", "enum")]
            full = ".".join(scope + [name])
            if kind == "message":
                messages[full] = []
            elif kind == "enum":
                enums[full] = []
            stack.append((kind, full if kind in ("message", "enum") else name))
        elif token == "}":
            if stack:
                stack.pop()
        elif stack:  # a statement inside a block
            kind, name = stack[-1]
            in_oneof = kind == "oneof"
            if in_oneof:
                kind, name = next((k, n) for k, n in reversed(stack) if k == "message")
            if kind == "message" and "=" in statement and statement[0] not in (
                    "option", "reserved", "extensions"):
                head = statement[:statement.index("=")]
                label = head[0] if head[0] in ("optional", "repeated") else ""
                if in_oneof:  # explicit presence, as a proto3 optional: printed only when set
                    label = "optional"
                messages[name].append((label, head[-2], head[-1]))
            elif kind == "enum" and "=" in statement and statement[0] != "option":
                enums[name].append(statement[0])
        statement = []
    return messages, enums


def load_proto():
    with open(PROTO, encoding="utf-8") as f:
        return parse_proto(f.read())


# ---- A validator for the subset of JSON Schema the document uses --------------------------

class SchemaValidator:
    """type, format (int32 range), enum, pattern, minimum, properties, required,
    additionalProperties (false), items, $ref, allOf, anyOf. Records the schemas it used."""

    def __init__(self, doc):
        self.doc = doc
        self.used = set()

    def ref(self, ref):
        node = self.doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        return node

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            node = self.ref(node["$ref"])
        return node

    def errors(self, schema, value, where="$"):
        found = []
        self._check(schema, value, where, found, self.used)
        return found

    def _check(self, schema, value, where, errors, used):
        if "$ref" in schema:
            used.add(schema["$ref"].rsplit("/", 1)[1])
            self._check(self.ref(schema["$ref"]), value, where, errors, used)
            return
        for sub in schema.get("allOf", []):
            self._check(sub, value, where, errors, used)
        if "anyOf" in schema:
            for sub in schema["anyOf"]:
                sub_errors, sub_used = [], set()
                self._check(sub, value, where, sub_errors, sub_used)
                if not sub_errors:
                    used |= sub_used
                    break
            else:
                errors.append(f"{where}: {value!r} matches no alternative of anyOf")
        kind = schema.get("type")
        types = {"object": dict, "array": list, "string": str, "boolean": bool,
                 "integer": int, "number": (int, float)}
        if kind is not None:
            if not isinstance(value, types[kind]) or (
                    kind in ("integer", "number") and isinstance(value, bool)):
                errors.append(f"{where}: {value!r} is not of type {kind}")
                return
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
        if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"],
                                                                             value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value!r} is below the minimum {schema['minimum']}")
        if schema.get("format") == "int32" and kind == "integer" and not (
                -2**31 <= value < 2**31):
            errors.append(f"{where}: {value!r} is out of int32 range")
        if kind == "object":
            properties = schema.get("properties", {})
            for name in schema.get("required", []):
                if name not in value:
                    errors.append(f"{where}: required field '{name}' missing")
            for name, item in value.items():
                if name in properties:
                    self._check(properties[name], item, f"{where}.{name}", errors, used)
                elif schema.get("additionalProperties") is False:
                    errors.append(f"{where}: field '{name}' is not documented")
        if kind == "array" and "items" in schema:
            for i, item in enumerate(value):
                self._check(schema["items"], item, f"{where}[{i}]", errors, used)


# ---- Reading the document --------------------------------------------------------------

def operations(doc):
    """(path, method, operation) of every documented operation."""
    return [(path, method, op) for path, item in doc["paths"].items()
            for method, op in item.items() if method in HTTP_METHODS]


def api_operations(doc):
    return [(path, op) for path, method, op in operations(doc)
            if path.startswith("/api/v1/") and method == "get"]


def parameters(validator, op):
    return [validator.resolve(p) for p in op.get("parameters", [])]


def param_text(value):
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def example_url(validator, path, op, optional=True, override=None, omit=()):
    """The path of `op` with its parameters' examples: every one, or (optional=False) the
    required ones and those marked x-example-always (one of several that exclude each other,
    e.g. the audit's series), never those marked x-example-never; `override` {name: text}
    replaces or adds, `omit` leaves out."""
    override = dict(override or {})
    query = []
    for param in parameters(validator, op):
        name = param["name"]
        if name in omit:
            continue
        if name in override:
            value = override.pop(name)
        elif param.get("x-example-never"):
            continue
        elif (param["in"] == "path" or param.get("required") or param.get("x-example-always")
              or optional):
            value = param_text(param["example"])
        else:
            continue
        if param["in"] == "path":
            path = path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
        else:
            query.append((name, value))
    query += list(override.items())
    return path + ("?" + urllib.parse.urlencode(query) if query else "")


def path_regex(template):
    return re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(template)) + "$")


def schema_tag(validator, schema):
    """A field schema, canonically: ('ref', Name), ('array', tag) or (type, format)."""
    if "$ref" in schema:
        return ("ref", schema["$ref"].rsplit("/", 1)[1])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return schema_tag(validator, schema["allOf"][0])
    if schema.get("type") == "array":
        return ("array", schema_tag(validator, schema["items"]))
    return (schema.get("type"), schema.get("format"))


PROTO_FIELD_TAGS = {"string": ("string", None), "int32": ("integer", "int32"),
                    "int64": ("ref", "Int64"), "uint64": ("ref", "Int64"),
                    "double": ("ref", "Double"), "bool": ("boolean", None)}
PROTO_PARAM_TAGS = {"string": ("string", None), "int32": ("integer", "int32"),
                    "int64": ("integer", "int64"), "bool": ("boolean", None)}


class OpenApiDocumentTest(unittest.TestCase):
    """The document alone, and against the proto file."""

    @classmethod
    def setUpClass(cls):
        cls.doc = load_openapi()
        cls.validator = SchemaValidator(cls.doc)
        cls.messages, cls.enums = load_proto()

    def test_path_keys_are_lines_the_route_test_reads(self):
        with open(OPENAPI, encoding="utf-8") as f:
            lines = f.read().splitlines()
        start = lines.index("paths:")
        end = next(i for i in range(start + 1, len(lines)) if re.match(r"\S", lines[i]))
        keys = []
        for line in lines[start + 1:end]:
            if re.match(r"  \S", line) and not line.startswith("  #"):
                self.assertRegex(line, r"^  (/api/v1/[a-z0-9_/{}-]+|/metrics):$")
                keys.append(line.strip()[:-1])
        self.assertEqual(keys, list(self.doc["paths"]))
        for key in keys:
            for segment in key.split("/"):
                if "{" in segment or "}" in segment:
                    self.assertRegex(segment, r"^\{[a-z_]+\}$", key)
        self.assertIn("/metrics", keys)

    def test_every_operation_is_complete(self):
        self.assertEqual(self.doc["openapi"], "3.0.3")
        self.assertIn("bearer", self.doc["components"]["securitySchemes"])
        self.assertIn({"bearer": []}, self.doc["security"])
        self.assertIn({}, self.doc["security"])  # --auth none
        ids = [op["operationId"] for _, _, op in operations(self.doc)]
        self.assertEqual(len(ids), len(set(ids)), ids)
        for path, method, op in operations(self.doc):
            with self.subTest(path=path):
                self.assertEqual(method, "get")
                self.assertTrue(op.get("summary") and op.get("description"))
                self.assertIn("200", op["responses"])
                for status, response in op["responses"].items():
                    response = self.validator.resolve(response)
                    self.assertTrue(response.get("description"), status)
                    self.assertTrue(response.get("content"), status)
                    if status != "200":
                        schema = response["content"]["application/json"]["schema"]
                        self.assertEqual(schema, {"$ref": "#/components/schemas/Error"})
                    if status == "401":
                        self.assertIn("WWW-Authenticate", response["headers"])
                path_params = set(re.findall(r"\{([a-z_]+)\}", path))
                documented_path_params = set()
                for param in parameters(self.validator, op):
                    for key in ("name", "in", "description", "schema"):
                        self.assertIn(key, param, f"{path} {param.get('name')}")
                    self.assertIn("example", param, f"{path} {param['name']}: no example")
                    self.assertFalse(self.validator.errors(
                        param["schema"], param["example"], f"{path} {param['name']} example"))
                    if param["in"] == "path":
                        self.assertTrue(param["required"])
                        documented_path_params.add(param["name"])
                    else:
                        self.assertEqual(param["in"], "query")
                    if "default" in param["schema"]:
                        self.assertFalse(param.get("required"), param["name"])
                self.assertEqual(documented_path_params, path_params)
                if path.startswith("/api/v1/"):
                    self.assertIn("namespace", [p["name"] for p in parameters(self.validator, op)])
                    self.assertEqual(
                        set(op["responses"]) - {"404", "409"},
                        {"200", "400", "401", "403", "500", "503"}, path)
                    self.assertIn("application/json", op["responses"]["200"]["content"])
        metrics = self.doc["paths"]["/metrics"]["get"]
        self.assertIn("text/plain; version=0.0.4", metrics["responses"]["200"]["content"])

    def test_every_reference_resolves(self):
        def walk(node, where):
            if isinstance(node, dict):
                if "$ref" in node:
                    self.assertTrue(node["$ref"].startswith("#/components/"), where)
                    try:
                        self.validator.ref(node["$ref"])
                    except KeyError:
                        self.fail(f"{where}: unresolved {node['$ref']}")
                for key, value in node.items():
                    walk(value, f"{where}/{key}")
            elif isinstance(node, list):
                for i, value in enumerate(node):
                    walk(value, f"{where}/{i}")
        walk(self.doc, "#")

    def test_parameters_are_the_request_message_fields(self):
        for path, op in api_operations(self.doc):
            with self.subTest(path=path):
                message = op["x-request-message"]
                self.assertIn(message, self.messages, f"{path}: no proto message {message}")
                fields = {name: (label, kind) for label, kind, name in self.messages[message]}
                # x-request-flatten: a message field whose own fields are parameters by their
                # names (the audit's source: hub=, s3=, ...), a repeated string among them one
                # comma-separated parameter (server/http/audit_params.h).
                for flat in op.get("x-request-flatten", []):
                    _, kind = fields.pop(flat)
                    for label, inner, name in self.messages[kind]:
                        repeated_text = label == "repeated" and inner == "string"
                        fields[name] = ("" if repeated_text else label, inner)
                documented = {p["name"]: p for p in parameters(self.validator, op)
                              if p["name"] != "namespace"}
                # Repeated and message fields cannot be given in a query string.
                settable = {name for name, (label, kind) in fields.items()
                            if label != "repeated" and (kind in SCALAR_TYPES
                                                        or kind in self.enums)}
                self.assertEqual(set(documented), settable,
                                 f"{path}: documented parameters vs {message}'s scalar fields")
                for name, param in documented.items():
                    label, kind = fields[name]
                    if kind in self.enums:
                        # An enum by its value names, or their short forms (state=firing
                        # for ALARM_STATE_FIRING; server/http/query_params.cc).
                        self.assertEqual(schema_tag(self.validator, param["schema"]),
                                         ("string", None), f"{path} {name}")
                        prefix = re.sub(r"(?<!^)([A-Z])", r"_\1", kind).upper() + "_"
                        for value in param["schema"]["enum"]:
                            self.assertIn(prefix + value.upper().removeprefix(prefix),
                                          self.enums[kind], f"{path} {name}={value}")
                        continue
                    self.assertEqual(schema_tag(self.validator, param["schema"]),
                                     PROTO_PARAM_TAGS[kind], f"{path} {name}")
                    if label == "optional":  # absence means something no value says
                        self.assertNotIn("default", param["schema"], f"{path} {name}")

    def test_schemas_mirror_the_proto_messages(self):
        schemas = self.doc["components"]["schemas"]
        for name, schema in schemas.items():
            if name in JSON_MAPPING_SCHEMAS:
                continue
            with self.subTest(schema=name):
                if name in self.enums:
                    self.assertEqual(schema["type"], "string")
                    self.assertEqual(schema["enum"], self.enums[name])
                    continue
                self.assertIn(name, self.messages, f"schema {name} is no proto message or enum")
                self.assertEqual(schema["type"], "object")
                self.assertIs(schema["additionalProperties"], False)
                fields = self.messages[name]
                self.assertEqual(list(schema["properties"]), [json_name(n) for _, _, n in fields])
                required = set(schema["required"])
                for label, kind, field in fields:
                    prop = schema["properties"][json_name(field)]
                    if kind in PROTO_FIELD_TAGS:
                        want = PROTO_FIELD_TAGS[kind]
                    else:
                        scoped = f"{name}.{kind}"
                        self.assertIn(scoped if scoped in self.enums else kind,
                                      set(self.enums) | set(self.messages), kind)
                        want = ("ref", kind)
                    if label == "repeated":
                        want = ("array", want)
                    self.assertEqual(schema_tag(self.validator, prop), want, f"{name}.{field}")
                    # Printed with default values: only a singular message field, or a
                    # proto3 optional one (explicit presence), may be absent.
                    if label != "optional" and (label == "repeated" or kind in SCALAR_TYPES
                                                or kind in self.enums):
                        self.assertIn(json_name(field), required, f"{name}.{field}")
                self.assertLessEqual(required, set(schema["properties"]))

    def test_response_schemas_are_proto_messages_and_examples_fit_them(self):
        for path, method, op in operations(self.doc):
            for status, response in op["responses"].items():
                response = self.validator.resolve(response)
                for media, content in response["content"].items():
                    with self.subTest(path=path, status=status):
                        schema = content["schema"]
                        if path.startswith("/api/v1/") and status == "200":
                            self.assertIn(schema_tag(self.validator, schema)[1], self.messages)
                            self.assertEqual(schema_tag(self.validator, schema)[1],
                                             response["description"])
                        self.assertIn("example", content)
                        self.assertEqual(self.validator.errors(schema, content["example"]), [])


class OpenApiServerTest(unittest.TestCase):
    """A real server with tokens on, the bert_run fixture stored as run seed0 (job 1) and a
    run 'two' with two probes."""
    covered = set()  # (path template, status) of the documented error answers seen

    @classmethod
    def setUpClass(cls):
        needed = [os.path.join(BIN, "anisoscope-server"), os.path.join(BIN, "anisoscope"),
                  os.path.join(FIXTURE, "probe.jsonl")]
        missing = [p for p in needed if not os.path.exists(p)]
        if missing:
            message = f"missing {', '.join(missing)} (set ANISOSCOPE_BIN, ANISOSCOPE_FIXTURES)"
            if os.environ.get("CI"):
                raise AssertionError(message)
            raise unittest.SkipTest(message)
        cls.doc = load_openapi()
        cls.validator = SchemaValidator(cls.doc)
        cls.work = tempfile.mkdtemp(prefix="anisoscope_openapi_")
        cls.db = os.path.join(cls.work, "metrics.db")
        cls.tokens = {role: cls.make_token(role)
                      for role in ("admin", "reader", "writer", "worker")}
        # Parameters marked x-example-fixture name a folder this test makes (an audit's
        # series: two steps, one without weights, and a folder that carries no step).
        series = cls.make_audit_series()
        for _, _, op in operations(cls.doc):
            for param in op.get("parameters", []):
                if param.get("x-example-fixture") == "audit_series":
                    param["example"] = series
        web_dir = os.path.join(cls.work, "web")  # empty: any other path is a plain 404
        os.mkdir(web_dir)
        cls.server = ServerProcess(cls.db, [FIXTURE, series], [
            "--http-listen", "127.0.0.1:0", "--auth", "tokens", "--web-dir", web_dir])
        cls.server.start()
        line = cls.server.process.stdout.readline()
        match = re.match(r"dashboard at (http://127\.0\.0\.1:\d+)/$", line.strip())
        assert match, f"no dashboard line: {line!r}"
        cls.base = match.group(1)
        step_0 = os.path.join(FIXTURE, "safetensors", "step_0")
        probe = os.path.join(FIXTURE, "probe.jsonl")
        for args in (["--run", "seed0", "--checkpoints", os.path.join(FIXTURE, "safetensors")],
                     # step 7 serves step 0's weights: the run lists a duplicate
                     ["--run", "two", "--checkpoint", f"0={step_0}", "--checkpoint",
                      f"7={step_0}"],
                     ["--run", "two", "--checkpoint", f"0={step_0}", "--samples", "5"]):
            cls.cli("submit", *args, "--probe-tokens", probe, "--wait")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def make_audit_series(cls):
        """A folder series for the audit's example: step_0 whole, step_5 without weights (a
        problem), notes (no step)."""
        series = os.path.join(cls.work, "audit_series")
        step_0 = os.path.join(FIXTURE, "safetensors", "step_0")
        shutil.copytree(step_0, os.path.join(series, "step_0"))
        os.makedirs(os.path.join(series, "step_5"))
        shutil.copy(os.path.join(step_0, "config.json"), os.path.join(series, "step_5"))
        os.makedirs(os.path.join(series, "notes"))
        return series

    def least_token(self, path):
        """The token of the least role that may call `path`'s operation: a reader, or a writer
        for an operation marked x-role: writer (the audit)."""
        _, op = self.operation_for(path)
        return "writer" if op is not None and op.get("x-role") == "writer" else "reader"

    @classmethod
    def make_token(cls, role):
        namespace = ["--namespace", "*"] if role == "worker" else []  # a worker's is said
        result = subprocess.run([os.path.join(BIN, "anisoscope-server"), "tokens", "create",
                                 "--db", cls.db, "--name", role, "--role", role, *namespace],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    @classmethod
    def cli(cls, *args):
        env = dict(os.environ, ANISOSCOPE_TOKEN=cls.tokens["admin"])
        result = subprocess.run([os.path.join(BIN, "anisoscope"), "--server",
                                 cls.server.address, *args], capture_output=True, text=True,
                                timeout=120, env=env)
        assert result.returncode == 0, f"anisoscope {' '.join(args)}: {result.stderr}"

    def get(self, path, token="least", base=None):
        """(status, headers, body bytes) of GET path; token: a role's token, "least" (the
        least role the operation needs: least_token), a literal 'anis_...' token, or None."""
        if token == "least":
            token = self.least_token(path)
        request = urllib.request.Request((base or self.base) + path)
        if token:
            request.add_header("Authorization",
                               f"Bearer {self.tokens.get(token, token)}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    def operation_for(self, path):
        """(template, operation) of the documented path that `path` is; (None, None)."""
        bare = urllib.parse.urlsplit(path).path
        for template, _, op in operations(self.doc):
            if path_regex(template).match(bare):
                return template, op
        return None, None

    def assert_json_answer(self, path, status, headers, body, response):
        """The answer has the documented response's headers and a JSON body of its schema;
        returns the body."""
        self.assertTrue(headers.get("Content-Type", "").startswith("application/json"),
                        f"{path}: {headers.get('Content-Type')}")
        for name, header in response.get("headers", {}).items():
            header = self.validator.resolve(header)
            self.assertIn(headers.get(name), header["schema"]["enum"], f"{path} {name}")
        value = json.loads(body)
        errors = self.validator.errors(response["content"]["application/json"]["schema"],
                                       value)
        self.assertEqual(errors, [], f"GET {path} -> {status}: {body[:300]!r}")
        return value

    def assert_error(self, path, want, token="least"):
        """GET path answers `want` with the documented error body; returns its message."""
        status, headers, body = self.get(path, token)
        self.assertEqual(status, want, f"GET {path}: {body[:300]!r}")
        template, op = self.operation_for(path)
        self.assertIsNotNone(op, path)
        self.assertIn(str(status), op["responses"], f"{template} does not document {status}")
        response = self.validator.resolve(op["responses"][str(status)])
        error = self.assert_json_answer(path, status, headers, body, response)
        self.assertEqual(error["error"]["code"], status)
        if "x-grpc-status" in response:
            self.assertEqual(error["error"]["status"], response["x-grpc-status"], path)
        self.covered.add((template, str(status)))
        return error["error"]["message"]

    def test_every_example_request_answers_its_schema(self):
        self.validator.used.clear()
        for path, op in api_operations(self.doc):
            self.assertEqual(list(op["responses"]["200"]["content"]), ["application/json"])
            for optional in (False, True):
                url = example_url(self.validator, path, op, optional)
                with self.subTest(url=url):
                    status, headers, body = self.get(url)
                    self.assertEqual(status, 200, f"GET {url}: {body[:300]!r}")
                    self.assert_json_answer(url, status, headers, body, op["responses"]["200"])
        # Every schema of a 200 answer met real data (no list was empty).
        reachable = set()
        pending = [op["responses"]["200"]["content"]["application/json"]["schema"]
                   for _, op in api_operations(self.doc)]
        while pending:
            node = pending.pop()
            if isinstance(node, dict):
                if "$ref" in node:
                    name = node["$ref"].rsplit("/", 1)[1]
                    if name not in reachable:
                        reachable.add(name)
                        pending.append(self.validator.ref(node["$ref"]))
                pending.extend(v for v in node.values() if isinstance(v, (dict, list)))
            elif isinstance(node, list):
                pending.extend(node)
        self.assertEqual(reachable - self.validator.used - REMOTE_ONLY_SCHEMAS, set())

    def test_a_server_without_tokens_needs_none(self):
        server = ServerProcess(os.path.join(self.work, "open.db"), [FIXTURE], [
            "--http-listen", "127.0.0.1:0", "--auth", "none", "--workers", "0"])
        server.start()
        try:
            base = re.match(r"dashboard at (\S+)/$", server.process.stdout.readline()).group(1)
            op = self.doc["paths"]["/api/v1/runs"]["get"]
            status, headers, body = self.get("/api/v1/runs?namespace=elsewhere", None, base)
            self.assertEqual(status, 200, body)
            self.assert_json_answer("/api/v1/runs", status, headers, body, op["responses"]["200"])
        finally:
            server.stop()

    def test_only_documented_paths_are_served(self):
        for path, op in api_operations(self.doc):
            # A documented route answers (maybe 400 without parameters), never the catch-all.
            bare = re.sub(r"\{[a-z_]+\}", "1", path)
            status, _, body = self.get(bare)
            self.assertNotIn(b"no such endpoint", body, bare)
            extras = [bare + "/", bare + "/x"] + ([] if "{" in path else [bare + "x"])
            for extra in [e for e in extras if self.operation_for(e)[1] is None]:
                message = self.assert_error_catch_all(extra)
                self.assertEqual(message, f"no such endpoint: GET {extra}")
        for path in ("/api", "/api/v1", "/api/v1/", "/api/v2/runs", "/api/v1/nothing"):
            self.assertEqual(self.assert_error_catch_all(path), f"no such endpoint: GET {path}")
        # The other direction, by guessing from the proto services: a name any RPC suggests
        # is either documented or not served.
        with open(PROTO, encoding="utf-8") as f:
            rpcs = re.findall(r"rpc\s+(\w+)\s*\(", f.read())
        words = {"health", "healthz", "status", "metrics", "tokens", "namespaces", "workers"}
        for rpc in rpcs:
            verb, noun = re.match(r"([A-Z][a-z]+)(\w*)", rpc).groups()
            noun = re.sub(r"(?<!^)([A-Z])", r"_\1", noun).lower()
            words |= {noun, noun + "s", noun.rstrip("s"), verb.lower()}
        for word in sorted(w for w in words if w):
            for path in (f"/api/v1/{word}", f"/api/v1/jobs/1/{word}", f"/api/v1/runs/{word}"):
                status, _, body = self.get(path)
                if b"no such endpoint" not in body:
                    self.assertIsNotNone(self.operation_for(path)[1],
                                         f"{path} is served ({status}) but not documented")

    def assert_error_catch_all(self, path):
        """The catch-all's 404 (with the API's headers); returns its message."""
        status, headers, body = self.get(path)
        self.assertEqual(status, 404, path)
        self.assertIsNone(headers.get("Access-Control-Allow-Origin"), path)  # never *
        response = self.doc["components"]["responses"]["NotFound"]
        return self.assert_json_answer(path, status, headers, body, response)["error"]["message"]

    def test_documented_errors(self):
        for path, op in api_operations(self.doc):
            url = example_url(self.validator, path, op, optional=False)
            self.assertIn("wants a bearer token", self.assert_error(url, 401, token=None))
            self.assertIn("not valid", self.assert_error(url, 401, token="anis_not-a-token"))
            self.assertIn("may not", self.assert_error(url, 403, token="worker"))
            if op.get("x-role") == "writer":
                self.assertIn("may not", self.assert_error(url, 403, token="reader"))
            self.assertIn("unknown parameter 'x'",
                          self.assert_error(example_url(self.validator, path, op, False,
                                                        override={"x": "1"}), 400))
        cases = [
            ("/api/v1/runs?namespace=not%20a%20namespace", 400, "namespace"),
            ("/api/v1/jobs?namespace=elsewhere", 403, "may not act in namespace 'elsewhere'"),
            ("/api/v1/jobs?limit=-1", 400, "limit must be >= 0"),
            ("/api/v1/jobs/0", 400, "job id must be > 0"),
            ("/api/v1/jobs/x", 400, "parameter 'id'"),
            ("/api/v1/jobs/99", 404, "job 99 not found"),
            ("/api/v1/series?run=seed0", 400, "metric is required"),
            ("/api/v1/series?run=seed0&metric=qk_mean_cosine&layer=x", 400, "parameter 'layer'"),
            ("/api/v1/series?run=seed0&metric=qk_mean_cosine&layer=1&layer=2", 400, "twice"),
            ("/api/v1/series?run=seed0&metric=nope", 400, "unknown metric 'nope'"),
            ("/api/v1/series?run=seed0&metric=qk_mean_cosine&from_step=5&to_step=1", 400,
             "from_step 5 is after to_step 1"),
            ("/api/v1/series?run=nope&metric=qk_mean_cosine", 404,
             "run 'nope' not found; known runs: seed0, two"),
            ("/api/v1/series?run=seed0&metric=qk_mean_cosine&probe_id=pnope", 404,
             "probe 'pnope' not found"),
            ("/api/v1/series?run=two&metric=qk_mean_cosine", 409, "several probes"),
            ("/api/v1/vectors?run=seed0&kind=v_mean", 400, "kind must be one of"),
            ("/api/v1/vectors?run=nope&kind=q_mean", 404, "run 'nope' not found"),
            ("/api/v1/vectors?run=two&kind=q_mean", 409, "several probes"),
            ("/api/v1/trajectory?run=seed0&layer=-1", 400, "must be >= 0"),
            ("/api/v1/trajectory?run=seed0&layer=99", 400,
             "layer 99 is out of range: run 'seed0' has layers 0..2"),
            ("/api/v1/trajectory?run=nope", 404, "run 'nope' not found"),
            ("/api/v1/vectors?run=seed0&kind=q_mean&head=4", 400, "heads 0..3"),
            ("/api/v1/vectors?run=seed0&kind=q_mean_pre_rotary", 400,
             "run 'seed0' has no 'q_mean_pre_rotary' vectors"),
            ("/api/v1/series?run=seed0&metric=hidden_anisotropy&head=0", 400, "not per head"),
            ("/api/v1/trajectory?run=two", 409, "several probes"),
            ("/api/v1/token_cloud?run=seed0&basis=qk", 400, "basis must be union, q or k"),
            ("/api/v1/token_cloud?run=nope", 404, "run 'nope' not found"),
            ("/api/v1/token_cloud?run=two", 409, "several probes"),
            ("/api/v1/correlation?run=nope", 404, "run 'nope' not found"),
            ("/api/v1/correlation?run=two", 409, "several probes"),
            ("/api/v1/isotropic_baseline?dimension=1", 400, "dimension must be in 2.."),
        ]
        for path, status, text in cases:
            with self.subTest(path=path):
                self.assertIn(text, self.assert_error(path, status))
        # Every documented error status that a request can provoke was provoked.
        for path, op in api_operations(self.doc):
            for status in set(op["responses"]) - {"200"} - UNPROVOKED_STATUSES:
                self.assertIn((path, status), self.covered, f"{path} {status} never seen")

    def test_every_documented_parameter_is_known_to_the_server(self):
        for path, op in api_operations(self.doc):
            for param in parameters(self.validator, op):
                if param["in"] != "query":
                    continue
                for name in {param["name"], json_name(param["name"])}:
                    url = re.sub(r"\{[a-z_]+\}", "1", path) + "?" + urllib.parse.urlencode(
                        {name: param_text(param["example"])})
                    status, _, body = self.get(url)
                    self.assertNotIn(f"unknown parameter '{name}'", body.decode(), url)
            message = self.assert_error(example_url(self.validator, path, op, False,
                                                    override={"not_a_field": "1"}), 400)
            self.assertEqual(message, "unknown parameter 'not_a_field'")

    def test_required_defaults_minimums_and_patterns_hold(self):
        for path, op in api_operations(self.doc):
            base_url = example_url(self.validator, path, op, optional=False)
            _, _, base_body = self.get(base_url)
            for param in parameters(self.validator, op):
                name, schema = param["name"], param["schema"]
                if param["in"] == "query" and param.get("required"):
                    url = example_url(self.validator, path, op, False, omit=(name,))
                    self.assert_error(url, 400)
                if "default" in schema:  # absent means the default
                    url = example_url(self.validator, path, op, False,
                                      override={name: param_text(schema["default"])})
                    status, _, body = self.get(url)
                    self.assertEqual((status, json.loads(body)), (200, json.loads(base_body)),
                                     url)
                if "minimum" in schema:
                    url = example_url(self.validator, path, op, False,
                                      override={name: str(schema["minimum"] - 1)})
                    self.assert_error(url, 400)
                if "pattern" in schema or "enum" in schema:
                    url = example_url(self.validator, path, op, False,
                                      override={name: "not valid!"})
                    self.assert_error(url, 400)

    def test_metrics(self):
        op = self.doc["paths"]["/metrics"]["get"]
        media = next(iter(op["responses"]["200"]["content"]))
        status, headers, body = self.get("/metrics")
        text = body.decode()
        self.assertEqual(status, 200, text[:300])
        self.assertEqual(headers.get("Content-Type", "").replace(" ", "").split(";")[:2],
                         media.replace(" ", "").split(";")[:2])
        self.assert_prometheus_text(text)
        self.assert_prometheus_text(op["responses"]["200"]["content"][media]["example"])
        self.assertIn("wants a bearer token", self.assert_error("/metrics", 401, token=None))
        self.assertIn("may not", self.assert_error("/metrics", 403, token="worker"))

    def assert_prometheus_text(self, text):
        """Prometheus text exposition format 0.0.4: HELP/TYPE comments and samples."""
        self.assertTrue(text.endswith("\n"))
        name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
        label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
        number = r"(?:[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf)|NaN)"
        sample = re.compile(rf"^({name})(?:\{{(?:{label}(?:,{label})*,?)?\}})? {number}"
                            r"(?: -?[0-9]+)?$")
        typed, samples = {}, 0
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("# TYPE "):
                match = re.match(rf"^# TYPE ({name}) (counter|gauge|histogram|summary|untyped)$",
                                 line)
                self.assertTrue(match, line)
                self.assertNotIn(match.group(1), typed, f"second TYPE line: {line}")
                typed[match.group(1)] = match.group(2)
            elif line.startswith("# HELP "):
                self.assertRegex(line, rf"^# HELP {name}( .*)?$")
            elif line.startswith("#"):
                continue
            else:
                match = sample.match(line)
                self.assertTrue(match, f"not a sample line: {line!r}")
                family = re.sub(r"_(bucket|sum|count|total)$", "", match.group(1))
                self.assertTrue(match.group(1) in typed or family in typed,
                                f"sample before its TYPE line: {line}")
                samples += 1
        self.assertGreater(samples, 0)


if __name__ == "__main__":
    unittest.main()
