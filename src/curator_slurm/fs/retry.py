"""Every request the layer makes to an object store, retried when the error is transient (exponential backoff, full
jitter), failing at once naming the URI and the fix when it is permanent, and counted per process."""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ..errors import CuratorError, InputError, OutputError

T = TypeVar("T")


class S3RetryError(CuratorError, OSError):
    """An object-store request kept failing with transient errors (throttling, resets, timeouts) for all its
    attempts; the message names the URI, the attempts and their errors. Retrying later may succeed."""


#: What each kind of operation is, for messages.
OPERATIONS = {
    "info": "looking up",
    "list": "listing",
    "open": "opening",
    "read": "reading",
    "upload": "uploading",
    "delete": "deleting",
    "mkdir": "creating the directory",
    "bucket": "looking up the bucket of",
    "region": "looking up the region of",
}

#: (reason, pattern) of transient errors, in the order tried; the reason is what :func:`s3_stats` counts.
TRANSIENT: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "throttled",
        re.compile(
            r"SLOW_DOWN|SlowDown|THROTTL|Throttl|TooManyRequests|RequestLimitExceeded|HTTP status (429|503)"
            r"|SERVICE_UNAVAILABLE|ServiceUnavailable"
        ),
    ),
    ("server error", re.compile(r"HTTP status 50[0-9]|INTERNAL_FAILURE|InternalError|INTERNAL_ERROR")),
    ("timeout", re.compile(r"curlCode: 28\b|Timeout was reached|REQUEST_TIMEOUT|RequestTimeout|timed out")),
    (
        "connection reset",
        re.compile(r"curlCode: (16|18|52|55|56|92)\b|Connection reset|Empty reply|Broken pipe|short read"),
    ),
    ("connection failed", re.compile(r"NETWORK_CONNECTION|curlCode: \d+")),
)

#: (kind, pattern) of permanent errors, tried before the transient ones.
PERMANENT: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "access",
        re.compile(
            r"ACCESS_DENIED|AccessDenied|INVALID_ACCESS_KEY_ID|InvalidAccessKeyId|SIGNATURE_DOES_NOT_MATCH"
            r"|SignatureDoesNotMatch|EXPIRED_TOKEN|ExpiredToken|InvalidToken|MISSING_AUTHENTICATION_TOKEN"
            r"|InvalidClientTokenId|HTTP status 40[13]"
        ),
    ),
    ("bucket", re.compile(r"NO_SUCH_BUCKET|NoSuchBucket|Bucket '[^']*' not found")),
    ("key", re.compile(r"NO_SUCH_KEY|NoSuchKey")),
)

_CODE = re.compile(r"AWS Error (\w+)(?: \(HTTP status (\d+)\))?")


def classify(error: BaseException) -> tuple[str, str] | None:
    """``("transient", reason)``, ``(kind, code)`` for a permanent error (kind ``access``, ``bucket`` or
    ``key``), or None for an error that is not an object store's answer."""
    if not isinstance(error, OSError) or isinstance(error, CuratorError):
        return None
    text = str(error)
    for kind, pattern in PERMANENT:
        if pattern.search(text):
            return kind, _code(text, kind)
    for reason, pattern in TRANSIENT:
        if pattern.search(text):
            return "transient", reason
    return None


def _code(text: str, default: str) -> str:
    """The AWS error code in pyarrow's message (``INVALID_ACCESS_KEY_ID``; ``HTTP 403`` when only the status
    is known, as for a HEAD), else ``default``."""
    found = _CODE.search(text)
    if found is None:
        return default
    return found.group(1) if found.group(1) != "UNKNOWN" or not found.group(2) else f"HTTP {found.group(2)}"


def bucket_of(uri: str) -> str:
    """The bucket (authority) of ``uri``: ``b`` of ``s3://b/k``."""
    return uri.split("://", 1)[-1].split("/", 1)[0]


def permanent_error(uri: str, kind: str, code: str, writing: bool) -> InputError | OutputError:
    """The error that tells the user what to fix, for a permanent answer of kind ``kind``."""
    bucket = bucket_of(uri)
    if kind == "access":
        action = "write to" if writing else "read"
        text = (
            f"{uri}: access denied ({code}); check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and "
            f"AWS_SESSION_TOKEN, or the profile AWS_PROFILE) and that they may {action} the bucket {bucket}"
        )
    elif kind == "bucket":
        text = f"{uri}: bucket {bucket} does not exist: create it or check the URI"
    else:
        text = f"{uri}: no such object; check the URI (or was it removed after the run started?)"
    return OutputError(text) if writing else InputError(text)


