#!/usr/bin/python3
"""The source tree's layers hold: every #include "…" of a C++ file points at its own folder
or at a folder lower in LAYERS (no arrow back up, so no cycle between folders), no include
crosses a boundary in NEVER (pairs the order alone allows), no header includes itself round
about (no cycle between headers), every folder with C++ sources has a layer, and
docs/architecture.md's server map names every folder of server/. These two lists are the
one home of the order and the boundaries; the CMake lists and the docs follow them."""
import collections
import glob
import os
import re
import subprocess
import unittest

SOURCE_DIR = os.path.abspath(os.environ.get(
    "ANISOSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))

# Lowest first. A folder may include its own files and any folder of an earlier row, never
# one of its own row or a later one. "proto" is the generated anisoscope/v1 code and
# proto/'s own headers.
LAYERS = [
    ["common"],
    ["proto"],
    ["storage", "analysis/checkpoint", "analysis/tokenizer",
     "sources/transfer",              # HTTP downloads (libcurl): the Hub and S3 sit on it
     "sources/cache"],                # the bounded cache those downloads land in
    ["analysis/models"],
    ["sources/listing"],              # what a Hub repo or an S3 prefix holds, step by step
    ["sources/fetch"],                # a listed step fetched into the node's cache
    ["sources/endpoints"],            # the operator's endpoints and keys; a step on the wire
    # The metric names and CheckpointMetrics: no LibTorch, so client/ and server/ include it.
    # It sits above models/ only for ModelShape (models/model_shape.h, plain data); with that
    # header moved in, this row drops to proto's and storage/ may include it too.
    ["analysis/metric_catalog"],
    ["analysis/metrics"],
    ["analysis/probe"],
    ["analysis/extractor"],            # the engine's top: checkpoint + probe -> metrics
    ["worker", "client"],              # a remote worker, the CLI
    ["server/wire", "server/monitoring", "server/auth",
     "server/sources"],                # --allow-source, a remote source listed by the server
    ["server/jobs"],                   # queue, leases, uploads, followed runs
    ["server/queries"],                # the query core over the store
    ["server/alarms"],                 # rules checked as each step is stored
    ["server/grpc", "server/http"],    # the two adapters
    ["server"],                        # the process: flags, wiring, host commands
    ["bench", "fuzz"],                 # tools over everything
]
# Boundaries the order alone does not hold: (files under, never include files under, except
# files under, why). Prefixes end in "/", so "analysis/" is every folder of the engine.
NEVER = [
    ("analysis/", "storage/", (), "the engine never reads or writes SQLite"),
    ("storage/", "analysis/", ("analysis/metric_catalog/",),
     "the store knows the metric names alone, never the engine"),
    ("worker/", "server/", (), "a worker reaches the server only through proto/ (gRPC)"),
    ("worker/", "storage/", (), "the server is the only writer of the database"),
    ("client/", "analysis/", ("analysis/metric_catalog/",),
     "the CLI stays free of LibTorch: of the engine it reads the metric names alone"),
    ("client/", "storage/", (), "the CLI reads the store only through the server"),
]
# Folders whose files are not product code, or are not C++ include targets.
NOT_LAYERED = ("tests/", "build/", "build-fuzz/", "web/", "python/", "docs/", "examples/",
               "scripts/", "deploy/")
# Quoted or bracketed: the build's include path is the source root, so <server/...> works too.
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]', re.MULTILINE)


# Each layered folder's row, and the top folders an include path may start with.
LEVELS = {folder: row for row, folders in enumerate(LAYERS) for folder in folders}
TOP_FOLDERS = {folder.split("/")[0] for folder in LEVELS}


def folder_of(path):
    """The folder a project file belongs to: its own, or "proto" for the wire contract's code."""
    if path.startswith("anisoscope/v1/") or path.startswith("proto/"):
        return "proto"
    return os.path.dirname(path)


def resolve_include(including, target):
    """The project path that `#include target` in file `including` names (beside the file
    first, as a quoted include is looked up), or None for a system or third-party header."""
    if target.startswith("anisoscope/v1/"):
        return target  # generated from proto/
    beside = os.path.normpath(os.path.join(os.path.dirname(including), target))
    if os.path.isfile(os.path.join(SOURCE_DIR, beside)):
        return beside
    if target.split("/")[0] in TOP_FOLDERS:
        return os.path.normpath(target)
    return None


def sources():
    """Relative paths of every .h and .cc of product code (tracked or new, not ignored)."""
    try:
        listed = subprocess.run(
            ["git", "-C", SOURCE_DIR, "ls-files", "--cached", "--others", "--exclude-standard"],
            capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        listed = [os.path.relpath(path, SOURCE_DIR)
                  for path in glob.glob(os.path.join(SOURCE_DIR, "**", "*.*"), recursive=True)]
    return sorted({path for path in listed
                   if path.endswith((".h", ".cc")) and not path.startswith(NOT_LAYERED)
                   and os.path.isfile(os.path.join(SOURCE_DIR, path))})


def include_lines(relative):
    """(line number, the include as written, the project file it names) for each project
    file `relative` includes."""
    with open(os.path.join(SOURCE_DIR, relative), encoding="utf-8", errors="replace") as file:
        text = file.read()
    found = []
    for match in INCLUDE.finditer(text):
        resolved = resolve_include(relative, match.group(1))
        if resolved is not None:
            found.append((text.count("\n", 0, match.start(1)) + 1, match.group(0).strip(),
                          resolved))
    return found


def includes(relative):
    """The project files `relative` includes, resolved."""
    return [resolved for _, _, resolved in include_lines(relative)]


class LayeringTest(unittest.TestCase):
    def test_every_source_folder_has_a_layer(self):
        for path in sources():
            with self.subTest(path=path):
                self.assertIn(folder_of(path), LEVELS,
                              f"{path}: its folder {folder_of(path)!r} has no row in LAYERS")

    def test_no_include_points_up_or_sideways(self):
        wrong = []
        for path in sources():
            here = folder_of(path)
            for target in includes(path):
                there = folder_of(target)
                if there == here:
                    continue
                if there not in LEVELS:
                    wrong.append(f"{path} includes {target}: no row in LAYERS for {there!r}")
                elif here in LEVELS and LEVELS[there] >= LEVELS[here]:
                    wrong.append(f"{path} ({here}, row {LEVELS[here]}) includes {target} "
                                 f"({there}, row {LEVELS[there]})")
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_no_include_crosses_a_boundary(self):
        for source, target, allowed, why in NEVER:
            with self.subTest(boundary=f"{source} never includes {target}"):
                wrong = [f"{path}:{line}: {written}"
                         + ("" if f'"{resolved}"' in written else f" ({resolved})")
                         + f": {source} never includes {target}: {why}"
                         for path in sources() if path.startswith(source)
                         for line, written, resolved in include_lines(path)
                         if resolved.startswith(target) and not resolved.startswith(allowed)]
                if wrong:
                    self.fail("\n".join(wrong))

    def test_no_include_cycle_between_headers(self):
        graph = collections.defaultdict(set)
        for path in sources():
            for target in includes(path):
                if os.path.isfile(os.path.join(SOURCE_DIR, target)):
                    graph[path].add(target)
        state = {}

        def visit(node, trail):
            state[node] = "open"
            for next_node in sorted(graph[node]):
                if state.get(next_node) == "open":
                    self.fail("include cycle: " + " -> ".join(trail + [node, next_node]))
                if next_node not in state:
                    visit(next_node, trail + [node])
            state[node] = "done"

        for node in sorted(graph):
            if node not in state:
                visit(node, [])

    def test_the_server_map_names_every_server_folder(self):
        with open(os.path.join(SOURCE_DIR, "docs", "architecture.md"), encoding="utf-8") as file:
            text = file.read()
        block = text[text.index("<!-- BEGIN server map"):text.index("<!-- END server map")]
        for folder in sorted(f for row in LAYERS for f in row if f.startswith("server/")):
            with self.subTest(folder=folder):
                self.assertTrue(f"`{folder}/`" in block,
                                f"docs/architecture.md's server map does not name `{folder}/`")


if __name__ == "__main__":
    unittest.main()
