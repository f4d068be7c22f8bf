"""S3 filesystems built on purpose: where each option comes from (first match wins: :func:`configure_s3` for the
bucket, for every bucket, the environment, the SDK's defaults), and the random start delay of array tasks."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..errors import OptionError, SettingError


@dataclass(frozen=True)
class S3Options:
    """Options of the S3 filesystem of one bucket; ``None`` leaves a field to the next source (in the order the
    module docstring gives).

    Args:
        endpoint_url: ``http(s)://host:port`` of an S3-compatible server (MinIO, Ceph, moto), None for AWS.
        region: the bucket's region.
        anonymous: no credentials (public buckets).
        max_attempts: attempts per request, the first included (1: no retry).
        retry_base: with ``retry_cap``, the wait before retry ``k`` (from 0) is uniform in
            ``[0, min(retry_cap, retry_base * 2**k))`` seconds (full jitter).
        retry_cap: the longest wait before a retry.
        connect_timeout: seconds (None: the SDK's, about 1).
        request_timeout: seconds (None: the SDK's, about 3).
    """

    endpoint_url: str | None = None
    region: str | None = None
    anonymous: bool | None = None
    max_attempts: int | None = None
    retry_base: float | None = None
    retry_cap: float | None = None
    connect_timeout: float | None = None
    request_timeout: float | None = None


_EVERY_BUCKET = ""
_OPTIONS: dict[str, S3Options] = {}  # bucket ("" for every bucket) -> what configure_s3 set
_LOCK = threading.Lock()
_RANDOM = random.SystemRandom()  # the same sequence in forked workers would retry them in step


def configure_s3(
    bucket: str | None = None,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    anonymous: bool | None = None,
    max_attempts: int | None = None,
    retry_base: float | None = None,
    retry_cap: float | None = None,
    connect_timeout: float | None = None,
    request_timeout: float | None = None,
) -> S3Options:
    """Set S3 options for ``bucket`` (None: every bucket) in this process, over the environment; each field
    given replaces what an earlier call set, None keeps it. Filesystems built before are dropped, so the next
    request uses the new options. Returns what is now set for that scope (see :func:`s3_options` for the
    options in effect). A bad value is an :class:`~curator_slurm.errors.OptionError`."""
    given = S3Options(
        endpoint_url, region, anonymous, max_attempts, retry_base, retry_cap, connect_timeout, request_timeout
    )
    _check(given)
    key = _EVERY_BUCKET if bucket is None else _bucket_name(bucket)
    with _LOCK:
        current = _OPTIONS.get(key, S3Options())
        changes = {
            f.name: getattr(given, f.name) for f in dataclasses.fields(given) if getattr(given, f.name) is not None
        }
        _OPTIONS[key] = dataclasses.replace(current, **changes)
        result = _OPTIONS[key]
    _changed()
    return result


def reset_s3() -> None:
    """Forget every option :func:`configure_s3` set and every S3 filesystem built: the next request reads the
    environment again (tests; a long-lived process whose AWS variables changed)."""
    with _LOCK:
        _OPTIONS.clear()
    _changed()


_GENERATION = [0]


def _changed() -> None:
    with _LOCK:
        _GENERATION[0] += 1


def options_generation() -> int:
    """A number that changes whenever :func:`configure_s3` or :func:`reset_s3` changes the options: S3
    filesystems built under another number are built again (:mod:`.paths`)."""
    with _LOCK:
        return _GENERATION[0]


def _bucket_name(bucket: str) -> str:
    name = bucket[len("s3://") :] if bucket.lower().startswith("s3://") else bucket
    name = name.strip("/").split("/", 1)[0]
    if not name or "@" in name:
        raise OptionError(f"configure_s3(bucket={bucket!r}): give a bucket name such as 'my-bucket' (no credentials)")
    return name


def _check(options: S3Options) -> None:
    if options.max_attempts is not None and (not isinstance(options.max_attempts, int) or options.max_attempts < 1):
        raise OptionError(f"max_attempts={options.max_attempts!r}: give the attempts per request, 1 or more")
    for name in ("retry_base", "retry_cap", "connect_timeout", "request_timeout"):
        value = getattr(options, name)
        if value is not None and (not isinstance(value, (int, float)) or not value >= 0 or value == float("inf")):
            raise OptionError(f"{name}={value!r}: give a finite number of seconds, 0 or more")
    url = options.endpoint_url
    if url is not None and ("@" in url or not url.strip()):
        raise OptionError(
            "endpoint_url: give the server as http(s)://host:port, without credentials (they belong in "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"
        )


def s3_options(bucket: str | None = None) -> S3Options:
    """The options in effect for ``bucket`` (None: a bucket with no options of its own), every retry field
    filled: :func:`configure_s3` for the bucket, then for every bucket, then the environment. What a run may
    record about its S3 setup: it holds no credentials."""
    from ..settings import s3_settings

    env = s3_settings()
    with _LOCK:
        layers = [_OPTIONS.get(_bucket_name(bucket)) if bucket else None, _OPTIONS.get(_EVERY_BUCKET)]
    merged: dict[str, Any] = {}
    for f in dataclasses.fields(S3Options):
        values = [getattr(layer, f.name) for layer in layers if layer is not None]
        values.append(getattr(env, f.name, None))
        merged[f.name] = next((v for v in values if v is not None), None)
    merged["anonymous"] = bool(merged["anonymous"])
    return S3Options(**merged)


def start_jitter(seconds: float | None = None) -> float:
    """Wait a random time, uniform in ``[0, seconds)``, and return it: the tasks of an array that start at
    once then reach the object store spread over that time, not in one burst (S3 answers bursts with
    ``SlowDown``). ``None`` reads ``CURATOR_S3_START_DELAY`` (default 0: no wait). A negative or infinite
    value is a :class:`~curator_slurm.errors.SettingError`."""
    if seconds is None:
        from ..settings import s3_settings

        seconds = s3_settings().start_delay
    if not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
        raise SettingError(f"start delay {seconds!r}: give a finite number of seconds, 0 or more")
    if seconds == 0:
        return 0.0
    delay = _RANDOM.uniform(0, seconds)
    time.sleep(delay)
    return delay


def backoff(attempt: int, base: float, cap: float) -> float:
    """The wait before retry number ``attempt`` (0 for the first): full jitter, uniform in
    ``[0, min(cap, base * 2**attempt))``."""
    return _RANDOM.uniform(0, min(cap, base * 2 ** min(attempt, 60)))
