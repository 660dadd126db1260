#!/usr/bin/python3
"""The deployment files against the binaries they start: every flag that the Kubernetes
manifests and systemd units pass is one the binary's --help lists, with a value where it
takes one; the manifests fit together (kustomization, volumes, GPU, probes, Service); the
Dockerfile builds the images the manifests run."""
import functools
import os
import re
import shlex
import subprocess
import unittest

import yaml

SOURCE_DIR = os.environ.get("ANISOSCOPE_SOURCE_DIR",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KUBERNETES_DIR = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
SYSTEMD_DIR = os.path.join(SOURCE_DIR, "deploy", "systemd")
SERVER, WORKER = "anisoscope-server", "anisoscope-worker"
WORKLOAD_KINDS = ("StatefulSet", "Deployment", "Job")
# Instances and values for systemd specifiers (%i, %H, ...); others become "x".
SPECIFIERS = {"i": "0", "I": "0", "H": "host", "S": "/var/lib", "%": "%"}
# `$VAR` alone in ExecStart becomes zero or more arguments (`${VAR}` exactly one).
EXTRA_OPTIONS = re.compile(r"\$(\w+)")


def parse_usage(text):
    """{flag: takes a value} from usage text whose flag lines start `--name [VALUE]`, or
    `-n,--name [VALUE]` as CLI11 writes them."""
    flags = {}
    for line in text.splitlines():
        match = re.match(r"\s*(?:-\w, ?)?--([a-z0-9][a-z0-9-]*)(.*)$", line)
        if not match:
            continue
        name, rest = match.groups()
        value = re.match(r"[ =](\S+)(\s{2,}|\s*$)?", rest)
        # A metavariable is followed by the column gap or looks like one (DIR, HOST:PORT, a|b).
        takes_value = bool(value) and (value.group(2) is not None or
                                       bool(re.search(r"[A-Z|:<>\[\]{}]", value.group(1))))
        flags.setdefault(name, takes_value)
    return flags


@functools.lru_cache(maxsize=None)
def binary_flags(binary):
    bin_dir = os.environ.get("ANISOSCOPE_BIN")
    if not bin_dir:
        raise AssertionError("ANISOSCOPE_BIN is not set; point it at build/bin")
    path = os.path.join(bin_dir, binary)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} is missing: build {binary} first "
                             f"(its --help is what the deployment files are checked against)")
    result = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"{path} --help exited {result.returncode}: {result.stderr}")
    flags = parse_usage(result.stdout + result.stderr)
    if "help" not in flags:
        raise AssertionError(f"{path} --help lists no --help line:\n{result.stdout}")
    return flags


def check_flags(binary, args, where, opaque=lambda arg: False):
    """{flag: [values]} of `args`; raises AssertionError naming `where` on a bad one."""
    flags, seen, i = binary_flags(binary), {}, 0
    while i < len(args):
        arg, i = args[i], i + 1
        if opaque(arg):
            continue
        match = re.fullmatch(r"--([^=]+)(?:=(.*))?", arg, re.S)
        if not match:
            raise AssertionError(f"{where}: unexpected argument {arg!r}; {binary} takes flags only")
        name, value = match.groups()
        if name not in flags:
            raise AssertionError(f"{where}: {binary} has no --{name}; its --help lists "
                                 + ", ".join("--" + flag for flag in sorted(flags)))
        if flags[name] and value is None:
            if i == len(args) or args[i].startswith("--"):
                raise AssertionError(f"{where}: --{name} wants a value")
            value, i = args[i], i + 1
        if flags[name] and not value:
            raise AssertionError(f"{where}: --{name} has an empty value")
        if not flags[name] and value is not None:
            raise AssertionError(f"{where}: --{name} takes no value, got {value!r}")
        seen.setdefault(name, []).append(value)
    return seen


def port_of(address):
    return int(address.rsplit(":", 1)[1])


@functools.lru_cache(maxsize=None)
def kubernetes_documents():
    """[(file, document)] of every YAML file in deploy/kubernetes."""
    documents = []
    for name in sorted(os.listdir(KUBERNETES_DIR)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(KUBERNETES_DIR, name)) as f:
            try:
                documents += [(name, doc) for doc in yaml.safe_load_all(f) if doc is not None]
            except yaml.YAMLError as error:
                raise AssertionError(f"{name} does not parse: {error}")
    return documents


def documents_of(kind):
    return [doc for _, doc in kubernetes_documents() if doc.get("kind") == kind]