def call(uri: str, kind: str, operation: Callable[[], T], writing: bool = False) -> T:
    """``operation()`` (one request to the object store that serves ``uri``), attempted up to
    ``max_attempts`` times while it fails with a transient error, waiting with full jitter between attempts;
    a permanent error raises at once (:func:`permanent_error`), transient errors on every attempt raise
    :class:`S3RetryError`. ``kind`` is one of :data:`OPERATIONS`; every attempt and retry is counted."""
    from .s3 import backoff, s3_options

    reasons: Counter[str] = Counter()
    attempt, options = 0, None
    while True:
        _count("requests", kind)
        try:
            return operation()
        except OSError as e:
            found = classify(e)
            if found is None:
                raise
            what, detail = found
            if what != "transient":
                raise permanent_error(uri, what, detail, writing) from e
            reasons[detail] += 1
            if options is None:
                options = s3_options(bucket_of(uri) if uri.startswith("s3://") else None)
            assert options.max_attempts is not None and options.retry_base is not None
            if attempt + 1 >= options.max_attempts:
                _count("gave_up", kind)
                raise _exhausted(uri, kind, attempt + 1, reasons, options.endpoint_url, e) from e
            _count("retries", kind)
            _count("reasons", detail)
            time.sleep(backoff(attempt, options.retry_base, options.retry_cap or 0.0))
            attempt += 1


def _exhausted(
    uri: str, kind: str, attempts: int, reasons: Counter[str], endpoint: str | None, last: OSError
) -> S3RetryError:
    errors = ", ".join(f"{reason} x{n}" for reason, n in reasons.most_common())
    where = f" at {endpoint}" if endpoint else ""
    return S3RetryError(
        f"{uri}: {OPERATIONS.get(kind, kind)} failed {attempts} time(s) in a row ({errors}); gave up after "
        f"{attempts} attempt(s). The object store{where} is overloaded or unreachable: run fewer tasks at once, "
        "spread their start (CURATOR_S3_START_DELAY), allow more attempts (CURATOR_S3_MAX_ATTEMPTS), or check "
        f"AWS_ENDPOINT_URL. Last error: {last}"
    )


_STATS_LOCK = threading.Lock()
_TABLES = ("requests", "retries", "reasons", "gave_up")
_STATS: dict[str, Counter[str]] = {name: Counter() for name in _TABLES}
_STATS_PID = os.getpid()


def _count(table: str, name: str) -> None:
    global _STATS_PID
    with _STATS_LOCK:
        if os.getpid() != _STATS_PID:  # a forked child counts its own requests only
            for counter in _STATS.values():
                counter.clear()
            _STATS_PID = os.getpid()
        _STATS[table][name] += 1


def s3_stats() -> dict[str, Any]:
    """This process's object-store counts since it started (or since :func:`reset_s3_stats`), a JSON-ready
    dict: ``requests`` (attempts per operation kind, first attempts included: ``info``, ``list``, ``open``,
    ``read``, ``upload``, ``delete``, ``bucket``), ``retries`` (retries per kind), ``reasons`` (retries per
    cause: ``throttled``, ``server error``, ``timeout``, ``connection reset``, ``connection failed``),
    ``gave_up`` (operations that failed on every attempt, per kind), and the totals ``requests_total``,
    ``retries_total``. An attempt is one request, but a listing (one request per 1,000 keys) and a multipart
    upload (one per part) may send several."""
    with _STATS_LOCK:
        pid_changed = os.getpid() != _STATS_PID
        tables = {name: ({} if pid_changed else dict(sorted(_STATS[name].items()))) for name in _TABLES}
    return _with_totals(tables)


def reset_s3_stats() -> dict[str, Any]:
    """:func:`s3_stats`, then zero the counts (e.g. after each task, to report the task's own)."""
    with _STATS_LOCK:
        tables = {name: dict(sorted(_STATS[name].items())) for name in _TABLES}
        if os.getpid() != _STATS_PID:
            tables = {name: {} for name in _TABLES}
        for counter in _STATS.values():
            counter.clear()
    return _with_totals(tables)


def add_s3_stats(stats: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of several :func:`s3_stats` results (the processes or tasks of one run)."""
    total: dict[str, Counter[str]] = {name: Counter() for name in _TABLES}
    for one in stats:
        for name in _TABLES:
            total[name].update(one.get(name) or {})
    return _with_totals({name: dict(sorted(c.items())) for name, c in total.items()})


def _with_totals(tables: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {
        **tables,
        "requests_total": sum(tables["requests"].values()),
        "retries_total": sum(tables["retries"].values()),
    }
