"""Faults and counters shared by hub_server.py and s3_server.py's proxy (stdlib only).

A fault is a JSON object (a "rule"), added in-process with `FaultTable.add(rule)` or over
HTTP with `POST /_control` on either server (the body is one rule, a list of rules, or
`{"faults": [...]}`; `DELETE /_control` clears them, `GET /_control` lists them):

    {"kind": "status", "match": "*/model.safetensors", "status": 429, "retry_after": 1,
     "times": 2}

Common fields:
  kind     one of KINDS below (required)
  match    fnmatch pattern against the request's URL path, percent-decoded, without the
           query ("/ORG/NAME/resolve/step1/model.safetensors", "/bucket/run/step1/x");
           default "*"
  method   only requests with this method (GET, HEAD, ...); default any
  listener only requests to this listener ("hub"/"cdn", "s3"/"other"); default any
  times    how many matching requests the rule affects, then it is spent; -1 = until
           cleared. Default 1, except throttle and the listing_* kinds (-1).

Kinds and their fields:
  status        answer `status` (429, 500, 503, ...) instead, with `Retry-After:
                retry_after` when given, and the server's usual error body. N x 429 then
                success: times=N. A 503 storm: times=-1 (clear it to end the storm).
  cut           send the headers and `after_bytes` bytes of the body, then reset the
                connection (RST: SO_LINGER 0). With times=1 the next request (a Range
                resume) is served normally.
  truncate      send the headers (Content-Length unchanged) and `after_bytes` bytes, then
                close the connection cleanly (FIN): a body shorter than announced.
  stall         no byte for `seconds` seconds: before the status line when `after_bytes`
                is absent, else after that many body bytes; then the answer goes on.
  corrupt       the body byte at file offset `offset` (default 0) is XORed with 0xFF.
  throttle      body bytes of matching answers share a `bytes_per_second` budget (a link).
  redirect      answer `status` (default 302; S3: 307) to the same path and query on the
                server's other listener (the Hub's CDN host, the S3 proxy's second host),
                which records whether an Authorization header arrived there.
  listing_size  listings report `size` for the entry `file` (a path in the repo, or an S3
                key); with "headers": true the Hub's X-Linked-Size says it too.
  listing_hash  listings report a wrong hash for `file`: the Hub's lfs.oid (sha256) or,
                for a non-LFS file, its oid; S3's ETag. `value` sets it (default: the
                hash of b"wrong").
  listing_extra listings gain a file entry per name in `names` (hostile names: "../x",
                "/abs", "a/../../b"), each served with `content` (default "hostile\\n")
                to a client that asks for it.

Counters (`GET /_stats`, `DELETE /_stats` resets; in-process `FaultTable.stats()`): per
listener, per URL path: requests, methods, statuses, bytes (body bytes sent), ranges (each
Range header seen, in order), authorization (how many requests carried one), faults (the
kinds applied).
"""
import copy
import fnmatch
import hashlib
import http.server
import socket
import socketserver
import struct
import sys
import threading
import time

KINDS = ("status", "cut", "truncate", "stall", "corrupt", "throttle", "redirect",
         "listing_size", "listing_hash", "listing_extra")
RESPONSE_KINDS = ("status", "redirect")           # replace the answer
BODY_KINDS = ("cut", "truncate", "stall", "corrupt", "throttle")  # shape the body
LISTING_KINDS = ("listing_size", "listing_hash", "listing_extra")
_FOREVER_BY_DEFAULT = ("throttle",) + LISTING_KINDS
CHUNK = 256 * 1024


class FaultError(ValueError):
    """A rule that cannot be applied (unknown kind, missing field)."""


