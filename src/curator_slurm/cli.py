"""The ``curator-slurm`` command: submit, status, failures, retry, plan, local, shard.

Every command exits non-zero with a one-line reason on bad input; ``--json`` prints data as JSON.
A pipeline script's own arguments go after ``--``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from curator_slurm import __version__
from curator_slurm.errors import CuratorError
from curator_slurm.slurm.env import job_environment

EXAMPLES = {
    "submit": """examples:
  curator-slurm submit curate.py --shards 100 --time 2:00:00 --cpus-per-task 8 -- --input data/ --output out/
  curator-slurm submit curate.py --shards 5000 --throttle 200 --dry-run -- --input data/ --output out/
  curator-slurm submit curate.py --shards 16 --nodes-per-task 4 -- --input data/ --output out/ --executor ray""",
    "status": """examples:
  curator-slurm status out/.curator-run
  curator-slurm status out/.curator-run --all --json
  curator-slurm status out/.curator-run --watch 30""",
    "failures": """examples:
  curator-slurm failures out/.curator-run
  curator-slurm failures out/.curator-run --traceback""",
    "retry": """examples:
  curator-slurm retry out/.curator-run
  curator-slurm retry out/.curator-run --shards 4 --time 1:00:00 --dry-run""",
    "plan": """examples:
  curator-slurm plan curate.py --shards 1000 -- --input data/ --output out/""",
    "local": """examples:
  curator-slurm local curate.py --shards 4 -- --input data/ --output out/
  curator-slurm local curate.py --shards 16 --parallel 2 --logs logs/ -- --input data/ --output out/""",
}


#: What to do about a damaged plan.json (see ``read_json``).
PLAN_REMEDY = "restore it, or delete it and submit the run again (`curator-slurm submit` writes it)"


class UsageError(CuratorError):
    """Bad command-line input."""


# --- helpers ----------------------------------------------------------------------------------------


def _split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Options for us before ``--``, the pipeline script's own arguments after it."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def run_plan(script: str, script_args: Sequence[str], cwd: str | None = None) -> dict[str, Any]:
    """Run ``script`` in plan mode (in ``cwd``, default this directory): it lists its source tasks and
    exits without reading data."""
    if not os.path.isfile(script):
        raise UsageError(f"{script}: no such pipeline script")
    with tempfile.TemporaryDirectory(prefix="curator-plan-") as tmp:
        out = os.path.join(tmp, "plan.json")
        proc = subprocess.run(
            [sys.executable, script, *script_args],
            env=job_environment(extra={"CURATOR_PLAN_OUT": out}),
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        if proc.returncode != 0 or not os.path.exists(out):
            detail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            if proc.returncode == 0:
                detail = "it finished without running a Pipeline"
            raise UsageError(f"listing the work of {script} failed (exit {proc.returncode}): {detail}")
        with open(out, encoding="utf-8") as f:
            plans = [json.loads(line) for line in f if line.strip()]
        # The full source tasks of the first plan, for the manifest (None: they cannot go into one); read now,
        # before the temporary directory goes. Not part of plan.json.
        from curator_slurm.runs.manifest import read_sources

        sources_file = plans[0].get("sources_file")
        table = read_sources(sources_file) if sources_file and plans[0].get("kind") == "pipeline" else None
        phase_sources = {
            phase["phase"]: read_sources(phase["sources_file"])
            for phase in plans[0].get("phases", [])
            if phase.get("sources_file")
        }
        for p in plans:
            p.pop("sources_file", None)
            for phase in p.get("phases", []):
                phase.pop("sources_file", None)
        # A script may run several pipelines (or a workflow of several phases): each wrote one plan line. The
        # first is the one submitted and followed; a workflow's line holds all of its phases.
        return {**plans[0], "plans": plans, "sources_table": table, "phase_sources": phase_sources}


def shard_loads(tasks: list[list[Any]], shards: int, strategy: str) -> list[tuple[int, float]]:
    """(task count, weight) per shard under ``strategy``."""
    from curator_slurm.runs.sharding import balanced_assignment, hash_assignment

    ids = [t[0] for t in tasks]
    weights = [float(t[1]) for t in tasks]
    owner = balanced_assignment(ids, weights, shards) if strategy == "balanced" else hash_assignment(ids, shards)
    loads = [[0, 0.0] for _ in range(shards)]
    for s, w in zip(owner, weights, strict=True):
        loads[s][0] += 1
        loads[s][1] += w
    return [(int(c), w) for c, w in loads]


def _fmt_weight(value: float, has_bytes: bool) -> str:
    from curator_slurm.runs.sharding import format_bytes

    return format_bytes(value) if has_bytes else f"{value:.0f}"


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# --- plan -------------------------------------------------------------------------------------------


def plan_summary(plan: dict[str, Any], shards: int) -> dict[str, Any]:
    summary: dict[str, Any] = {"source_tasks": len(plan["tasks"]), "shards": shards, "strategies": {}}
    for strategy in ("hash", "balanced"):
        loads = shard_loads(plan["tasks"], shards, strategy)
        weights = [w for _, w in loads]
        counts = [c for c, _ in loads]
        mean = statistics.mean(weights) if weights else 0.0
        summary["strategies"][strategy] = {
            "tasks_min": min(counts),
            "tasks_max": max(counts),
            "weight_min": min(weights),
            "weight_mean": mean,
            "weight_max": max(weights),
            "imbalance": max(weights) / mean if mean else 1.0,
            "empty_shards": sum(1 for c in counts if c == 0),
        }
    return summary


def cmd_plan(args: argparse.Namespace, script_args: list[str]) -> int:
    plan = run_plan(args.script, script_args)
    summary = plan_summary(plan, args.shards)
    summary["run_dir"] = plan["run_dir"]
    table = plan.pop("sources_table")
    if plan.get("kind") == "workflow":  # the table shows the first phase; submit gives every phase a manifest
        table = (plan.get("phase_sources") or {}).get(plan["phases"][0]["phase"])
        summary["phase"] = plan["phases"][0]["phase"]
    summary["manifest"] = table is not None
    summary["submit_strategy"] = "balanced" if summary["manifest"] else "hash"
    if args.json:
        _print_json(summary)
        return 0
    unit = "bytes" if plan["has_bytes"] else "weight"
    of = f" of phase {summary['phase']!r}" if "phase" in summary else ""
    print(f"{summary['source_tasks']} source tasks{of} over {args.shards} shards (run directory: {plan['run_dir']})")
    print(
        f"{'strategy':<9} {'tasks min-max':>14} {unit + ' min':>12} {'mean':>12} {'max':>12} "
        f"{'max/mean':>9} {'empty':>6}"
    )
    for strategy, s in summary["strategies"].items():
        print(
            f"{strategy:<9} {s['tasks_min']:>6}-{s['tasks_max']:<7} "
            f"{_fmt_weight(s['weight_min'], plan['has_bytes']):>12} "
            f"{_fmt_weight(s['weight_mean'], plan['has_bytes']):>12} "
            f"{_fmt_weight(s['weight_max'], plan['has_bytes']):>12} {s['imbalance']:>9.3f} {s['empty_shards']:>6}"
        )
    chosen = summary["submit_strategy"]
    why = (
        "the tasks load a manifest of this listing, so every shard sees the same list"
        if summary["manifest"]
        else "the source tasks cannot go into a manifest, so each task lists its input; balanced needs every "
        "shard to list the same inputs (--strategy balanced)"
    )
    print(f"submit would use {chosen} (expected max/mean {summary['strategies'][chosen]['imbalance']:.3f}): {why}")
    return 0


# --- submit / retry ---------------------------------------------------------------------------------


def _add_sbatch_options(p: argparse.ArgumentParser, defaults_from_run: bool = False) -> None:
    d = argparse.SUPPRESS if defaults_from_run else None
    p.add_argument("--throttle", type=int, default=d, metavar="K", help="run at most K tasks of an array at once (%%K)")
    p.add_argument("--time", default=d, help="time limit per task, e.g. 2:00:00")
    p.add_argument("--partition", default=d)
    p.add_argument("--cpus-per-task", type=int, default=d)
    p.add_argument("--mem", default=d, help="memory per node, e.g. 16G")
    p.add_argument("--gpus-per-task", type=int, default=d)
    p.add_argument(
        "--nodes-per-task",
        type=int,
        default=argparse.SUPPRESS if defaults_from_run else 1,
        help="nodes per array task; > 1 starts a Ray cluster over them",
    )
    p.add_argument("--job-name", default=d)
    p.add_argument("--output-logs", default=d, metavar="DIR", help="task logs go to DIR/<job>_<task>.log")
    p.add_argument("--signal", default=d, help="sbatch --signal, e.g. B:USR1@300 to stop cleanly before the time limit")
    p.add_argument(
        "--requeue",
        action="store_true",
        default=argparse.SUPPRESS if defaults_from_run else False,
        help="make tasks requeueable and requeue them after a stop signal",
    )
    p.add_argument(
        "--accept-new-inputs",
        action="store_true",
        default=argparse.SUPPRESS if defaults_from_run else False,
        help="let tasks go on when the inputs they list differ from the run's first listing "
        "(files added or removed since); sets CURATOR_ACCEPT_NEW_INPUTS=1",
    )
    p.add_argument("--sbatch-arg", action="append", default=d, metavar="ARG", help="extra sbatch option (repeatable)")
    p.add_argument(
        "--env-setup",
        action="append",
        default=d,
        metavar="LINE",
        help="shell line run before the pipeline, e.g. 'source ~/venv/bin/activate' (repeatable)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the script(s) and sbatch command lines; submit nothing"
    )


def _array_limits(dry_run: bool) -> tuple[int, int | None, str]:
    from curator_slurm.slurm.submit import SlurmCommandError, cluster_array_limits

    try:
        size, tasks = cluster_array_limits()
        return size, tasks, "from scontrol show config"
    except SlurmCommandError:
        if not dry_run:
            raise
        return 1001, None, "Slurm's default; scontrol not reachable"


def refuse_if_busy(run_dir: str, force: bool = False) -> None:
    """One submission at a time per run: refuse while an array task of an earlier one is queued or running
    (both would take the same source tasks, doing them twice)."""
    from curator_slurm.slurm.submit import ACTIVE_STATES, job_states, load_submissions

    states = job_states([str(a["job_id"]) for sub in load_submissions(run_dir) for a in sub["arrays"]]) or {}
    busy = sorted(j for j, s in states.items() if s in ACTIVE_STATES)
    if busy and not force:
        raise UsageError(
            f"{len(busy)} task(s) of this run are still queued or running ({', '.join(busy[:5])}); a second "
            f"submission would do their source tasks twice. Wait (curator-slurm status {run_dir}), scancel them, "
            "or, for retry, pass --force"
        )


def check_before_submit(opts: Any, plan: dict[str, Any], manifest: bool = False) -> None:
    """What every array task would check as it starts, checked before sbatch (see ``check_submission``).
    With a ``manifest`` the sizes do not matter (the plan fixes who does what): only the ids are compared."""
    from curator_slurm.runs.ledger import check_submission

    ids = [t[0] for t in plan["tasks"]]
    weights = [int(t[1]) for t in plan["tasks"]] if opts.strategy == "balanced" and not manifest else None
    check_submission(opts.run_dir, plan.get("fingerprint"), ids, weights, opts.accept_new_inputs)


def _submit(
    opts: Any, kind: str, dry_run: bool, as_json: bool, source_list: str | None = None, force: bool = False
) -> int:
    from curator_slurm.slurm.submit import render_script, sbatch_command, split_shards, submission_lock, submit

    max_size, max_tasks, origin = _array_limits(dry_run)
    chunks = split_shards(opts.shards, max_size, max_tasks)
    if dry_run:
        if as_json:
            _print_json(
                {
                    "max_array_size": max_size,
                    "arrays": [
                        {
                            "offset": c.offset,
                            "size": c.size,
                            "script": render_script(opts, c),
                            "command": sbatch_command(f"<{kind}-{i}.sh>"),
                        }
                        for i, c in enumerate(chunks)
                    ],
                }
            )
            return 0
        print(f"# {opts.shards} shards in {len(chunks)} array(s) (MaxArraySize={max_size}, {origin})")
        for i, chunk in enumerate(chunks):
            print(f"# --- array {i}: shards {chunk.offset}-{chunk.offset + chunk.size - 1}")
            print(render_script(opts, chunk), end="")
            print(f"# command: {shlex.join(sbatch_command(f'<{kind}-{i}.sh>'))}")
        return 0
    with submission_lock(opts.run_dir):
        refuse_if_busy(opts.run_dir, force)
        record = submit(opts, chunks, kind, source_list)
    if as_json:
        _print_json(asdict(record))
        return 0
    jobs = ", ".join(
        f"{a['job_id']} (shards {a['offset']}-{int(a['offset']) + int(a['size']) - 1})" for a in record.arrays
    )
    print(f"submitted {opts.shards} shards as {len(record.arrays)} array(s): {jobs}")
    print(f"run directory: {opts.run_dir}\nfollow with: curator-slurm status {opts.run_dir}")
    return 0


def _options_from_args(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    mapping = {
        "throttle": "throttle",
        "time": "time",
        "partition": "partition",
        "cpus_per_task": "cpus_per_task",
        "mem": "mem",
        "gpus_per_task": "gpus_per_task",
        "nodes_per_task": "nodes_per_task",
        "job_name": "job_name",
        "output_logs": "output_logs",
        "signal": "signal",
        "requeue": "requeue",
        "accept_new_inputs": "accept_new_inputs",
        "strategy": "strategy",
    }
    out = dict(base)
    for arg, key in mapping.items():
        if hasattr(args, arg) and getattr(args, arg) is not None:
            out[key] = getattr(args, arg)
    if getattr(args, "sbatch_arg", None):
        out["sbatch_args"] = tuple(args.sbatch_arg)
    if getattr(args, "env_setup", None):
        out["env_setup"] = tuple(args.env_setup)
    return out


def cmd_submit(args: argparse.Namespace, script_args: list[str]) -> int:
    from curator_slurm.slurm.submit import SubmitOptions

    plan = run_plan(args.script, script_args)
    sources = plan.pop("sources_table", None)
    run_dir = os.path.abspath(args.run_dir or plan["run_dir"] or "")
    if not run_dir or run_dir == os.path.abspath(""):
        raise UsageError(
            "the pipeline does not end in a file writer, so there is no default run directory; pass --run-dir"
        )
    n_tasks = len(plan["tasks"])
    if args.shards > n_tasks:
        print(
            f"note: {args.shards} shards for {n_tasks} source tasks; {args.shards - n_tasks} or more will have "
            "nothing to do",
            file=sys.stderr,
        )
    fields = _options_from_args(args, {"job_name": os.path.splitext(os.path.basename(args.script))[0]})
    if sources is not None and plan.get("kind") != "workflow":
        fields["strategy"] = args.strategy or "balanced"  # with a manifest every shard sees the same list
    opts = SubmitOptions(
        script=os.path.abspath(args.script),
        script_args=tuple(script_args),
        shards=args.shards,
        run_dir=run_dir,
        **{k: v for k, v in fields.items() if k in SubmitOptions.__dataclass_fields__},
    )
    if plan.get("kind") == "workflow":
        return _submit_workflow(args, opts, plan)
    check_before_submit(opts, plan, manifest=sources is not None)
    if sources is not None:
        opts = _with_manifest(opts, sources, "submit", args.dry_run, args.json)
    if not args.dry_run:
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "plan.json"), "w", encoding="utf-8") as f:
            json.dump(plan, f)
    return _submit(opts, "submit", args.dry_run, args.json)


def _with_manifest(
    opts: Any, sources: Any, kind: str, dry_run: bool, as_json: bool, record: dict[str, Any] | None = None
) -> Any:
    """Plan once: write the source tasks ``sources`` as a manifest of ``opts.shards`` shards into the run
    directory (not on a dry run) and return ``opts`` that export ``CURATOR_MANIFEST`` to every task."""
    from curator_slurm.runs.manifest import attach_manifest

    opts, info = attach_manifest(opts, sources, kind, dry_run, record)
    if info is not None:
        weights = [w for _, w in info.loads]
        mean = sum(weights) / len(weights)
        print(
            f"planned {info.count} source tasks into {info.path} ({opts.strategy}; heaviest shard "
            f"{max(weights) / mean if mean else 1.0:.3f}x the mean)",
            file=sys.stderr if as_json else sys.stdout,
        )
    return opts


def _submit_workflow(args: argparse.Namespace, opts: Any, plan: dict[str, Any]) -> int:
    """Every phase of a workflow at once, each phase's arrays behind the phase before (afterok)."""
    from curator_slurm.slurm.phases import parse_phase_shards, phase_options, phase_shard_counts, submit_phases
    from curator_slurm.slurm.submit import render_script, split_shards

    phase_sources = plan.pop("phase_sources", None)  # each phase's manifest (not part of the saved plan)
    names = [p["phase"] for p in plan["phases"]]
    counts = phase_shard_counts(plan, args.shards, parse_phase_shards(args.phase_shards, names))
    limits = _array_limits(args.dry_run)[:2]
    if args.dry_run:
        previous = ["<none>"]
        for phase in plan["phases"]:
            phase_opts = phase_options(
                opts, phase, counts[phase["phase"]], previous if phase is not plan["phases"][0] else ()
            )
            chunks = split_shards(phase_opts.shards, *limits)
            print(f"# === phase {phase['phase']!r}: {phase_opts.shards} shards in {len(chunks)} array(s)")
            for chunk in chunks:
                print(render_script(phase_opts, chunk), end="")
            previous = [f"<jobs of {phase['phase']}>"]
        return 0
    from curator_slurm.slurm.phases import save_submission

    save_submission(plan["run_dir"], opts, counts, plan)
    submitted = submit_phases(opts, plan, counts, limits, sources=phase_sources)
    if args.json:
        _print_json({name: asdict(record) for name, record in submitted})
        return 0
    for name, record in submitted:
        jobs = ", ".join(str(a["job_id"]) for a in record.arrays)
        print(f"phase {name}: {record.shards} shards as {len(record.arrays)} array(s): {jobs}")
    print(f"run directory: {plan['run_dir']}\nfollow with: curator-slurm status {plan['run_dir']}")
    return 0


