#!/usr/bin/python3
"""A real S3-compatible server for tests: s3rver (npm, pinned in package.json) on a free
port and a temporary folder, a bucket made and filled with Debian's s3cmd, behind a small
proxy that verifies SigV4 signatures and injects faults (stdlib only, besides node, the npm
module and s3cmd).

    client --> proxy 127.0.0.1:P ("s3" listener) --> s3rver 127.0.0.1:Q
               proxy localhost:P2 ("other" listener: a second host, the target of a
                                   `redirect` fault, which records Authorization headers)

Addressing is path-style (http://127.0.0.1:P/BUCKET/KEY), region us-east-1, and the keys
are s3rver's built-in pair: access key S3RVER, secret S3RVER. s3rver checks the access key
of a SigV4 request but never its signature (see sigv4.py), so the proxy does: a request whose
signature (header or presigned query) does not verify is answered 403
SignatureDoesNotMatch, an unsigned one 403 AccessDenied (`require_signature=False` lets
those through, `verify_signatures=False` skips the check), before s3rver sees it.

Faults and counters: fault_injection.py's rules, over `POST /_control` and `GET /_stats` on
the proxy or in process (`s3.faults.add(...)`, `s3.stats()`). On S3: `status` answers S3's
XML error (503 SlowDown, 500 InternalError, 429 TooManyRequests); `redirect` is a 307
TemporaryRedirect to the other listener; cut, truncate, stall, corrupt and throttle shape
any body s3rver sends (an object's offsets for `corrupt`); listing_size, listing_hash (the
ETag) and listing_extra (extra <Contents> keys, served by the proxy when fetched) rewrite
ListObjects/ListObjectsV2 answers; `file` and `names` are full keys.

From Python:
    from s3_server import S3Server
    with S3Server(bucket="ckpt") as s3:
        s3.put_tree("/path/to/run", "runs/a/")      # s3cmd put --recursive, to s3rver
        s3.url, s3.other_url, s3.env()               # AWS_ACCESS_KEY_ID, ... for a client
        s3.faults.add({"kind": "cut", "after_bytes": 4096, "match": "/ckpt/runs/a/*"})
        s3.s3cmd("ls", "-r", "s3://ckpt/")           # through the proxy (signed, verified)
From the shell (prints the proxy's URL, then "other URL", "direct URL", "bucket NAME"; serves
until SIGTERM/SIGINT):
    python3 s3_server.py [--bucket B] [--fixtures DIR --prefix P/] [--port 0] [--fault JSON]
"""
import argparse
import hashlib
import html
import http.client
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sigv4  # noqa: E402
from fault_injection import (BODY_KINDS, BodyWriter, DispatchingHandler,  # noqa: E402
                             FaultError, FaultTable, Listener,
                             LISTING_KINDS, RESPONSE_KINDS, wrong_hash)

ACCESS_KEY = SECRET_KEY = "S3RVER"
REGION = "us-east-1"
S3RVER = os.path.join(HERE, "node_modules", "s3rver", "bin", "s3rver.js")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "expect"}
ERROR_CODES = {429: ("TooManyRequests", "Please reduce your request rate."),
               500: ("InternalError", "We encountered an internal error. Please try again."),
               503: ("SlowDown", "Please reduce your request rate.")}


def error_xml(code, message, extra=""):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f'<Message>{html.escape(message)}</Message>{extra}'
            f'<RequestId>{secrets.token_hex(8).upper()}</RequestId></Error>').encode()


def rewrite_listing(xml, faults):
    """A ListObjects(V2) answer with the listing faults applied (the rest byte-identical)."""
    text = xml.decode()

    def contents(match):
        block = match.group(0)
        key = html.unescape(re.search(r"<Key>(.*?)</Key>", block, re.S).group(1))
        for fault in faults:
            if fault.get("file") != key:
                continue
            if fault["kind"] == "listing_size":
                block = re.sub(r"<Size>\d+</Size>", f"<Size>{int(fault['size'])}</Size>", block)
            elif fault["kind"] == "listing_hash":
                value = fault.get("value") or wrong_hash("md5")
                block = re.sub(r"<ETag>.*?</ETag>", f"<ETag>&quot;{value}&quot;</ETag>", block)
        return block

    text = re.sub(r"<Contents>.*?</Contents>", contents, text, flags=re.S)
    extra = []
    for fault in faults:
        if fault["kind"] != "listing_extra":
            continue
        content = fault.get("content", "hostile\n").encode()
        for name in fault["names"]:
            extra.append(f"<Contents><Key>{html.escape(name)}</Key>"
                         "<LastModified>2023-11-14T22:13:20.000Z</LastModified>"
                         f"<ETag>&quot;{hashlib.md5(content).hexdigest()}&quot;</ETag>"
                         f"<Size>{len(content)}</Size><StorageClass>STANDARD</StorageClass>"
                         "</Contents>")
    if extra:
        text = text.replace("</ListBucketResult>", "".join(extra) + "</ListBucketResult>")
        text = re.sub(r"<KeyCount>(\d+)</KeyCount>",
                      lambda m: f"<KeyCount>{int(m.group(1)) + len(extra)}</KeyCount>", text)
    return text.encode()


