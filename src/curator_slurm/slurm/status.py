"""The progress of a run, as data and as the text `curator-slurm status` and `failures` print.

Which source tasks are done or failed is the ledger's answer (:func:`~curator_slurm.runs.ledger.load_status`);
this module adds what a person following a run wants besides: totals from the plan, throughput and ETA,
a row per shard, the array tasks of every submission with their Slurm state and log, and whether the run is
stalled (work pending, nothing queued or running).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from curator_slurm.errors import RunDirError
from curator_slurm.runs.ledger import LEDGER_DIR, load_status
from curator_slurm.runs.plan import PLAN_FILE, PLAN_REMEDY
from curator_slurm.runs.rundir import (
    DEFAULT_RUN_DIR_NAME,
    RERUN_REMEDY,
    RUN_FILE,
    SOURCES_FILE,
    load_refusals,
    read_json,
)
from curator_slurm.runs.summary import shard_row, summarise_done
from curator_slurm.slurm.control import ACTIVE_STATES, ENDED_BADLY_STATES, job_states
from curator_slurm.slurm.submit import SUBMISSIONS_FILE, load_submissions


def check_run_dir(path: str) -> None:
    """Refuse a directory that is not a run directory (a common slip: the output directory itself)."""
    if not os.path.isdir(path):
        raise RunDirError(f"{path}: no such run directory")
    markers = (RUN_FILE, SOURCES_FILE, LEDGER_DIR, PLAN_FILE, SUBMISSIONS_FILE)
    if not any(os.path.exists(os.path.join(path, m)) for m in markers):
        inner = os.path.join(path, DEFAULT_RUN_DIR_NAME)
        hint = f"; did you mean {inner}?" if os.path.isdir(inner) else ""
        raise RunDirError(f"{path} is not a run directory (no run.json, ledger/ or plan.json){hint}")


def workflow_phase_dirs(run_dir: str) -> list[tuple[str, str]] | None:
    """(phase, run directory) of each phase when ``run_dir`` is a workflow's, else None."""
    from curator_slurm.workflow import workflow_phases

    phases = workflow_phases(run_dir)
    return None if phases is None else [(p, os.path.join(run_dir, p)) for p in phases]


def _planned_total(run_dir: str) -> int | None:
    """How many source tasks the run has: the plan submit wrote, else the first listing a process saw."""
    if os.path.exists(os.path.join(run_dir, PLAN_FILE)):
        return len(read_json(os.path.join(run_dir, PLAN_FILE), PLAN_REMEDY)["tasks"])
    if os.path.exists(os.path.join(run_dir, SOURCES_FILE)):
        return read_json(os.path.join(run_dir, SOURCES_FILE), RERUN_REMEDY)["count"]
    return None