# --- status -----------------------------------------------------------------------------------------


def check_run_dir(path: str) -> None:
    """Refuse a directory that is not a run directory (a common slip: the output directory itself)."""
    from curator_slurm.runs.ledger import DEFAULT_RUN_DIR_NAME, LEDGER_DIR, RUN_FILE, SOURCES_FILE

    if not os.path.isdir(path):
        raise UsageError(f"{path}: no such run directory")
    markers = (RUN_FILE, SOURCES_FILE, LEDGER_DIR, "plan.json", "submissions.jsonl")
    if not any(os.path.exists(os.path.join(path, m)) for m in markers):
        inner = os.path.join(path, DEFAULT_RUN_DIR_NAME)
        hint = f"; did you mean {inner}?" if os.path.isdir(inner) else ""
        raise UsageError(f"{path} is not a run directory (no run.json, ledger/ or plan.json){hint}")


def collect_status(run_dir: str) -> dict[str, Any]:
    """Everything `status` shows, as data."""
    from curator_slurm.backends.results import funnel_of_records
    from curator_slurm.runs.ledger import RERUN_REMEDY, SOURCES_FILE, iter_records, read_json
    from curator_slurm.slurm.submit import ACTIVE_STATES, ENDED_BADLY_STATES, job_states, load_submissions

    check_run_dir(run_dir)
    plan_path = os.path.join(run_dir, "plan.json")
    total = None
    if os.path.exists(plan_path):
        total = len(read_json(plan_path, PLAN_REMEDY)["tasks"])
    elif os.path.exists(os.path.join(run_dir, SOURCES_FILE)):
        total = read_json(os.path.join(run_dir, SOURCES_FILE), RERUN_REMEDY)["count"]
    done: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    first_time = last_time = None
    for r in iter_records(run_dir):
        first_time = r["time"] if first_time is None else min(first_time, r["time"])
        last_time = r["time"] if last_time is None else max(last_time, r["time"])
        if r["status"] == "done":
            done[r["source"]] = r
        elif r["status"] == "failed":
            failed[r["source"]] = r
    failed = {k: v for k, v in failed.items() if k not in done}
    total = total if total is not None else len(done) + len(failed)
    pending = max(total - len(done) - len(failed), 0)
    rows_in = sum(r.get("rows_in", 0) for r in done.values())
    rows_out = sum(r.get("rows_out", 0) for r in done.values())
    elapsed = (last_time - first_time) if first_time is not None and last_time is not None else 0.0
    rate = len(done) / elapsed if elapsed > 0 else None
    shards: dict[str, dict[str, Any]] = {}
    for r in [*done.values(), *failed.values()]:
        s = shards.setdefault(r.get("shard", "?"), _shard_row(r.get("shard", "?"), None))
        s["done" if r["status"] == "done" else "failed"] += 1
        s["seconds"] += r.get("seconds", 0.0)
        s["rows_in"] += r.get("rows_in", 0)
        if r.get("array_job_id"):
            s["job"] = f"{r['array_job_id']}_{r['array_task_id']}"
    submissions = load_submissions(run_dir)
    # A submitted shard that recorded nothing (no work, or not run yet) still gets its row; the newest
    # submission first, so a retry's shard that has not run shows the retry's array task.
    for sub in reversed(submissions):
        for a in sub["arrays"] if sub.get("shards") else []:
            for index in range(int(a.get("size", 0))):
                label = f"{int(a['offset']) + index}/{sub['shards']}"
                shards.setdefault(label, _shard_row(label, f"{a['job_id']}_{index}"))
    job_ids = [str(a["job_id"]) for sub in submissions for a in sub["arrays"]]
    states = job_states(job_ids)
    active = None
    tasks = array_tasks(run_dir, submissions, states)
    if states is not None:
        active = {}
        for task in tasks:
            state = task["state"] or "UNKNOWN"  # forgotten by Slurm (older than MinJobAge)
            active[state] = active.get(state, 0) + 1
        for row in shards.values():
            row["state"] = None
        for task in reversed(tasks):  # the newest submission's task of a shard wins
            if task["shard"] in shards and shards[task["shard"]].get("state") is None:
                shards[task["shard"]]["state"] = task["state"]
    running = sum(1 for t in tasks if t["state"] in ACTIVE_STATES)
    # Pending work with nothing queued or running will never finish by itself: no ETA, but the tasks that
    # ended without doing it and the retry command.
    stalled = bool(pending) and states is not None and running == 0
    recorded = {r.get("shard") for r in [*done.values(), *failed.values()]}
    last = tasks[-1]["submission"] if tasks else None
    # Array tasks that ended badly: those of any submission while work is left, and always those of the
    # newest one (its tasks were meant to finish the run; it is not complete while they failed).
    ended = [
        {**t, "recorded": t["shard"] in recorded}
        for t in tasks
        if t["state"] in ENDED_BADLY_STATES and (pending or failed or t["submission"] == last)
    ]
    last_failed = sum(1 for t in ended if t["submission"] == last)
    return {
        "run_dir": os.path.abspath(run_dir),
        "total": total,
        "done": len(done),
        "failed": len(failed),
        "pending": pending,
        "percent": 100.0 * len(done) / total if total else 100.0,
        "rows_in": rows_in,
        "rows_out": rows_out,
        "tasks_per_second": rate,
        "docs_per_second": rows_in / elapsed if elapsed > 0 else None,
        "eta_seconds": None if stalled else pending / rate if rate and pending else (0.0 if not pending else None),
        "stalled": stalled,
        "shards": sorted(shards.values(), key=_shard_order),
        "jobs": job_ids,
        "job_states": active,
        "ended_tasks": ended,
        "last_submission_failed": last_failed,
        "funnel": [row.as_dict() for row in funnel_of_records(done.values())],
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


def _shard_row(label: str, job: str | None) -> dict[str, Any]:
    """A row of the status table for a shard that has recorded nothing yet."""
    return {"shard": label, "done": 0, "failed": 0, "seconds": 0.0, "rows_in": 0, "job": job}


def _shard_order(row: dict[str, Any]) -> tuple[int, int, str]:
    """By shard count, then index: ``2/16`` before ``10/16``, and the shards of one count together."""
    index, _, count = str(row["shard"]).partition("/")
    if index.isdigit() and count.isdigit():
        return int(count), int(index), ""
    return -1, -1, str(row["shard"])


def _print_status(status: dict[str, Any], show_all: bool) -> None:
    def num(value: float | None, fmt: str = "{:.1f}") -> str:
        return "-" if value is None else fmt.format(value)

    print(f"run directory {status['run_dir']}")
    print(
        f"source tasks: {status['total']} total, {status['done']} done, {status['failed']} failed, "
        f"{status['pending']} pending ({status['percent']:.1f}% done)"
    )
    eta = "stalled" if status["stalled"] else f"ETA {num(status['eta_seconds'], '{:.0f}')} s"
    print(
        f"documents: {status['rows_in']} in, {status['rows_out']} out; "
        f"throughput {num(status['docs_per_second'], '{:.0f}')}"
        f" docs/s, {num(status['tasks_per_second'], '{:.2f}')} tasks/s; {eta}"
    )
    if status["funnel"]:
        print(f"funnel of the done source tasks, all shards: {'docs in':>10} {'docs out':>10} {'dropped':>10}")
        for row in status["funnel"]:
            dropped = row["dropped"] if row["rows_in"] else "-"
            print(f"  {row['stage']:<45} {row['rows_in']:>10} {row['rows_out']:>10} {dropped:>10}")
    if status["job_states"] is not None:
        states = ", ".join(f"{n} {s}" for s, n in sorted(status["job_states"].items())) or "none known to Slurm"
        print(f"array tasks of jobs {', '.join(status['jobs']) or '-'}: {states}")
    ended = status["ended_tasks"]
    for t in ended if show_all else ended[:10]:
        what = "after recording some work" if t["recorded"] else "without recording any work"
        print(f"array task {t['job']} (shard {t['shard']}) ended {t['state']} {what}; log: {t['log']}")
    if len(ended) > 10 and not show_all:
        print(f"... and {len(ended) - 10} more array tasks that ended badly (--all lists them)")
    if status["last_submission_failed"] and not status["pending"] and not status["failed"]:
        print(
            f"not complete: {status['last_submission_failed']} array task(s) of the last submission ended badly "
            "(see their logs above), although every source task is recorded done"
        )
    if status["stalled"]:
        print(
            f"stalled: {status['pending']} source tasks pending and no job of this run is queued or running; "
            f"see the logs above and `curator-slurm failures {status['run_dir']}`, then "
            f"`curator-slurm retry {status['run_dir']}`"
        )
    shards = status["shards"]
    if not shards:
        return
    shown = shards
    if not show_all and len(shards) > 20:
        incomplete = [s for s in shards if s["failed"]]
        slowest = sorted(shards, key=lambda s: -s["seconds"])[:5]
        shown = sorted({s["shard"]: s for s in incomplete + slowest}.values(), key=_shard_order)
        print(f"shards with failures and the 5 slowest of {len(shards)} (--all for every shard):")
    print(f"{'shard':>10} {'done':>6} {'failed':>6} {'seconds':>9} {'docs in':>10}  job")
    for s in shown:
        state = f" {s['state']}" if s.get("state") else ""
        print(
            f"{s['shard']:>10} {s['done']:>6} {s['failed']:>6} {s['seconds']:>9.1f} {s['rows_in']:>10}  "
            f"{s['job'] or '-'}{state}"
        )


def status_exit_code(status: dict[str, Any]) -> int:
    """1 when some source task failed, the run is stalled (work pending, nothing queued or running), or
    an array task of the newest submission ended badly; else 0 (complete, or still going)."""
    return 1 if status["failed"] or status["stalled"] or status["last_submission_failed"] else 0


def _workflow_phase_dirs(run_dir: str) -> list[tuple[str, str]] | None:
    """(phase, run directory) of each phase when ``run_dir`` is a workflow's, else None."""
    from curator_slurm.workflow import workflow_phases

    phases = workflow_phases(run_dir)
    return None if phases is None else [(p, os.path.join(run_dir, p)) for p in phases]


def _workflow_status(args: argparse.Namespace, phases: list[tuple[str, str]]) -> int:
    """Each phase's status in order; a phase with no run directory yet has not started. ``--watch`` refreshes
    until the last phase has nothing pending, or a phase failed or stalled."""
    while True:
        statuses: dict[str, Any] = {}
        code = 0
        for name, directory in phases:
            if not os.path.isdir(directory):
                statuses[name] = None
                if not args.json:
                    print(f"== phase {name}: not started")
                continue
            status = collect_status(directory)
            statuses[name] = status
            code = max(code, status_exit_code(status))
            if not args.json:
                print(f"== phase {name}")
                _print_status(status, args.all)
        if args.json:
            _print_json({"workflow": args.run_dir, "phases": statuses})
        last = statuses[phases[-1][0]]
        finished = last is not None and last["pending"] == 0
        stuck = any(s is not None and (s["stalled"] or s["failed"]) for s in statuses.values())
        if not args.watch or finished or stuck:
            return code
        sys.stdout.flush()
        time.sleep(args.watch)
        print()


def cmd_status(args: argparse.Namespace, _: list[str]) -> int:
    phases = _workflow_phase_dirs(args.run_dir)
    if phases is not None:
        return _workflow_status(args, phases)
    while True:
        status = collect_status(args.run_dir)
        try:
            if args.json:
                _print_json(status)
            else:
                _print_status(status, args.all)
            sys.stdout.flush()
        except BrokenPipeError:  # `status | head -1`: the reader is gone, the exit code still tells
            _silence_stdout()
            return status_exit_code(status)
        if not args.watch or status["pending"] == 0 or status["stalled"]:
            return status_exit_code(status)
        time.sleep(args.watch)
        print()


# --- failures ---------------------------------------------------------------------------------------


def cmd_failures(args: argparse.Namespace, _: list[str]) -> int:
    phases = _workflow_phase_dirs(args.run_dir)
    if phases is not None:
        code = 0
        for name, directory in phases:
            if os.path.isdir(directory):
                print(f"== phase {name}", file=sys.stderr if args.json else sys.stdout)
                code = max(code, cmd_failures(argparse.Namespace(**{**vars(args), "run_dir": directory}), []))
        return code
    from curator_slurm.runs.ledger import load_status
    from curator_slurm.slurm.submit import load_submissions

    check_run_dir(args.run_dir)
    failed = load_status(args.run_dir).failed
    logs_dirs = {
        str(a["job_id"]): sub["options"].get("output_logs") or os.path.join(args.run_dir, "logs")
        for sub in load_submissions(args.run_dir)
        for a in sub["arrays"]
    }
    rows = []
    for source, r in sorted(failed.items()):
        log = None
        if r.get("array_job_id") and str(r["array_job_id"]) in logs_dirs:
            log = os.path.join(logs_dirs[str(r["array_job_id"])], f"{r['array_job_id']}_{r['array_task_id']}.log")
        rows.append(
            {
                "source": source,
                "stage": r.get("stage"),
                "error": r.get("error"),
                "files": r.get("files"),
                "attempts": r.get("attempts"),
                "shard": r.get("shard"),
                "host": r.get("host"),
                "job": f"{r['array_job_id']}_{r['array_task_id']}" if r.get("array_job_id") else r.get("job_id"),
                "log": log,
                "traceback": r.get("traceback"),
            }
        )
    # Array tasks that ended badly while work is pending: a task that died at import, was cancelled or ran
    # out of time recorded nothing for the source tasks it never finished.
    status = collect_status(args.run_dir)
    ended = status["ended_tasks"] if status["pending"] else []  # else the failed source tasks say it all
    for t in ended:
        rows.append(
            {
                "source": None,
                "stage": None,
                "error": f"array task {t['job']} ended {t['state']}"
                + ("" if t["recorded"] else " without recording any work"),
                "files": None,
                "attempts": None,
                "shard": t["shard"],
                "host": None,
                "job": t["job"],
                "log": t["log"],
                "traceback": None,
            }
        )
    if args.json:
        _print_json(rows if args.traceback else [{k: v for k, v in r.items() if k != "traceback"} for r in rows])
        return 0
    if not rows:
        print("no failed source tasks")
        return 0
    for r in rows[len(rows) - len(ended) :]:
        print(f"- {r['error']} (shard {r['shard']}); log: {r['log']}")
    rows = rows[: len(rows) - len(ended)]
    if not rows:
        print("no failed source tasks recorded; the array tasks above ended before recording theirs")
        return 0
    print(f"{len(rows)} failed source task(s):")
    for r in rows:
        print(f"- {r['source']} [{r['stage']}] after {r['attempts']} attempt(s), shard {r['shard']} on {r['host']}")
        print(f"  error: {(r['error'] or '').splitlines()[0] if r['error'] else ''}")
        if r["files"]:
            print(f"  files: {', '.join(map(str, r['files']))}")
        if r["log"]:
            print(f"  log:   {r['log']}")
        if args.traceback and r["traceback"]:
            print("  " + r["traceback"].rstrip().replace("\n", "\n  "))
    return 0


# --- retry ------------------------------------------------------------------------------------------


def _retry_workflow(args: argparse.Namespace, run_root: str) -> int:
    """Resubmit the first phase that is not complete (done work is skipped) and every phase after it."""
    from curator_slurm.slurm.phases import first_incomplete_phase, load_submission, submit_phases
    from curator_slurm.slurm.submit import ACTIVE_STATES, job_states, load_submissions

    saved = load_submission(run_root)
    if saved is None:
        raise UsageError(f"{run_root} has no workflow submission to retry; submit it first with curator-slurm submit")
    base, counts, plan = saved
    incomplete = first_incomplete_phase(plan)
    if incomplete is None:
        print(f"nothing to retry: every phase of {plan['workflow']!r} is complete")
        return 0
    phase, missing = incomplete
    jobs = [str(a["job_id"]) for p in plan["phases"] for sub in load_submissions(p["run_dir"]) for a in sub["arrays"]]
    busy = sorted(j for j, state in (job_states(jobs) or {}).items() if state in ACTIVE_STATES)
    if busy and not args.force:
        raise UsageError(
            f"{len(busy)} task(s) of this workflow are still queued or running ({', '.join(busy[:5])}); "
            "wait, scancel them, or pass --force"
        )
    fields = _options_from_args(args, {})
    base = replace(base, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in fields.items()
                            if k in _submit_option_names() and k not in ("shards", "run_dir")})  # fmt: skip
    if args.shards:
        counts = {**counts, phase: args.shards}
    later = [p["phase"] for p in plan["phases"]][[p["phase"] for p in plan["phases"]].index(phase) + 1 :]
    print(
        f"retrying phase {phase} ({missing} source task(s) not done)"
        + (f" and then {', '.join(later)}" if later else "")
    )
    if args.dry_run:
        return 0
    for name, record in submit_phases(base, plan, counts, _array_limits(False)[:2], start=phase):
        print(f"phase {name}: {record.shards} shards as {len(record.arrays)} array(s): "
              + ", ".join(str(a["job_id"]) for a in record.arrays))  # fmt: skip
    return 0


