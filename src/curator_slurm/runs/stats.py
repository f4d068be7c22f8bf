"""Per-process stats files, ``<run dir>/stats/<host>-<pid>.json``: per stage, the source tasks, documents in and out,
seconds, and the distributions of document lengths (UTF-8 bytes) and tokens in fixed log2 buckets, so that files
merge exactly by addition (per phase, per workflow). The format is in docs/reference.md, "Stats files"."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from typing import Any

import numpy as np
import pyarrow as pa

#: The directory of a run directory that holds the stats files.
STATS_DIR = "stats"
#: The format's version (``version`` in every file).
VERSION = 1
#: Bucket k holds the values whose bit length is k: 0 for 0, then [2**(k-1), 2**k).
BUCKETS = 64


def histogram(values: np.ndarray) -> np.ndarray:
    """The log2 bucket counts (:data:`BUCKETS` of them) of non-negative integer ``values``."""
    _, exponents = np.frexp(values.astype(np.float64))  # v = m * 2**e with m in [0.5, 1): e is v's bit length
    return np.bincount(exponents, minlength=BUCKETS)[:BUCKETS].astype(np.int64, copy=False)


def bucket_range(k: int) -> tuple[int, int]:
    """The values bucket ``k`` holds, ``[low, high)``."""
    return (0, 1) if k == 0 else (1 << (k - 1), 1 << k)


def text_lengths(task: Any) -> np.ndarray | None:
    """The UTF-8 byte lengths of the ``text`` column of a document batch, from its offsets (no text is read; a
    null is 0); None for any other task."""
    table = getattr(task, "data", None)
    if not isinstance(table, pa.Table):
        return None
    at = table.schema.get_field_index("text")
    if at < 0:
        return None
    column = table.column(at)
    kind: Any = np.int32 if column.type == pa.string() else np.int64 if column.type == pa.large_string() else None
    if kind is None:
        return None
    size = np.dtype(kind).itemsize
    parts = [np.diff(np.frombuffer(c.buffers()[1], kind, len(c) + 1, c.offset * size)) for c in column.iterchunks()]
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else None


#: Lengths a stage keeps before they are folded into its histogram (bounded memory, few numpy calls).
FOLD = 1 << 16


def note_output(stats: Any, task: Any) -> None:
    """Add an output ``task`` of a stage to its ``stats``' distributions: the lengths of a document batch's
    texts (kept, then folded into log2 buckets by :func:`fold`), the per-document token counts a token writer
    put in its file group (``token_histogram``)."""
    lengths = text_lengths(task)
    if lengths is not None:
        pending = stats.pending
        pending.append(lengths)
        stats.pending_rows += len(lengths)
        if stats.pending_rows >= FOLD:
            fold(stats)
        return
    tokens = task.metadata.get("token_histogram") if hasattr(task, "metadata") else None
    if tokens:
        counts = np.zeros(BUCKETS, np.int64)
        counts[: len(tokens)] = tokens
        stats.tokens = counts if stats.tokens is None else stats.tokens + counts


def fold(stats: Any) -> None:
    """Fold a stage's kept lengths into its length histogram."""
    if not stats.pending:
        return
    values = stats.pending[0] if len(stats.pending) == 1 else np.concatenate(stats.pending)
    stats.pending.clear()
    stats.pending_rows = 0
    counts = histogram(values)
    stats.lengths = counts if stats.lengths is None else stats.lengths + counts


def _trim(counts: np.ndarray | None) -> list[int]:
    if counts is None:
        return []
    nonzero = np.flatnonzero(counts)
    return [int(c) for c in counts[: nonzero[-1] + 1]] if len(nonzero) else []


class _Stage:
    """One stage's sums in a stats file, with its lengths not folded yet (as :func:`fold` takes them)."""

    def __init__(self, name: str) -> None:
        self.name, self.tasks, self.docs_in, self.docs_out, self.seconds = name, 0, 0, 0, 0.0
        self.lengths: np.ndarray | None = None
        self.tokens: np.ndarray | None = None
        self.pending: list[np.ndarray] = []
        self.pending_rows = 0