def containers():
    """[(workload, pod spec, container, binary, {flag: [values]})] of every workload."""
    found = []
    for _, doc in kubernetes_documents():
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        pod = doc["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            where = f"{doc['kind']} {doc['metadata']['name']}, container {container['name']}"
            command = container.get("command")
            if not command:
                raise AssertionError(f"{where}: set command so that its flags can be checked")
            binary = os.path.basename(command[0])
            if binary not in (SERVER, WORKER):
                raise AssertionError(f"{where}: runs {binary}, not {SERVER} or {WORKER}")
            flags = check_flags(binary, command[1:] + container.get("args", []), where)
            found.append((doc, pod, container, binary, flags))
    return found


def read_unit(path):
    """{(section, key): [values]} of a systemd unit, with continuation lines joined."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", f.read())
    unit, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        unit.setdefault((section, key.strip()), []).append(value.strip())
    return unit


def unit_command(exec_start):
    """ExecStart's argv with specifiers substituted and the prefixes (-, @, ...) dropped."""
    exec_start = re.sub(r"%(.)", lambda m: SPECIFIERS.get(m.group(1), "x"), exec_start)
    return shlex.split(exec_start.lstrip("@-:+!"))


def environment_example():
    """{variable: value} of deploy/systemd/*.env.example."""
    (name,) = [n for n in os.listdir(SYSTEMD_DIR) if n.endswith(".env.example")]
    options = {}
    with open(os.path.join(SYSTEMD_DIR, name)) as f:
        for line in f:
            key, equals, value = line.strip().partition("=")
            if equals and not key.startswith("#"):
                options[key] = value
    return options


def dockerfile_stages():
    """{stage: (base, [instruction lines])} of the Dockerfile, continuations joined."""
    with open(os.path.join(SOURCE_DIR, "Dockerfile")) as f:
        lines = [line for line in f.read().splitlines() if not line.lstrip().startswith("#")]
    stages, current = {}, None
    for line in re.sub(r"\\\n", " ", "\n".join(lines)).splitlines():
        match = re.match(r"\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if match:
            current = match.group(2) or f"stage{len(stages)}"
            stages[current] = (match.group(1), [])
        elif current and line.strip():
            stages[current][1].append(line.strip())
    return stages


def stage_text(stages, target):
    """The instructions of `target` and of every stage it is built from or copies from."""
    base, instructions = stages[target]
    text = list(instructions)
    sources = re.findall(r"--from=(\S+)", " ".join(instructions)) + [base]
    for source in set(sources):
        if source in stages and source != target:
            text += stage_text(stages, source)
    return text


class KubernetesManifestsTest(unittest.TestCase):
    def test_every_kind_is_there(self):
        kinds = {doc.get("kind") for _, doc in kubernetes_documents()}
        for kind in ("StatefulSet", "Service", "Deployment", "Job", "PersistentVolumeClaim",
                     "Kustomization"):
            self.assertIn(kind, kinds)

    def test_kustomization_lists_exactly_the_manifests(self):
        (kustomization,) = documents_of("Kustomization")
        resources = kustomization["resources"]
        for resource in resources:
            self.assertTrue(os.path.isfile(os.path.join(KUBERNETES_DIR, resource)), resource)
        manifests = {name for name, doc in kubernetes_documents()
                     if doc.get("kind") != "Kustomization"}
        self.assertEqual(set(resources), manifests)

    def test_every_container_passes_flags_its_binary_has(self):
        binaries = [binary for _, _, _, binary, _ in containers()]
        self.assertIn(SERVER, binaries)
        self.assertIn(WORKER, binaries)

    def test_images_are_dockerfile_targets(self):
        stages = dockerfile_stages()
        for _, _, container, binary, _ in containers():
            target = container["image"].rsplit("/", 1)[-1].split(":")[0]
            self.assertIn(target, stages, f"{container['image']} is no Dockerfile stage")
            self.assertIn(f'ENTRYPOINT ["{binary}"]', stages[target][1])

    def test_allowed_roots_are_mounted_volumes(self):
        for doc, _, container, _, flags in containers():
            mounts = [mount["mountPath"].rstrip("/") for mount in container["volumeMounts"]]
            for root in flags.get("allow-root", []):
                self.assertTrue(any(root == m or root.startswith(m + "/") for m in mounts),
                                f"{doc['metadata']['name']}: --allow-root {root} is not mounted")
            self.assertIn("allow-root", flags, doc["metadata"]["name"])

    def test_server_database_is_on_its_claim_template(self):
        (statefulset,) = documents_of("StatefulSet")
        self.assertEqual(statefulset["spec"]["replicas"], 1, "SQLite has one writer")
        ((_, _, container, _, flags),) = [c for c in containers() if c[3] == SERVER]
        claims = {t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        self.assertIn(mounts.get(os.path.dirname(flags["db"][0])), claims)

    def test_server_probes_ask_grpc_health_on_its_grpc_port(self):
        ((_, _, container, _, flags),) = [c for c in containers() if c[3] == SERVER]
        grpc_port = port_of(flags["listen"][0])
        self.assertIn(grpc_port, [port["containerPort"] for port in container["ports"]])
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(container[probe]["grpc"]["port"], grpc_port, probe)

    def test_service_exposes_the_server_ports_and_workers_use_it(self):
        ((_, pod, container, _, flags),) = [c for c in containers() if c[3] == SERVER]
        (service,) = documents_of("Service")
        (statefulset,) = documents_of("StatefulSet")
        labels = statefulset["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(service["spec"]["selector"].items(), labels.items())
        named = {port["name"]: port["containerPort"] for port in container["ports"]}
        exposed = {named.get(port["targetPort"], port["targetPort"]): port["port"]
                   for port in service["spec"]["ports"]}
        for flag in ("listen", "http-listen"):
            self.assertIn(port_of(flags[flag][0]), exposed, f"--{flag}")
        address = f"{service['metadata']['name']}:{exposed[port_of(flags['listen'][0])]}"
        for doc, _, _, binary, worker_flags in containers():
            if binary == WORKER:
                self.assertEqual(worker_flags["server"], [address], doc["metadata"]["name"])

    def test_workers_have_one_gpu_each(self):
        for doc, _, container, binary, flags in containers():
            if binary != WORKER:
                continue
            self.assertEqual(int(container["resources"]["limits"]["nvidia.com/gpu"]), 1)
            # The device plugin shows a pod its one GPU as device 0.
            self.assertIn(flags["device"][0], ("cuda", "cuda:0"), doc["metadata"]["name"])
        self.assertTrue(documents_of("Deployment"))

    def test_job_is_indexed_and_its_workers_leave_when_idle(self):
        (job,) = documents_of("Job")
        self.assertEqual(job["spec"]["completionMode"], "Indexed")
        self.assertGreater(job["spec"]["completions"], 0)
        self.assertGreater(job["spec"]["parallelism"], 0)
        for doc, _, _, _, flags in containers():
            if doc is job:
                self.assertGreater(int(flags["idle-exit"][0]), 0)


class SystemdUnitsTest(unittest.TestCase):
    def units(self):
        names = sorted(n for n in os.listdir(SYSTEMD_DIR) if n.endswith(".service"))
        self.assertEqual(len(names), 2, names)
        return [(name, read_unit(os.path.join(SYSTEMD_DIR, name))) for name in names]

    def test_exec_start_flags_are_the_binaries_flags(self):
        options = environment_example()
        for name, unit in self.units():
            (exec_start,) = unit[("Service", "ExecStart")]
            argv = unit_command(exec_start)
            binary = os.path.basename(argv[0])
            self.assertIn(binary, (SERVER, WORKER), name)
            flags = check_flags(binary, argv[1:], name, opaque=EXTRA_OPTIONS.fullmatch)
            self.assertIn("allow-root", flags, name)
            # A whole-argument $VAR is split into extra flags: check the example file's.
            for match in filter(None, map(EXTRA_OPTIONS.fullmatch, argv[1:])):
                variable = match[1]
                self.assertIn(variable, options, f"{name}: ${variable} is not in the example")
                check_flags(binary, options[variable].split(), f"{name}: ${variable}")

    def test_worker_template_takes_the_gpu_from_the_instance(self):
        with open(os.path.join(SYSTEMD_DIR, "anisoscope-worker@.service")) as f:
            self.assertRegex(f.read(), r"--device[ =]cuda:%i\b")

    def test_units_stop_with_sigterm_and_restart_on_failure(self):
        for name, unit in self.units():
            self.assertEqual(unit[("Service", "KillSignal")], ["SIGTERM"], name)
            self.assertEqual(unit[("Service", "Restart")], ["on-failure"], name)
            self.assertIn(("Service", "TimeoutStopSec"), unit, name)
            self.assertNotEqual(unit.get(("Service", "User"), ["root"]), ["root"], name)


class DockerfileTest(unittest.TestCase):
    def test_server_image_is_built_by_setup_sh(self):
        text = " ".join(stage_text(dockerfile_stages(), "server"))
        self.assertRegex(text, r"RUN \S*scripts/setup\.sh")

    def test_worker_image_builds_only_the_worker(self):
        text = " ".join(stage_text(dockerfile_stages(), "worker-cuda"))
        self.assertIn("-DANISOSCOPE_WORKER_ONLY=ON", text)
        self.assertIn("--target anisoscope-worker", text)

    def test_context_leaves_out_host_builds(self):
        with open(os.path.join(SOURCE_DIR, ".dockerignore")) as f:
            patterns = f.read().split()
        self.assertIn(".git", patterns)
        self.assertTrue({"build", "build*", "/build", "build/"} & set(patterns), patterns)
        self.assertIn("**/node_modules", patterns)


if __name__ == "__main__":
    unittest.main()