def _submit_option_names() -> set[str]:
    from curator_slurm.slurm.submit import SubmitOptions

    return set(SubmitOptions.__dataclass_fields__)


def cmd_retry(args: argparse.Namespace, _: list[str]) -> int:
    if _workflow_phase_dirs(args.run_dir) is not None:
        return _retry_workflow(args, os.path.abspath(args.run_dir))
    from curator_slurm.runs.ledger import load_status, read_json
    from curator_slurm.runs.sharding import write_source_list
    from curator_slurm.slurm.submit import SubmitOptions, load_submissions

    run_dir = os.path.abspath(args.run_dir)
    submissions = load_submissions(run_dir)
    plan_path = os.path.join(run_dir, "plan.json")
    if not submissions or not os.path.exists(plan_path):
        raise UsageError(f"{run_dir} has no submission to retry; submit it first with curator-slurm submit")
    all_ids = [t[0] for t in read_json(plan_path, PLAN_REMEDY)["tasks"]]
    state = load_status(run_dir)
    remaining = [t for t in all_ids if t not in state.done]
    if not remaining:
        print(f"nothing to retry: all {len(all_ids)} source tasks are done")
        return 0
    refuse_if_busy(run_dir, args.force)
    first = submissions[0]
    per_shard = max(len(all_ids) / int(first["shards"]), 1.0)
    shards = args.shards or max(1, math.ceil(len(remaining) / per_shard))
    retry_dir = os.path.join(run_dir, "retries")
    source_list = os.path.join(retry_dir, f"retry-{len(submissions)}-{int(time.time())}.ids")
    previous = dict(submissions[-1]["options"])
    previous.pop("env", None)
    fields = _options_from_args(args, previous)
    base = SubmitOptions(
        script=submissions[-1]["script"],
        script_args=tuple(submissions[-1]["script_args"]),
        shards=shards,
        run_dir=run_dir,
    )
    opts = replace(
        base,
        **{
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in fields.items()
            if k in SubmitOptions.__dataclass_fields__ and k not in ("shards", "run_dir")
        },
        env=(("CURATOR_SOURCE_LIST", source_list),),
    )
    # The script (or its inputs) may have changed since the submission: list its work again, as every
    # retry task would, and refuse what they would refuse.
    plan = run_plan(opts.script, opts.script_args, cwd=opts.workdir)
    sources = plan.pop("sources_table", None)
    if sources is not None:
        opts = replace(opts, strategy=opts.strategy or "balanced")
    check_before_submit(opts, plan, manifest=sources is not None)
    if sources is not None:  # a manifest of the remaining tasks, checked against the whole plan's digest
        import pyarrow as pa
        import pyarrow.compute as pc

        from curator_slurm.runs.ledger import source_record

        wanted = pa.array(remaining, type=pa.string())
        left = sources.filter(pc.is_in(sources.column("task_id"), value_set=wanted))
        opts = replace(opts, env=tuple(kv for kv in opts.env if kv[0] != "CURATOR_SOURCE_LIST"))
        everything = source_record([t[0] for t in plan["tasks"]])
        opts = _with_manifest(opts, left, "retry", args.dry_run, args.json, everything)
        source_list = None
    elif not args.dry_run:
        os.makedirs(retry_dir, exist_ok=True)
        write_source_list(source_list, remaining)
    print(
        f"retrying {len(remaining)} of {len(all_ids)} source tasks ({len(state.failed)} failed, "
        f"{len(remaining) - len(state.failed)} never finished) with {shards} shard(s)",
        file=sys.stderr if args.json else sys.stdout,
    )
    return _submit(opts, "retry", args.dry_run, args.json, source_list, force=args.force)


