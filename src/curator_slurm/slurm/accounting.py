"""What Slurm's accounting (``sacct``) says of a run's arrays, for `curator-slurm report`: per array job, its tasks,
their memory high-water mark (MaxRSS), CPU efficiency and queue wait; or why accounting does not answer."""

from __future__ import annotations

import datetime
import shutil
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The columns asked of sacct, in order.
FIELDS = ("JobID", "State", "Submit", "Start", "End", "ElapsedRaw", "TotalCPU", "AllocCPUS", "MaxRSS", "NodeList")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


@dataclass
class ArrayAccounting:
    """One array job as sacct accounts it: ``tasks`` (allocations), ``max_rss`` (bytes, the largest of any
    step), ``cpu_seconds`` used of ``cpu_seconds_allocated`` (elapsed x CPUs), each task's queue wait."""

    job: str
    tasks: int = 0
    states: dict[str, int] = field(default_factory=dict)
    max_rss: int | None = None
    cpu_seconds: float = 0.0
    cpu_seconds_allocated: float = 0.0
    waits: list[float] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        waits = sorted(self.waits)
        efficiency = self.cpu_seconds / self.cpu_seconds_allocated if self.cpu_seconds_allocated > 0 else None
        return {
            "job": self.job,
            "tasks": self.tasks,
            "states": dict(sorted(self.states.items())),
            "max_rss": self.max_rss,
            "cpu_efficiency": efficiency,
            "cpu_seconds": round(self.cpu_seconds, 1),
            "wait_median": statistics.median(waits) if waits else None,
            "wait_max": waits[-1] if waits else None,
            "nodes": sorted(self.nodes),
        }


def accounting(job_ids: Sequence[str]) -> dict[str, Any]:
    """``{"available": True, "arrays": [...]}`` (:meth:`ArrayAccounting.as_dict` per array job, in the order
    given), or ``{"available": False, "reason": ...}`` in sacct's own words (no sacct, accounting storage
    disabled, no record of these jobs)."""
    if not job_ids:
        return {"available": False, "reason": "the run has no submitted array job"}
    if shutil.which("sacct") is None:
        return {"available": False, "reason": "sacct is not installed here"}
    cmd = ["sacct", "-j", ",".join(job_ids), "--parsable2", "--noheader", "--format", ",".join(FIELDS)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"available": False, "reason": f"sacct failed: {e}"}
    arrays = parse_sacct(proc.stdout, job_ids)
    if proc.returncode != 0 or not any(a.tasks for a in arrays):
        said = " ".join((proc.stderr.strip() or proc.stdout.strip()).split())
        return {"available": False, "reason": said or "sacct has no record of the run's jobs"}
    return {"available": True, "arrays": [a.as_dict() for a in arrays]}


def parse_sacct(text: str, job_ids: Sequence[str]) -> list[ArrayAccounting]:
    """Sum ``sacct --parsable2 --noheader --format FIELDS`` lines per array job of ``job_ids``: an allocation
    line (``123_4``) counts a task, its state, CPUs x elapsed and queue wait; a step line (``123_4.batch``)
    its MaxRSS; TotalCPU is the allocation's (it covers its steps)."""
    arrays = {str(j): ArrayAccounting(str(j)) for j in job_ids}
    for line in text.splitlines():
        values = line.split("|")
        if len(values) != len(FIELDS):
            continue
        row = dict(zip(FIELDS, values, strict=True))
        job_id = row["JobID"]
        array = arrays.get(job_id.split("_", 1)[0].split(".", 1)[0])
        if array is None:
            continue
        rss = memory_bytes(row["MaxRSS"])
        if rss is not None:
            array.max_rss = max(array.max_rss or 0, rss)
        if "." in job_id:  # a step: only its memory counts
            continue
        array.tasks += 1
        state = row["State"].split(" ", 1)[0] or "UNKNOWN"
        array.states[state] = array.states.get(state, 0) + 1
        elapsed, cpus = _number(row["ElapsedRaw"]), _number(row["AllocCPUS"])
        if elapsed is not None and cpus is not None:
            array.cpu_seconds_allocated += elapsed * cpus
        array.cpu_seconds += duration_seconds(row["TotalCPU"]) or 0.0
        submit, start = timestamp(row["Submit"]), timestamp(row["Start"])
        if submit is not None and start is not None:
            array.waits.append(max(start - submit, 0.0))
        if row["NodeList"] and row["NodeList"] not in ("None assigned", "(null)"):
            array.nodes.add(row["NodeList"])
    return list(arrays.values())


def memory_bytes(value: str) -> int | None:
    """``123456K`` (sacct's MaxRSS) in bytes; a plain number is bytes; None when empty or odd."""
    value = value.strip()
    if not value:
        return None
    scale = _UNITS.get(value[-1].upper(), 1)
    number = _number(value[:-1] if value[-1].upper() in _UNITS else value)
    return None if number is None else int(number * scale)


def duration_seconds(value: str) -> float | None:
    """sacct's ``[D-]HH:MM:SS[.mmm]`` or ``MM:SS.mmm`` in seconds; None when empty or odd."""
    value = value.strip()
    if not value:
        return None
    days, _, clock = value.rpartition("-")
    parts = clock.split(":")
    try:
        seconds = sum(float(p) * 60**i for i, p in enumerate(reversed(parts)))
        return seconds + (int(days) * 86400 if days else 0)
    except ValueError:
        return None


def timestamp(value: str) -> float | None:
    """sacct's ``2026-12-04T17:45:10`` (local time) as seconds since the epoch; None for Unknown/None."""
    try:
        return datetime.datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        return None


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


__all__ = ["ArrayAccounting", "accounting", "duration_seconds", "memory_bytes", "parse_sacct", "timestamp"]
