"""The Hub's repos as hub_server.py serves them: plain folders, ROOT/ORG/NAME/<branch>/...,
each branch one git commit whose blob, tree and commit ids are real git object ids (LFS
files as their pointers), hashes cached by inode, size and mtime. Stdlib only."""
import fnmatch
import hashlib
import json
import os
import threading

# The LFS patterns of the .gitattributes the Hub writes into every new model repo.
LFS_PATTERNS = ("*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5",
                "*.joblib", "*.lfs.*", "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz",
                "*.onnx", "*.ot", "*.parquet", "*.pb", "*.pickle", "*.pkl", "*.pt", "*.pth",
                "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*", "*.tar", "*.tflite",
                "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*")
GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in LFS_PATTERNS)
COMMIT_TIME = 1700000000  # 2023-11-14T22:13:20Z, every branch's commit date
COMMIT_DATE = "2023-11-14T22:13:20.000Z"
AUTHOR = "anisoscope-tests <tests@anisoscope.invalid>"
DEFAULT_LFS_THRESHOLD = 10 * 1024 * 1024


def git_blob_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256, size):
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\n"
            f"size {size}\n").encode()


def git_tree_oid(children):
    """children: [(name, is_dir, oid)]; git's order (a tree sorts as name + "/")."""
    entries = sorted(children, key=lambda c: c[0].encode() + (b"/" if c[1] else b""))
    body = b"".join((b"40000 " if d else b"100644 ") + n.encode() + b"\0" + bytes.fromhex(o)
                    for n, d, o in entries)
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def git_commit_oid(tree, message):
    body = (f"tree {tree}\nauthor {AUTHOR} {COMMIT_TIME} +0000\n"
            f"committer {AUTHOR} {COMMIT_TIME} +0000\n\n{message}\n").encode()
    return hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()


class FileHashes:
    """sha256 and git blob oid of files, cached by (device, inode, size, mtime)."""

    def __init__(self):
        self._lock, self._cache = threading.Lock(), {}

    def get(self, path, st):
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            found = self._cache.get(key)
        if found is not None:
            return found
        sha256, sha1 = hashlib.sha256(), hashlib.sha1()
        sha1.update(b"blob %d\0" % st.st_size)
        with open(path, "rb") as f:
            while True:
                block = f.read(1 << 20)
                if not block:
                    break
                sha256.update(block)
                sha1.update(block)
        found = {"sha256": sha256.hexdigest(), "blob": sha1.hexdigest()}
        with self._lock:
            self._cache[key] = found
        return found


class Entry:
    """One file of a branch as the Hub lists it."""

    def __init__(self, path, abspath, size, lfs, blob_oid, sha256, data=None):
        self.path, self.abspath, self.size, self.lfs = path, abspath, size, lfs
        self.blob_oid, self.sha256, self.data = blob_oid, sha256, data  # data: synthesized

    @property
    def pointer(self):
        return lfs_pointer(self.sha256, self.size)

    def read(self, offset, n):
        if self.data is not None:
            return self.data[offset:offset + n]
        with open(self.abspath, "rb") as f:
            f.seek(offset)
            return f.read(n)


class Snapshot:
    """A branch: its files, its directories' tree oids, its commit."""

    def __init__(self, branch, files, trees, commit):
        self.branch, self.files, self.trees, self.commit = branch, files, trees, commit


