"""What the done records of a run add up to, read file by file (each file adds to one shard's row): the part of
`status` that grows with the ledger."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from curator_slurm.runs.durations import Durations, add_columns, add_minutes
from curator_slurm.runs.funnel import FunnelRow, FunnelSum
from curator_slurm.runs.ledger import complete_lines, ledger_files, parse_lines
from curator_slurm.runs.readfile import count
from curator_slurm.runs.tallies import add_s3_counts, count_taken, describe_s3, shard_row  # noqa: F401 - imported from here too
from curator_slurm.stages.notes import merge_notes

#: The columns of a ledger record that `status` sums; the rest of a record is not parsed.
_SUMMARY_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("status", pa.string()),
        ("shard", pa.string()),
        ("seconds", pa.float64()),
        ("rows_in", pa.int64()),
        ("rows_out", pa.int64()),
        ("tokens", pa.int64()),
        ("time", pa.float64()),
        ("array_job_id", pa.string()),
        ("array_task_id", pa.string()),
        ("taken_from", pa.string()),
    ]
)


@dataclass
class DoneSummary:
    """What `status` shows of the done source tasks, summed while the ledger is read."""

    done: int = 0
    records: int = 0
    rows_in: int = 0
    rows_out: int = 0
    #: Tokens of the done source tasks' outputs; None when no record counts any.
    tokens: int | None = None
    first_time: float = float("inf")
    last_time: float = float("-inf")
    shards: dict[str, dict[str, Any]] = field(default_factory=dict)
    funnel: list[FunnelRow] = field(default_factory=list)
    #: The done records' notes summed (``stages.notes``): why stages dropped documents, damaged inputs.
    notes: dict[str, Any] = field(default_factory=dict)
    #: The array tasks (``<job>_<index>``) that wrote a record of any kind: they started and did work.
    jobs: set[str] = field(default_factory=set)
    #: Object-store requests and retries of every recorded task (done or failed, each attempt's record):
    #: ``{"requests", "retries", "reasons"}``; None when no record made any.
    s3: dict[str, Any] | None = None
    #: How long the done source tasks took (counted ones: one per task), and the slowest of them.
    durations: Durations = field(default_factory=Durations)
    #: Done source tasks per minute of wall time (minute since the epoch -> count): throughput over time.
    per_minute: dict[int, int] = field(default_factory=dict)
    #: The sums behind ``funnel`` (which summaries of other records add to).
    funnel_sum: FunnelSum = field(default_factory=FunnelSum)
    #: The done source tasks that a process of another shard than their owner did (took over): ``tasks`` in
    #: all, and how many ``by`` each shard that did them and ``from`` each shard that owned them.
    takeover: dict[str, Any] = field(default_factory=lambda: {"tasks": 0, "by": {}, "from": {}})


def current_done(run_dir: str, done: set[str]) -> tuple[set[str], int]:
    """The done source tasks that the run's current listing holds, and how many done ones it does not (their
    inputs were removed or replaced since): only the first count toward the run's progress."""
    from curator_slurm.runs.rundir import current_source_ids, id_hashes

    current = current_source_ids(run_dir)
    if current is None or not done:
        return done, 0
    ids = list(done)
    listed = np.isin(id_hashes(ids), current)
    kept = {i for i, ok in zip(ids, listed, strict=True) if ok}
    return kept, len(ids) - len(kept)


def summarise_done(run_dir: str, done: set[str], files: list[str] | None = None) -> DoneSummary:
    """Sum the done source tasks' records, shard by shard, in memory bounded by one ledger file.

    Each done source task counts once, with its last done record (files in name order, lines in file
    order, as ``load_status`` reads them). ``done`` is consumed: a source id leaves it when its record is
    counted, so a 10-million-record ledger needs no second set. A ledger file is one writer's, so its
    records share one shard and one array task; only the columns summed here are parsed (pyarrow's JSON
    reader), and a record's ``stages`` only when the record counts. ``files``: these ledger files only (in
    name order), not every file of the run directory."""
    summary = DoneSummary()
    funnel = summary.funnel_sum
    for name in reversed(ledger_files(run_dir) if files is None else files):
        table, lines = _summary_table(name)
        if table is None or table.num_rows == 0:
            continue
        summary.records += table.num_rows
        for line in lines:
            if b'"s3":' in line:  # only records of tasks that talked to an object store
                summary.s3 = _add_s3(summary.s3, line)
        job, task = table.column("array_job_id")[0].as_py(), table.column("array_task_id")[0].as_py()
        if job:  # a ledger file is one writer's: one array task
            summary.jobs.add(f"{job}_{task}")
        times = table.column("time").to_pylist()
        known = [t for t in times if t is not None]
        if known:
            summary.first_time = min(summary.first_time, min(known))
            summary.last_time = max(summary.last_time, max(known))
        kept = []
        statuses = table.column("status").to_pylist()
        sources = table.column("source").to_pylist()
        for i in range(table.num_rows - 1, -1, -1):  # the last done record of a source is the one counted
            if statuses[i] == "done" and sources[i] in done:
                done.discard(sources[i])
                kept.append(i)
        if not kept:
            continue
        picked = table.take(pa.array(kept, pa.int64()))
        label = picked.column("shard")[0].as_py() or "?"
        row = summary.shards.setdefault(label, shard_row(label, None))
        row["done"] += len(kept)
        row["seconds"] += float(pc.sum(picked.column("seconds")).as_py() or 0.0)
        rows_in = int(pc.sum(picked.column("rows_in")).as_py() or 0)
        row["rows_in"] += rows_in
        summary.rows_in += rows_in
        summary.rows_out += int(pc.sum(picked.column("rows_out")).as_py() or 0)
        tokens = pc.sum(picked.column("tokens")).as_py()
        if tokens is not None:
            summary.tokens = (summary.tokens or 0) + int(tokens)
        summary.done += len(kept)
        count_taken(summary.takeover, row, picked.column("taken_from").to_pylist())
        job, task = picked.column("array_job_id")[0].as_py(), picked.column("array_task_id")[0].as_py()
        if job:
            row["job"] = f"{job}_{task}"
        add_columns(summary.durations, _floats(picked, "seconds"), picked.column("source").to_pylist(), label)
        add_minutes(summary.per_minute, _floats(picked, "time"))
        for i in kept:
            funnel.add(_checked_stages(_stages_of(lines[i])), _stage_seconds_of(lines[i]))
            if b'"notes":' in lines[i]:  # rare: only records of stages that noted something
                _add_notes(summary.notes, lines[i])
    summary.funnel = funnel.rows()
    if not summary.records:
        summary.first_time = summary.last_time = 0.0
    return summary


