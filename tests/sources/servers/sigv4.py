"""AWS Signature Version 4 for S3, as the verifying side computes it (stdlib only).

s3rver 3.7.1 checks only the access key of a SigV4 request, never its signature
(lib/middleware/authentication.js: "Signature version 4 calculation is unimplemented"), so
s3_server.py's proxy verifies signatures with this module before a request reaches s3rver.
Both the Authorization header form and the presigned query form are verified; S3's rules:
the path is URI-encoded once (not normalized), the query sorted and encoded, the payload
hash is the x-amz-content-sha256 header (UNSIGNED-PAYLOAD allowed).
"""
import datetime
import hashlib
import hmac
import urllib.parse

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 15 * 60


class SignatureError(Exception):
    """A request S3 would refuse: (status, S3 error code, message)."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def uri_encode(text, keep_slash):
    return urllib.parse.quote(text, safe="-_.~" + ("/" if keep_slash else ""))


def canonical_query(raw_query, drop=()):
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        key, _, value = part.partition("=")
        key, value = urllib.parse.unquote(key), urllib.parse.unquote(value)
        if key in drop:
            continue
        pairs.append((uri_encode(key, False), uri_encode(value, False)))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def canonical_request(method, raw_path, raw_query, headers, signed_headers, payload_hash,
                      drop_query=()):
    """headers: {lowercase name: [values]}."""
    path = uri_encode(urllib.parse.unquote(raw_path), True) or "/"
    lines = []
    for name in signed_headers:
        values = headers.get(name)
        if values is None:
            raise SignatureError(403, "SignatureDoesNotMatch",
                                 f"signed header {name} is missing from the request")
        lines.append(f"{name}:" + ",".join(" ".join(v.split()) for v in values))
    return "\n".join([method, path, canonical_query(raw_query, drop_query), "\n".join(lines),
                      "", ";".join(signed_headers), payload_hash])


def signing_key(secret, date, region, service):
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def signature(secret, amz_date, scope, request_text):
    date, region, service, _ = scope.split("/")
    string_to_sign = "\n".join([ALGORITHM, amz_date, scope,
                                hashlib.sha256(request_text.encode()).hexdigest()])
    return hmac.new(signing_key(secret, date, region, service), string_to_sign.encode(),
                    hashlib.sha256).hexdigest()


def _parse_authorization(value):
    algorithm, _, rest = value.partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError(400, "InvalidArgument", f"unsupported authorization {algorithm}")
    fields = {}
    for part in rest.split(","):
        key, _, val = part.strip().partition("=")
        fields[key] = val
    try:
        return fields["Credential"], fields["SignedHeaders"].split(";"), fields["Signature"]
    except KeyError as missing:
        raise SignatureError(400, "AuthorizationHeaderMalformed", f"no {missing} field")


def _check_time(amz_date, now, expires=None):
    try:
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except ValueError:
        raise SignatureError(403, "AccessDenied", f"bad x-amz-date {amz_date!r}")
    delta = (now - when).total_seconds()
    if expires is not None:
        if delta > expires:
            raise SignatureError(403, "AccessDenied", "Request has expired")
    elif abs(delta) > MAX_SKEW_S:
        raise SignatureError(403, "RequestTimeTooSkewed",
                             "The difference between the request time and the current time "
                             "is too large.")


def verify(method, raw_path, raw_query, headers, body_sha256, keys, now=None):
    """Raises SignatureError unless the request carries a valid SigV4 signature.

    headers: {lowercase name: [values]}; body_sha256: hex digest of the body read;
    keys: {access key id: secret}; now: an aware datetime (default: the clock).
    Returns the access key id. An unsigned request raises AccessDenied."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    query = urllib.parse.parse_qs(raw_query, keep_blank_values=True)
    if "authorization" in headers:
        credential, signed, provided = _parse_authorization(headers["authorization"][0])
        amz_date = (headers.get("x-amz-date") or [""])[0]
        payload = (headers.get("x-amz-content-sha256") or [body_sha256])[0]
        if payload not in ("UNSIGNED-PAYLOAD",) and not payload.startswith("STREAMING-") \
                and payload != body_sha256:
            raise SignatureError(400, "XAmzContentSHA256Mismatch",
                                 "The provided 'x-amz-content-sha256' header does not match "
                                 "what was computed.")
        drop, expires = (), None
    elif query.get("X-Amz-Algorithm") == [ALGORITHM]:
        try:
            credential = query["X-Amz-Credential"][0]
            signed = query["X-Amz-SignedHeaders"][0].split(";")
            provided = query["X-Amz-Signature"][0]
            amz_date = query["X-Amz-Date"][0]
            expires = int(query["X-Amz-Expires"][0])
        except (KeyError, ValueError) as missing:
            raise SignatureError(400, "AuthorizationQueryParametersError", str(missing))
        payload = (headers.get("x-amz-content-sha256") or ["UNSIGNED-PAYLOAD"])[0]
        drop = ("X-Amz-Signature",)
    else:
        raise SignatureError(403, "AccessDenied", "Access Denied (the request is not signed)")
    key_id, _, scope = credential.partition("/")
    if key_id not in keys:
        raise SignatureError(403, "InvalidAccessKeyId",
                             "The AWS Access Key Id you provided does not exist in our records.")
    if "host" not in signed:
        raise SignatureError(403, "SignatureDoesNotMatch", "the host header is not signed")
    if scope.split("/")[0] != amz_date[:8] or len(scope.split("/")) != 4:
        raise SignatureError(403, "SignatureDoesNotMatch", f"bad credential scope {scope}")
    _check_time(amz_date, now, expires)
    text = canonical_request(method, raw_path, raw_query, headers, signed, payload, drop)
    want = signature(keys[key_id], amz_date, scope, text)
    if not hmac.compare_digest(want, provided):
        raise SignatureError(403, "SignatureDoesNotMatch",
                             "The request signature we calculated does not match the signature "
                             "you provided. Check your key and signing method.")
    return key_id
