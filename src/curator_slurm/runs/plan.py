"""The plan of a run: a script's source tasks, listed in plan mode without reading data, and how they
would split over N shards. ``curator-slurm plan`` shows it; ``submit``, ``retry`` and ``local`` start from
it; the sharding benchmark measures :func:`shard_loads`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from curator_slurm import fs
from curator_slurm.errors import OptionError
from curator_slurm.runs.layout import PLAN_FILE
from curator_slurm.runs.sharding import balanced_assignment, format_bytes, hash_assignment
from curator_slurm.settings import job_environment

#: What to do about a damaged plan.json (see ``read_json``).
PLAN_REMEDY = "restore it, or delete it and submit the run again (`curator-slurm submit` writes it)"
#: Written into a run directory by `submit`: the plan every later phase and `retry` compare against.


def run_plan(script: str, script_args: Sequence[str], cwd: str | None = None) -> dict[str, Any]:
    """Run ``script`` in plan mode (in ``cwd``, default this directory): it lists its source tasks and
    exits without reading data.

    The result is the first plan line the script wrote, plus ``plans`` (one per step: every pipeline or
    workflow run the script makes, see :mod:`curator_slurm.runs.steps`), each with ``sources_table`` (a
    pipeline's full source tasks for a manifest, None when they cannot go into one) and ``phase_sources``
    (a workflow's, by phase), and ``glue`` (the script guards code with ``is_driver()``).
    """
    if not os.path.isfile(script):
        raise OptionError(f"{script}: no such pipeline script")
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
            raise OptionError(f"listing the work of {script} failed (exit {proc.returncode}): {detail}")
        with open(out, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        glue = any(p.get("kind") == "glue" for p in lines)
        plans = [_with_sources(p) for p in lines if p.get("kind") != "glue"]  # before the directory goes
        if not plans:
            raise OptionError(f"listing the work of {script} failed: it finished without running a Pipeline")
        return {**plans[0], "plans": plans, "glue": glue}


def _with_sources(plan: dict[str, Any]) -> dict[str, Any]:
    """One plan line with its source tables read (``sources_table``: a pipeline's full source tasks for a
    manifest, None when they cannot go into one; ``phase_sources``: a workflow's, by phase); the files'
    names are not kept (they are not part of plan.json)."""
    from curator_slurm.runs.manifest import read_sources

    sources_file = plan.pop("sources_file", None)
    table = read_sources(sources_file) if sources_file and plan.get("kind") == "pipeline" else None
    phase_sources = {}
    for phase in plan.get("phases", []):
        phase_file = phase.pop("sources_file", None)
        if phase_file:
            phase_sources[phase["phase"]] = read_sources(phase_file)
    return {**plan, "sources_table": table, "phase_sources": phase_sources}


def shard_loads(tasks: list[list[Any]], shards: int, strategy: str) -> list[tuple[int, float]]:
    """(task count, weight) per shard under ``strategy`` for ``tasks`` as a plan lists them
    (``[task_id, weight]`` pairs)."""
    ids = [t[0] for t in tasks]
    weights = [float(t[1]) for t in tasks]
    owner = balanced_assignment(ids, weights, shards) if strategy == "balanced" else hash_assignment(ids, shards)
    loads = [[0, 0.0] for _ in range(shards)]
    for s, w in zip(owner, weights, strict=True):
        loads[s][0] += 1
        loads[s][1] += w
    return [(int(c), w) for c, w in loads]


def plan_summary(plan: dict[str, Any], shards: int) -> dict[str, Any]:
    """What `plan` shows, as data: the spread of tasks and weight over ``shards`` under each strategy, and
    which strategy `submit` would use (balanced when the tasks go into a manifest, which fixes who does
    what, else hash). A workflow's table is its first phase's; submit gives every phase a manifest."""
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
    summary["run_dir"] = plan.get("run_dir")
    table = plan.get("sources_table")
    if plan.get("kind") == "workflow":
        table = (plan.get("phase_sources") or {}).get(plan["phases"][0]["phase"])
        summary["phase"] = plan["phases"][0]["phase"]
    summary["manifest"] = table is not None
    summary["submit_strategy"] = "balanced" if summary["manifest"] else "hash"
    return summary


def format_plan(summary: dict[str, Any], has_bytes: bool) -> str:
    """The table `curator-slurm plan` prints for ``summary`` (weights as bytes when ``has_bytes``)."""

    def weight(value: float) -> str:
        return format_bytes(value) if has_bytes else f"{value:.0f}"

    unit = "bytes" if has_bytes else "weight"
    of = f" of phase {summary['phase']!r}" if "phase" in summary else ""
    lines = [
        f"{summary['source_tasks']} source tasks{of} over {summary['shards']} shards "
        f"(run directory: {summary['run_dir']})",
        f"{'strategy':<9} {'tasks min-max':>14} {unit + ' min':>12} {'mean':>12} {'max':>12} "
        f"{'max/mean':>9} {'empty':>6}",
    ]
    for strategy, s in summary["strategies"].items():
        lines.append(
            f"{strategy:<9} {s['tasks_min']:>6}-{s['tasks_max']:<7} {weight(s['weight_min']):>12} "
            f"{weight(s['weight_mean']):>12} {weight(s['weight_max']):>12} {s['imbalance']:>9.3f} "
            f"{s['empty_shards']:>6}"
        )
    chosen = summary["submit_strategy"]
    why = (
        "the tasks load a manifest of this listing, so every shard sees the same list"
        if summary["manifest"]
        else "the source tasks cannot go into a manifest, so each task lists its input; balanced needs every "
        "shard to list the same inputs (--strategy balanced)"
    )
    lines.append(
        f"submit would use {chosen} (expected max/mean {summary['strategies'][chosen]['imbalance']:.3f}): {why}"
    )
    return "\n".join(lines)


def plan_record(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` (as :func:`run_plan` gave it) as it is saved: without its source tables and other steps."""
    return {k: v for k, v in plan.items() if k not in ("plans", "glue", "sources_table", "phase_sources")}


def save_plan(run_dir: str, plan: dict[str, Any]) -> None:
    """Write ``plan`` (as :func:`run_plan` gave it, without its source tables) into ``run_dir``, where
    `status` counts the run's source tasks, `retry` finds those not done and a later phase checks this one."""
    os.makedirs(run_dir, exist_ok=True)
    fs.atomic_write_text(os.path.join(run_dir, PLAN_FILE), json.dumps(plan_record(plan)))  # never half a plan


def manifest_note(info: Any, strategy: str | None) -> str:
    """Where the manifest of a submission went and how even its shards are (``info``, a ``ManifestInfo``)."""
    weights = [w for _, w in info.loads]
    mean = sum(weights) / len(weights)
    return (
        f"planned {info.count} source tasks into {info.path} ({strategy}; heaviest shard "
        f"{max(weights) / mean if mean else 1.0:.3f}x the mean)"
    )


def planned_task_ids(run_dir: str) -> list[str]:
    """The source task ids of the plan `submit` wrote into ``run_dir``."""
    from curator_slurm.runs.rundir import read_json

    return [t[0] for t in read_json(os.path.join(run_dir, PLAN_FILE), PLAN_REMEDY)["tasks"]]


def check_before_submit(opts: Any, plan: dict[str, Any], manifest: bool = False) -> None:
    """What every array task would check as it starts, checked before sbatch (see ``check_submission``).
    With a ``manifest`` the sizes do not matter (the plan fixes who does what): only the ids are compared.
    ``opts`` is a :class:`~curator_slurm.slurm.submit.SubmitOptions`."""
    from curator_slurm.runs.rundir import check_submission

    ids = [t[0] for t in plan["tasks"]]
    weights = [int(t[1]) for t in plan["tasks"]] if opts.strategy == "balanced" and not manifest else None
    check_submission(opts.run_dir, plan.get("fingerprint"), ids, weights, opts.accept_new_inputs)
