"""What the progress files of a run directory say (:mod:`curator_slurm.runs.progress`): the processes running
a source task now, with how far they got and whether they straggle, and those that died while running one."""

from __future__ import annotations

import logging
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.runs.liveness import process_alive
from curator_slurm.runs.progress import DEFAULT_INTERVAL, PROGRESS_DIR
from curator_slurm.runs.readfile import count, load_object, number, text

logger = logging.getLogger(__name__)

#: A running source task straggles when it has run this many times as long as its peers' typical duration ...
STRAGGLER_FACTOR = 3.0
#: ... where "typical" is the median duration of the done source tasks once at least this many are done, else
#: the median time so far of the tasks running now (at least 3 of them) ...
STRAGGLER_MIN_DONE = 5
#: ... and at least this many of its process's publication intervals (before that, its file cannot tell a
#: slow task from one that just started).
STRAGGLER_MIN_INTERVALS = 2
#: A running process whose file is older than this many of its publication intervals (at least
#: :data:`MIN_FROZEN_SECONDS`) is not progressing: its timer thread publishes every interval while it works,
#: so it is frozen (SIGSTOP, a debugger, swapped out) or wedged.
FROZEN_INTERVALS = 2
MIN_FROZEN_SECONDS = 1.0


@dataclass
class Progress:
    """The processes of a run directory: ``running`` a source task now (alive, or on another host), ``dead``
    (their progress file names a source task and their process is gone: killed), and the shards' drivers."""

    running: list[dict[str, Any]] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)
    drivers: list[dict[str, Any]] = field(default_factory=list)
    #: How many source tasks' worth of work the running ones have done (:func:`running_fraction`).
    share: float = 0.0

    def fields(self) -> dict[str, Any]:
        """What `status --json` shows of it: ``running`` and ``dead``."""
        return {"running": self.running, "dead": self.dead}


def running_now(run_dir: str, durations: Any, done: int) -> Progress:
    """:func:`read_progress` of ``run_dir`` judged against the ``done`` source tasks' ``durations`` (a
    :class:`~curator_slurm.runs.durations.Durations`), with the running tasks' share of work."""
    typical = durations.quantile(0.5)
    progress = read_progress(run_dir, typical, done)
    progress.share = running_fraction(progress.running, typical)
    return progress


def read_states(run_dir: str) -> list[dict[str, Any]]:
    """Every progress file of ``run_dir`` as written, each with ``alive``: True, False (gone) or None (a
    process of another host, which cannot be checked from here)."""
    directory = os.path.join(run_dir, PROGRESS_DIR)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    states = []
    for name in names:
        state = load_object(os.path.join(directory, name))  # None: removed while we looked, or damaged
        if state is None:
            continue
        pid = count(state.get("pid"), None)
        if pid is None:
            logger.warning(f"{os.path.join(directory, name)}: skipped, its pid is {state.get('pid')!r}")
            continue
        host, start = text(state.get("host")), text(state.get("start"))
        state["alive"] = process_alive(host, pid, start)
        states.append(state)
    return states


def read_progress(run_dir: str, typical: float | None = None, done: int = 0, now: float | None = None) -> Progress:
    """The running and dead processes of ``run_dir``; ``typical`` is the median duration of the ``done``
    source tasks (for the straggler rule, see :func:`mark_stragglers`)."""
    now = time.time() if now is None else now
    out = Progress()
    for state in read_states(run_dir):
        if state.get("role") == "driver":
            out.drivers.append(state)
        if not state.get("source_task") or not isinstance(state["source_task"], str):
            continue
        entry = _entry(state, now)
        (out.dead if state["alive"] is False else out.running).append(entry)
    mark_stragglers(out.running, typical if done >= STRAGGLER_MIN_DONE else None)
    out.running.sort(key=lambda e: (-e["seconds"], e["host"], e["pid"]))
    return out


def _entry(state: dict[str, Any], now: float) -> dict[str, Any]:
    """One process's row of `status`'s ``running`` (or ``dead``) list."""
    published = number(state.get("seconds"), 0.0) or 0.0
    updated = number(state.get("updated"), now) or now
    seconds = published
    started = number(state.get("task_started"))
    if state["alive"] is not False and started:  # still going: time until now
        seconds = max(published, now - started)
    interval = number(state.get("interval"))
    return {
        "shard": text(state.get("shard")),
        "job": text(state.get("job")),
        "host": text(state.get("host")),
        "pid": state.get("pid"),
        "role": text(state.get("role")),
        "source_task": state.get("source_task"),
        "docs_in": count(state.get("docs_in")),
        "docs_out": count(state.get("docs_out")),
        "bytes": count(state.get("bytes"), None),
        "seconds": round(seconds, 1),
        "docs_per_second": number(state.get("docs_per_second")),
        "tasks_done": count(state.get("tasks_done")),
        "updated_seconds_ago": round(max(now - updated, 0.0), 1),
        "checked": state["alive"] is not None,
        "interval": interval if interval is not None and interval > 0 else DEFAULT_INTERVAL,
        "straggler": False,
        "progressing": progressing(state, now),
    }


def progressing(state: dict[str, Any], now: float) -> bool:
    """Whether the process of a progress file is alive and published within :data:`FROZEN_INTERVALS` of its
    intervals (a process on another host counts by its file's age alone)."""
    if state.get("alive") is False:
        return False
    interval = float(state["interval"] if state.get("interval") is not None else DEFAULT_INTERVAL)
    age = now - float(state.get("updated") or now)
    return age <= FROZEN_INTERVALS * max(interval, MIN_FROZEN_SECONDS)


def mark_stragglers(running: list[dict[str, Any]], typical: float | None) -> None:
    """Set each running entry's ``straggler``: it has run more than :data:`STRAGGLER_FACTOR` times the
    ``typical`` duration (the done tasks' median; without one, the median time so far of at least 3 running
    tasks), and more than :data:`STRAGGLER_MIN_INTERVALS` of its publication intervals."""
    if typical is None and len(running) >= 3:
        typical = statistics.median(e["seconds"] for e in running)
    for e in running:
        floor = STRAGGLER_MIN_INTERVALS * e["interval"]
        e["straggler"] = bool(typical) and e["seconds"] > max(STRAGGLER_FACTOR * float(typical or 0.0), floor)


def running_fraction(running: list[dict[str, Any]], typical: float | None) -> float:
    """How many source tasks' worth of work the running ones have done, judged by time against the done
    tasks' ``typical`` duration (each counts at most 0.9: it has not ended); 0 without a typical duration."""
    if not typical:
        return 0.0
    return sum(min(e["seconds"] / typical, 0.9) for e in running)


__all__ = [
    "FROZEN_INTERVALS",
    "STRAGGLER_FACTOR",
    "STRAGGLER_MIN_DONE",
    "Progress",
    "progressing",
    "read_progress",
    "read_states",
    "running_fraction",
    "running_now",
]
