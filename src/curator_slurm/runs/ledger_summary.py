"""Summaries of ledger files, kept by their writers (:mod:`.ledger_keeper`), so that `status` reads a few kilobytes
per ledger file instead of every record; one is used only when it is exact. Design: docs/design.md, "Status tells
the truth, fast"."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np

from curator_slurm.runs.ledger import ledger_files
from curator_slurm.runs.ledger_keeper import (
    _HEX_ID,
    SUMMARIES_DIR,
    FileSummary,
    add_file_summary,
    key_of,
    load_file_summary,
    summary_paths,
)
from curator_slurm.runs.readfile import LEDGER_BYTES, read_bytes
from curator_slurm.runs.summary import _summary_table, summarise_done


def read_run(run_dir: str, summaries: bool = True) -> tuple[dict[str, dict[str, Any]], Any]:
    """What `status` needs of a run's ledger, exactly, reading each file's summary where it can: the failed
    source tasks (not done by any record; the latest failure of each, as ``load_status`` gives them) and the
    done ones' :class:`~curator_slurm.runs.summary.DoneSummary`. The files without a usable summary, and every
    file whose keys cannot settle a question alone (a key of two done records, a failed task's key among done
    ones that is not its id), are read record by record; every file with ``summaries=False`` (`status --verify`:
    a summary covers a file's length and end, not each record, so a record damaged in the middle is seen only
    by reading it)."""
    files = ledger_files(run_dir)
    fast: dict[str, FileSummary] = {}
    for path in files if summaries else []:
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
            keys[at : at + state.keys] = _keys_of(path, state)
            at += state.keys
        keys[at:] = slow_keys
        return keys
    parts = []
    for path, state in fast.items():
        mine = _keys_of(path, state)
        parts.append(mine[(mine >= np.uint64(low)) & (mine <= np.uint64(high - 1))])
    parts.append(slow_keys[(slow_keys >= np.uint64(low)) & (slow_keys <= np.uint64(high - 1))])
    return np.concatenate(parts)


def _keys_of(path: str, state: FileSummary) -> np.ndarray:
    """The done keys of the ledger file ``path`` (its summary ``state`` checked them), read again: as many as
    it counts, zeros if the file shrank since (a regular file of bounded size, as every file read here)."""
    data = read_bytes(summary_paths(path)[1], LEDGER_BYTES, 0, 8 * state.keys).ljust(8 * state.keys, b"\0")
    return np.frombuffer(data, dtype="<u8")


def _holders(fast: dict[str, FileSummary], keys: set[int]) -> dict[int, list[str]]:
    """For each of ``keys``, the fast files whose done keys include it (read again from their .ids files)."""
    if not keys:
        return {}
    wanted = np.fromiter(keys, dtype="<u8", count=len(keys))
    found: dict[int, list[str]] = {}
    for path, state in fast.items():
        mine = _keys_of(path, state)
        for key in np.intersect1d(mine, wanted).tolist():
            found.setdefault(int(key), []).append(path)
    return found


__all__ = ["SUMMARIES_DIR", "load_file_summary", "read_run", "summary_paths"]
