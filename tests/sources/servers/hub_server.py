#!/usr/bin/python3
"""A local server speaking the Hugging Face Hub's HTTP protocol, for tests (stdlib only).

Model repos are plain folders, one folder per branch:

    ROOT/ORG/NAME/<branch>/<files and subfolders>     e.g. ROOT/EleutherAI/pythia-14m/step1000/
    ROOT/ORG/NAME/.hub.json                           optional: {"private": false,
        "gated": false | "auto" | "manual", "tokens": ["hf_..."]}  (tokens that may read it)

Each branch is served as one git commit (hub_repos.py): blobs, trees and the commit are real
git object ids (`git hash-object`, `git write-tree`, `git commit-tree` with a fixed author
and date and the message "<branch>" give the same ids). A file is an LFS file when its name
matches the Hub's default .gitattributes patterns (*.safetensors, *.bin, *.pt, ...) or it is larger
than `lfs_threshold` (10 MiB); its git blob is then the LFS pointer and the listing carries
`lfs: {oid: <sha256>, size, pointerSize}`. Like every Hub repo, each branch also lists a
`.gitattributes` (unless the folder has its own; `synthesize_gitattributes=False` drops
it). Files are followed through symlinks (duplicate steps cost no disk), and their hashes are
cached by inode, size and mtime.

Endpoints (ORG/NAME repos; a revision is a branch name or a branch's 40-hex commit):
  GET  /api/models?author=&search=&limit=           list (paginated by Link)
  GET  /api/models/ORG/NAME[/revision/REV][?blobs=true&expand=...]   model info (sha, siblings)
  GET  /api/models/ORG/NAME/refs                    {"branches": [...], "tags": [], "converts": []}
  GET  /api/models/ORG/NAME/tree/REV[/PATH]?recursive=&expand=&cursor=   Link: <..>; rel="next"
  POST /api/models/ORG/NAME/paths-info/REV          {"paths": [...], "expand": bool} (JSON or form)
  GET|HEAD /ORG/NAME/resolve/REV/PATH               the file: X-Repo-Commit, ETag (LFS: "sha256",
       else "git blob sha1"), X-Linked-Etag/X-Linked-Size (LFS), Accept-Ranges, Range -> 206
       and Content-Range, 416; with lfs_redirect (default) an LFS file is a 302 to the CDN
       listener (another host name and port) with a signed, expiring query, as the Hub does.
  GET|HEAD /ORG/NAME/raw/REV/PATH                   the git blob (an LFS file's pointer)
  CDN listener: GET|HEAD /repos/..../<sha256>?Expires=&Signature=&Key-Pair-Id=  (403 if the
       signature is wrong or expired; its ETag is opaque, 32 hex digits, neither the sha256
       nor the git oid, as a CDN's S3 ETag is); it also serves every route
       above, so a `redirect` fault can send any request there.
Errors as the Hub sends them: JSON {"error": ...} with X-Error-Code / X-Error-Message:
  unknown or private repo: 401 RepoNotFound without a valid token, 404 with one; a token not
  known to the server: 401 "Invalid credentials in Authorization header"; a gated repo's
  files: 401 GatedRepo without a token, 403 GatedRepo with a token not in its list (the
  listings and model info stay public, as on the Hub); 404 RevisionNotFound; 404
  EntryNotFound (with X-Repo-Commit, which hf_hub_download caches as .no_exist).
Faults and counters: fault_injection.py's rules, through `POST /_control`, `GET /_stats` on
either listener, or in process (`server.faults.add({...})`, `server.stats()`).
Page size: `page_size` (1000) entries per tree page, `expand_page_size` (50) with expand=true.
Not served: datasets and spaces, tags, repos without an ORG, Xet.

From Python:
    from hub_server import HubServer
    with HubServer(root, tokens=["hf_reader"], page_size=3) as hub:   # threads, ports 0
        hub.url, hub.cdn_url; hub.faults.add({"kind": "cut", "after_bytes": 4096,
                                              "match": "*/model.safetensors"})
        hub.stats()["cdn"]  # per path counters
From the shell (prints the Hub URL, then "cdn <URL>", then serves until SIGTERM/SIGINT):
    python3 hub_server.py --root DIR --port 0 [--page-size N] [--gated ORG/NAME=TOKEN]
        [--private ORG/NAME=TOKEN] [--token T] [--no-lfs-redirect] [--throttle BYTES_PER_S]
        [--fault JSON] [--cdn-host localhost] [--lfs-threshold BYTES] [--verbose]
    (--throttle adds a throttle rule for every path: DELETE /_control clears it too)
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_injection import (BODY_KINDS, BodyWriter, DispatchingHandler,  # noqa: E402
                             FaultError, FaultTable, Listener,
                             RESPONSE_KINDS, wrong_hash)
from hub_repos import (COMMIT_DATE, DEFAULT_LFS_THRESHOLD, Entry, RepoStore,  # noqa: E402
                       git_blob_oid)


class HttpError(Exception):
    def __init__(self, status, message, code=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


def parse_range(header, size):
    """(start, end_inclusive) of a single `bytes=` range, None to serve all, or "invalid"."""
    if not header or not header.strip().startswith("bytes=") or "," in header:
        return None
    spec = header.strip()[len("bytes="):].strip()
    first, _, last = spec.partition("-")
    try:
        if first == "":
            n = int(last)
            if n <= 0:
                return "invalid"
            return (max(0, size - n), size - 1) if size else "invalid"
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or start > end:
        return "invalid"
    return start, min(end, size - 1)


class Handler(DispatchingHandler):
    server_version = "anisoscope-hub-test"

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def base_url(self):
        return f"http://{self.headers.get('Host') or self.server.hub.host_of(self.server.role)}"

    def dispatch(self, method):
        hub = self.server.hub
        self.method = method
        raw_path, _, self.raw_query = self.path.partition("?")
        self.query = urllib.parse.parse_qs(self.raw_query, keep_blank_values=True)
        self.segments = [urllib.parse.unquote(s) for s in raw_path.split("/")[1:]]
        self.url_path = urllib.parse.unquote(raw_path)
        if self.url_path.startswith("/_control") or self.url_path.startswith("/_stats"):
            body = self.read_body()
            return self.control(method, body)
        self.counter = hub.faults.record(self.server.role, method, self.url_path, self.headers)
        body = self.read_body() if method == "POST" else b""
        role, path = self.server.role, self.url_path
        fault = hub.faults.take(role, method, path, RESPONSE_KINDS)
        body_faults = hub.faults.take_all(role, method, path, BODY_KINDS)
        self.body_faults = body_faults
        self.writer = BodyWriter(self, hub.faults, self.counter, body_faults,
                                 hub.throttles_for(body_faults), hub.stop_event)
        self.writer.stall_before_headers()
        try:
            if fault is not None:
                hub.faults.note(self.counter, fault=fault["kind"])
                if fault["kind"] == "status":
                    headers = {}
                    if fault.get("retry_after") is not None:
                        headers["Retry-After"] = str(fault["retry_after"])
                    status = int(fault["status"])
                    message = fault.get("message") or {
                        429: "You have exceeded our hourly quotas for action 'resolve'. "
                             "Retry after the time in the Retry-After header.",
                        503: "Service Unavailable"}.get(status, "Injected error")
                    raise HttpError(status, message, fault.get("error_code"), headers)
                other = hub.other_base(self.server.role)
                location = other + self.path
                return self.send_simple(int(fault.get("status", 302)),
                                        f"Found. Redirecting to {location}".encode(),
                                        "text/plain; charset=utf-8", {"Location": location})
            self.route(method, body)
        except HttpError as e:
            self.send_error_json(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def control(self, method, body):
        hub = self.server.hub
        try:
            if self.url_path == "/_control":
                if method == "POST":
                    ids = hub.faults.add(json.loads(body or b"{}"))
                    return self.send_json({"ids": ids, "faults": hub.faults.rules()})
                if method == "DELETE":
                    hub.faults.clear()
                return self.send_json({"faults": hub.faults.rules()})
            if self.url_path == "/_stats":
                if method == "DELETE":
                    hub.faults.reset_stats()
                return self.send_json(hub.faults.stats())
            raise HttpError(404, "unknown control path")
        except (FaultError, ValueError) as e:
            self.send_json({"error": str(e)}, 400)
        except HttpError as e:
            self.send_json({"error": e.message}, e.status)

    # answers
    def send_simple(self, status, body, content_type, headers=None, count=True):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", "Root=1-" + secrets.token_hex(12))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if count and hasattr(self, "counter"):
            self.server.hub.faults.note(self.counter, status=status)
        if self.method != "HEAD":
            if count and hasattr(self, "writer") and self.body_faults:
                self.writer.write(lambda o, n: body[o:o + n], 0, len(body))
            else:
                self.wfile.write(body)
                if count and hasattr(self, "counter"):
                    self.server.hub.faults.note(self.counter, nbytes=len(body))

    def send_json(self, value, status=200, headers=None, count=False):
        body = json.dumps(value).encode()
        self.send_simple(status, body, "application/json; charset=utf-8", headers, count)

    def send_error_json(self, e):
        headers = dict(e.headers)
        if e.code:
            headers["X-Error-Code"] = e.code
        headers["X-Error-Message"] = e.message
        self.send_json({"error": e.message}, e.status, headers, count=True)

    # access
    def token(self):
        value = self.headers.get("Authorization")
        if value is None:
            return None
        scheme, _, token = value.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else value

    def authorize(self, repo, files):
        """Raises the Hub's error unless the caller may read `repo` (its files if `files`)."""
        store = self.server.hub.store
        token = self.token()
        known = store.known_tokens() | set(self.server.hub.tokens)
        if token is not None and token not in known:
            raise HttpError(401, "Invalid credentials in Authorization header")
        config = store.config(repo) if store.repo_dir(repo) else None
        allowed = config is not None and token in config.get("tokens", [])
        if config is None or (config.get("private") and not allowed):
            raise HttpError(401 if token is None else 404, "Repository not found",
                            "RepoNotFound")
        if files and config.get("gated") and not allowed:
            if token is None:
                raise HttpError(401, f"Access to model {repo} is restricted. You must have "
                                "access to it and be authenticated to access it. Please log "
                                "in.", "GatedRepo")
            raise HttpError(403, f"Access to model {repo} is restricted and you are not in "
                            f"the authorized list. Visit {self.base_url()}/{repo} to ask for "
                            "access.", "GatedRepo")
        return config

    def snapshot(self, repo, revision):
        snap = self.server.hub.store.resolve(repo, revision)
        if snap is None:
            raise HttpError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return snap

    # routes
    def route(self, method, body):
        s = self.segments
        if self.server.role == "cdn" and s and s[0] == "repos":
            return self.cdn_blob(method)
        if s[:2] == ["api", "models"]:
            if len(s) == 2 and method == "GET":
                return self.list_models()
            if len(s) < 4:
                raise HttpError(404, "Repository not found", "RepoNotFound")
            repo = f"{s[2]}/{s[3]}"
            rest = s[4:]
            if not rest and method == "GET":
                return self.model_info(repo, "main")
            if len(rest) == 2 and rest[0] == "revision" and method == "GET":
                return self.model_info(repo, rest[1])
            if rest == ["refs"] and method == "GET":
                return self.refs(repo)
            if len(rest) >= 2 and rest[0] == "tree" and method == "GET":
                return self.tree(repo, rest[1], "/".join(rest[2:]).strip("/"))
            if len(rest) == 2 and rest[0] == "paths-info" and method == "POST":
                return self.paths_info(repo, rest[1], body)
            raise HttpError(404, "Not Found")
        if len(s) >= 5 and s[2] in ("resolve", "raw") and method in ("GET", "HEAD"):
            return self.resolve(f"{s[0]}/{s[1]}", s[3], "/".join(s[4:]), s[2] == "raw")
        raise HttpError(404, "Not Found")

    def listing_faults(self):
        hub = self.server.hub
        return hub.faults.take_all(self.server.role, self.method, self.url_path,
                                   ("listing_size", "listing_hash", "listing_extra"))

    def entry_json(self, snap, entry, expand, faults):
        item = {"type": "file", "oid": entry.blob_oid, "size": entry.size, "path": entry.path}
        if entry.lfs:
            item["lfs"] = {"oid": entry.sha256, "size": entry.size,
                           "pointerSize": len(entry.pointer)}
        for fault in faults:
            if fault.get("file") != entry.path:
                continue
            if fault["kind"] == "listing_size":
                item["size"] = int(fault["size"])
                if entry.lfs:
                    item["lfs"]["size"] = int(fault["size"])
            elif fault["kind"] == "listing_hash":
                if entry.lfs:
                    item["lfs"]["oid"] = fault.get("value") or wrong_hash("sha256")
                else:
                    item["oid"] = fault.get("value") or wrong_hash("sha1")
        if expand:
            item["lastCommit"] = {"id": snap.commit, "title": snap.branch, "date": COMMIT_DATE}
            item["securityFileStatus"] = {"status": "safe"}
        return item

    def extra_entries(self, faults):
        items = []
        for fault in faults:
            if fault["kind"] == "listing_extra":
                content = fault.get("content", "hostile\n").encode()
                for name in fault["names"]:
                    items.append({"type": "file", "oid": git_blob_oid(content),
                                  "size": len(content), "path": name})
        return items

    def tree(self, repo, revision, path):
        self.authorize(repo, files=False)
        snap = self.snapshot(repo, revision)
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("true", "1")
        expand = self.query.get("expand", ["false"])[0].lower() in ("true", "1")
        if path and path not in snap.trees:
            if path in snap.files:
                raise HttpError(400, f"'{path}' is not a directory")
            raise HttpError(404, f"Path {path} does not exist on {revision}", "EntryNotFound")
        faults = self.listing_faults()
        items = []

        def walk(prefix):
            names = {}
            for p in list(snap.files) + [t for t in snap.trees if t]:
                if prefix and not p.startswith(prefix + "/"):
                    continue
                rest = p[len(prefix) + 1:] if prefix else p
                if rest and "/" not in rest:
                    names[rest] = p
            for name in sorted(names, key=lambda n: n.encode()):
                full = names[name]
                if full in snap.trees:
                    item = {"type": "directory", "oid": snap.trees[full], "size": 0,
                            "path": full}
                    if expand:
                        item["lastCommit"] = {"id": snap.commit, "title": snap.branch,
                                              "date": COMMIT_DATE}
                    items.append(item)
                    if recursive:
                        walk(full)
                else:
                    items.append(self.entry_json(snap, snap.files[full], expand, faults))

        walk(path)
        if not path:
            items.extend(self.extra_entries(faults))
        size = self.server.hub.expand_page_size if expand else self.server.hub.page_size
        offset = 0
        if "cursor" in self.query:
            try:
                offset = json.loads(base64.urlsafe_b64decode(
                    self.query["cursor"][0].encode()))["offset"]
            except (ValueError, KeyError):
                raise HttpError(400, "Invalid cursor")
        page = items[offset:offset + size]
        headers = {"X-Repo-Commit": snap.commit}
        if offset + size < len(items):
            cursor = base64.urlsafe_b64encode(json.dumps({"offset": offset + size}).encode())
            query = [(k, v) for k, vs in self.query.items() if k != "cursor" for v in vs]
            query.append(("cursor", cursor.decode()))
            link = (f"{self.base_url()}{self.path.partition('?')[0]}?"
                    f"{urllib.parse.urlencode(query)}")
            headers["Link"] = f'<{link}>; rel="next"'
        self.send_json(page, 200, headers, count=True)

    def paths_info(self, repo, revision, body):
        self.authorize(repo, files=False)
        snap = self.snapshot(repo, revision)
        content_type = self.headers.get("Content-Type", "")
        if "json" in content_type:
            request = json.loads(body or b"{}")
            paths, expand = request.get("paths", []), bool(request.get("expand"))
        else:
            form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = form.get("expand", ["false"])[0].lower() in ("true", "1")
        if isinstance(paths, str):
            paths = [paths]
        faults = self.listing_faults()
        items = []
        for p in paths:
            p = p.strip("/")
            if p in snap.files:
                items.append(self.entry_json(snap, snap.files[p], expand, faults))
            elif p in snap.trees:
                item = {"type": "directory", "oid": snap.trees[p], "size": 0, "path": p}
                if expand:
                    item["lastCommit"] = {"id": snap.commit, "title": snap.branch,
                                          "date": COMMIT_DATE}
                items.append(item)
        self.send_json(items, 200, {"X-Repo-Commit": snap.commit}, count=True)

    def model_json(self, repo, snap, config, blobs, faults):
        org = repo.split("/")[0]
        siblings = []
        for path in sorted(snap.files, key=lambda p: p.encode()):
            entry = snap.files[path]
            sibling = {"rfilename": path}
            if blobs:
                listed = self.entry_json(snap, entry, False, faults)
                sibling.update({"blobId": listed["oid"], "size": listed["size"]})
                if entry.lfs:
                    sibling["lfs"] = {"sha256": listed["lfs"]["oid"],
                                      "size": listed["lfs"]["size"],
                                      "pointerSize": listed["lfs"]["pointerSize"]}
            siblings.append(sibling)
        return {"_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo,
                "modelId": repo, "author": org, "sha": snap.commit,
                "lastModified": COMMIT_DATE, "createdAt": COMMIT_DATE,
                "private": bool(config.get("private")), "disabled": False,
                "gated": config.get("gated") or False, "downloads": 0, "likes": 0,
                "tags": [], "library_name": "transformers", "pipeline_tag": None,
                "siblings": siblings, "spaces": [],
                "usedStorage": sum(e.size for e in snap.files.values())}

    def model_info(self, repo, revision):
        config = self.authorize(repo, files=False)
        if revision == "HEAD":
            revision = "main"
        snap = self.snapshot(repo, revision)
        blobs = self.query.get("blobs", ["false"])[0].lower() in ("true", "1")
        info = self.model_json(repo, snap, config, blobs, self.listing_faults())
        expand = self.query.get("expand", []) + self.query.get("expand[]", [])
        if expand:
            info = {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
        self.send_json(info, 200, count=True)

    def list_models(self):
        store = self.server.hub.store
        token = self.token()
        author = self.query.get("author", [None])[0]
        search = self.query.get("search", [None])[0]
        limit = int(self.query.get("limit", ["1000"])[0])
        offset = int(self.query.get("offset", ["0"])[0])
        found = []
        for repo in store.repos():
            config = store.config(repo)
            if config.get("private") and token not in config.get("tokens", []):
                continue
            if author and repo.split("/")[0] != author:
                continue
            if search and search.lower() not in repo.lower():
                continue
            if "main" not in store.branches(repo):
                continue
            found.append((repo, config))
        page = found[offset:offset + limit]
        items = []
        for repo, config in page:
            info = self.model_json(repo, store.snapshot(repo, "main"), config, False, [])
            expand = self.query.get("expand", [])
            items.append({k: v for k, v in info.items()
                          if not expand or k in ("_id", "id") or k in expand})
        headers = {}
        if offset + limit < len(found):
            query = [(k, v) for k, vs in self.query.items() if k != "offset" for v in vs]
            query.append(("offset", str(offset + limit)))
            headers["Link"] = (f'<{self.base_url()}/api/models?'
                               f'{urllib.parse.urlencode(query)}>; rel="next"')
        self.send_json(items, 200, headers, count=True)

    def refs(self, repo):
        self.authorize(repo, files=False)
        store = self.server.hub.store
        branches = [{"name": b, "ref": f"refs/heads/{b}",
                     "targetCommit": store.snapshot(repo, b).commit}
                    for b in store.branches(repo)]
        self.send_json({"branches": branches, "converts": [], "tags": []}, 200, count=True)

    def file_headers(self, snap, entry, raw):
        name = entry.path.rsplit("/", 1)[-1]
        quoted = urllib.parse.quote(name)
        headers = {"X-Repo-Commit": snap.commit, "Accept-Ranges": "bytes",
                   "Content-Disposition":
                       f"inline; filename*=UTF-8''{quoted}; filename=\"{name}\";",
                   "Access-Control-Expose-Headers":
                       "X-Repo-Commit,X-Request-Id,X-Error-Code,X-Error-Message,"
                       "X-Total-Count,ETag,Link,Accept-Ranges,Content-Range,"
                       "X-Linked-Size,X-Linked-ETag"}
        if entry.lfs and not raw:
            size = entry.size
            for fault in self.server.hub.faults.rules():
                if (fault["kind"] == "listing_size" and fault.get("file") == entry.path
                        and fault.get("headers") and fault["times"] != 0):
                    size = int(fault["size"])
            headers.update({"ETag": f'"{entry.sha256}"', "X-Linked-Etag": f'"{entry.sha256}"',
                            "X-Linked-Size": str(size)})
        else:
            headers["ETag"] = f'"{entry.blob_oid}"'
        return headers

    def resolve(self, repo, revision, path, raw):
        self.authorize(repo, files=True)
        snap = self.snapshot(repo, revision)
        hub = self.server.hub
        entry = snap.files.get(path)
        if entry is None:
            extra = hub.faults.extra_content(path)
            if extra is None:
                raise HttpError(404, "Entry not found", "EntryNotFound",
                                {"X-Repo-Commit": snap.commit})
            entry = Entry(path, None, len(extra), False, git_blob_oid(extra),
                          hashlib.sha256(extra).hexdigest(), extra)
        headers = self.file_headers(snap, entry, raw)
        if raw and entry.lfs:
            pointer = entry.pointer
            entry = Entry(path, None, len(pointer), False, entry.blob_oid, None, pointer)
        elif entry.lfs and hub.lfs_redirect:
            location = hub.cdn_location(repo, entry)
            return self.send_simple(302, f"Found. Redirecting to {location}".encode(),
                                    "text/plain; charset=utf-8",
                                    dict(headers, Location=location))
        self.send_file(entry, headers, "text/plain; charset=utf-8" if not entry.lfs
                       else "application/octet-stream")

    def send_file(self, entry, headers, content_type):
        hub = self.server.hub
        size = entry.size
        rng = parse_range(self.headers.get("Range"), size)
        if rng == "invalid":
            self.send_simple(416, b"", "text/plain", dict(headers,
                             **{"Content-Range": f"bytes */{size}"}))
            return
        start, end = rng if rng else (0, size - 1)
        length = end - start + 1 if size else 0
        status = 206 if rng else 200
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        hub.faults.note(self.counter, status=status)
        if self.method == "HEAD" or length == 0:
            return
        if entry.data is not None:
            self.writer.write(entry.read, start, length)
            return
        with open(entry.abspath, "rb") as f:
            def read(offset, n):
                f.seek(offset)
                return f.read(n)

            def sendfile(offset, count):
                sent = 0
                while sent < count:
                    n = os.sendfile(self.connection.fileno(), f.fileno(), offset + sent,
                                    count - sent)
                    if n == 0:
                        break
                    sent += n
                return sent

            self.writer.write(read, start, length, sendfile)

    def cdn_blob(self, method):
        hub = self.server.hub
        digest = self.segments[-1]
        expires = self.query.get("Expires", [None])[0]
        signature = self.query.get("Signature", [None])[0]
        if not expires or not signature or "Key-Pair-Id" not in self.query:
            return self.s3_error(403, "AccessDenied",
                                 "Missing Key-Pair-Id query parameter or cookie value")
        if not hmac.compare_digest(signature, hub.sign("/".join(self.segments), expires)):
            return self.s3_error(403, "AccessDenied", "Invalid signature")
        if int(expires) < time.time():
            return self.s3_error(403, "AccessDenied", "Request has expired")
        entry = hub.store.blob_by_digest(digest)
        if entry is None:
            return self.s3_error(404, "NoSuchKey", "The specified key does not exist.")
        etag = hashlib.md5(entry.sha256.encode()).hexdigest()  # opaque, as an S3 ETag is
        disposition = self.query.get("response-content-disposition", [None])[0]
        headers = {"ETag": f'"{etag}"', "Accept-Ranges": "bytes", "Server": "AmazonS3",
                   "Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT"}
        if disposition:
            headers["Content-Disposition"] = disposition
        self.send_file(entry, headers, "application/octet-stream")

    def s3_error(self, status, code, message):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f'<Message>{message}</Message></Error>').encode()
        self.send_simple(status, body, "application/xml")