def collect_status(run_dir: str) -> dict[str, Any]:
    """Everything `status` shows, as data (the keys are those of ``status --json``)."""
    check_run_dir(run_dir)
    state = load_status(run_dir)
    failed = state.failed
    summary = summarise_done(run_dir, state.done)
    done_count = summary.done
    total = _planned_total(run_dir)
    total = total if total is not None else done_count + len(failed)
    pending = max(total - done_count - len(failed), 0)
    rows_in, rows_out = summary.rows_in, summary.rows_out
    elapsed = summary.last_time - summary.first_time if summary.records else 0.0
    rate = done_count / elapsed if elapsed > 0 else None
    shards = summary.shards
    for r in failed.values():
        s = shards.setdefault(r.get("shard", "?"), shard_row(r.get("shard", "?"), None))
        s["failed"] += 1
        s["seconds"] += r.get("seconds", 0.0)
        if r.get("array_job_id"):
            s["job"] = f"{r['array_job_id']}_{r['array_task_id']}"
    submissions = load_submissions(run_dir)
    # A submitted shard that recorded nothing (no work, or not run yet) still gets its row; the newest
    # submission first, so a retry's shard that has not run shows the retry's array task.
    for sub in reversed(submissions):
        for a in sub["arrays"] if sub.get("shards") else []:
            for index in range(int(a.get("size", 0))):
                label = f"{int(a['offset']) + index}/{sub['shards']}"
                shards.setdefault(label, shard_row(label, f"{a['job_id']}_{index}"))
    job_ids = [str(a["job_id"]) for sub in submissions for a in sub["arrays"]]
    states = job_states(job_ids)
    active = None
    tasks = array_tasks(run_dir, submissions, states)
    if states is not None:
        active = {}
        for task in tasks:
            task_state = task["state"] or "UNKNOWN"  # forgotten by Slurm (older than MinJobAge)
            active[task_state] = active.get(task_state, 0) + 1
        for row in shards.values():
            row["state"] = None
        for task in reversed(tasks):  # the newest submission's task of a shard wins
            if task["shard"] in shards and shards[task["shard"]].get("state") is None:
                shards[task["shard"]]["state"] = task["state"]
    running = sum(1 for t in tasks if t["state"] in ACTIVE_STATES)
    # Pending work with nothing queued or running will never finish by itself: no ETA, but the tasks that
    # ended without doing it and the retry command.
    stalled = bool(pending) and states is not None and running == 0
    recorded = {label for label, row in shards.items() if row["done"] or row["failed"]}
    last = tasks[-1]["submission"] if tasks else None
    # Array tasks that ended badly: those of any submission while work is left, and always those of the
    # newest one (its tasks were meant to finish the run; it is not complete while they failed).
    ended = [
        {**t, "recorded": t["shard"] in recorded}
        for t in tasks
        if t["state"] in ENDED_BADLY_STATES and (pending or failed or t["submission"] == last)
    ]
    return {
        "run_dir": os.path.abspath(run_dir),
        "total": total,
        "done": done_count,
        "failed": len(failed),
        "pending": pending,
        "percent": 100.0 * done_count / total if total else 100.0,
        "rows_in": rows_in,
        "rows_out": rows_out,
        "tokens": summary.tokens,
        "tasks_per_second": rate,
        "docs_per_second": rows_in / elapsed if elapsed > 0 else None,
        "eta_seconds": None if stalled else pending / rate if rate and pending else (0.0 if not pending else None),
        "stalled": stalled,
        "shards": sorted(shards.values(), key=shard_order),
        "jobs": job_ids,
        "job_states": active,
        "ended_tasks": ended,
        "last_submission_failed": sum(1 for t in ended if t["submission"] == last),
        "funnel": [row.as_dict() for row in summary.funnel],
    }


def array_tasks(run_dir: str, submissions: list[dict[str, Any]], states: dict[str, str] | None) -> list[dict[str, Any]]:
    """Every array task of every submission, oldest first: ``job`` (``123_4``), ``shard`` (``i/N``),
    ``state`` (from squeue; None when Slurm no longer knows the task or cannot be asked) and ``log``."""
    tasks = []
    for line, sub in enumerate(submissions):
        logs = sub.get("options", {}).get("output_logs") or os.path.join(run_dir, "logs")
        submission = sub.get("submission") or f"line {line + 1}"  # one line per submission before ids
        for a in sub.get("arrays", []):
            for index in range(int(a.get("size", 0))):
                job = f"{a['job_id']}_{index}"
                tasks.append(
                    {
                        "job": job,
                        "shard": f"{int(a['offset']) + index}/{sub['shards']}",
                        "state": (states or {}).get(job),
                        "log": os.path.join(logs, f"{job}.log"),
                        "submission": submission,
                    }
                )
    return tasks


def shard_order(row: dict[str, Any]) -> tuple[int, int, str]:
    """By shard count, then index: ``2/16`` before ``10/16``, and the shards of one count together."""
    index, _, count = str(row["shard"]).partition("/")
    if index.isdigit() and count.isdigit():
        return int(count), int(index), ""
    return -1, -1, str(row["shard"])


def status_exit_code(status: dict[str, Any]) -> int:
    """1 when some source task failed, the run is stalled (work pending, nothing queued or running), or
    an array task of the newest submission ended badly; else 0 (complete, or still going)."""
    return 1 if status["failed"] or status["stalled"] or status["last_submission_failed"] else 0


@dataclass(frozen=True)
class StatusReport:
    """One look at a run (a workflow: at each of its phases): ``data`` as ``status --json`` prints it,
    ``text`` as ``status`` prints it, the exit ``code``, and whether ``settled`` (``--watch`` can stop:
    nothing pending, or nothing that will go on by itself)."""

    data: dict[str, Any]
    text: str
    code: int
    settled: bool
    workflow: bool


