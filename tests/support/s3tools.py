"""The S3 tests' server and its faults: the real S3 server that ``scripts/s3-up.sh`` started (moto's standalone
server on loopback), unique buckets per test, and :class:`FaultProxy`, a small HTTP proxy in front of it that
counts requests by kind and answers a chosen share of them with ``503 SlowDown`` or a reset connection.

The proxy is a true boundary (the network between a client and S3): the client under test speaks real S3 to
a real server through it, and the faults are the ones S3 itself sends under load.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import socket
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

STATE_DIR = Path(os.environ.get("CURATOR_S3_STATE", "/var/tmp/curator-s3"))
REQUIRE_S3 = os.environ.get("CURATOR_REQUIRE_S3") == "1"

#: What the tests put in the environment of S3 clients (moto accepts any key; these are not secrets).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "curator-test-key",
    "AWS_SECRET_ACCESS_KEY": "curator-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def endpoint() -> str:
    """The endpoint of the running S3 server; skips the test without one (fails with CURATOR_REQUIRE_S3=1,
    as in CI)."""
    path = STATE_DIR / "endpoint"
    url = path.read_text().strip() if path.exists() else ""
    if url:
        try:
            with socket.create_connection(tuple(urlsplit(url).netloc.split(":")), timeout=2):  # type: ignore[arg-type]
                return url
        except OSError:
            pass
    why = f"no S3 server answers (endpoint file {path}); start it with scripts/s3-up.sh"
    if REQUIRE_S3:
        pytest.fail(f"CURATOR_REQUIRE_S3=1 but {why}")
    pytest.skip(why)


def new_bucket(url: str) -> str:
    """A new, empty bucket on the server at ``url``."""
    import boto3

    name = f"curator-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=url, **_boto_credentials()).create_bucket(Bucket=name)
    return name


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


def client(url: str):  # type: ignore[no-untyped-def]
    """A boto3 S3 client for the server at ``url``."""
    import boto3

    return boto3.client("s3", endpoint_url=url, **_boto_credentials())


def s3_env(url: str) -> dict[str, str]:
    """The environment an S3 client of the code under test gets: the standard AWS variables."""
    return {**CREDENTIALS, "AWS_ENDPOINT_URL": url}


def request_kind(method: str, target: str) -> str:
    """``LIST`` (a listing of a bucket or of all buckets), ``GET``, ``HEAD``, ``PUT``, ``POST`` or ``DELETE``."""
    parts = urlsplit(target)
    key = parts.path.lstrip("/").partition("/")[2]
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "GET" and (not key or "list-type" in query or "delimiter" in query) and "uploads" not in query:
        return "LIST"
    return method


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body as it came: ``Content-Length`` bytes, or a chunked body (the AWS SDK streams uploads
    as ``aws-chunked`` with a checksum trailer) verbatim, chunks and trailer included, to forward as it is."""
    if "chunked" not in (handler.headers.get("Transfer-Encoding") or "").lower():
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else b""
    raw = bytearray()
    while True:
        line = handler.rfile.readline()
        raw += line
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        raw += handler.rfile.read(size + 2)  # the chunk and its CRLF
    while True:  # the trailer, up to its blank line
        line = handler.rfile.readline()
        raw += line
        if line in (b"\r\n", b"\n", b""):
            return bytes(raw)


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream``: counts requests by :func:`request_kind` and fails
    a ``fault_rate`` share of them (seeded), half as ``503 SlowDown`` and half as a reset connection.

    With ``keep_alive=False`` every answer closes its connection: a client never reuses one, so a reset
    always reaches the client's code (curl silently sends a request again once when a *reused* connection
    dies before any answer, which would hide that fault from a count of retries)."""

    def __init__(self, upstream: str, fault_rate: float = 0.0, seed: int = 0, keep_alive: bool = True) -> None:
        self.upstream = urlsplit(upstream).netloc
        self.fault_rate = fault_rate
        self.keep_alive = keep_alive
        self.random = random.Random(seed)
        self.counts: Counter[str] = Counter()
        #: The path (and query) of every LIST request, in order: which bucket and prefix each listing asked for.
        self.list_paths: list[str] = []
        self.faults: Counter[str] = Counter()
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _end_headers(self) -> None:
                if not proxy.keep_alive:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()

            def _any(self) -> None:
                body = _read_body(self)
                kind = request_kind(self.command, self.path)
                with proxy.lock:
                    proxy.counts[kind] += 1
                    if kind == "LIST":
                        proxy.list_paths.append(self.path)
                    roll = proxy.random.random()
                if roll < proxy.fault_rate / 2:
                    with proxy.lock:
                        proxy.faults["503"] += 1
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self._end_headers()
                    if self.command != "HEAD":  # a HEAD answer has no body, whatever its length says
                        with contextlib.suppress(OSError):  # the client may hang up first
                            self.wfile.write(SLOW_DOWN)
                    return
                if roll < proxy.fault_rate:
                    with proxy.lock:
                        proxy.faults["reset"] += 1
                    # SO_LINGER 0: close() sends a TCP RST, which the client sees as "connection reset".
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "expect")}
                upstream = http.client.HTTPConnection(proxy.upstream, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(name, value)
                    # A HEAD answer's length is the object's, not of the (empty) body.
                    length = answer.getheader("Content-Length") if self.command == "HEAD" else None
                    self.send_header("Content-Length", length or str(len(data)))
                    self._end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reset_counts(self) -> None:
        with self.lock:
            self.counts.clear()
            self.faults.clear()


@contextmanager
def fault_proxy(upstream: str, fault_rate: float = 0.0, seed: int = 0, keep_alive: bool = True) -> Iterator[FaultProxy]:
    """A running :class:`FaultProxy` for the duration of the block."""
    proxy = FaultProxy(upstream, fault_rate, seed, keep_alive)
    proxy.thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()


def upload_tree(url: str, local: Path, bucket: str, prefix: str) -> None:
    """Every file under ``local`` as an object ``prefix/<relative path>`` of ``bucket``."""
    s3 = client(url)
    for path in sorted(Path(local).rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local)}")


def object_tree(url: str, bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix/`` by the rest of its key (as :func:`helpers.read_tree` gives a local tree)."""
    s3 = client(url)
    out: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            key = item["Key"]
            if key.endswith("/"):  # a "directory marker" some writers make: no file
                continue
            out[key[len(prefix) + 1 :]] = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return dict(sorted(out.items()))