class StatsFile:
    """One process's stats file: :meth:`add` the stage stats of each done source task, written (atomically) at
    most every ``interval`` seconds and at :meth:`close`. Best effort: a run directory that cannot take it
    loses stats, never work.

    Args:
        run_dir: the run directory.
        shard: the shard's label (``3/16``).
        job: the Slurm array task or job id, None outside Slurm.
        interval: seconds between two writes at most.
    """

    def __init__(self, run_dir: str, shard: str, job: str | None, interval: float) -> None:
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.directory = os.path.join(run_dir, STATS_DIR)
        self.path = os.path.join(self.directory, f"{self.host}-{self.pid}.json")
        # The first write waits an interval too: a short process writes once, as it ends.
        self.interval, self.next, self.dirty = interval, time.monotonic() + interval, False
        self.data: dict[str, Any] = {"version": VERSION, "host": self.host, "pid": self.pid, "shard": shard,
                                     "job": job, "tasks": 0, "seconds": 0.0, "stages": []}  # fmt: skip
        self.stages: dict[str, _Stage] = {}

    def add(self, stats: Sequence[Any], seconds: float) -> None:
        self.data["tasks"] += 1
        self.data["seconds"] += seconds
        for s in stats:
            entry = self.stages.get(s.name)
            if entry is None:
                entry = self.stages[s.name] = _Stage(s.name)
            entry.tasks += 1
            entry.docs_in += s.rows_in
            entry.docs_out += s.rows_out
            entry.seconds += s.seconds
            entry.pending += s.pending  # folded in bulk: a task's few documents cost no numpy call of their own
            entry.pending_rows += s.pending_rows
            if entry.pending_rows >= FOLD:
                fold(entry)
            for key in ("lengths", "tokens"):
                counts = getattr(s, key, None)
                if counts is not None:
                    mine = getattr(entry, key)
                    setattr(entry, key, counts.copy() if mine is None else mine + counts)
        self.dirty = True
        if time.monotonic() >= self.next:
            self.write()

    def write(self) -> None:
        self.next, self.dirty = time.monotonic() + self.interval, False
        for entry in self.stages.values():
            fold(entry)
        stages = [{"stage": e.name, "tasks": e.tasks, "docs_in": e.docs_in, "docs_out": e.docs_out,
                   "seconds": round(e.seconds, 4), "length_log2": _trim(e.lengths), "token_log2": _trim(e.tokens)}
                  for e in self.stages.values()]  # fmt: skip
        data = {**self.data, "seconds": round(self.data["seconds"], 4), "stages": stages}
        temporary = os.path.join(self.directory, f".{self.host}-{self.pid}.tmp")
        with suppress(OSError):
            os.makedirs(self.directory, exist_ok=True)
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(data, f, separators=(",", ":"))
            os.replace(temporary, self.path)

    def close(self) -> None:
        if self.dirty:
            self.write()


def merge_stats(files: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Stats files (or merged stats) added together, stage by stage in order of first appearance: the counts,
    seconds and bucket counts summed; ``files`` how many went in."""
    out: dict[str, Any] = {"version": VERSION, "files": 0, "tasks": 0, "seconds": 0.0, "stages": []}
    stages: dict[str, dict[str, Any]] = {}
    for data in files:
        out["files"] += int(data.get("files", 1))
        out["tasks"] += int(data.get("tasks", 0))
        out["seconds"] += float(data.get("seconds", 0.0))
        for s in data.get("stages") or []:
            entry = stages.get(s["stage"])
            if entry is None:
                entry = stages[s["stage"]] = {"stage": s["stage"], "tasks": 0, "docs_in": 0, "docs_out": 0,
                                              "seconds": 0.0, "length_log2": [], "token_log2": []}  # fmt: skip
                out["stages"].append(entry)
            for key in ("tasks", "docs_in", "docs_out"):
                entry[key] += int(s.get(key, 0))
            entry["seconds"] += float(s.get("seconds", 0.0))
            for key in ("length_log2", "token_log2"):
                entry[key] = _add_lists(entry[key], s.get(key) or [])
    out["seconds"] = round(out["seconds"], 4)
    return out


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return [int(x) + (int(shorter[i]) if i < len(shorter) else 0) for i, x in enumerate(longer)]


def read_stats(run_dir: str) -> dict[str, Any] | None:
    """Every stats file of ``run_dir`` merged (:func:`merge_stats`); None when it has none. A file that is not
    a regular file, not JSON or of another version is left out."""
    directory = os.path.join(run_dir, STATS_DIR)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return None
    found = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("stages"), list):
            found.append(data)
    return merge_stats(found) if found else None


__all__ = ["BUCKETS", "STATS_DIR", "StatsFile", "bucket_range", "fold", "histogram", "merge_stats", "note_output",
           "read_stats", "text_lengths"]  # fmt: skip
