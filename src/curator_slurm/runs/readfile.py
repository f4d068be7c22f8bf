"""The one way a reader of a run directory opens a file: a regular file of bounded size (a FIFO, a device or a
directory in its place is refused, never waited on or read without end), and values checked for their type."""

from __future__ import annotations

import json
import logging
import math
import os
import stat
from typing import Any

from curator_slurm.errors import RunDirError

logger = logging.getLogger(__name__)

#: The largest file of each kind a reader reads: a ledger file (about 1 KB a record) or a keys file ...
LEDGER_BYTES = 4 << 30
#: ... a JSON file a run writes once (run.json, sources.json, plan.json, submissions.jsonl, upstreams.json) ...
JSON_BYTES = 256 << 20
#: ... and a small file many processes rewrite (progress files, liveness markers, summaries, refusals, claims).
SMALL_BYTES = 16 << 20


class UnreadableFileError(RunDirError):
    """A file of a run directory that is not a regular file, or larger than such a file can be."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str, limit: int, start: int = 0, length: int | None = None) -> bytes:
    """The bytes of ``path`` (from ``start``, at most ``length``), after checking that it is a regular file of
    at most ``limit`` bytes; else :class:`UnreadableFileError` naming it (``OSError`` when it cannot be opened).
    Opened without blocking, so a FIFO in its place is refused at once, and never read past ``limit``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFileError(f"{path}: {_kind(st.st_mode)}, not a regular file; not read")
        if st.st_size > limit:
            raise UnreadableFileError(f"{path}: {st.st_size} bytes, more than such a file holds ({limit}); not read")
        end = limit + 1 if length is None else min(start + length, limit + 1)
        chunks, at = [], start
        while at < end:  # the expected size (and one byte more, to see growth) first: one read, no copy
            want = min(end, max(st.st_size + 1, at + (1 << 20))) - at
            chunk = os.pread(fd, min(want, 1 << 30), at)
            if not chunk:
                break
            chunks.append(chunk)
            at += len(chunk)
        if at > limit:  # grew past the bound while we read
            raise UnreadableFileError(f"{path}: more than {limit} bytes; not read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str, limit: int = SMALL_BYTES) -> str:
    """:func:`read_bytes` of ``path`` as UTF-8 text (``UnicodeDecodeError``, a ``ValueError``, when it is not)."""
    return read_bytes(path, limit).decode("utf-8")


def load_json(path: str, limit: int = SMALL_BYTES) -> Any:
    """The JSON value ``path`` holds (read as :func:`read_bytes` reads it): ``OSError`` when it cannot be
    read, ``ValueError`` when it is not UTF-8 JSON (``UnreadableFileError`` is both a ``RunDirError`` and
    neither: callers that skip damaged files catch it too)."""
    return json.loads(read_bytes(path, limit).decode("utf-8"))


def load_object(path: str, limit: int = SMALL_BYTES) -> dict[str, Any] | None:
    """The JSON object ``path`` holds; None (with a warning naming it) when it is unreadable, damaged, or not
    an object; None without one when it is gone."""
    try:
        value = load_json(path, limit)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnreadableFileError) as e:
        logger.warning(f"{path}: skipped, unreadable ({e})")
        return None
    if not isinstance(value, dict):
        logger.warning(f"{path}: skipped, holds a JSON {type(value).__name__}, not an object")
        return None
    return value


def number(value: Any, default: float | None = None) -> float | None:
    """``value`` when it is a finite number (not a bool, not a string), else ``default``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return float(value)


def count(value: Any, default: int | None = 0) -> int | None:
    """``value`` when it is a whole number of at least 0 (not a bool, not a string), else ``default``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return default
    return value


def text(value: Any) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


__all__ = [
    "JSON_BYTES",
    "LEDGER_BYTES",
    "SMALL_BYTES",
    "UnreadableFileError",
    "count",
    "load_json",
    "load_object",
    "number",
    "read_bytes",
    "read_text",
    "text",
]
