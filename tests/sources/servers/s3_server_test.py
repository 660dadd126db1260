#!/usr/bin/python3
"""s3_server.py: s3rver (npm) started on a free port, filled and read back by Debian's s3cmd
through the SigV4-verifying proxy; AWS's published SigV4 examples against sigv4.py; each
proxy fault as a signed client meets it. Missing node, npm modules or s3cmd fail in CI
(CI=true) and skip elsewhere."""
import datetime
import hashlib
import html
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prerequisites  # noqa: E402
import sigv4  # noqa: E402
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUCKET = "ckpt"
WEIGHTS = hashlib.sha256(b"seed").digest() * 4000  # 128000 bytes
EMPTY = hashlib.sha256(b"").hexdigest()


def signed(url, method="GET", headers=None, secret=SECRET_KEY, body=b"", timeout=10):
    """(status, headers, body) of a SigV4-signed request (header form), no redirects."""
    parts = urllib.parse.urlsplit(url)
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    headers = dict(headers or {})
    headers.update({"Host": parts.netloc, "x-amz-date": amz_date,
                    "x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
    lower = {k.lower(): [v] for k, v in headers.items()}
    names = sorted(lower)
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    text = sigv4.canonical_request(method, parts.path, parts.query, lower, names,
                                   lower["x-amz-content-sha256"][0])
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, "
                                f"Signature={sigv4.signature(secret, amz_date, scope, text)}")
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, parts.path + ("?" + parts.query if parts.query else ""),
                     body=body or None, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


class AwsExamplesTest(unittest.TestCase):
    """sigv4.py against the examples of AWS's "Signature Calculations for the Authorization
    Header" and "Query String Authentication" pages (key AKIAIOSFODNN7EXAMPLE)."""
    KEYS = {"AKIAIOSFODNN7EXAMPLE": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    WHEN = datetime.datetime(2013, 5, 24, 0, 5, tzinfo=datetime.timezone.utc)
    SCOPE = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"

    def header_request(self, path, query, extra, signed_names, signature):
        headers = {"host": ["examplebucket.s3.amazonaws.com"], "x-amz-date": ["20130524T000000Z"],
                   "x-amz-content-sha256": [EMPTY], **extra}
        headers["authorization"] = [f"AWS4-HMAC-SHA256 Credential={self.SCOPE},"
                                    f"SignedHeaders={signed_names},Signature={signature}"]
        return sigv4.verify("GET", path, query, headers, EMPTY, self.KEYS, self.WHEN)

    def test_get_object_example(self):
        self.header_request("/test.txt", "", {"range": ["bytes=0-9"]},
                            "host;range;x-amz-content-sha256;x-amz-date",
                            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")

    def test_list_objects_example(self):
        self.header_request("/", "max-keys=2&prefix=J", {},
                            "host;x-amz-content-sha256;x-amz-date",
                            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")

    def test_presigned_url_example(self):
        query = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"
                 "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"
                 "X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
                 "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
        sigv4.verify("GET", "/test.txt", query, {"host": ["examplebucket.s3.amazonaws.com"]},
                     EMPTY, self.KEYS, self.WHEN)

    def test_a_changed_byte_is_refused(self):
        with self.assertRaises(sigv4.SignatureError) as caught:
            self.header_request("/test.txt", "", {"range": ["bytes=0-8"]},
                                "host;range;x-amz-content-sha256;x-amz-date",
                                "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        self.assertEqual(caught.exception.code, "SignatureDoesNotMatch")


class S3ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        prerequisites.node()
        prerequisites.npm_module("s3rver")
        prerequisites.s3cmd()
        cls.tmp = tempfile.mkdtemp(prefix="s3-server-test-")
        cls.fixtures = os.path.join(cls.tmp, "run")
        for step in ("step0", "step1000"):
            os.makedirs(os.path.join(cls.fixtures, step))
            with open(os.path.join(cls.fixtures, step, "model.safetensors"), "wb") as f:
                f.write(WEIGHTS)
            with open(os.path.join(cls.fixtures, step, "config.json"), "w") as f:
                f.write(json.dumps({"step": step}) + "\n")
        started = time.monotonic()
        cls.s3 = S3Server(bucket=BUCKET).start()
        cls.s3.put_tree(cls.fixtures, "runs/a/")
        cls.start_seconds = time.monotonic() - started

    @classmethod
    def tearDownClass(cls):
        cls.s3.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.s3.faults.clear()
        self.s3.reset_stats()

    def key_url(self, key, base=None):
        return f"{base or self.s3.url}/{BUCKET}/{key}"

    def control(self, rule):
        request = urllib.request.Request(f"{self.s3.url}/_control", method="POST",
                                         data=json.dumps(rule).encode())
        return json.loads(urllib.request.urlopen(request).read())

    def test_s3cmd_round_trip_through_the_verifying_proxy(self):
        listed = self.s3.s3cmd("ls", "-r", f"s3://{BUCKET}/runs/a/").stdout
        for step in ("step0", "step1000"):
            self.assertIn(f"s3://{BUCKET}/runs/a/{step}/model.safetensors", listed)
        self.assertIn(str(len(WEIGHTS)), listed)
        target = os.path.join(self.tmp, "got")
        self.s3.s3cmd("get", "--force", f"s3://{BUCKET}/runs/a/step1000/model.safetensors",
                      target)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), WEIGHTS)
        stats = self.s3.stats()["s3"]
        entry = stats[f"/{BUCKET}/runs/a/step1000/model.safetensors"]
        self.assertEqual(entry["requests"], entry["authorization"])
        self.assertEqual(sum((v["faults"] for v in stats.values()), []), [])  # all verified

    def test_signatures_are_checked_by_the_proxy_not_by_s3rver(self):
        key = "runs/a/step0/config.json"
        self.assertEqual(signed(self.key_url(key))[0], 200)
        status, _, body = signed(self.key_url(key), secret="WRONG")
        self.assertEqual(status, 403)
        self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", body)
        self.assertEqual(signed(self.key_url(key, self.s3.direct_url), secret="WRONG")[0], 200)
        status, _, body = signed(self.key_url(key), headers={"Range": "bytes=0-1"})
        self.assertEqual((status, body), (206, b'{"'))
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(self.key_url(key))
        self.assertEqual(caught.exception.code, 403)
        self.assertIn(b"AccessDenied", caught.exception.read())
        caught.exception.close()

    def test_list_objects_v2_and_its_lies(self):
        listing = f"{self.s3.url}/{BUCKET}?list-type=2&prefix=runs%2Fa%2F"
        status, _, honest = signed(listing)
        self.assertEqual(status, 200)
        self.assertIn(b"<KeyCount>4</KeyCount>", honest)
        self.control([{"kind": "listing_size", "file": "runs/a/step0/model.safetensors",
                       "size": 10**12},
                      {"kind": "listing_hash", "file": "runs/a/step1000/model.safetensors"},
                      {"kind": "listing_extra", "names": ["runs/a/../x", "/abs",
                                                          "runs/a/step0/../../b"]}])
        status, _, lying = signed(listing)
        self.assertIn(b"<Size>1000000000000</Size>", lying)
        self.assertIn(hashlib.md5(b"wrong").hexdigest().encode(), lying)
        self.assertIn(b"<KeyCount>7</KeyCount>", lying)
        for name in (b"runs/a/../x", b"/abs", b"runs/a/step0/../../b"):
            self.assertIn(b"<Key>" + name + b"</Key>", lying)
        status, _, body = signed(self.key_url("runs/a/../x"))  # a client that keeps ".."
        self.assertEqual((status, body), (200, b"hostile\n"))

    def test_list_objects_v2_pages_by_continuation_token(self):
        keys, token, pages = [], None, 0
        while True:
            query = [("list-type", "2"), ("max-keys", "1"), ("prefix", "runs/a/")]
            if token:
                query.append(("continuation-token", token))
            status, _, body = signed(f"{self.s3.url}/{BUCKET}?"
                                     + urllib.parse.urlencode(sorted(query)))
            self.assertEqual(status, 200, body)
            pages += 1
            keys += re.findall(r"<Key>(.*?)</Key>", body.decode())
            found = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>",
                              body.decode())
            if not found:
                break
            token = html.unescape(found.group(1))
        self.assertEqual(pages, 4)
        self.assertEqual(keys, [f"runs/a/{step}/{name}" for step in ("step0", "step1000")
                                for name in ("config.json", "model.safetensors")])

    def test_503_then_success_and_429_with_retry_after(self):
        key = self.key_url("runs/a/step0/config.json")
        self.control({"kind": "status", "status": 503, "times": 2})
        self.control({"kind": "status", "status": 429, "retry_after": 2, "times": 1})
        first, second, third, fourth = (signed(key) for _ in range(4))
        self.assertEqual((first[0], second[0], third[0], fourth[0]), (503, 503, 429, 200))
        self.assertIn(b"<Code>SlowDown</Code>", first[2])
        self.assertEqual(third[1]["Retry-After"], "2")

    def test_cut_once_then_range_resume(self):
        key = self.key_url("runs/a/step0/model.safetensors")
        self.control({"kind": "cut", "after_bytes": 50_000, "match": "*/model.safetensors"})
        with self.assertRaises((ConnectionResetError, http.client.IncompleteRead)):
            signed(key)
        status, headers, rest = signed(key, headers={"Range": "bytes=50000-"})
        self.assertEqual(status, 206)
        self.assertEqual(WEIGHTS[:50_000] + rest, WEIGHTS)
        entry = self.s3.stats()["s3"][f"/{BUCKET}/runs/a/step0/model.safetensors"]
        self.assertEqual((entry["faults"], entry["ranges"]), (["cut"], ["bytes=50000-"]))

    def test_truncate_stall_corrupt_throttle(self):
        key = self.key_url("runs/a/step1000/model.safetensors")
        self.control({"kind": "truncate", "after_bytes": 1000})
        with self.assertRaises(http.client.IncompleteRead):
            signed(key)
        self.control({"kind": "corrupt", "offset": 60_000})
        status, _, body = signed(key, headers={"Range": "bytes=59990-60009"})
        self.assertEqual(status, 206)
        self.assertEqual(body[10], WEIGHTS[60_000] ^ 0xFF)
        self.assertEqual(body[:10] + body[11:], WEIGHTS[59_990:60_000] + WEIGHTS[60_001:60_010])
        self.control({"kind": "throttle", "bytes_per_second": 400_000, "times": 1})
        started = time.monotonic()
        self.assertEqual(signed(key)[2], WEIGHTS)
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        self.control({"kind": "stall", "seconds": 2, "after_bytes": 10})
        with self.assertRaises((socket.timeout, TimeoutError)):
            signed(key, timeout=0.5)

    def test_redirect_to_another_host_records_the_authorization(self):
        self.control({"kind": "redirect", "match": "*/config.json"})
        status, headers, body = signed(self.key_url("runs/a/step0/config.json"))
        self.assertEqual(status, 307)
        self.assertIn(b"<Code>TemporaryRedirect</Code>", body)
        location = headers["Location"]
        self.assertTrue(location.startswith(self.s3.other_url), location)
        self.assertEqual(signed(location)[0], 200)
        other = self.s3.stats()["other"][f"/{BUCKET}/runs/a/step0/config.json"]
        self.assertEqual(other["authorization"], 1)

    def test_script_prints_its_url(self):
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "s3_server.py"),
                                 "--bucket", "scripted", "--fixtures", self.fixtures,
                                 "--prefix", "p/"], stdout=subprocess.PIPE, text=True)
        try:
            url = proc.stdout.readline().strip()
            self.assertTrue(url.startswith("http://127.0.0.1:"), url)
            status, _, body = signed(f"{url}/scripted/p/step0/model.safetensors")
            self.assertEqual((status, body), (200, WEIGHTS))
        finally:
            proc.terminate()
            proc.wait(15)
            proc.stdout.close()


if __name__ == "__main__":
    unittest.main()