def status_report(run_dir: str, show_all: bool = False) -> StatusReport:
    """:func:`collect_status` of ``run_dir``, or of every phase when it is a workflow's, with its text."""
    phases = workflow_phase_dirs(run_dir)
    if phases is None:
        s = collect_status(run_dir)
        settled = s["pending"] == 0 or s["stalled"]
        return StatusReport(s, format_status(s, show_all), status_exit_code(s), settled, workflow=False)
    statuses = workflow_status(phases)
    data = {"workflow": run_dir, "phases": statuses}
    text = format_workflow_status(statuses, show_all)
    return StatusReport(data, text, workflow_exit_code(statuses), workflow_settled(statuses), workflow=True)


def workflow_status(phases: list[tuple[str, str]]) -> dict[str, dict[str, Any] | None]:
    """The status of each phase (``workflow_phase_dirs``), in order; None for a phase whose run directory
    does not exist yet (not started)."""
    return {name: collect_status(d) if os.path.isdir(d) else None for name, d in phases}


def workflow_exit_code(statuses: dict[str, dict[str, Any] | None]) -> int:
    """:func:`status_exit_code` of the worst phase that started."""
    return max((status_exit_code(s) for s in statuses.values() if s is not None), default=0)


def workflow_settled(statuses: dict[str, dict[str, Any] | None]) -> bool:
    """Whether watching a workflow can stop: its last phase has nothing pending, or a phase failed or
    stalled (the phases after it cannot start by themselves)."""
    last = list(statuses.values())[-1]
    finished = last is not None and last["pending"] == 0
    return finished or any(s is not None and (s["stalled"] or s["failed"]) for s in statuses.values())


def format_workflow_status(statuses: dict[str, dict[str, Any] | None], show_all: bool) -> str:
    """The text of `curator-slurm status` for a workflow: each phase's, under its name."""
    return "\n".join(
        f"== phase {name}: not started" if s is None else f"== phase {name}\n{format_status(s, show_all)}"
        for name, s in statuses.items()
    )


def format_status(status: dict[str, Any], show_all: bool) -> str:
    """The text of `curator-slurm status` for ``status`` (from :func:`collect_status`); without
    ``show_all`` a large run shows only the shards with failures and the slowest ones."""

    def num(value: float | None, fmt: str = "{:.1f}") -> str:
        return "-" if value is None else fmt.format(value)

    lines = [
        f"run directory {status['run_dir']}",
        f"source tasks: {status['total']} total, {status['done']} done, {status['failed']} failed, "
        f"{status['pending']} pending ({status['percent']:.1f}% done)",
    ]
    eta = "stalled" if status["stalled"] else f"ETA {num(status['eta_seconds'], '{:.0f}')} s"
    lines.append(
        f"documents: {status['rows_in']} in, {status['rows_out']} out; throughput "
        f"{num(status['docs_per_second'], '{:.0f}')} docs/s, {num(status['tasks_per_second'], '{:.2f}')} tasks/s; {eta}"
    )
    if status.get("tokens") is not None:
        lines.append(f"tokens: {status['tokens']} in the outputs of the done source tasks")
    if status["funnel"]:
        lines.append(f"funnel of the done source tasks, all shards: {'docs in':>10} {'docs out':>10} {'dropped':>10}")
        for row in status["funnel"]:
            dropped = row["dropped"] if row["rows_in"] else "-"
            lines.append(f"  {row['stage']:<45} {row['rows_in']:>10} {row['rows_out']:>10} {dropped:>10}")
    if status["job_states"] is not None:
        states = ", ".join(f"{n} {s}" for s, n in sorted(status["job_states"].items())) or "none known to Slurm"
        lines.append(f"array tasks of jobs {', '.join(status['jobs']) or '-'}: {states}")
    ended = status["ended_tasks"]
    for t in ended if show_all else ended[:10]:
        what = "after recording some work" if t["recorded"] else "without recording any work"
        lines.append(f"array task {t['job']} (shard {t['shard']}) ended {t['state']} {what}; log: {t['log']}")
    if len(ended) > 10 and not show_all:
        lines.append(f"... and {len(ended) - 10} more array tasks that ended badly (--all lists them)")
    if status["last_submission_failed"] and not status["pending"] and not status["failed"]:
        lines.append(
            f"not complete: {status['last_submission_failed']} array task(s) of the last submission ended badly "
            "(see their logs above), although every source task is recorded done"
        )
    if status["stalled"]:
        lines.append(
            f"stalled: {status['pending']} source tasks pending and no job of this run is queued or running; "
            f"see the logs above and `curator-slurm failures {status['run_dir']}`, then "
            f"`curator-slurm retry {status['run_dir']}`"
        )
    shards = status["shards"]
    if shards:
        shown = shards
        if not show_all and len(shards) > 20:
            incomplete = [s for s in shards if s["failed"]]
            slowest = sorted(shards, key=lambda s: -s["seconds"])[:5]
            shown = sorted({s["shard"]: s for s in incomplete + slowest}.values(), key=shard_order)
            lines.append(f"shards with failures and the 5 slowest of {len(shards)} (--all for every shard):")
        lines.append(f"{'shard':>10} {'done':>6} {'failed':>6} {'seconds':>9} {'docs in':>10}  job")
        for s in shown:
            state = f" {s['state']}" if s.get("state") else ""
            lines.append(
                f"{s['shard']:>10} {s['done']:>6} {s['failed']:>6} {s['seconds']:>9.1f} {s['rows_in']:>10}  "
                f"{s['job'] or '-'}{state}"
            )
    return "\n".join(lines)