class HubServer:
    """The Hub listener and its CDN listener, served from threads of this process."""

    def __init__(self, root, *, host="127.0.0.1", port=0, cdn_host="localhost", cdn_port=0,
                 page_size=1000, expand_page_size=50, lfs_threshold=DEFAULT_LFS_THRESHOLD,
                 lfs_redirect=True, tokens=(), repos=None, throttle=None,
                 synthesize_gitattributes=True, verbose=False):
        self.store = RepoStore(root, lfs_threshold, synthesize_gitattributes, repos or {})
        self.host, self.port, self.cdn_host, self.cdn_port = host, port, cdn_host, cdn_port
        self.page_size, self.expand_page_size = page_size, expand_page_size
        self.lfs_redirect, self.tokens, self.verbose = lfs_redirect, list(tokens), verbose
        self.faults = FaultTable()
        self.stop_event = threading.Event()
        self.secret = secrets.token_bytes(32)
        if throttle:
            self.faults.add({"kind": "throttle", "bytes_per_second": throttle, "times": -1})
        self._servers, self._threads = {}, []

    def start(self):
        for role, port in (("hub", self.port), ("cdn", self.cdn_port)):
            server = Listener(("127.0.0.1", port), Handler)
            server.hub, server.role, server.verbose = self, role, self.verbose
            self._servers[role] = server
            thread = threading.Thread(target=server.serve_forever, name=f"hub-{role}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self):
        self.stop_event.set()
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def host_of(self, role):
        host = self.host if role == "hub" else self.cdn_host
        return f"{host}:{self._servers[role].server_address[1]}"

    @property
    def url(self):
        return f"http://{self.host_of('hub')}"

    @property
    def cdn_url(self):
        return f"http://{self.host_of('cdn')}"

    def other_base(self, role):
        return self.cdn_url if role == "hub" else self.url

    def stats(self):
        return self.faults.stats()

    def reset_stats(self):
        self.faults.reset_stats()

    def throttles_for(self, body_faults):
        return [f["_bucket"] for f in body_faults if f["kind"] == "throttle"]

    def sign(self, path, expires):
        mac = hmac.new(self.secret, f"{path}?{expires}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def cdn_location(self, repo, entry):
        repo_hash = hashlib.sha256(repo.encode()).hexdigest()
        path = f"repos/{repo_hash[:2]}/{repo_hash[2:4]}/{repo_hash}/{entry.sha256}"
        expires = str(int(time.time()) + 3600)
        name = entry.path.rsplit("/", 1)[-1]
        disposition = (f"inline; filename*=UTF-8''{urllib.parse.quote(name)}; "
                       f"filename=\"{name}\";")
        query = urllib.parse.urlencode([
            ("response-content-disposition", disposition), ("Expires", expires),
            ("Policy", base64.urlsafe_b64encode(json.dumps(
                {"Statement": [{"Condition": {"DateLessThan": {"AWS:EpochTime":
                                                               int(expires)}}}]}).encode())
             .decode().rstrip("=")),
            ("Signature", self.sign(path, expires)), ("Key-Pair-Id", "KVTP0A1DKRTAX")])
        return f"{self.cdn_url}/{path}?{query}"


def _split_assignment(text):
    repo, _, token = text.partition("=")
    return repo, token


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cdn-host", default="localhost")
    parser.add_argument("--cdn-port", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--expand-page-size", type=int, default=50)
    parser.add_argument("--lfs-threshold", type=int, default=DEFAULT_LFS_THRESHOLD)
    parser.add_argument("--no-lfs-redirect", action="store_true")
    parser.add_argument("--no-gitattributes", action="store_true")
    parser.add_argument("--token", action="append", default=[])
    parser.add_argument("--gated", action="append", default=[], metavar="ORG/NAME=TOKEN")
    parser.add_argument("--private", action="append", default=[], metavar="ORG/NAME=TOKEN")
    parser.add_argument("--throttle", type=float, metavar="BYTES_PER_S")
    parser.add_argument("--fault", action="append", default=[], metavar="JSON")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    repos = {}
    for flag, key in ((args.gated, "gated"), (args.private, "private")):
        for text in flag:
            repo, token = _split_assignment(text)
            entry = repos.setdefault(repo, {"tokens": []})
            entry[key] = "manual" if key == "gated" else True
            if token:
                entry["tokens"].append(token)
    hub = HubServer(args.root, host=args.host, port=args.port, cdn_host=args.cdn_host,
                    cdn_port=args.cdn_port, page_size=args.page_size,
                    expand_page_size=args.expand_page_size, lfs_threshold=args.lfs_threshold,
                    lfs_redirect=not args.no_lfs_redirect, tokens=args.token, repos=repos,
                    throttle=args.throttle, synthesize_gitattributes=not args.no_gitattributes,
                    verbose=args.verbose)
    for text in args.fault:
        hub.faults.add(json.loads(text))
    hub.start()
    print(hub.url, flush=True)
    print(f"cdn {hub.cdn_url}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    hub.stop()


if __name__ == "__main__":
    main()
