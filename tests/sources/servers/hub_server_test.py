#!/usr/bin/python3
"""hub_server.py's faithfulness and its faults.

OfficialClientTest: the official client, @huggingface/hub (package.json's pin), run by node
against the server (hub_client_check.mjs): listFiles across pages, downloadFile of a small
and an LFS file (through the CDN redirect), fileDownloadInfo, fileExists, listModels,
modelInfo, downloadFileToCacheDir's cache layout, a gated repo without, with a wrong and
with the right token; everything it returns is checked against the fixture, byte for byte.
ProtocolTest: refs, real git's object ids (git hash-object / write-tree / commit-tree), the
Hub's errors, ranges. FaultsTest: each fault kind as a client sees it, over real sockets.
Missing node or npm modules fail in CI (CI=true) and skip elsewhere."""
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prerequisites  # noqa: E402
from hub_server import HubServer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = "EleutherAI/pythia-tiny"
GATED = "gated-org/gated-model"
READER, OTHER = "hf_gated_reader_token", "hf_other_user_token"
LFS_SIZE = 300_000


def make_bytes(seed, n):
    out, block = bytearray(), hashlib.sha256(seed.encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_fixture(root):
    """Three Pythia-like branches (step1000 holds main's weights), a gated repo."""
    base = os.path.join(root, REPO)
    for branch, seed in (("main", "final"), ("step0", "init"), ("step1000", "final")):
        d = os.path.join(base, branch)
        write(os.path.join(d, "config.json"), json.dumps({"step": branch}).encode() + b"\n")
        write(os.path.join(d, "model.safetensors"), make_bytes(seed, LFS_SIZE))
        write(os.path.join(d, "sub", "notes.txt"), f"notes of {branch}\n".encode())
        write(os.path.join(d, "sub", "deeper", "optimizer.bin"), make_bytes(branch, 1000))
        for i in range(5):
            write(os.path.join(d, f"extra_{i}.txt"), f"{branch} {i}\n".encode())
    g = os.path.join(root, GATED)
    write(os.path.join(g, "main", "model.safetensors"), make_bytes("gated", 50_000))
    write(os.path.join(g, "main", "config.json"), b"{}\n")
    write(os.path.join(g, ".hub.json"), json.dumps({"gated": "manual", "tokens": [READER]})
          .encode())


def expected_tree(branch_dir):
    """{path: listing entry} computed here, independently of the server (plus .gitattributes)."""
    found = {}
    for dirpath, _, names in os.walk(branch_dir):
        for name in names:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, branch_dir)
            data = read(full)
            lfs = name.endswith((".safetensors", ".bin"))
            if lfs:
                sha = hashlib.sha256(data).hexdigest()
                pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\n"
                           f"size {len(data)}\n").encode()
                found[rel] = {"type": "file", "size": len(data), "path": rel,
                              "oid": hashlib.sha1(b"blob %d\0" % len(pointer) + pointer)
                              .hexdigest(),
                              "lfs": {"oid": sha, "size": len(data),
                                      "pointerSize": len(pointer)}}
            else:
                found[rel] = {"type": "file", "size": len(data), "path": rel,
                              "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
    return found


def get(url, headers=None, method="GET"):
    """(status, headers, body) without following redirects or raising on errors."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    target = parts.path + ("?" + parts.query if parts.query else "")
    try:
        conn.request(method, target, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


class HubFixture(unittest.TestCase):
    page_size = 3

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hub-server-test-")
        cls.root = os.path.join(cls.tmp, "root")
        make_fixture(cls.root)
        cls.hub = HubServer(cls.root, page_size=cls.page_size, expand_page_size=2,
                            tokens=[OTHER]).start()

    @classmethod
    def tearDownClass(cls):
        cls.hub.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.hub.faults.clear()
        self.hub.reset_stats()

    def refs(self, repo=REPO):
        status, _, body = get(f"{self.hub.url}/api/models/{repo}/refs")
        self.assertEqual(status, 200)
        return {b["name"]: b["targetCommit"] for b in json.loads(body)["branches"]}


class OfficialClientTest(HubFixture):
    """@huggingface/hub's own calls against the server."""

    @classmethod
    def setUpClass(cls):
        node = prerequisites.node()
        module = prerequisites.npm_module("@huggingface/hub")
        cls.client_version = json.loads(read(os.path.join(module, "package.json")))["version"]
        super().setUpClass()
        cls.hub.faults.clear()
        commits = {b["name"]: b["targetCommit"] for b in json.loads(
            get(f"{cls.hub.url}/api/models/{REPO}/refs")[2])["branches"]}
        cls.commit = commits["step1000"]
        cls.out = os.path.join(cls.tmp, "out")
        plan = {"hubUrl": cls.hub.url, "outDir": cls.out, "repo": REPO, "revision": "step1000",
                "commit": cls.commit, "smallPath": "config.json",
                "lfsPath": "model.safetensors", "subdir": "sub", "owner": "EleutherAI",
                "gatedRepo": GATED, "gatedPath": "model.safetensors", "gatedToken": READER,
                "wrongToken": OTHER, "unknownToken": "hf_nobody_knows_this"}
        plan_path = os.path.join(cls.tmp, "plan.json")
        plan["resultPath"] = os.path.join(cls.tmp, "results.json")
        write(plan_path, json.dumps(plan).encode())
        started = time.monotonic()
        run = subprocess.run([node, os.path.join(HERE, "hub_client_check.mjs"), plan_path],
                             cwd=HERE, capture_output=True, text=True, timeout=60)
        cls.node_seconds = time.monotonic() - started
        if run.returncode != 0:
            raise AssertionError(f"node failed ({run.returncode}): {run.stderr[-3000:]}")
        cls.results = json.loads(read(plan["resultPath"]))
        cls.stats = cls.hub.stats()
        print(f"\n@huggingface/hub {cls.client_version}: node ran {cls.node_seconds:.1f} s",
              file=sys.stderr)

    def setUp(self):
        pass  # the stats of the node run are kept in cls.stats

    def ok(self, name):
        result = self.results[name]
        self.assertIn("ok", result, f"{name}: {result.get('error')}")
        return result["ok"]

    def error(self, name):
        result = self.results[name]
        self.assertIn("error", result, f"{name} succeeded: {result.get('ok')}")
        return result["error"]

    def branch_dir(self, branch="step1000"):
        return os.path.join(self.root, REPO, branch)

    def test_list_files_recursive_across_pages_matches_the_fixture(self):
        listed = self.ok("listFiles_recursive")
        files = {e["path"]: e for e in listed if e["type"] == "file"}
        gitattributes = files.pop(".gitattributes")
        self.assertEqual(files, expected_tree(self.branch_dir()))
        self.assertNotIn("lfs", gitattributes)
        self.assertEqual({e["path"] for e in listed if e["type"] == "directory"},
                         {"sub", "sub/deeper"})
        tree_path = f"/api/models/{REPO}/tree/step1000"
        pages = self.stats["hub"][tree_path]["requests"]
        self.assertGreaterEqual(pages, 3 + 1 + 1)  # recursive (>=5 pages of 3), top, missing

    def test_list_files_top_level_and_expanded_subfolder(self):
        top = {e["path"]: e["type"] for e in self.ok("listFiles_top")}
        self.assertEqual(top["sub"], "directory")
        self.assertNotIn("sub/notes.txt", top)
        sub = self.ok("listFiles_subdir_expand")
        self.assertEqual({e["path"] for e in sub}, {"sub/deeper", "sub/notes.txt"})
        for entry in sub:
            self.assertEqual(entry["lastCommit"]["id"], self.commit)

    def test_missing_revision_is_the_hubs_404(self):
        error = self.error("listFiles_missing_revision")
        self.assertEqual(error["statusCode"], 404)
        self.assertIn("Invalid rev id: no-such-branch", error["message"])

    def test_downloads_are_byte_for_byte_the_files(self):
        for name, path in (("download_small", "config.json"),
                           ("download_lfs", "model.safetensors")):
            saved = self.ok(name)
            with open(saved["file"], "rb") as got, \
                    open(os.path.join(self.branch_dir(), path), "rb") as want:
                self.assertEqual(got.read(), want.read(), name)
        self.assertIsNone(self.ok("download_missing"))

    def test_lfs_download_went_through_the_cdn_redirect(self):
        resolve = self.stats["hub"][f"/{REPO}/resolve/step1000/model.safetensors"]
        self.assertIn(302, resolve["statuses"])
        cdn = [v for p, v in self.stats["cdn"].items() if p.startswith("/repos/")]
        self.assertTrue(cdn, self.stats["cdn"])
        self.assertTrue(any(206 in v["statuses"] for v in cdn))  # the 0-0 probe
        self.assertTrue(any(200 in v["statuses"] for v in cdn))  # the body

    def test_file_download_info_reads_the_hubs_headers(self):
        small = self.ok("info_small")
        want = expected_tree(self.branch_dir())["config.json"]
        self.assertEqual(small["etag"], f'"{want["oid"]}"')
        self.assertEqual(small["size"], want["size"])
        lfs = self.ok("info_lfs")
        self.assertEqual(lfs["size"], LFS_SIZE)
        self.assertTrue(lfs["url"].startswith(self.hub.url + "/"), lfs["url"])

    def test_file_exists_and_models_and_model_info(self):
        self.assertIs(self.ok("exists_small"), True)
        self.assertIs(self.ok("exists_missing"), False)
        models = self.ok("listModels")
        self.assertEqual(models, [{"name": REPO, "private": False, "gated": False}])
        info = self.ok("modelInfo")
        self.assertEqual(info["sha"], self.commit)
        self.assertEqual({s["rfilename"] for s in info["siblings"]},
                         set(expected_tree(self.branch_dir())) | {".gitattributes"})

    def test_cache_layout_is_hugging_faces(self):
        path = self.ok("cache_by_commit")
        sha = hashlib.sha256(make_bytes("final", LFS_SIZE)).hexdigest()
        storage = os.path.join(self.out, "cache", "models--EleutherAI--pythia-tiny")
        self.assertEqual(path, os.path.join(storage, "snapshots", self.commit,
                                            "model.safetensors"))
        self.assertEqual(os.path.realpath(path), os.path.join(storage, "blobs", sha))
        self.assertEqual(read(path), make_bytes("final", LFS_SIZE))

    def test_gated_repo_wants_its_token(self):
        no_token = self.error("gated_no_token")
        self.assertEqual(no_token["statusCode"], 401)
        self.assertIn(f"Access to model {GATED} is restricted", no_token["message"])
        wrong = self.error("gated_wrong_token")
        self.assertEqual(wrong["statusCode"], 403)
        self.assertIn("not in the authorized list", wrong["message"])
        unknown = self.error("gated_unknown_token")
        self.assertEqual(unknown["statusCode"], 401)
        self.assertIn("Invalid credentials", unknown["message"])
        self.assertIn("model.safetensors", {e["path"] for e in self.ok("gated_listing_no_token")})
        saved = self.ok("gated_token")
        self.assertEqual(read(saved["file"]), make_bytes("gated", 50_000))

    def test_token_went_to_the_hub_and_not_to_the_cdn(self):
        resolve = self.stats["hub"][f"/{GATED}/resolve/main/model.safetensors"]
        self.assertGreaterEqual(resolve["authorization"], 2)  # wrong, unknown, right token
        gated_sha = hashlib.sha256(make_bytes("gated", 50_000)).hexdigest()
        cdn = [v for p, v in self.stats["cdn"].items() if p.endswith(gated_sha)]
        self.assertTrue(cdn)
        self.assertEqual(sum(v["authorization"] for v in cdn), 0)


class ProtocolTest(HubFixture):
    """The Hub's answers as a C++ client will read them (no node needed)."""

    def test_refs_name_every_branch_with_its_commit(self):
        refs = self.refs()
        self.assertEqual(set(refs), {"main", "step0", "step1000"})
        self.assertNotEqual(refs["main"], refs["step1000"])  # same weights, other commits
        status, _, body = get(f"{self.hub.url}/api/models/{REPO}/refs")
        branch = json.loads(body)["branches"][0]
        self.assertEqual(branch["ref"], "refs/heads/" + branch["name"])
        self.assertEqual(json.loads(body)["tags"], [])

    def test_object_ids_are_gits(self):
        git = shutil.which("git")
        if git is None:
            self.skipTest("git is not installed")
        work = os.path.join(self.tmp, "git-step0")
        shutil.rmtree(work, ignore_errors=True)
        env = dict(os.environ, GIT_AUTHOR_NAME="anisoscope-tests",
                   GIT_AUTHOR_EMAIL="tests@anisoscope.invalid",
                   GIT_COMMITTER_NAME="anisoscope-tests",
                   GIT_COMMITTER_EMAIL="tests@anisoscope.invalid",
                   GIT_AUTHOR_DATE="1700000000 +0000", GIT_COMMITTER_DATE="1700000000 +0000")
        subprocess.run([git, "init", "-q", work], check=True, env=env)
        entries = []
        url = f"{self.hub.url}/api/models/{REPO}/tree/step0?recursive=true"
        while url:
            status, headers, body = get(url)
            entries += json.loads(body)
            link = headers.get("Link")
            url = link[1:link.index(">")] if link else None
        for entry in entries:
            if entry["type"] != "file":
                continue
            status, _, blob = get(f"{self.hub.url}/{REPO}/raw/step0/{entry['path']}")
            self.assertEqual(status, 200)
            write(os.path.join(work, entry["path"]), blob)
            oid = subprocess.run([git, "hash-object", os.path.join(work, entry["path"])],
                                 capture_output=True, text=True, check=True).stdout.strip()
            self.assertEqual(oid, entry["oid"], entry["path"])
        subprocess.run([git, "-C", work, "add", "-A"], check=True, env=env)
        tree = subprocess.run([git, "-C", work, "write-tree"], capture_output=True, text=True,
                              check=True, env=env).stdout.strip()
        commit = subprocess.run([git, "-C", work, "commit-tree", tree, "-m", "step0"],
                                capture_output=True, text=True, check=True,
                                env=env).stdout.strip()
        self.assertEqual(commit, self.refs()["step0"])
        sub = subprocess.run([git, "-C", work, "rev-parse", f"{tree}:sub"],
                             capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(sub, next(e["oid"] for e in entries if e["path"] == "sub"))

    def test_resolve_headers_and_ranges(self):
        url = f"{self.hub.url}/{REPO}/resolve/step0/config.json"
        data = read(os.path.join(self.root, REPO, "step0", "config.json"))
        status, headers, body = get(url)
        self.assertEqual((status, body), (200, data))
        self.assertEqual(headers["X-Repo-Commit"], self.refs()["step0"])
        self.assertEqual(headers["ETag"],
                         '"%s"' % hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())
        self.assertEqual(headers["Accept-Ranges"], "bytes")
        status, headers, body = get(url, {"Range": "bytes=2-5"})
        self.assertEqual((status, body), (206, data[2:6]))
        self.assertEqual(headers["Content-Range"], f"bytes 2-5/{len(data)}")
        status, headers, body = get(url, {"Range": "bytes=-3"})
        self.assertEqual((status, body), (206, data[-3:]))
        status, headers, _ = get(url, {"Range": f"bytes={len(data)}-"})
        self.assertEqual((status, headers["Content-Range"]), (416, f"bytes */{len(data)}"))

    def test_lfs_resolve_is_a_redirect_with_linked_headers(self):
        url = f"{self.hub.url}/{REPO}/resolve/step0/model.safetensors"
        sha = hashlib.sha256(make_bytes("init", LFS_SIZE)).hexdigest()
        status, headers, _ = get(url, method="HEAD")
        self.assertEqual(status, 302)
        self.assertEqual(headers["X-Linked-Etag"], f'"{sha}"')
        self.assertEqual(headers["X-Linked-Size"], str(LFS_SIZE))
        self.assertEqual(headers["X-Repo-Commit"], self.refs()["step0"])
        location = headers["Location"]
        self.assertTrue(location.startswith(self.hub.cdn_url + "/repos/"), location)
        self.assertNotEqual(urllib.parse.urlsplit(location).hostname,
                            urllib.parse.urlsplit(self.hub.url).hostname)
        status, headers, body = get(location, {"Range": "bytes=100-199"})
        self.assertEqual((status, body), (206, make_bytes("init", LFS_SIZE)[100:200]))
        tampered = location.replace("Expires=", "Expires=1")
        self.assertEqual(get(tampered)[0], 403)

    def test_errors_are_the_hubs(self):
        cases = [
            (f"/api/models/{REPO}/tree/nope", {}, 404, "RevisionNotFound"),
            (f"/{REPO}/resolve/main/nope.txt", {}, 404, "EntryNotFound"),
            ("/nobody/nothing/resolve/main/x", {}, 401, "RepoNotFound"),
            ("/nobody/nothing/resolve/main/x", {"Authorization": f"Bearer {OTHER}"}, 404,
             "RepoNotFound"),
            (f"/{GATED}/resolve/main/config.json", {}, 401, "GatedRepo"),
            (f"/{GATED}/resolve/main/config.json", {"Authorization": f"Bearer {OTHER}"}, 403,
             "GatedRepo"),
            (f"/{REPO}/resolve/main/config.json", {"Authorization": "Bearer hf_unknown"}, 401,
             None),
        ]
        for path, headers, want_status, want_code in cases:
            status, got, body = get(self.hub.url + path, headers)
            self.assertEqual(status, want_status, path)
            self.assertEqual(got.get("X-Error-Code"), want_code, path)
            self.assertIn("error", json.loads(body))
        status, got, _ = get(f"{self.hub.url}/{REPO}/resolve/main/nope.txt")
        self.assertEqual(got["X-Repo-Commit"], self.refs()["main"])
        status, _, body = get(f"{self.hub.url}/{GATED}/resolve/main/config.json",
                              {"Authorization": f"Bearer {READER}"})
        self.assertEqual((status, body), (200, b"{}\n"))

    def test_revision_by_commit_and_paths_info(self):
        commit = self.refs()["step1000"]
        status, headers, _ = get(f"{self.hub.url}/{REPO}/resolve/{commit}/config.json")
        self.assertEqual((status, headers["X-Repo-Commit"]), (200, commit))
        request = urllib.request.Request(
            f"{self.hub.url}/api/models/{REPO}/paths-info/step1000",
            data=urllib.parse.urlencode({"paths": ["model.safetensors", "sub"],
                                         "expand": "true"}, doseq=True).encode())
        items = json.loads(urllib.request.urlopen(request).read())
        self.assertEqual([i["type"] for i in items], ["file", "directory"])
        self.assertEqual(items[0]["lastCommit"]["id"], commit)

    def test_script_prints_its_urls(self):
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "hub_server.py"),
                                 "--root", self.root, "--port", "0"],
                                stdout=subprocess.PIPE, text=True)
        try:
            url = proc.stdout.readline().strip()
            cdn = proc.stdout.readline().split()[1]
            self.assertTrue(url.startswith("http://127.0.0.1:"), url)
            self.assertTrue(cdn.startswith("http://localhost:"), cdn)
            self.assertEqual(get(f"{url}/api/models/{REPO}/refs")[0], 200)
        finally:
            proc.terminate()
            proc.wait(10)
            proc.stdout.close()


