"""The progress of a run, as data: the ledger's done and failed tasks plus totals from the plan, throughput and ETA,
a row per shard, the array tasks of every submission with their Slurm state and log, and whether it is stalled."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from curator_slurm.errors import RunDirError
from curator_slurm.runs.funnel import describe_numbers, workflow_numbers
from curator_slurm.runs.ledger import LEDGER_DIR, load_status
from curator_slurm.runs.ledger_summary import read_run
from curator_slurm.runs.liveness import live_processes
from curator_slurm.runs.plan import PLAN_FILE, PLAN_REMEDY
from curator_slurm.runs.progress_read import running_now
from curator_slurm.runs.readfile import count, number
from curator_slurm.runs.rundir import (
    DEFAULT_RUN_DIR_NAME,
    RERUN_REMEDY,
    RUN_FILE,
    SOURCES_FILE,
    listing_replaced,
    load_refusals,
    read_json,
)
from curator_slurm.runs.stats import read_stats
from curator_slurm.runs.summary import current_done, summarise_done
from curator_slurm.runs.tallies import shard_row
from curator_slurm.runs.verify import verify_problems, verify_run
from curator_slurm.slurm.control import ACTIVE_STATES, ENDED_BADLY_STATES, job_states
from curator_slurm.slurm.status_text import format_failures, format_status, format_workflow_status, shard_order
from curator_slurm.slurm.submit import SUBMISSIONS_FILE, SubmissionRecord, load_submissions


def check_run_dir(path: str) -> None:
    """Refuse a directory that is not a run directory (a common slip: the output directory itself)."""
    if not os.path.isdir(path):
        raise RunDirError(f"{path}: no such run directory")
    markers = (RUN_FILE, SOURCES_FILE, LEDGER_DIR, PLAN_FILE, SUBMISSIONS_FILE)
    if not any(os.path.lexists(os.path.join(path, m)) for m in markers):
        inner = os.path.join(path, DEFAULT_RUN_DIR_NAME)
        hint = f"; did you mean {inner}?" if os.path.isdir(inner) else ""
        raise RunDirError(f"{path} is not a run directory (no run.json, ledger/ or plan.json){hint}")
    if os.path.lexists(os.path.join(path, RUN_FILE)):  # damaged: a RunDirError naming it, not "0 total, done"
        read_json(os.path.join(path, RUN_FILE), RERUN_REMEDY)


def workflow_phase_dirs(run_dir: str) -> list[tuple[str, str]] | None:
    """(phase, run directory) of each phase when ``run_dir`` is a workflow's, else None."""
    from curator_slurm.workflows.workflow import workflow_phases

    phases = workflow_phases(run_dir)
    return None if phases is None else [(p, os.path.join(run_dir, p)) for p in phases]


def _planned_total(run_dir: str) -> int | None:
    """How many source tasks the run has: the plan submit wrote, else the first listing a process saw."""
    for name, key, remedy in ((PLAN_FILE, "tasks", PLAN_REMEDY), (SOURCES_FILE, "count", RERUN_REMEDY)):
        path = os.path.join(run_dir, name)
        if os.path.lexists(path):
            value = read_json(path, remedy).get(key)
            total = len(value) if isinstance(value, list) and name == PLAN_FILE else count(value, None)
            if total is None or (name == SOURCES_FILE and isinstance(value, list)):
                raise RunDirError(f"{path}: damaged, its {key!r} is {str(value)[:40]!r}; {remedy}")
            return total
    return None


def _shard_rows(
    shards: dict[str, dict[str, Any]], failed: dict[str, dict[str, Any]], submissions: list[SubmissionRecord]
) -> dict[str, dict[str, Any]]:
    """The row of every shard: the done records' (``shards``), with the failures added, and one for each
    submitted shard that recorded nothing (no work, or not run yet); the newest submission first, so a retry's
    shard that has not run shows the retry's array task."""
    for r in failed.values():
        s = shards.setdefault(r.get("shard", "?"), shard_row(r.get("shard", "?"), None))
        s["failed"] += 1
        s["seconds"] += number(r.get("seconds"), 0.0) or 0.0
        if r.get("array_job_id"):
            s["job"] = f"{r['array_job_id']}_{r['array_task_id']}"
    for sub in reversed(submissions):
        for a in sub["arrays"] if sub.get("shards") else []:
            for index in range(int(a.get("size", 0))):
                label = f"{int(a['offset']) + index}/{sub['shards']}"
                shards.setdefault(label, shard_row(label, f"{a['job_id']}_{index}"))
    return shards