def _validate(rule):
    if not isinstance(rule, dict):
        raise FaultError("a fault is a JSON object")
    kind = rule.get("kind")
    if kind not in KINDS:
        raise FaultError(f"unknown fault kind {kind!r}; one of {', '.join(KINDS)}")
    required = {"status": ["status"], "cut": ["after_bytes"], "truncate": ["after_bytes"],
                "stall": ["seconds"], "throttle": ["bytes_per_second"],
                "listing_size": ["file", "size"], "listing_hash": ["file"],
                "listing_extra": ["names"]}.get(kind, [])
    for field in required:
        if field not in rule:
            raise FaultError(f"fault {kind!r} needs {field!r}")
    rule = dict(rule)
    rule.setdefault("match", "*")
    rule.setdefault("times", -1 if kind in _FOREVER_BY_DEFAULT else 1)
    if kind == "throttle":
        rule["_bucket"] = Throttle(float(rule["bytes_per_second"]))
    return rule


class Throttle:
    """A shared byte budget: callers of `consume(n)` are paced to `rate` bytes/s together."""

    def __init__(self, rate):
        self.rate, self._lock, self._next = max(rate, 1.0), threading.Lock(), 0.0

    def consume(self, n, stop=None):
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now - 0.01)  # up to 10 ms of unused budget carries over
            self._next = start + n / self.rate
            wait = self._next - now
        if wait > 0:
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)

    def chunk(self):
        return int(max(4096, min(CHUNK, self.rate / 50)))


class FaultTable:
    """The rules and counters of one server (all its listeners). Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._rules = []
        self._next_id = 1
        self._stats = {}

    # rules
    def add(self, rules):
        """Adds one rule or a list of them (see the module docstring); returns their ids."""
        if isinstance(rules, dict) and "faults" in rules:
            rules = rules["faults"]
        if isinstance(rules, dict):
            rules = [rules]
        checked = [_validate(r) for r in rules]
        ids = []
        with self._lock:
            for rule in checked:
                rule["id"] = self._next_id
                self._next_id += 1
                self._rules.append(rule)
                ids.append(rule["id"])
        return ids

    def clear(self):
        with self._lock:
            self._rules.clear()

    def rules(self):
        with self._lock:
            return [{k: v for k, v in r.items() if not k.startswith("_")} for r in self._rules]

    def _matches(self, rule, listener, method, path):
        if rule["times"] == 0:
            return False
        if rule.get("listener") not in (None, listener):
            return False
        if rule.get("method") not in (None, method):
            return False
        return fnmatch.fnmatchcase(path, rule["match"])

    def _spend(self, rule):
        if rule["times"] > 0:
            rule["times"] -= 1

    def take(self, listener, method, path, kinds):
        """The first live rule of `kinds` matching the request, spent once; else None."""
        with self._lock:
            for rule in self._rules:
                if rule["kind"] in kinds and self._matches(rule, listener, method, path):
                    self._spend(rule)
                    return dict(rule)
        return None

    def take_all(self, listener, method, path, kinds):
        """Every live rule of `kinds` matching the request, each spent once."""
        taken = []
        with self._lock:
            for rule in self._rules:
                if rule["kind"] in kinds and self._matches(rule, listener, method, path):
                    self._spend(rule)
                    taken.append(dict(rule))
        return taken

    def extra_content(self, file_path):
        """The content served for a name some listing_extra rule injects, else None."""
        with self._lock:
            for rule in self._rules:
                if rule["kind"] == "listing_extra" and file_path in rule["names"]:
                    return rule.get("content", "hostile\n").encode()
        return None

    # counters
    def record(self, listener, method, path, headers):
        """Counts one request; returns its counter (pass it to `add_bytes`/`note`)."""
        with self._lock:
            entry = self._stats.setdefault(listener, {}).setdefault(path, {
                "requests": 0, "methods": [], "statuses": [], "bytes": 0, "ranges": [],
                "authorization": 0, "faults": []})
            entry["requests"] += 1
            entry["methods"].append(method)
            if headers.get("Range") is not None:
                entry["ranges"].append(headers.get("Range"))
            if headers.get("Authorization") is not None:
                entry["authorization"] += 1
        return entry

    def note(self, entry, status=None, nbytes=0, fault=None):
        with self._lock:
            if status is not None:
                entry["statuses"].append(status)
            entry["bytes"] += nbytes
            if fault is not None:
                entry["faults"].append(fault)

    def stats(self):
        with self._lock:
            return copy.deepcopy(self._stats)

    def reset_stats(self):
        with self._lock:
            self._stats.clear()


def wrong_hash(algorithm="sha256"):
    return hashlib.new(algorithm, b"wrong").hexdigest()


def reset_connection(handler):
    """Closes the handler's connection with a RST (SO_LINGER 0), not a FIN."""
    try:
        handler.wfile.flush()
    except OSError:
        pass
    try:
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      struct.pack("ii", 1, 0))
    except OSError:
        pass
    handler.close_connection = True
    for stream in (handler.rfile, handler.wfile):
        try:
            stream.close()
        except OSError:
            pass
    handler.connection.close()