# --- local ------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace, script_args: list[str]) -> int:
    if not os.path.isfile(args.script):
        raise UsageError(f"{args.script}: no such pipeline script")
    logs = args.logs or tempfile.mkdtemp(prefix="curator-local-")
    os.makedirs(logs, exist_ok=True)
    plan = run_plan(args.script, script_args)
    if plan.get("kind") != "workflow":
        extra = _local_manifest(plan["sources_table"], plan.get("run_dir"), args.shards, args.strategy)
        return _local_array(args, script_args, args.shards, logs, extra, "shard")
    from curator_slurm.slurm.phases import parse_phase_shards, phase_shard_counts

    counts = phase_shard_counts(
        plan, args.shards, parse_phase_shards(args.phase_shards, [p["phase"] for p in plan["phases"]])
    )
    run_dirs = {p["phase"]: p.get("run_dir") for p in plan["phases"]}
    for phase, n in counts.items():  # in order: a phase starts when every shard of the one before ended well
        print(f"phase {phase}:")
        extra = _local_manifest(plan["phase_sources"].get(phase), run_dirs[phase], n, args.strategy)
        code = _local_array(args, script_args, n, logs, {"CURATOR_PHASE": phase, **extra}, f"{phase}-shard")
        if code:
            return code
    return 0