def _read_ledger(
    run_dir: str, verify: bool = False, precise: bool = False
) -> tuple[dict[str, dict[str, Any]], Any, int]:
    """The failed source tasks, the done ones' summary, and how many done ones the current listing no longer
    has: from the ledger files' summaries where they are exact (``read_run``), unless accepted new inputs
    replaced the listing, or ``precise`` (then record by record, counting only the current listing's tasks);
    with ``verify``, every record is read."""
    if not listing_replaced(run_dir) and not precise:
        failed, summary = read_run(run_dir, summaries=not verify)
        return failed, summary, 0
    state = load_status(run_dir)
    current, outside = current_done(run_dir, state.done)  # done tasks of inputs no longer listed do not count
    return state.failed, summarise_done(run_dir, current), outside


def _counted(run_dir: str, verify: bool) -> tuple[dict[str, dict[str, Any]], Any, int, int]:
    """:func:`_read_ledger`'s failed tasks, done summary and done tasks not listed, with the run's total: done
    records of tasks that the listing lacks (a ledger file copied from another run) are read again record by
    record to leave them out, and never count above the total."""
    failed, summary, outside = _read_ledger(run_dir, verify)
    total = _planned_total(run_dir)
    if total is not None and summary.done > total and not outside:
        failed, summary, outside = _read_ledger(run_dir, verify, precise=True)
    if total is not None and summary.done > total:  # no listing kept to tell which: never above 100 %
        outside, summary.done = outside + summary.done - total, total
    return failed, summary, outside, total if total is not None else summary.done + len(failed)


def collect_status(run_dir: str, verify: bool = False, stats: bool = True) -> dict[str, Any]:
    """Everything `status` shows, as data (the keys are those of ``status --json``); with ``verify``, also
    whether every done source task's outputs are still there and its inputs unchanged (``verified``)."""
    check_run_dir(run_dir)
    failed, summary, outside, total = _counted(run_dir, verify)
    done_count = summary.done
    pending = max(total - done_count - len(failed), 0)
    elapsed = summary.last_time - summary.first_time if summary.records else 0.0
    rate = done_count / elapsed if elapsed > 0 else None
    progress = running_now(run_dir, summary.durations, done_count)  # what each process does now (runs.progress)
    submissions = load_submissions(run_dir)
    shards = _shard_rows(summary.shards, failed, submissions)
    job_ids = [str(a["job_id"]) for sub in submissions for a in sub["arrays"]]
    states = job_states(job_ids)
    active: dict[str, int] | None = None
    tasks = array_tasks(run_dir, submissions, states)
    never_started(tasks, states)
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
    live = live_processes(run_dir)
    # Pending work with nothing queued or running (no array task, no process of this host: those killed
    # left their markers behind) will never finish by itself: stopped, no ETA. Unknown when the run has
    # jobs and Slurm cannot be asked.
    working = running + live.running
    stalled = bool(pending) and working == 0 and (states is not None or not job_ids)
    # Every process of this host stopped (SIGSTOP) with nothing queued or running elsewhere: nothing advances.
    frozen = bool(pending) and bool(live.frozen) and len(live.frozen) == working
    recorded = summary.jobs | {
        f"{r['array_job_id']}_{r['array_task_id']}" for r in failed.values() if r.get("array_job_id")
    }
    last = tasks[-1]["submission"] if tasks else None
    ended = ended_tasks(tasks, recorded, bool(pending or failed), last)
    return {
        "run_dir": os.path.abspath(run_dir),
        "total": total,
        "done": done_count,
        "failed": len(failed),
        "pending": pending,
        "percent": 100.0 * done_count / total if total else 100.0,
        "rows_in": summary.rows_in,
        "rows_out": summary.rows_out,
        "tokens": summary.tokens,
        "s3": summary.s3,
        "tasks_per_second": rate,
        "docs_per_second": summary.rows_in / elapsed if elapsed > 0 else None,
        "eta_seconds": None if stalled or frozen else eta(pending, rate, progress.share),
        "stalled": stalled,
        "stopped": stalled,
        "active": working + (1 if states is None and job_ids else 0),
        "processes": {
            "alive": list(live.alive),
            "elsewhere": list(live.elsewhere),
            "gone": list(live.gone),
            "frozen": list(live.frozen) if frozen else [],
        },
        "shards": sorted(shards.values(), key=shard_order),
        "jobs": job_ids,
        "job_states": active,
        "ended_tasks": ended,
        "last_submission_failed": sum(1 for t in ended if t["submission"] == last),
        "funnel": [row.as_dict() for row in summary.funnel],
        "verified": verify_run(run_dir) if verify else None,
        "done_not_listed": outside,
        "damaged": int(summary.notes.get("damaged_total") or len(summary.notes.get("damaged") or [])),
    } | {
        "notes": summary.notes,  # why stages dropped documents, damaged inputs (stages.notes)
        "stats": read_stats(run_dir) if stats else None,  # the processes' stats files merged (runs.stats)
        "takeover": summary.takeover,  # who did what (runs.takeover)
        **progress.fields(),
    }


