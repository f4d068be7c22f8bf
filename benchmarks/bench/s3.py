"""S3 for rows s1-s2: the shared local server that ``scripts/s3-up.sh`` started (its endpoint in
``$CURATOR_S3_STATE/endpoint``, default ``/var/tmp/curator-s3``), a fresh bucket on it per bench run (deleted at
the end), a private seeded server for the listing rows (``seeded_s3.py``), the standard AWS variables the code
under test is configured by, and requests counted by kind from a server's log (one line per request)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

STATE_DIR = Path(os.environ.get("CURATOR_S3_STATE", "/var/tmp/curator-s3"))
#: What S3 clients get (moto accepts any key; these are the tests' values, not secrets).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "curator-test-key",
    "AWS_SECRET_ACCESS_KEY": "curator-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
SEEDED_SERVER = Path(__file__).resolve().parent / "seeded_s3.py"


def aws_env(url: str) -> dict[str, str]:
    """The environment that points pyarrow, boto3 and the package at the server ``url``."""
    return {**CREDENTIALS, "AWS_ENDPOINT_URL": url}


def answers(url: str) -> bool:
    try:
        with socket.create_connection((urlsplit(url).hostname, urlsplit(url).port or 80), timeout=2):
            return True
    except OSError:
        return False


def shared_endpoint() -> tuple[str | None, str]:
    """(endpoint, "") of the shared server when it answers, else (None, why not)."""
    path = STATE_DIR / "endpoint"
    url = path.read_text().strip() if path.exists() else ""
    if not url:
        return None, f"no S3 server (no endpoint in {path}; start one with `make s3-up`)"
    if not answers(url):
        return None, f"no S3 server answers at {url} (start it with `make s3-up`)"
    try:
        import boto3  # noqa: F401
    except ImportError:
        return None, "boto3 is not installed (the dev extra has it)"
    return url, ""


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the block (the in-process rows' S3 clients read them), then as before."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def client(url: str):  # type: ignore[no-untyped-def]
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        config=Config(max_pool_connections=16),
    )


@contextlib.contextmanager
def fresh_bucket(url: str) -> Iterator[str]:
    """A new bucket on the server at ``url`` for the block; every object in it and the bucket deleted after
    (moto keeps them in memory)."""
    s3 = client(url)
    name = f"curator-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        keys = [
            {"Key": o["Key"]}
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name)
            for o in page.get("Contents", [])
        ]
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=name, Delete={"Objects": keys[i : i + 1000], "Quiet": True})
        s3.delete_bucket(Bucket=name)


def upload(url: str, bucket: str, prefix: str, files: list[Path]) -> float:
    """Put ``files`` under ``prefix`` (their names kept), eight at a time; the seconds it took."""
    s3 = client(url)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda f: s3.upload_file(str(f), bucket, f"{prefix}/{f.name}"), files))
    return time.perf_counter() - start


_REQUEST = re.compile(r"(GET|HEAD|PUT|POST|DELETE) (/\S*) HTTP/")  # werkzeug may colour the method


class RequestLog:
    """The requests a server logged (werkzeug's one line per request) after a mark, counted by kind: LIST (a
    bucket listing), GET (an object), HEAD, PUT, POST, DELETE. Only lines naming ``bucket`` count, so other
    clients of a shared server are left out."""

    def __init__(self, path: Path, bucket: str) -> None:
        self.path = path
        self.bucket = bucket
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def counts(self) -> Counter[str]:
        kinds: Counter[str] = Counter()
        if not self.path.exists():
            return kinds
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode("utf-8", "replace")
        for match in _REQUEST.finditer(text):
            method, target = match.groups()
            if not target.startswith(f"/{self.bucket}"):
                continue
            key = target.split("?", 1)[0][len(self.bucket) + 2 :]
            kinds["LIST" if method == "GET" and not key else method] += 1
        return kinds

    def summary(self) -> str:
        """The counts as text (:func:`describe`), or why there are none."""
        if not self.path.exists():
            return f"not counted (no server log at {self.path})"
        return describe(self.counts())


def describe(kinds: Counter[str]) -> str:
    order = ("LIST", "HEAD", "GET", "PUT", "POST", "DELETE")
    return ", ".join(f"{kinds[k]:,} {k}" for k in order if kinds[k]) or "no request"


@dataclass
class SeededServer:
    """A private moto server holding ``objects`` objects under ``s3://bucket/prefix``; ``log`` is its request
    log, ``seed_seconds`` how long making the objects took inside it."""

    url: str
    bucket: str
    prefix: str
    objects: int
    seed_seconds: float
    log: RequestLog

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def seeded_unavailable() -> str:
    """Why a private seeded server cannot run here ("" when it can)."""
    import importlib.util

    for module in ("moto", "werkzeug", "boto3"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (the dev extra has moto[server] and boto3)"
    return ""


@contextlib.contextmanager
def seeded_server(work: Path, objects: int, timeout: float = 120.0) -> Iterator[SeededServer]:
    """:data:`SEEDED_SERVER` started with ``objects`` objects, for the block; stopped (its own pid) after."""
    bucket, prefix = f"curator-bench-{uuid.uuid4().hex[:8]}", "in"
    log_path = work / "seeded-s3.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(SEEDED_SERVER), bucket, prefix, str(objects)],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    try:
        ready = _read_ready(proc, timeout)
        if isinstance(ready, str):
            proc.kill()
            proc.wait()
            lines = log_path.read_text(errors="replace").strip().splitlines() or ["nothing on its standard error"]
            raise RuntimeError(f"the seeded S3 server ({SEEDED_SERVER.name}) {ready}: {lines[-1]}")
        port, seconds = ready
        server = SeededServer(
            f"http://127.0.0.1:{port}", bucket, prefix, objects, seconds, RequestLog(log_path, bucket)
        )
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def _read_ready(proc: subprocess.Popen[str], timeout: float) -> tuple[int, float] | str:
    """The port and seeding seconds the server prints once it serves, or what went wrong."""
    assert proc.stdout is not None
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        line = pool.submit(proc.stdout.readline)
        try:
            text = line.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            proc.kill()  # unblocks the readline
            return f"did not start within {timeout:.0f} s"
    parts = text.split()
    if len(parts) != 3 or parts[0] != "ready":
        return f"exited with code {proc.wait()}" if not text else f"printed {text.strip()!r}"
    return int(parts[1]), float(parts[2])
