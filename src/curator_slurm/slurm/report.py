"""What `curator-slurm report` shows of a run (each phase of a workflow), as data: progress and ETA, the funnel
and time per stage, task durations and the slowest tasks, throughput over time, failures grouped by exception
(with their source ids and logs), damaged inputs, S3 requests and retries, the processes running now.
:mod:`curator_slurm.slurm.report_html` draws it."""

from __future__ import annotations

import os
import time
from typing import Any

from curator_slurm.runs.durations import bin_edges
from curator_slurm.runs.ledger import _records_of, ledger_files
from curator_slurm.runs.ledger_summary import load_file_summary, read_run
from curator_slurm.slurm.status import collect_status, workflow_phase_dirs
from curator_slurm.slurm.submit import load_submissions

#: Source ids listed per group of failures (the count says how many there are).
IDS_PER_GROUP = 20
#: Groups of failures shown (the largest first).
GROUPS = 30


def report_data(run_dir: str) -> dict[str, Any]:
    """Everything the report shows of ``run_dir`` (a run directory, or a workflow's: one section per phase)."""
    phases = workflow_phase_dirs(run_dir)
    sections = (
        [{"phase": None, **phase_data(run_dir)}]
        if phases is None
        else [
            {"phase": name, **phase_data(d)} if os.path.isdir(d) else {"phase": name, "status": None}
            for name, d in phases
        ]
    )
    from curator_slurm.workflows.workflow import workflow_warnings

    return {
        "run_dir": os.path.abspath(run_dir),
        "generated": time.time(),
        "warnings": workflow_warnings(run_dir),
        "workflow": phases is not None,
        "sections": sections,
    }


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


__all__ = ["failure_groups", "failure_records", "phase_data", "report_data"]
