"""What `curator-slurm report` shows of a run (each phase of a workflow), as data: the overview (the workflow's
numbers), a timeline of phases, arrays and processes, a view per node, Slurm accounting, then per phase progress
and ETA, the funnel and time per stage, task durations, throughput over time, failures grouped by exception,
damaged inputs, S3 requests and retries, the processes running now. :mod:`curator_slurm.slurm.report_html`
draws it."""

from __future__ import annotations

import os
import re
import time
from typing import Any

from curator_slurm.runs.durations import bin_edges
from curator_slurm.runs.funnel import workflow_numbers
from curator_slurm.runs.ledger import _records_of, ledger_files
from curator_slurm.runs.ledger_summary import load_file_summary, read_run
from curator_slurm.runs.summary import _summary_table
from curator_slurm.slurm.accounting import accounting
from curator_slurm.slurm.status import collect_status, phase_started, workflow_phase_dirs
from curator_slurm.slurm.submit import load_submissions

#: Source ids listed per group of failures (the count says how many there are).
IDS_PER_GROUP = 20
#: Groups of failures shown (the largest first).
GROUPS = 30
#: Processes drawn on the timeline (the earliest first; the table of nodes counts every one).
TIMELINE_PROCESSES = 200
#: A ledger file's name: ``p.<layout>.<index>.<job tag>-<host>-<pid>-<random>.jsonl`` (runs.ledger).
_LEDGER_NAME = re.compile(r"^p\.[^.]+\.\d+\.(?P<tag>[^-]+)-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]+\.jsonl$")


def report_data(run_dir: str, ask_slurm: bool = True) -> dict[str, Any]:
    """Everything the report shows of ``run_dir`` (a run directory, or a workflow's: one section per phase),
    the overview, timeline, nodes and accounting first (``ask_slurm``: ask sacct)."""
    from curator_slurm.workflows.workflow import workflow_document_phases, workflow_warnings

    phases = workflow_phase_dirs(run_dir)
    dirs = [(None, run_dir)] if phases is None else [(name, d) for name, d in phases]
    sections: list[dict[str, Any]] = [
        {"phase": name, **phase_data(d)} if phase_started(d) else {"phase": name, "status": None} for name, d in dirs
    ]
    statuses: dict[str, dict[str, Any] | None] = {str(s["phase"]): s["status"] for s in sections}
    documents = workflow_document_phases(run_dir) if phases is not None else None
    processes = {str(name): process_rows(d) if phase_started(d) else [] for name, d in dirs}
    jobs = [j for s in sections if s["status"] for j in s["status"]["jobs"]]
    return {
        "run_dir": os.path.abspath(run_dir),
        "generated": time.time(),
        "warnings": workflow_warnings(run_dir),
        "workflow": phases is not None,
        "numbers": workflow_numbers(statuses, documents),
        "timeline": timeline(processes),
        "nodes": nodes(processes),
        "accounting": accounting(jobs) if ask_slurm else {"available": False, "reason": "not asked"},
        "sections": sections,
    }


def process_rows(run_dir: str) -> list[dict[str, Any]]:
    """One row per ledger file of ``run_dir`` (one process that recorded work): its host, pid, job tag,
    shard, source tasks done (records) and failed, seconds of work, documents in, and the time of its first and
    last record; from the file's summary where it is current, else from its records."""
    rows = []
    for path in ledger_files(run_dir):
        named = _LEDGER_NAME.match(os.path.basename(path))
        row: dict[str, Any] = {
            "host": named["host"] if named else "?",
            "pid": int(named["pid"]) if named else None,
            "tag": named["tag"] if named else "?",
        }
        loaded = load_file_summary(path)
        if loaded is not None:
            state = loaded[0]
            row |= {"shard": state.shard, "done": state.keys, "failed": len(state.failed), "seconds": state.seconds,
                    "rows_in": state.rows_in, "first": state.first_time, "last": state.last_time}  # fmt: skip
        else:
            table, _ = _summary_table(path)
            if table is None:
                continue
            records = table.to_pydict()
            times = [t for t in records["time"] if t is not None]
            row |= {
                "shard": next((s for s in records["shard"] if s), "?"),
                "done": records["status"].count("done"),
                "failed": records["status"].count("failed"),
                "seconds": sum(s or 0.0 for s in records["seconds"]),
                "rows_in": sum(r or 0 for r in records["rows_in"]),
                "first": min(times, default=None),
                "last": max(times, default=None),
            }
        if row["first"] is None or row["last"] is None:
            continue
        tasks = max(row["done"] + row["failed"], 1)
        row["start"] = row["first"] - row["seconds"] / tasks  # about when its first task began
        rows.append(row)
    return sorted(rows, key=lambda r: r["start"])