def _floats(table: pa.Table, column: str) -> Any:
    """A float column as a numpy array, NaN where a record has no value."""
    return table.column(column).to_numpy(zero_copy_only=False).astype("float64")


def describe_takeover(takeover: dict[str, Any] | None, done: int) -> str:
    """``"takeover: 7 of 24 done source tasks were done by a shard other than their owner's (by 1/4: 3, 2/4: 4;
    from 0/4: 7)"``, or "" when none was."""
    if not takeover or not takeover.get("tasks"):
        return ""

    def counts(by: dict[str, int]) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(by.items(), key=lambda kv: _shard_key(kv[0])))

    return (
        f"takeover: {takeover['tasks']} of {done} done source tasks were done by a shard other than their "
        f"owner's (by {counts(takeover['by'])}; from {counts(takeover['from'])})"
    )


def _shard_key(label: str) -> tuple[int, int, str]:
    index, _, count = label.partition("/")
    return (int(count), int(index), "") if index.isdigit() and count.isdigit() else (-1, -1, label)


def _add_s3(total: dict[str, Any] | None, line: bytes) -> dict[str, Any] | None:
    try:
        part = json.loads(line).get("s3")
    except ValueError:
        return total
    return add_s3_counts(total, part) if isinstance(part, dict) else total


def _summary_table(path: str) -> tuple[pa.Table | None, list[bytes]]:
    """The summed columns of one ledger file and its record lines (row i of the table is line i)."""
    data = complete_lines(path)
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        return None, []
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False),
            parse_options=pj.ParseOptions(explicit_schema=_SUMMARY_SCHEMA, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowInvalid:  # a damaged line in the middle (or an odd value): record by record
        table = None
    if table is None or table.num_rows != len(lines):
        records = parse_lines(path, data)
        lines = [json.dumps(r).encode() for r in records]
        columns = {f.name: pa.array([_as(r.get(f.name), f.type) for r in records], f.type) for f in _SUMMARY_SCHEMA}
        table = pa.table(columns, schema=_SUMMARY_SCHEMA)
    return table, lines


def _as(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if kind == pa.string():
        return str(value)
    try:
        return float(value) if kind == pa.float64() else int(value)
    except (TypeError, ValueError):
        return None


def _add_notes(into: dict[str, Any], line: bytes) -> None:
    """Add a done record's notes to ``into``; each damaged input names the source task that read it."""
    try:
        record = json.loads(line)
    except ValueError:
        return
    notes = record.get("notes") if isinstance(record, dict) else None
    if not isinstance(notes, dict):
        return
    counts = notes.get("counts")
    counts = {k: v for k, v in counts.items() if count(v, None) is not None} if isinstance(counts, dict) else {}
    listed = notes.get("damaged")
    damaged = (
        [{**d, "source": record.get("source")} for d in listed if isinstance(d, dict)]
        if isinstance(listed, list)
        else []
    )
    total = count(notes.get("damaged_total"), None)
    merge_notes(into, {"counts": counts, "damaged": damaged, **({"damaged_total": total} if total else {})})


def _checked_stages(stages: Any) -> Any:
    """A done record's ``stages`` when each row is ``[name, rows in, rows out, ...]`` with whole numbers (None
    when damaged: that record's funnel is not counted, rather than a traceback)."""
    if not isinstance(stages, list):
        return None
    for row in stages:
        if not isinstance(row, list) or len(row) < 3 or not isinstance(row[0], str):
            return None
        if any(count(v, None) is None for v in row[1:3]) or any(
            v is not None and count(v, None) is None for v in row[3:5]
        ):
            return None
    return stages


def _stages_of(line: bytes) -> Any:
    """A done record's ``stages``, parsed from its slice of the line (the whole line if that fails)."""
    at = line.find(b'"stages":')
    if at < 0:  # a record written before records carried stages
        return None
    end = line.find(b"]]", at)
    try:
        return json.loads(line[at + 9 : end + 2]) if end > 0 else json.loads(line)["stages"]
    except (ValueError, KeyError, TypeError):
        try:
            return json.loads(line).get("stages")
        except (ValueError, AttributeError):
            return None


def _stage_seconds_of(line: bytes) -> Any:
    """A done record's ``stage_seconds``, parsed from its slice of the line; None for a record without them."""
    at = line.find(b'"stage_seconds":')
    if at < 0:
        return None
    end = line.find(b"]", at)
    try:
        return json.loads(line[at + 16 : end + 1])
    except ValueError:
        try:
            return json.loads(line).get("stage_seconds")
        except (ValueError, AttributeError):
            return None
