"""What a ledger's writer keeps beside each ledger file for `status`: ``ledger-summaries/<ledger file>.json``
(the sums of its records and how many bytes of the file they cover) and ``<ledger file>.ids`` (one 8-byte key per
done record, in record order); and the check that a summary is whole. :mod:`.ledger_summary` reads them."""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from curator_slurm.errors import RunDirError
from curator_slurm.runs.durations import Durations
from curator_slurm.runs.funnel import FunnelSum
from curator_slurm.runs.layout import SUMMARIES_DIR
from curator_slurm.runs.readfile import LEDGER_BYTES, SMALL_BYTES, load_json, read_bytes
from curator_slurm.runs.tallies import add_s3_counts, count_taken, shard_row
from curator_slurm.stages.notes import merge_notes

#: The summaries' format: 3 carries a digest of the summary itself (its totals too, not only the keys).
VERSION = 3
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
    #: Done records of tasks taken over from another shard, by the owner's shard (``taken_from``).
    taken_from: dict[str, int] = field(default_factory=dict)

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
        if record.get("taken_from"):
            owner = str(record["taken_from"])
            self.taken_from[owner] = self.taken_from.get(owner, 0) + 1
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
        out["digest"] = _own_digest(out)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileSummary:
        if data.get("version") != VERSION:
            raise ValueError(f"summary version {data.get('version')}, not {VERSION}")
        if data.get("digest") != _own_digest(data):  # edited (its totals), or damaged
            raise ValueError("summary digest does not match its content")
        plain = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        plain.update(
            funnel=FunnelSum.from_json(data["funnel"]),
            durations=Durations.from_json(data["durations"]),
            per_minute={int(m): int(n) for m, n in data["per_minute"].items()},
        )
        return cls(**plain)


def _own_digest(data: dict[str, Any]) -> str:
    """The digest of a summary's JSON without its ``digest`` (keys sorted: the order a reader sees is not
    the writer's)."""
    body = {k: v for k, v in data.items() if k != "digest"}
    return xxhash.xxh64_hexdigest(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"))


class SummaryKeeper:
    """What a :class:`~curator_slurm.runs.ledger.LedgerWriter` keeps beside its ledger file: :meth:`add` each
    record as it is written, :meth:`commit` once the records are in the file (their keys appended, the summary
    replaced). Best effort: a summary that cannot be written is missing, and a missing one is read around.

    Args:
        ledger_path: the ledger file whose summary and keys this keeps.
    """

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
    return xxhash.xxh64_hexdigest(read_bytes(path, LEDGER_BYTES, max(end - TAIL, 0), min(end, TAIL)))


def complete_length(path: str) -> int:
    """The bytes of a ledger file up to its last newline (a torn last line is not a record), reading its end."""
    at = os.path.getsize(path)
    while at > 0:
        start = max(at - (1 << 16), 0)
        block = read_bytes(path, LEDGER_BYTES, start, at - start)  # a regular file of bounded size
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        at = start
    return 0


def load_file_summary(ledger_path: str) -> tuple[FileSummary, np.ndarray] | None:
    """The summary of a ledger file and its keys, when it is current and intact; None otherwise."""
    summary_path, keys_path = summary_paths(ledger_path)
    try:
        state = FileSummary.from_json(load_json(summary_path, SMALL_BYTES))
        if state.covered != complete_length(ledger_path):
            return None  # stale (records written since) or wrong
        if state.tail_digest != _tail_digest(ledger_path, state.covered):
            return None
        data = read_bytes(keys_path, LEDGER_BYTES, 0, 8 * state.keys)
        if len(data) != 8 * state.keys or xxhash.xxh64_hexdigest(data) != state.keys_digest:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RunDirError):
        return None  # gone, stale, damaged, edited, or not a regular file: the ledger file is read instead
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
    count_taken(total.takeover, row, [o for o, n in state.taken_from.items() for _ in range(n)])
    merge_notes(total.notes, state.notes)
    total.durations.merge(state.durations)
    for minute, n in state.per_minute.items():
        total.per_minute[minute] = total.per_minute.get(minute, 0) + n


__all__ = [
    "SUMMARIES_DIR",
    "FileSummary",
    "SummaryKeeper",
    "add_file_summary",
    "complete_length",
    "key_of",
    "load_file_summary",
    "summary_paths",
]