def eta(pending: int, rate: float | None, running: float) -> float | None:
    """Seconds until the ``pending`` source tasks are done at ``rate`` tasks per second, less the ``running``
    tasks' worth of work already done (:func:`running_fraction`); 0 with nothing pending, None without a rate."""
    if not pending:
        return 0.0
    if not rate:
        return None
    return max(pending - running, 0.0) / rate


def ended_tasks(
    tasks: list[dict[str, Any]], recorded: set[str], work_left: bool, last: str | None
) -> list[dict[str, Any]]:
    """The array tasks that ended badly: those of any submission while work is left, and always those of
    the newest one (``last``: its tasks were meant to finish the run; it is not complete while they
    failed), each with whether it ``recorded`` work (its ``<job>_<index>`` wrote a ledger record) and
    ``started`` (it left a log: one cancelled while it waited never started, and has no log to point at)."""
    ended = []
    for t in tasks:
        if t["state"] in ENDED_BADLY_STATES and (work_left or t["submission"] == last):
            started = os.path.exists(t["log"])
            ended.append(
                {**t, "recorded": t["job"] in recorded, "started": started, "log": t["log"] if started else None}
            )
    return ended


def never_started(tasks: list[dict[str, Any]], states: dict[str, str] | None) -> None:
    """Give the state CANCELLED (and ``unlisted: True``) to each task that squeue does not list and that left
    no log: it is neither queued nor running, and it never started. Slurm keeps no record of a pending array
    task that ``scancel <job>_<index>`` cancels (it drops the index from its array), and forgets a whole job
    ``MinJobAge`` after it ended (a phase cancelled while it waited); without this such a task was "UNKNOWN"
    in ``status`` and missing from ``failures``. Nothing is changed when Slurm cannot be asked."""
    if states is None:
        return
    for task in tasks:
        if task["state"] is None and not os.path.exists(task["log"]):
            task["state"], task["unlisted"] = "CANCELLED", True


def array_tasks(
    run_dir: str, submissions: list[SubmissionRecord], states: dict[str, str] | None
) -> list[dict[str, Any]]:
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


#: `status` exit codes: the run's state as a program can read it (the reference lists them).
EXIT_OK, EXIT_NOT_COMPLETE, EXIT_USAGE, EXIT_DAMAGED = 0, 1, 2, 3


def status_exit_code(status: dict[str, Any]) -> int:
    """1 when some source task failed, the run is stopped (work pending, nothing queued or running), an
    array task of the newest submission ended badly, or ``--verify`` found lost outputs, changed inputs or
    changed inputs of an earlier phase; else 3 when damaged inputs lost records (done: no retry can fix
    them, but the output lacks what they held); else 0 (complete, or still going)."""
    bad = verify_problems(status.get("verified"))
    if status["failed"] or status["stalled"] or status["last_submission_failed"] or bad:
        return EXIT_NOT_COMPLETE
    return EXIT_DAMAGED if status.get("damaged") else EXIT_OK


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


def status_report(run_dir: str, show_all: bool = False, verify: bool = False, stats: bool = True) -> StatusReport:
    """:func:`collect_status` of ``run_dir``, or of every phase when it is a workflow's, with its text.
    Settled (``--watch`` stops) when nothing can change any more: nothing pending, or nothing running."""
    from curator_slurm.workflows.workflow import workflow_document_phases, workflow_warnings

    phases = workflow_phase_dirs(run_dir)
    if phases is None:
        s = collect_status(run_dir, verify, stats)
        settled = s["pending"] == 0 or s["stalled"]
        return StatusReport(s, format_status(s, show_all), status_exit_code(s), settled, workflow=False)
    statuses = workflow_status(phases, verify, stats)
    stopped = workflow_stopped(statuses, live_processes(run_dir).running)
    warnings = workflow_warnings(run_dir)
    starting = phases_starting(phases)
    numbers = workflow_numbers(statuses, workflow_document_phases(run_dir))
    data = {
        "workflow": run_dir,
        "phases": statuses,
        "stopped": stopped,
        "starting": starting,
        "numbers": numbers,
        "warnings": warnings,
    }
    text = format_workflow_status(statuses, show_all, run_dir if stopped else None, starting)
    text = "".join(f"warning: {w}\n" for w in warnings) + f"workflow: {describe_numbers(numbers)}\n{text}"
    code = worst([workflow_exit_code(statuses), EXIT_NOT_COMPLETE if stopped else EXIT_OK])
    return StatusReport(data, text, code, stopped or workflow_settled(statuses), workflow=True)