class ProxyHandler(DispatchingHandler):
    server_version = "anisoscope-s3-proxy"

    def send_bytes(self, status, body, headers, faults=None):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.counter is not None:
            self.server.s3.faults.note(self.counter, status=status)
        if self.method == "HEAD" or not body:
            return
        if self.counter is not None:
            self.writer.write(lambda o, n: body[o:o + n], 0, len(body))
        else:
            self.wfile.write(body)

    def send_error_xml(self, status, code, message, headers=None, extra=""):
        self.send_bytes(status, error_xml(code, message, extra),
                        dict({"Content-Type": "application/xml"}, **(headers or {})))

    def dispatch(self, method):
        s3 = self.server.s3
        self.method, self.counter = method, None
        raw_path, _, raw_query = self.path.partition("?")
        path = urllib.parse.unquote(raw_path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if path in ("/_control", "/_stats"):
            return self.control(method, path, body)
        self.counter = s3.faults.record(self.server.role, method, path, self.headers)
        body_faults = s3.faults.take_all(self.server.role, method, path, BODY_KINDS)
        self.writer = BodyWriter(self, s3.faults, self.counter, body_faults,
                                 [f["_bucket"] for f in body_faults if f["kind"] == "throttle"],
                                 s3.stop_event)
        try:
            self.writer.stall_before_headers()
            fault = s3.faults.take(self.server.role, method, path, RESPONSE_KINDS)
            if fault is not None:
                s3.faults.note(self.counter, fault=fault["kind"])
                if fault["kind"] == "status":
                    status = int(fault["status"])
                    code, message = ERROR_CODES.get(status, ("InjectedError", "Injected error"))
                    headers = {}
                    if fault.get("retry_after") is not None:
                        headers["Retry-After"] = str(fault["retry_after"])
                    return self.send_error_xml(status, fault.get("error_code", code),
                                               fault.get("message", message), headers)
                location = s3.other_base(self.server.role) + self.path
                return self.send_error_xml(
                    int(fault.get("status", 307)), "TemporaryRedirect",
                    "Please re-send this request to the specified temporary endpoint. "
                    "Continue to use the original request endpoint for future requests.",
                    {"Location": location},
                    f"<Endpoint>{urllib.parse.urlsplit(location).netloc}</Endpoint>")
            if s3.verify_signatures:
                headers = {}
                for name, value in self.headers.items():
                    headers.setdefault(name.lower(), []).append(value)
                try:
                    sigv4.verify(method, raw_path, raw_query, headers,
                                 hashlib.sha256(body).hexdigest(), s3.keys)
                except sigv4.SignatureError as e:
                    unsigned = "authorization" not in headers and "X-Amz-Signature" not in \
                        raw_query
                    if not (unsigned and not s3.require_signature):
                        s3.faults.note(self.counter, fault="signature:" + e.code)
                        return self.send_error_xml(e.status, e.code, e.message)
            extra = s3.faults.extra_content(path.split("/", 2)[-1]) \
                if path.count("/") >= 2 else None
            if extra is not None and method in ("GET", "HEAD"):
                return self.send_bytes(200, extra, {
                    "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes",
                    "ETag": f'"{hashlib.md5(extra).hexdigest()}"'})
            self.forward(method, raw_path, raw_query, path, body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def forward(self, method, raw_path, raw_query, path, body):
        s3 = self.server.s3
        conn = http.client.HTTPConnection("127.0.0.1", s3.s3rver_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            conn.request(method, self.path, body=body if body else None, headers=headers)
            resp = conn.getresponse()
            out = {k: v for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP}
            is_listing = (method == "GET" and resp.status == 200 and path.strip("/") != ""
                          and "/" not in path.strip("/")
                          and "xml" in resp.getheader("Content-Type", ""))
            if is_listing:
                data = resp.read()
                faults = s3.faults.take_all(self.server.role, method, path, LISTING_KINDS)
                out.pop("Content-Length", None)
                return self.send_bytes(resp.status, rewrite_listing(data, faults), out)
            if resp.getheader("Content-Length") is None or method == "HEAD":
                data = resp.read()
                if method == "HEAD":
                    self.send_response(resp.status)
                    for k, v in out.items():
                        self.send_header(k, v)
                    self.end_headers()
                    s3.faults.note(self.counter, status=resp.status)
                    return
                out.pop("Content-Length", None)
                return self.send_bytes(resp.status, data, out)
            length = int(resp.getheader("Content-Length"))
            start = 0
            content_range = resp.getheader("Content-Range")
            if content_range:
                start = int(re.match(r"bytes (\d+)-", content_range).group(1))
            self.send_response(resp.status)
            for k, v in out.items():
                self.send_header(k, v)
            self.end_headers()
            s3.faults.note(self.counter, status=resp.status)
            if length:
                self.writer.write(lambda offset, n: resp.read(n), start, length)
        finally:
            conn.close()

    def control(self, method, path, body):
        s3 = self.server.s3
        try:
            if path == "/_control":
                if method == "POST":
                    ids = s3.faults.add(json.loads(body or b"{}"))
                    answer = {"ids": ids, "faults": s3.faults.rules()}
                else:
                    if method == "DELETE":
                        s3.faults.clear()
                    answer = {"faults": s3.faults.rules()}
            else:
                if method == "DELETE":
                    s3.faults.reset_stats()
                answer = s3.faults.stats()
            self.send_bytes(200, json.dumps(answer).encode(),
                            {"Content-Type": "application/json"})
        except (FaultError, ValueError) as e:
            self.send_bytes(400, json.dumps({"error": str(e)}).encode(),
                            {"Content-Type": "application/json"})


class S3Server:
    """s3rver, its bucket, and the verifying, fault-injecting proxy in front of it."""

    def __init__(self, *, bucket="anisoscope-test", port=0, other_host="localhost",
                 other_port=0, verify_signatures=True, require_signature=True,
                 throttle=None, node=None, s3rver=S3RVER, s3cmd=None, verbose=False):
        self.bucket, self.port, self.other_host, self.other_port = bucket, port, other_host, \
            other_port
        self.verify_signatures, self.require_signature = verify_signatures, require_signature
        self.keys = {ACCESS_KEY: SECRET_KEY}
        self.node = node or shutil.which("node")
        self.s3rver, self.s3cmd_path = s3rver, s3cmd or shutil.which("s3cmd")
        self.verbose = verbose
        self.faults = FaultTable()
        if throttle:
            self.faults.add({"kind": "throttle", "bytes_per_second": throttle})
        self.stop_event = threading.Event()
        self._process, self._servers, self.tmp = None, {}, None

    # lifecycle
    def start(self):
        if not self.node or not os.path.isfile(self.s3rver):
            raise RuntimeError("s3rver needs node and the npm modules: run `npm ci "
                               "--no-audit --no-fund` in tests/sources/servers")
        if not self.s3cmd_path:
            raise RuntimeError("s3cmd is not installed (apt-get install s3cmd)")
        self.tmp = tempfile.mkdtemp(prefix="s3rver-")
        try:
            self._start_s3rver()
            for role, port in (("s3", self.port), ("other", self.other_port)):
                server = Listener(("127.0.0.1", port), ProxyHandler)
                server.s3, server.role, server.verbose = self, role, self.verbose
                self._servers[role] = server
                threading.Thread(target=server.serve_forever, name=f"s3-{role}",
                                 daemon=True).start()
            self.s3cmd_config = self._write_s3cmd_config("s3cmd.cfg", self.url)
            self.s3cmd_direct_config = self._write_s3cmd_config("s3cmd-direct.cfg",
                                                                self.direct_url)
            self.s3cmd("mb", f"s3://{self.bucket}", direct=True)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_s3rver(self):
        data = os.path.join(self.tmp, "data")
        os.makedirs(data)
        # --openssl-legacy-provider: s3rver's ListObjectsV2 continuation tokens are DES,
        # which OpenSSL 3 serves only from its legacy provider (else every truncated
        # ListObjectsV2 answer is a 500 InternalError).
        self._process = subprocess.Popen(
            [self.node, "--openssl-legacy-provider", self.s3rver, "-d", data,
             "-a", "127.0.0.1", "-p", "0", "--silent", "--no-vhost-buckets"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while True:
            line = self._process.stdout.readline()
            if not line:
                raise RuntimeError("s3rver exited: " + self._process.stderr.read()[-2000:])
            found = re.search(r"S3rver listening on [^:]+:(\d+)", line)
            if found:
                self.s3rver_port = int(found.group(1))
                break
        threading.Thread(target=self._process.stdout.read, daemon=True).start()
        threading.Thread(target=self._process.stderr.read, daemon=True).start()

    def _write_s3cmd_config(self, name, url):
        hostport = urllib.parse.urlsplit(url).netloc
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(f"[default]\naccess_key = {ACCESS_KEY}\nsecret_key = {SECRET_KEY}\n"
                    f"host_base = {hostport}\nhost_bucket = {hostport}\nuse_https = False\n"
                    f"signature_v2 = False\nbucket_location = {REGION}\n"
                    "check_ssl_certificate = False\nguess_mime_type = False\n")
        return path

    def stop(self):
        self.stop_event.set()
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        self._servers.clear()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            for stream in (self._process.stdout, self._process.stderr):
                stream.close()
            self._process = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # addresses
    @property
    def url(self):
        return f"http://127.0.0.1:{self._servers['s3'].server_address[1]}"

    @property
    def other_url(self):
        return f"http://{self.other_host}:{self._servers['other'].server_address[1]}"

    @property
    def direct_url(self):
        return f"http://127.0.0.1:{self.s3rver_port}"

    def other_base(self, role):
        return self.other_url if role == "s3" else self.url

    def env(self):
        """The variables an AWS client reads, for this server."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_ENDPOINT_URL": self.url}

    # data
    def s3cmd(self, *args, direct=False, check=True):
        """Runs s3cmd against the proxy (or s3rver itself with direct=True)."""
        config = self.s3cmd_direct_config if direct else self.s3cmd_config
        run = subprocess.run([self.s3cmd_path, "-c", config, "--no-progress", *args],
                             capture_output=True, text=True, timeout=120)
        if check and run.returncode != 0:
            raise RuntimeError(f"s3cmd {' '.join(args)} failed ({run.returncode}): "
                               f"{run.stderr.strip()[-2000:]}")
        return run

    def put_tree(self, local_dir, prefix=""):
        """Every file under local_dir to s3://BUCKET/PREFIX<relative path>, by s3cmd."""
        self.s3cmd("put", "--recursive", "--no-preserve", local_dir.rstrip("/") + "/",
                   f"s3://{self.bucket}/{prefix}", direct=True)

    def put_file(self, local_path, key):
        self.s3cmd("put", "--no-preserve", local_path, f"s3://{self.bucket}/{key}",
                   direct=True)

    # faults and counters
    def stats(self):
        return self.faults.stats()

    def reset_stats(self):
        self.faults.reset_stats()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bucket", default="anisoscope-test")
    parser.add_argument("--fixtures", help="a folder put under the prefix")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--other-host", default="localhost")
    parser.add_argument("--throttle", type=float, metavar="BYTES_PER_S")
    parser.add_argument("--no-verify", action="store_true", help="skip SigV4 verification")
    parser.add_argument("--allow-unsigned", action="store_true")
    parser.add_argument("--fault", action="append", default=[], metavar="JSON")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    s3 = S3Server(bucket=args.bucket, port=args.port, other_host=args.other_host,
                  verify_signatures=not args.no_verify,
                  require_signature=not args.allow_unsigned, throttle=args.throttle,
                  verbose=args.verbose)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    s3.start()
    try:
        if args.fixtures:
            s3.put_tree(args.fixtures, args.prefix)
        for text in args.fault:
            s3.faults.add(json.loads(text))
        print(s3.url, flush=True)
        print(f"other {s3.other_url}", flush=True)
        print(f"direct {s3.direct_url}", flush=True)
        print(f"bucket {s3.bucket}", flush=True)
        done.wait()
    finally:
        s3.stop()


if __name__ == "__main__":
    main()