def _local_manifest(table: Any, run_dir: str | None, shards: int, strategy: str | None) -> dict[str, str]:
    """``CURATOR_MANIFEST`` for the shards of a local array: the listing planned once, as `submit` does
    (into ``<run dir>/manifest/local-<n>``); nothing when the tasks cannot go into a manifest or there is no
    run directory."""
    if table is None or not run_dir:
        return {}
    from curator_slurm.runs.manifest import new_manifest_dir, write_manifest

    directory = new_manifest_dir(run_dir, "local")
    write_manifest(directory, table, shards, strategy or "balanced")
    return {"CURATOR_MANIFEST": directory}


def _local_array(
    args: argparse.Namespace, script_args: list[str], n: int, logs: str, extra: dict[str, str], name: str
) -> int:
    """Run ``n`` shard processes of the script with ``extra`` in their environment, as an array would."""
    parallel = args.parallel or min(n, os.cpu_count() or 1)
    job = f"local{os.getpid()}"
    running: dict[int, tuple[subprocess.Popen[bytes], Any]] = {}
    codes: dict[int, int] = {}
    todo = list(range(n))[::-1]
    print(f"running {n} shards of {args.script}, {parallel} at a time; logs in {logs}")
    while todo or running:
        while todo and len(running) < parallel:
            i = todo.pop()
            env = job_environment(
                extra={
                    "SLURM_ARRAY_JOB_ID": job,
                    "SLURM_ARRAY_TASK_ID": str(i),
                    "SLURM_ARRAY_TASK_COUNT": str(n),
                    "SLURM_ARRAY_TASK_MIN": "0",
                    "SLURM_ARRAY_TASK_MAX": str(n - 1),
                    "SLURM_ARRAY_TASK_STEP": "1",
                    **extra,
                }
            )
            if args.strategy:
                env["CURATOR_SHARD_STRATEGY"] = args.strategy
            log = open(os.path.join(logs, f"{name}-{i}.log"), "wb")  # noqa: SIM115 - closed when the shard ends
            proc = subprocess.Popen(
                [sys.executable, args.script, *script_args], env=env, stdout=log, stderr=subprocess.STDOUT
            )
            running[i] = (proc, log)
        for i, (proc, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                codes[i] = proc.returncode
                del running[i]
                print(f"shard {i}/{n}: {'ok' if proc.returncode == 0 else f'FAILED (exit {proc.returncode})'}")
        time.sleep(0.05)
    failed = sorted(i for i, c in codes.items() if c != 0)
    if failed:
        print(
            f"{len(failed)} of {n} shards failed: {', '.join(map(str, failed))}; see {logs}/{name}-<i>.log",
            file=sys.stderr,
        )
        return 1
    print(f"all {n} shards finished")
    return 0


# --- shard ------------------------------------------------------------------------------------------


def cmd_shard(args: argparse.Namespace, _: list[str]) -> int:
    from curator_slurm.slurm.env import ShardSpec

    spec = ShardSpec.from_env()
    if args.json:
        _print_json(
            {
                "index": spec.index,
                "count": spec.count,
                "enabled": spec.enabled,
                "strategy": spec.strategy,
                "origin": spec.origin,
            }
        )
    else:
        print(f"{spec.label} ({spec.origin}), strategy {spec.strategy}")
    return 0


# --- parser -----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curator-slurm",
        description="Run data-curation pipelines sharded across Slurm job arrays. "
        "A pipeline script's own arguments go after `--`.",
    )
    parser.add_argument("--version", action="version", version=f"curator-slurm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=EXAMPLES.get(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        return p

    p = command("submit", "submit a pipeline script as one or more Slurm arrays of N shards")
    p.add_argument("script", help="the pipeline script (run unchanged in every array task)")
    p.add_argument("--shards", type=int, required=True, help="number of shards (array tasks in all)")
    p.add_argument("--run-dir", help="run directory (default: the pipeline's, inside the writer's output)")
    p.add_argument("--strategy", choices=["hash", "balanced"], help="shard strategy (default: hash)")
    p.add_argument("--phase-shards", metavar="PHASE=N,...", help="a workflow's shards per phase, e.g. find=4,write=16")
    _add_sbatch_options(p)
    p.add_argument("--json", action="store_true")

    p = command("status", "progress of a run: source tasks done/failed/pending, throughput, ETA, jobs")
    p.add_argument("run_dir")
    p.add_argument("--all", action="store_true", help="show every shard")
    p.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until nothing is pending")
    p.add_argument("--json", action="store_true")

    p = command("failures", "the failed source tasks of a run, with stage, error, files and log")
    p.add_argument("run_dir")
    p.add_argument("--traceback", action="store_true", help="show full tracebacks")
    p.add_argument("--json", action="store_true")

    p = command("retry", "resubmit only the source tasks of a run that are not done")
    p.add_argument("run_dir")
    p.add_argument("--shards", type=int, help="shards for the retry (default: about as large as the first run's)")
    p.add_argument("--force", action="store_true", help="retry even while jobs of this run are queued or running")
    _add_sbatch_options(p, defaults_from_run=True)
    p.add_argument("--json", action="store_true")

    p = command("plan", "list a script's source tasks and show how they split over N shards (reads no data)")
    p.add_argument("script")
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--json", action="store_true")

    p = command("local", "run a script as N shard processes on this machine, as an array would")
    p.add_argument("script")
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--parallel", type=int, help="processes at once (default: min(shards, CPUs))")
    p.add_argument("--logs", help="directory for shard-<i>.log (default: a new temporary directory)")
    p.add_argument("--strategy", choices=["hash", "balanced"], help="shard strategy (default: hash)")
    p.add_argument("--phase-shards", metavar="PHASE=N,...", help="a workflow's shards per phase, e.g. find=4,write=16")

    p = command("shard", "print which shard this process would take, from the environment")
    p.add_argument("--json", action="store_true")
    return parser


COMMANDS = {
    "submit": cmd_submit,
    "status": cmd_status,
    "failures": cmd_failures,
    "retry": cmd_retry,
    "plan": cmd_plan,
    "local": cmd_local,
    "shard": cmd_shard,
}


def main(argv: Sequence[str] | None = None) -> int:
    ours, script_args = _split_argv(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(ours)
    if unknown:
        hint = ""
        if getattr(args, "script", None) and "--" not in (sys.argv[1:] if argv is None else argv):
            hint = (
                f"; the pipeline script's own options go after `--`, e.g. curator-slurm {args.command} "
                f"{shlex.quote(args.script)} ... -- {shlex.join(unknown)}"
            )
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    if args.command is None:
        parser.print_help()
        return 2
    for name in ("shards", "parallel", "throttle"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            print(f"curator-slurm {args.command}: --{name} {value}: must be >= 1", file=sys.stderr)
            return 2
    try:
        return COMMANDS[args.command](args, script_args)
    except BrokenPipeError:  # the reader of our output (`| head -1`) has all it wanted
        _silence_stdout()
        return 141  # what a shell reports for a process that SIGPIPE ended
    except (CuratorError, OSError) as e:  # bad input or a failing command; anything else is a bug: traceback
        print(f"curator-slurm {args.command}: {e}", file=sys.stderr)
        return 2


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
