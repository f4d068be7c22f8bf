"""Summaries of ledger files, kept by their writers, so that `status` reads a few kilobytes per ledger file instead
of every record: ``ledger-summaries/<ledger file>.json`` (the sums of the records, and how many bytes of the file
they cover) and ``<ledger file>.ids`` (one 8-byte key per done record, in record order).

A summary is used only when it is exact: it covers the ledger file's complete lines (a torn last line is not a
record), its keys and the bytes before its end check out (digests), and none of its keys is among another
record's (a task done twice, in one file or two, or two ids with one key). Any other file, and every file that
shares a key with it, is read record by record (:func:`~curator_slurm.runs.summary.summarise_done`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from curator_slurm.runs.durations import Durations
from curator_slurm.runs.funnel import FunnelSum
from curator_slurm.runs.summary import add_s3_counts, shard_row
from curator_slurm.stages.notes import merge_notes

#: The directory of a run directory that holds the ledger files' summaries.
SUMMARIES_DIR = "ledger-summaries"
VERSION = 1
#: How many bytes before a summary's end its digest covers (a ledger file replaced by another of one length).
TAIL = 4096
_HEX_ID = re.compile(r"[0-9a-f]{16}")


def key_of(source: str) -> tuple[int, bool]:
    """A done record's key: its id itself when it is 16 hex digits (``content_id``'s: one key per id, exactly),
    else a 64-bit hash of it (False: two ids may share it, so a match must be checked record by record)."""
    if _HEX_ID.fullmatch(source):
        return int(source, 16), True
    return xxhash.xxh64_intdigest(source.encode("utf-8")), False


def summary_paths(ledger_path: str) -> tuple[str, str]:
    """(summary, keys) of a ledger file ``<run dir>/ledger/<name>.jsonl``."""
    run_dir = os.path.dirname(os.path.dirname(ledger_path))
    base = os.path.join(run_dir, SUMMARIES_DIR, os.path.basename(ledger_path))
    return base + ".json", base + ".ids"


@dataclass
class FileSummary:
    """The sums of one ledger file's records (every done record counts here; duplicates are the reader's to
    find, by key), and what they cover."""

    covered: int = 0  # bytes of the ledger file
    keys: int = 0  # done records (8-byte keys in the .ids file)
    keys_digest: str = ""
    tail_digest: str = ""
    exact_keys: bool = True
    records: int = 0
    first_time: float | None = None
    last_time: float | None = None
    job: str | None = None
    shard: str | None = None
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    tokens: int | None = None
    funnel: FunnelSum = field(default_factory=FunnelSum)
    notes: dict[str, Any] = field(default_factory=dict)
    s3: dict[str, Any] | None = None
    durations: Durations = field(default_factory=Durations)
    per_minute: dict[int, int] = field(default_factory=dict)
    #: Failed records, in order: ``[source, seconds, array_job_id, array_task_id]``.
    failed: list[list[Any]] = field(default_factory=list)

    def add(self, record: dict[str, Any]) -> int | None:
        """Add one record (as its writer wrote it); its key when it is a done one."""
        self.records += 1
        t = record.get("time")
        if isinstance(t, (int, float)):
            self.first_time = t if self.first_time is None else min(self.first_time, t)
            self.last_time = t if self.last_time is None else max(self.last_time, t)
        if self.shard is None:
            self.shard = record.get("shard") or "?"
        if self.job is None and record.get("array_job_id"):
            self.job = f"{record['array_job_id']}_{record.get('array_task_id')}"
        if record.get("s3"):
            self.s3 = add_s3_counts(self.s3, record["s3"])
        source = str(record.get("source"))
        if record.get("status") == "failed":
            self.failed.append([source, record.get("seconds"), record.get("array_job_id"), record.get("array_task_id")])
            return None
        if record.get("status") != "done":
            return None
        key, exact = key_of(source)
        self.exact_keys = self.exact_keys and exact
        seconds = float(record.get("seconds") or 0.0)
        self.rows_in += int(record.get("rows_in") or 0)
        self.rows_out += int(record.get("rows_out") or 0)
        self.seconds += seconds
        if record.get("tokens") is not None:
            self.tokens = (self.tokens or 0) + int(record["tokens"])
        self.funnel.add(record.get("stages"), record.get("stage_seconds"))
        notes = record.get("notes")
        if notes:
            damaged = [{**d, "source": source} for d in notes.get("damaged") or []]
            merge_notes(self.notes, {"counts": notes.get("counts"), "damaged": damaged})
        self.durations.add(seconds, source, self.shard or "?")
        if isinstance(t, (int, float)):
            minute = int(t // 60)
            self.per_minute[minute] = self.per_minute.get(minute, 0) + 1
        return key

    def as_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("funnel", "durations", "per_minute")}
        out.update(
            version=VERSION,
            funnel=self.funnel.as_json(),
            durations=self.durations.as_json(),
            per_minute={str(m): n for m, n in self.per_minute.items()},
        )
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileSummary:
        if data.get("version") != VERSION:
            raise ValueError(f"summary version {data.get('version')}, not {VERSION}")
        plain = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        plain.update(
            funnel=FunnelSum.from_json(data["funnel"]),
            durations=Durations.from_json(data["durations"]),
            per_minute={int(m): int(n) for m, n in data["per_minute"].items()},
        )
        return cls(**plain)


class SummaryKeeper:
    """What a :class:`~curator_slurm.runs.ledger.LedgerWriter` keeps beside its ledger file: :meth:`add` each
    record as it is written, :meth:`commit` once the records are in the file (their keys appended, the summary
    replaced). Best effort: a summary that cannot be written is missing, and a missing one is read around."""

    def __init__(self, ledger_path: str) -> None:
        self.ledger_path = ledger_path
        self.summary_path, self.keys_path = summary_paths(ledger_path)
        self.state = FileSummary()
        self.pending: list[dict[str, Any]] = []
        self.digest = xxhash.xxh64()
        self.broken = False

    def add(self, record: dict[str, Any]) -> None:
        self.pending.append(record)

    def commit(self, covered: int) -> None:
        """The pending records are in the ledger file, which is now ``covered`` bytes long."""
        records, self.pending = self.pending, []
        if self.broken:
            return
        keys = [k for k in (self.state.add(r) for r in records) if k is not None]
        data = np.asarray(keys, dtype="<u8").tobytes()
        self.digest.update(data)
        self.state.covered, self.state.keys = covered, self.state.keys + len(keys)
        self.state.keys_digest = self.digest.hexdigest()
        try:
            self.state.tail_digest = _tail_digest(self.ledger_path, covered)
            os.makedirs(os.path.dirname(self.summary_path), exist_ok=True)
            with open(self.keys_path, "ab") as f:
                f.write(data)
            temporary = self.summary_path + ".tmp"
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(self.state.as_json(), f, separators=(",", ":"))
            os.replace(temporary, self.summary_path)
        except OSError:  # the summary is gone for good (its keys may be incomplete): status reads the file
            self.broken = True
            for path in (self.summary_path, self.keys_path):
                with contextlib.suppress(OSError):
                    os.unlink(path)


def _tail_digest(path: str, end: int) -> str:
    with open(path, "rb") as f:
        f.seek(max(end - TAIL, 0))
        return xxhash.xxh64_hexdigest(f.read(min(end, TAIL)))


def complete_length(path: str) -> int:
    """The bytes of a ledger file up to its last newline (a torn last line is not a record), reading its end."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        at = size
        while at > 0:
            start = max(at - (1 << 16), 0)
            f.seek(start)
            block = f.read(at - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                return start + cut + 1
            at = start
    return 0


def load_file_summary(ledger_path: str) -> tuple[FileSummary, np.ndarray] | None:
    """The summary of a ledger file and its keys, when it is current and intact; None otherwise."""
    summary_path, keys_path = summary_paths(ledger_path)
    try:
        with open(summary_path, encoding="utf-8") as f:
            state = FileSummary.from_json(json.load(f))
        if state.covered != complete_length(ledger_path):
            return None  # stale (records written since) or wrong
        if state.tail_digest != _tail_digest(ledger_path, state.covered):
            return None
        with open(keys_path, "rb") as f:
            data = f.read(8 * state.keys)
        if len(data) != 8 * state.keys or xxhash.xxh64_hexdigest(data) != state.keys_digest:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state, np.frombuffer(data, dtype="<u8")


def add_file_summary(total: Any, state: FileSummary) -> None:
    """Add a file's summary to ``total`` (a :class:`~curator_slurm.runs.summary.DoneSummary`)."""
    total.records += state.records
    if state.first_time is not None and state.last_time is not None:
        total.first_time = min(total.first_time, state.first_time)
        total.last_time = max(total.last_time, state.last_time)
    if state.job:
        total.jobs.add(state.job)
    total.s3 = add_s3_counts(total.s3, state.s3)
    if not state.keys:
        return
    label = state.shard or "?"
    row = total.shards.setdefault(label, shard_row(label, None))
    row["done"] += state.keys
    row["seconds"] += state.seconds
    row["rows_in"] += state.rows_in
    if state.job:
        row["job"] = state.job
    total.done += state.keys
    total.rows_in += state.rows_in
    total.rows_out += state.rows_out
    if state.tokens is not None:
        total.tokens = (total.tokens or 0) + state.tokens
    total.funnel_sum.merge(state.funnel)
    merge_notes(total.notes, state.notes)
    total.durations.merge(state.durations)
    for minute, n in state.per_minute.items():
        total.per_minute[minute] = total.per_minute.get(minute, 0) + n


def read_run(run_dir: str) -> tuple[dict[str, dict[str, Any]], Any]:
    """What `status` needs of a run's ledger, exactly, reading each file's summary where it can: the failed
    source tasks (not done by any record; the latest failure of each, as ``load_status`` gives them) and the
    done ones' :class:`~curator_slurm.runs.summary.DoneSummary`. The files without a usable summary, and every
    file whose keys cannot settle a question alone (a key of two done records, a failed task's key among done
    ones that is not its id), are read record by record."""
    from curator_slurm.runs.ledger import ledger_files
    from curator_slurm.runs.summary import summarise_done

    files = ledger_files(run_dir)
    fast: dict[str, FileSummary] = {}
    for path in files:
        loaded = load_file_summary(path)
        if loaded is not None:
            fast[path] = loaded[0]
    slow = _Slow([p for p in files if p not in fast])
    candidates = {src for state in fast.values() for src, *_ in state.failed} | set(slow.failed_ids())
    duplicates, present = _scan_keys(fast, slow.done_keys(), {key_of(c)[0] for c in candidates})
    # A task done twice (or two ids with one key): those files are read record by record.
    moved = {path for found in _holders(fast, duplicates).values() for path in found}
    holders = _holders({p: st for p, st in fast.items() if p not in moved}, present)
    for source in candidates:
        found = holders.get(key_of(source)[0], [])
        if found and (not _hex(source) or not all(fast[h].exact_keys for h in found)):
            moved.update(found)  # the key may be another id's: compare the ids themselves
    slow.add(sorted(moved))
    failed: dict[str, dict[str, Any]] = {}
    for path in files:  # in name order: a later failure record replaces an earlier one
        if path in slow.failed_of:
            failed.update((str(r["source"]), r) for r in slow.failed_of[path])
        else:
            state = fast[path]
            for source, seconds, job, task in state.failed:
                failed[source] = {"source": source, "status": "failed", "shard": state.shard, "seconds": seconds,
                                  "array_job_id": job, "array_task_id": task}  # fmt: skip
    done_text = slow.done
    for source in list(failed):
        key = key_of(source)[0]
        fast_holders = [h for h in holders.get(key, []) if h not in moved]
        if source in done_text or (_hex(source) and fast_holders):
            del failed[source]  # an exact file's key of a hex id is that id: done
    summary = summarise_done(run_dir, set(done_text), files=sorted(slow.paths))
    if not summary.records:  # no record read: the times are those of the summaries
        summary.first_time, summary.last_time = float("inf"), float("-inf")
    for path, state in fast.items():
        if path not in moved:
            add_file_summary(summary, state)
    summary.funnel = summary.funnel_sum.rows()
    if not summary.records:
        summary.first_time = summary.last_time = 0.0
    return failed, summary


def _hex(source: str) -> bool:
    return bool(_HEX_ID.fullmatch(source))


class _Slow:
    """The ledger files read record by record: their done ids and, per file, their failure records."""

    def __init__(self, paths: list[str]) -> None:
        self.paths: list[str] = []
        self.done: set[str] = set()
        self.failed_of: dict[str, list[dict[str, Any]]] = {}
        self.add(paths)

    def add(self, paths: list[str]) -> None:
        from curator_slurm.runs.summary import _summary_table

        for path in paths:
            if path in self.failed_of:
                continue
            self.paths.append(path)
            failed: list[dict[str, Any]] = []
            self.failed_of[path] = failed
            table, lines = _summary_table(path)  # pyarrow parses the ids; only failure records are decoded
            if table is None:
                continue
            statuses = table.column("status").to_pylist()
            for i, (source, status) in enumerate(zip(table.column("source").to_pylist(), statuses, strict=True)):
                if status == "done":
                    self.done.add(str(source))
                elif status == "failed":
                    try:
                        failed.append(json.loads(lines[i]))
                    except ValueError:
                        continue

    def failed_ids(self) -> list[str]:
        return [str(r.get("source")) for records in self.failed_of.values() for r in records]

    def done_keys(self) -> np.ndarray:
        return np.fromiter((key_of(s)[0] for s in self.done), dtype="<u8", count=len(self.done))


#: Keys held in memory at once while looking for repeats (96 MB): more keys are looked at a range at a time.
KEYS_AT_ONCE = 12_000_000


def _scan_keys(fast: dict[str, FileSummary], slow_keys: np.ndarray, wanted: set[int]) -> tuple[set[int], set[int]]:
    """The keys of more than one done record, and those of ``wanted`` that some done record has: the fast files'
    keys read from their .ids files, in as many ranges of key values as keep :data:`KEYS_AT_ONCE` in memory."""
    total = sum(state.keys for state in fast.values()) + len(slow_keys)
    ranges = max(1, -(-total // KEYS_AT_ONCE))
    bounds = [(2**64 * i) // ranges for i in range(ranges + 1)]
    wanted_sorted = np.fromiter(sorted(wanted), dtype="<u8", count=len(wanted))
    repeated: set[int] = set()
    present: set[int] = set()
    for low, high in itertools.pairwise(bounds):
        keys = _keys_in(fast, slow_keys, low, high, whole=ranges == 1, total=total)
        keys.sort()
        if len(keys) > 1:
            same = keys[1:] == keys[:-1]
            if same.any():
                repeated.update(int(k) for k in np.unique(keys[1:][same]))
        if len(wanted_sorted) and len(keys):
            at = np.minimum(np.searchsorted(keys, wanted_sorted), len(keys) - 1)
            present.update(int(k) for k in wanted_sorted[keys[at] == wanted_sorted])
    return repeated, present


def _keys_in(
    fast: dict[str, FileSummary], slow_keys: np.ndarray, low: int, high: int, whole: bool, total: int
) -> np.ndarray:
    """Every done key in ``[low, high)`` (``whole``: all of them, read straight into one array)."""
    if whole:
        keys = np.empty(total, dtype="<u8")
        at = 0
        for path, state in fast.items():
            with open(summary_paths(path)[1], "rb") as f:
                f.readinto(memoryview(keys[at : at + state.keys]).cast("B"))
            at += state.keys
        keys[at:] = slow_keys
        return keys
    parts = []
    for path, state in fast.items():
        with open(summary_paths(path)[1], "rb") as f:
            mine = np.frombuffer(f.read(8 * state.keys), dtype="<u8")
        parts.append(mine[(mine >= np.uint64(low)) & (mine <= np.uint64(high - 1))])
    parts.append(slow_keys[(slow_keys >= np.uint64(low)) & (slow_keys <= np.uint64(high - 1))])
    return np.concatenate(parts)


def _holders(fast: dict[str, FileSummary], keys: set[int]) -> dict[int, list[str]]:
    """For each of ``keys``, the fast files whose done keys include it (read again from their .ids files)."""
    if not keys:
        return {}
    wanted = np.fromiter(keys, dtype="<u8", count=len(keys))
    found: dict[int, list[str]] = {}
    for path, state in fast.items():
        with open(summary_paths(path)[1], "rb") as f:
            mine = np.frombuffer(f.read(8 * state.keys), dtype="<u8")
        for key in np.intersect1d(mine, wanted).tolist():
            found.setdefault(int(key), []).append(path)
    return found


__all__ = [
    "SUMMARIES_DIR",
    "FileSummary",
    "SummaryKeeper",
    "add_file_summary",
    "complete_length",
    "key_of",
    "load_file_summary",
    "read_run",
    "summary_paths",
]