class RepoStore:
    """The repos under `root`, read on each request (folders may change between calls)."""

    def __init__(self, root, lfs_threshold, synthesize_gitattributes, overrides):
        self.root, self.lfs_threshold = os.path.abspath(root), lfs_threshold
        self.synthesize_gitattributes = synthesize_gitattributes
        self.overrides = overrides  # {"ORG/NAME": {"private":..., "gated":..., "tokens": [...]}}
        self.hashes = FileHashes()
        self._lock, self._snapshots, self._by_digest = threading.Lock(), {}, {}

    def repo_dir(self, repo):
        org, _, name = repo.partition("/")
        if not org or not name or "/" in name or org.startswith(".") or name.startswith("."):
            return None
        path = os.path.join(self.root, org, name)
        return path if os.path.isdir(path) else None

    def repos(self):
        found = []
        for org in sorted(os.listdir(self.root)):
            if org.startswith(".") or not os.path.isdir(os.path.join(self.root, org)):
                continue
            for name in sorted(os.listdir(os.path.join(self.root, org))):
                if self.repo_dir(f"{org}/{name}"):
                    found.append(f"{org}/{name}")
        return found

    def config(self, repo):
        config = {"private": False, "gated": False, "tokens": []}
        path = os.path.join(self.repo_dir(repo) or "", ".hub.json")
        if os.path.isfile(path):
            with open(path) as f:
                config.update(json.load(f))
        config.update(self.overrides.get(repo, {}))
        return config

    def known_tokens(self):
        tokens = set()
        for repo in set(self.repos()) | set(self.overrides):
            if self.repo_dir(repo):
                tokens.update(self.config(repo).get("tokens", []))
        return tokens

    def branches(self, repo):
        base = self.repo_dir(repo)
        return sorted(b for b in os.listdir(base)
                      if not b.startswith(".") and os.path.isdir(os.path.join(base, b)))

    def is_lfs(self, path, size):
        name = path.rsplit("/", 1)[-1]
        return size > self.lfs_threshold or any(
            fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(path, p) for p in LFS_PATTERNS)

    def snapshot(self, repo, branch):
        base = os.path.join(self.repo_dir(repo), branch)
        stats = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                abspath = os.path.join(dirpath, name)
                try:
                    st = os.stat(abspath)
                except OSError:
                    continue
                rel = os.path.relpath(abspath, base).replace(os.sep, "/")
                stats.append((rel, abspath, st))
        key = tuple((r, s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns) for r, _, s in stats)
        with self._lock:
            cached = self._snapshots.get((repo, branch))
        if cached is not None and cached[0] == key:
            return cached[1]
        files = {}
        for rel, abspath, st in stats:
            h = self.hashes.get(abspath, st)
            if self.is_lfs(rel, st.st_size):
                blob = git_blob_oid(lfs_pointer(h["sha256"], st.st_size))
                files[rel] = Entry(rel, abspath, st.st_size, True, blob, h["sha256"])
            else:
                files[rel] = Entry(rel, abspath, st.st_size, False, h["blob"], h["sha256"])
        if self.synthesize_gitattributes and ".gitattributes" not in files:
            data = GITATTRIBUTES.encode()
            files[".gitattributes"] = Entry(".gitattributes", None, len(data), False,
                                            git_blob_oid(data),
                                            hashlib.sha256(data).hexdigest(), data)
        trees = {}

        def tree(prefix):
            children = {}
            for path, entry in files.items():
                if prefix and not path.startswith(prefix + "/"):
                    continue
                rest = path[len(prefix) + 1:] if prefix else path
                head, sep, _ = rest.partition("/")
                if sep:
                    children[head] = True
                else:
                    children[head] = entry
            listed = []
            for name, child in children.items():
                if child is True:
                    sub = f"{prefix}/{name}" if prefix else name
                    listed.append((name, True, tree(sub)))
                else:
                    listed.append((name, False, child.blob_oid))
            trees[prefix] = git_tree_oid(listed)
            return trees[prefix]

        commit = git_commit_oid(tree(""), branch)
        snap = Snapshot(branch, files, trees, commit)
        with self._lock:
            self._snapshots[(repo, branch)] = (key, snap)
            for entry in files.values():
                if entry.abspath is not None:
                    self._by_digest[entry.sha256] = entry
        return snap

    def resolve(self, repo, revision):
        """The Snapshot of a branch name or a branch's commit, else None."""
        branches = self.branches(repo)
        if revision in branches:
            return self.snapshot(repo, revision)
        if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
            for branch in branches:
                snap = self.snapshot(repo, branch)
                if snap.commit == revision:
                    return snap
        return None

    def blob_by_digest(self, digest):
        """(Entry) of any branch's file whose sha256 is `digest`, for the CDN."""
        with self._lock:
            entry = self._by_digest.get(digest)
        if entry is not None and os.path.isfile(entry.abspath):
            return entry
        for repo in self.repos():
            for branch in self.branches(repo):
                for entry in self.snapshot(repo, branch).files.values():
                    if entry.sha256 == digest:
                        return entry
        return None