def timeline(processes: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Bars of the timeline, in order: each phase (``kind`` "phase"), then its arrays (by the Slurm job of its
    processes; "local" outside Slurm), then its processes (the first :data:`TIMELINE_PROCESSES` of the run),
    each with ``label``, ``start`` and ``end`` (seconds since the epoch), ``phase``, and ``failed``."""
    bars: list[dict[str, Any]] = []
    drawn = 0
    for phase, rows in processes.items():
        if not rows:
            continue
        bars.append(_bar("phase", f"phase {phase}" if phase != "None" else "run", phase, rows))
        arrays: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            arrays.setdefault(r["tag"].split("_", 1)[0] if "_" in r["tag"] else "local", []).append(r)
        if len(arrays) > 1 or "local" not in arrays:
            bars += [_bar("array", f"array {job}", phase, group) for job, group in arrays.items()]
        for r in rows[: max(TIMELINE_PROCESSES - drawn, 0)]:
            bars.append(_bar("process", f"{r['tag']} {r['host']}:{r['pid']}", phase, [r]))
            drawn += 1
    return bars


def _bar(kind: str, label: str, phase: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": kind,
        "label": label,
        "phase": phase,
        "start": min(r["start"] for r in rows),
        "end": max(r["last"] for r in rows),
        "done": sum(r["done"] for r in rows),
        "failed": sum(r["failed"] for r in rows),
    }


def nodes(processes: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per host over every phase: processes, source tasks done and failed, seconds of work, documents
    in, and throughput (documents in per second of the time between its first process's start and its last
    record)."""
    by_host: dict[str, dict[str, Any]] = {}
    for rows in processes.values():
        for r in rows:
            empty = {"host": r["host"], "processes": 0, "done": 0, "failed": 0, "seconds": 0.0, "rows_in": 0,
                     "start": r["start"], "end": r["last"]}  # fmt: skip
            n = by_host.setdefault(r["host"], empty)
            n["processes"] += 1
            n["done"] += r["done"]
            n["failed"] += r["failed"]
            n["seconds"] += r["seconds"]
            n["rows_in"] += r["rows_in"]
            n["start"], n["end"] = min(n["start"], r["start"]), max(n["end"], r["last"])
    for n in by_host.values():
        span = n["end"] - n["start"]
        n["docs_per_second"] = n["rows_in"] / span if span > 0 else None
    return sorted(by_host.values(), key=lambda n: n["host"])


def phase_data(run_dir: str) -> dict[str, Any]:
    """The report's data of one run directory."""
    status = collect_status(run_dir)
    failed, summary = read_run(run_dir)
    durations = summary.durations
    return {
        "status": status,
        "durations": [
            {"low": bin_edges(b)[0], "high": bin_edges(b)[1], "tasks": n} for b, n in sorted(durations.bins.items())
        ],
        "quantiles": {q: durations.quantile(q) for q in (0.5, 0.9, 0.99)},
        "slowest": [{"seconds": s, "source": i, "shard": h} for s, i, h in durations.slowest_first()],
        "per_minute": sorted(summary.per_minute.items()),
        "failures": failure_groups(run_dir, set(failed)),
    }


def failure_records(run_dir: str, failed: set[str]) -> list[dict[str, Any]]:
    """The latest failure record of each of ``failed`` (source ids not done), reading only the ledger files
    whose summary lists failures (or that have no usable summary)."""
    latest: dict[str, dict[str, Any]] = {}
    if not failed:
        return []
    for path in ledger_files(run_dir):
        loaded = load_file_summary(path)
        if loaded is not None and not loaded[0].failed:
            continue
        for record in _records_of([path]):
            if record.get("status") == "failed" and record.get("source") in failed:
                latest[str(record["source"])] = record
    return list(latest.values())


def failure_groups(run_dir: str, failed: set[str]) -> list[dict[str, Any]]:
    """The failed source tasks grouped by exception (its type and stage): how many, the first message, the
    source ids (the first :data:`IDS_PER_GROUP`) and the logs of the array tasks that ran them."""
    logs = _log_dirs(run_dir)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in failure_records(run_dir, failed):
        error = str(r.get("error") or "")
        kind = error.split(":", 1)[0].strip() or "unknown"
        group = groups.setdefault(
            (kind, str(r.get("stage"))),
            {
                "exception": kind,
                "stage": r.get("stage"),
                "count": 0,
                "message": error.splitlines()[0] if error else "",
                "sources": [],
                "logs": [],
            },
        )
        group["count"] += 1
        if len(group["sources"]) < IDS_PER_GROUP:
            group["sources"].append(r.get("source"))
            job = r.get("array_job_id")
            if job and str(job) in logs:
                log = os.path.join(logs[str(job)], f"{job}_{r.get('array_task_id')}.log")
                if log not in group["logs"]:
                    group["logs"].append(log)
    return sorted(groups.values(), key=lambda g: -g["count"])[:GROUPS]


def _log_dirs(run_dir: str) -> dict[str, str]:
    """The log directory of each submitted array job of the run."""
    out = {}
    for sub in load_submissions(run_dir):
        for a in sub.get("arrays", []):
            out[str(a["job_id"])] = sub.get("options", {}).get("output_logs") or os.path.join(run_dir, "logs")
    return out


__all__ = ["failure_groups", "failure_records", "nodes", "phase_data", "process_rows", "report_data", "timeline"]