def finish_connection(handler):
    """Closes the handler's connection cleanly (FIN) after what was sent."""
    try:
        handler.wfile.flush()
        handler.connection.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    handler.close_connection = True


class BodyWriter:
    """Writes an answer's body under the body faults that matched its request.

    `read(offset, n)` returns up to n bytes of the resource from `offset`; `start` is the
    first resource offset of this body, `length` its byte count. Returns True when the whole
    body was written and the connection may be reused."""

    def __init__(self, handler, table, counter, faults, throttles, stop):
        self.handler, self.table, self.counter = handler, table, counter
        self.faults, self.throttles, self.stop = faults, throttles, stop

    def stall_before_headers(self):
        for fault in self.faults:
            if fault["kind"] == "stall" and fault.get("after_bytes") is None:
                self.table.note(self.counter, fault="stall")
                self.stop.wait(float(fault["seconds"]))

    def write(self, read, start, length, sendfile=None):
        cut = next((f for f in self.faults if f["kind"] in ("cut", "truncate")), None)
        stall = next((f for f in self.faults
                      if f["kind"] == "stall" and f.get("after_bytes") is not None), None)
        corrupt = [f for f in self.faults if f["kind"] == "corrupt"]
        limit = length if cut is None else min(length, int(cut["after_bytes"]))
        simple = cut is None and stall is None and not corrupt and not self.throttles
        sent = 0
        try:
            if simple and sendfile is not None and length > CHUNK:
                sent = sendfile(start, length)
                return True
            chunk = min([CHUNK] + [t.chunk() for t in self.throttles])
            while sent < limit:
                if stall is not None and sent >= int(stall["after_bytes"]):
                    self.table.note(self.counter, fault="stall")
                    self.stop.wait(float(stall["seconds"]))
                    stall = None
                n = limit - sent
                if stall is not None:
                    n = min(n, int(stall["after_bytes"]) - sent)
                data = read(start + sent, min(n, chunk))
                if not data:
                    break
                for fault in corrupt:
                    at = int(fault.get("offset", 0)) - (start + sent)
                    if 0 <= at < len(data):
                        data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
                for throttle in self.throttles:
                    throttle.consume(len(data), self.stop)
                self.handler.wfile.write(data)
                sent += len(data)
                if self.stop.is_set():
                    break
            if cut is not None and limit < length:
                self.table.note(self.counter, fault=cut["kind"])
                if cut["kind"] == "cut":
                    reset_connection(self.handler)
                else:
                    finish_connection(self.handler)
                return False
            return sent == length
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.handler.close_connection = True
            return False
        finally:
            self.table.note(self.counter, nbytes=sent)


class Listener(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """One listening socket of a test server: a thread per connection; its `role` names it
    in logs and fault rules, `verbose` lets its requests and errors be printed."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    role = ""
    verbose = False

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)


class DispatchingHandler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1, quiet unless its Listener is verbose, every method to `dispatch(method)`."""
    protocol_version = "HTTP/1.1"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write(f"[{self.server.role}] " + (fmt % args) + "\n")

    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_POST(self):
        self.dispatch("POST")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        raise NotImplementedError