def workflow_status(
    phases: list[tuple[str, str]], verify: bool = False, stats: bool = True
) -> dict[str, dict[str, Any] | None]:
    """The status of each phase (``workflow_phase_dirs``), in order; None for a phase whose run directory
    does not exist yet (not started)."""
    return {name: collect_status(d, verify, stats) if phase_started(d) else None for name, d in phases}


def workflow_numbers_of(run_root: str) -> dict[str, Any]:
    """The workflow's own numbers (``status --json``'s ``numbers``: :func:`~curator_slurm.runs.funnel.
    workflow_numbers`) of the workflow whose run directory is ``run_root``."""
    from curator_slurm.workflows.workflow import workflow_document_phases

    phases = workflow_phase_dirs(run_root)
    if phases is None:
        raise RunDirError(f"{run_root} is not a workflow's run directory (no workflow.json)")
    return workflow_numbers(workflow_status(phases), workflow_document_phases(run_root))


def phase_started(run_dir: str) -> bool:
    """Whether a phase's run directory holds a run yet: a directory that exists without any of its files is
    being set up (``starting``), not an error."""
    markers = (RUN_FILE, SOURCES_FILE, LEDGER_DIR, PLAN_FILE, SUBMISSIONS_FILE)
    return os.path.isdir(run_dir) and any(os.path.exists(os.path.join(run_dir, m)) for m in markers)


def phases_starting(phases: list[tuple[str, str]]) -> list[str]:
    """The phases whose run directory exists but holds no run yet (being set up)."""
    return [name for name, d in phases if os.path.isdir(d) and not phase_started(d)]


def workflow_exit_code(statuses: dict[str, dict[str, Any] | None]) -> int:
    """:func:`status_exit_code` of the worst phase that started."""
    return worst([status_exit_code(s) for s in statuses.values() if s is not None])


def worst(codes: list[int]) -> int:
    """The exit code that says the most: not complete (1) over damaged inputs (3) over fine (0)."""
    rank = {EXIT_OK: 0, EXIT_DAMAGED: 1, EXIT_NOT_COMPLETE: 2}
    return max(codes, key=lambda c: rank.get(c, 3), default=EXIT_OK)


def workflow_stopped(statuses: dict[str, dict[str, Any] | None], root_processes: int) -> bool:
    """Whether a workflow is stopped: its last phase is not complete, and nothing of it is queued or
    running (no array task of any phase, no process in any phase's run directory or in the workflow's)."""
    last = list(statuses.values())[-1]
    complete = last is not None and last["pending"] == 0 and not last["failed"]
    return not complete and root_processes == 0 and all(s is None or s["active"] == 0 for s in statuses.values())


def workflow_settled(statuses: dict[str, dict[str, Any] | None]) -> bool:
    """Whether watching a workflow can stop: its last phase has nothing pending, or a phase failed or
    stalled (the phases after it cannot start by themselves)."""
    last = list(statuses.values())[-1]
    finished = last is not None and last["pending"] == 0
    return finished or any(s is not None and (s["stalled"] or s["failed"]) for s in statuses.values())


def damaged_inputs(run_dir: str) -> list[dict[str, Any]]:
    """The damaged inputs the done source tasks of ``run_dir`` noted (file, offset, error, source)."""
    return list(collect_status(run_dir)["notes"].get("damaged") or [])


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
            + (" before it started" if not t["started"] else "" if t["recorded"] else " without recording any work")
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


__all__ = [
    "StatusReport",
    "check_run_dir",
    "collect_status",
    "damaged_inputs",
    "failure_rows",
    "format_failures",
    "format_status",
    "format_workflow_status",
    "shard_order",
    "status_report",
    "workflow_numbers_of",
    "workflow_phase_dirs",
]