class FaultsTest(HubFixture):
    """Each fault as a client meets it, set over HTTP as a C++ test will."""

    def control(self, rule):
        request = urllib.request.Request(f"{self.hub.url}/_control",
                                         data=json.dumps(rule).encode(), method="POST")
        return json.loads(urllib.request.urlopen(request).read())

    def stats(self, listener="hub"):
        return json.loads(urllib.request.urlopen(f"{self.hub.url}/_stats").read()).get(
            listener, {})

    def test_429_then_success(self):
        self.control({"kind": "status", "status": 429, "retry_after": 1, "times": 2,
                      "match": "*/config.json"})
        url = f"{self.hub.url}/{REPO}/resolve/main/config.json"
        for _ in range(2):
            status, headers, body = get(url)
            self.assertEqual((status, headers["Retry-After"]), (429, "1"))
            self.assertIn("error", json.loads(body))
        self.assertEqual(get(url)[0], 200)
        self.assertEqual(self.stats()[f"/{REPO}/resolve/main/config.json"]["statuses"],
                         [429, 429, 200])

    def test_503_storm_until_cleared(self):
        self.control({"kind": "status", "status": 503, "times": -1})
        url = f"{self.hub.url}/api/models/{REPO}/refs"
        self.assertEqual([get(url)[0] for _ in range(5)], [503] * 5)
        urllib.request.urlopen(urllib.request.Request(f"{self.hub.url}/_control",
                                                      method="DELETE"))
        self.assertEqual(get(url)[0], 200)

    def test_cut_once_then_range_resume(self):
        self.control({"kind": "cut", "after_bytes": 70_000, "match": "/repos/*"})
        url = f"{self.hub.url}/{REPO}/resolve/step0/model.safetensors"
        location = get(url, method="HEAD")[1]["Location"]
        parts = urllib.parse.urlsplit(location)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("GET", parts.path + "?" + parts.query)
        resp = conn.getresponse()
        self.assertEqual(resp.getheader("Content-Length"), str(LFS_SIZE))
        got = b""
        with self.assertRaises((ConnectionResetError, http.client.IncompleteRead)):
            while True:
                block = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                if not block:
                    raise http.client.IncompleteRead(got)
                got += block
        conn.close()
        self.assertEqual(len(got), 70_000)
        status, _, rest = get(location, {"Range": f"bytes={len(got)}-"})
        self.assertEqual(status, 206)
        self.assertEqual(got + rest, make_bytes("init", LFS_SIZE))
        cdn = self.stats("cdn")
        self.assertEqual(sum((v["ranges"] for v in cdn.values()), []), [f"bytes={len(got)}-"])
        self.assertIn("cut", sum((v["faults"] for v in cdn.values()), []))

    def test_truncated_body(self):
        self.control({"kind": "truncate", "after_bytes": 5, "match": "*/config.json"})
        with self.assertRaises(http.client.IncompleteRead) as caught:
            get(f"{self.hub.url}/{REPO}/resolve/main/config.json")
        self.assertEqual(len(caught.exception.partial), 5)

    def test_stall_times_a_client_out(self):
        self.control({"kind": "stall", "seconds": 2, "match": "*/refs"})
        conn = http.client.HTTPConnection("127.0.0.1", int(self.hub.url.rsplit(":", 1)[1]),
                                          timeout=0.3)
        conn.request("GET", f"/api/models/{REPO}/refs")
        with self.assertRaises(socket.timeout):
            conn.getresponse()
        conn.close()
        self.assertEqual(get(f"{self.hub.url}/api/models/{REPO}/refs")[0], 200)

    def test_listing_lies_and_hostile_names(self):
        wrong = "0" * 64
        self.control([{"kind": "listing_hash", "file": "model.safetensors", "value": wrong},
                      {"kind": "listing_size", "file": "config.json", "size": 10**12},
                      {"kind": "listing_extra", "names": ["../x", "/abs", "a/../../b"]}])
        self.hub.page_size = 1000
        try:
            status, _, body = get(f"{self.hub.url}/api/models/{REPO}/tree/main?recursive=1")
        finally:
            self.hub.page_size = self.page_size
        listed = {e["path"]: e for e in json.loads(body)}
        self.assertEqual(listed["model.safetensors"]["lfs"]["oid"], wrong)
        self.assertEqual(listed["config.json"]["size"], 10**12)
        for name in ("../x", "/abs", "a/../../b"):
            self.assertIn(name, listed)
        conn = http.client.HTTPConnection("127.0.0.1", int(self.hub.url.rsplit(":", 1)[1]))
        conn.request("GET", f"/{REPO}/resolve/main/../x")
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.read()), (200, b"hostile\n"))
        conn.close()

    def test_corrupt_byte(self):
        self.control({"kind": "corrupt", "offset": 3, "match": "*/config.json"})
        data = read(os.path.join(self.root, REPO, "main", "config.json"))
        body = get(f"{self.hub.url}/{REPO}/resolve/main/config.json")[2]
        self.assertEqual(body[:3] + body[4:], data[:3] + data[4:])
        self.assertEqual(body[3], data[3] ^ 0xFF)

    def test_redirect_to_another_host_records_the_authorization(self):
        self.control({"kind": "redirect", "match": f"/api/models/{REPO}/refs"})
        url = f"{self.hub.url}/api/models/{REPO}/refs"
        status, headers, _ = get(url, {"Authorization": f"Bearer {READER}"})
        self.assertEqual(status, 302)
        location = headers["Location"]
        self.assertTrue(location.startswith(self.hub.cdn_url), location)
        self.assertEqual(get(location)[0], 200)  # a client that drops the token
        self.assertEqual(get(location, {"Authorization": f"Bearer {READER}"})[0], 200)
        cdn = self.stats("cdn")[f"/api/models/{REPO}/refs"]
        self.assertEqual((cdn["requests"], cdn["authorization"]), (2, 1))

    def test_throttle(self):
        self.control({"kind": "throttle", "bytes_per_second": 1_000_000, "match": "/repos/*"})
        location = get(f"{self.hub.url}/{REPO}/resolve/main/model.safetensors",
                       method="HEAD")[1]["Location"]
        started = time.monotonic()
        self.assertEqual(len(get(location)[2]), LFS_SIZE)
        self.assertGreaterEqual(time.monotonic() - started, 0.25)

    def test_bad_rule_is_refused(self):
        request = urllib.request.Request(f"{self.hub.url}/_control",
                                         data=b'{"kind": "meteor"}', method="POST")
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
        self.assertEqual(caught.exception.code, 400)


if __name__ == "__main__":
    unittest.main()