def failure_rows(run_dir: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What `failures` lists: one row per failed source task (stage, error, files, attempts, shard, host,
    job, log, traceback), and, while work is pending, one row per array task that ended badly (a task that
    died at import, was cancelled or ran out of time recorded nothing for the source tasks it never did)."""
    check_run_dir(run_dir)
    logs_dirs = {
        str(a["job_id"]): sub["options"].get("output_logs") or os.path.join(run_dir, "logs")
        for sub in load_submissions(run_dir)
        for a in sub["arrays"]
    }
    rows = []
    for source, r in sorted(load_status(run_dir).failed.items()):
        job = r.get("array_job_id")
        log = None
        if job and str(job) in logs_dirs:
            log = os.path.join(logs_dirs[str(job)], f"{job}_{r['array_task_id']}.log")
        rows.append(
            _failure_row(
                source=source,
                stage=r.get("stage"),
                error=r.get("error"),
                files=r.get("files"),
                attempts=r.get("attempts"),
                shard=r.get("shard"),
                host=r.get("host"),
                job=f"{job}_{r['array_task_id']}" if job else r.get("job_id"),
                log=log,
                traceback=r.get("traceback"),
            )
        )
    status = collect_status(run_dir)
    ended = status["ended_tasks"] if status["pending"] else []  # else the failed source tasks say it all
    refused = load_refusals(run_dir)
    tasks = [
        _failure_row(
            error=f"array task {t['job']} ended {t['state']}"
            + ("" if t["recorded"] else " without recording any work")
            + (f": the run directory refused it: {refused[t['job']]['error']}" if t["job"] in refused else ""),
            shard=t["shard"],
            job=t["job"],
            log=t["log"],
        )
        for t in ended
    ]
    return rows, tasks


def _failure_row(**values: Any) -> dict[str, Any]:
    keys = ("source", "stage", "error", "files", "attempts", "shard", "host", "job", "log", "traceback")
    return {k: values.get(k) for k in keys}


def format_failures(rows: list[dict[str, Any]], tasks: list[dict[str, Any]], traceback: bool) -> str:
    """The text of `curator-slurm failures` for :func:`failure_rows`' ``rows`` and ended array ``tasks``."""
    if not rows and not tasks:
        return "no failed source tasks"
    lines = [f"- {r['error']} (shard {r['shard']}); log: {r['log']}" for r in tasks]
    if not rows:
        lines.append("no failed source tasks recorded; the array tasks above ended before recording theirs")
        return "\n".join(lines)
    lines.append(f"{len(rows)} failed source task(s):")
    for r in rows:
        lines.append(
            f"- {r['source']} [{r['stage']}] after {r['attempts']} attempt(s), shard {r['shard']} on {r['host']}"
        )
        lines.append(f"  error: {(r['error'] or '').splitlines()[0] if r['error'] else ''}")
        if r["files"]:
            lines.append(f"  files: {', '.join(map(str, r['files']))}")
        if r["log"]:
            lines.append(f"  log:   {r['log']}")
        if traceback and r["traceback"]:
            lines.append("  " + r["traceback"].rstrip().replace("\n", "\n  "))
    return "\n".join(lines)
