"""Submitting a workflow: one array (or several) per phase, all at once, each phase behind every array of the phase
before (``afterok``), each phase an ordinary run in its own run directory. Design: docs/design.md, "Slurm
submission"."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from curator_slurm import fs
from curator_slurm.errors import CuratorError, OptionError
from curator_slurm.runs.layout import PLAN_FILE
from curator_slurm.runs.plan import check_before_submit, plan_record
from curator_slurm.slurm.control import active_jobs
from curator_slurm.slurm.submit import (
    ArrayChunk,
    Submission,
    SubmitOptions,
    format_tasks,
    load_submissions,
    split_shards,
    submit,
)


class PhaseOptionError(CuratorError, ValueError):
    """A bad ``--phase-shards`` value."""


def parse_phase_shards(text: str | None, phases: Sequence[str]) -> dict[str, int]:
    """``"find=4,write=8"`` → ``{"find": 4, "write": 8}``; names must be phases of the workflow."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise PhaseOptionError(f"--phase-shards {text!r}: {part!r} is not PHASE=N with N >= 1, e.g. find=4")
        if name.strip() not in phases:
            raise PhaseOptionError(f"--phase-shards {text!r}: no phase {name.strip()!r}; the phases are {list(phases)}")
        out[name.strip()] = int(value)
    return out


def phase_shard_counts(plan: dict[str, Any], shards: int, overrides: dict[str, int]) -> dict[str, int]:
    """Array tasks per phase: ``--phase-shards`` where given, else the phase's default, else ``--shards``;
    never more than the phase can use (its source tasks, e.g. its buckets)."""
    counts = {}
    for phase in plan["phases"]:
        name = phase["phase"]
        wanted = overrides.get(name) or phase.get("default_shards") or shards
        limit = min(x for x in (phase.get("max_shards"), len(phase["tasks"]) or 1) if x)
        counts[name] = max(1, min(wanted, limit)) if name not in overrides else wanted
    return counts


def phase_options(base: SubmitOptions, phase: dict[str, Any], shards: int, after: Sequence[str]) -> SubmitOptions:
    """The submission of one phase: the base options with the phase's shards, run directory, job name,
    ``CURATOR_PHASE``, and a dependency on the job ids ``after`` (the arrays of the phase before)."""
    extra: tuple[str, ...] = ()
    if after:
        extra = (f"--dependency=afterok:{':'.join(after)}", "--kill-on-invalid-dep=yes")
    return dataclasses.replace(
        base,
        shards=shards,
        run_dir=phase["run_dir"],
        job_name=f"{base.job_name}-{phase['phase']}",
        env=(*base.env, ("CURATOR_PHASE", phase["phase"])),
        sbatch_args=(*base.sbatch_args, *extra),
        output_logs=os.path.join(base.output_logs, phase["phase"]) if base.output_logs else "",
    )


def submit_phases(
    base: SubmitOptions,
    plan: dict[str, Any],
    counts: dict[str, int],
    limits: tuple[int, int | None],
    start: str | None = None,
    after: Sequence[str] = (),
    send: Callable[[SubmitOptions, list[ArrayChunk], str], Submission] | None = None,
    sources: Mapping[str, Any] | None = None,
) -> list[tuple[str, Submission]]:
    """Submit the phases of ``plan`` from ``start`` (default: the first) on, each behind the one before
    (the first behind ``after``), writing each phase's plan into its run directory. Job ids are recorded
    in each phase's ``submissions.jsonl`` as soon as its arrays are submitted. A phase with a table in
    ``sources`` (its planned source tasks) gets a manifest in its run directory (``CURATOR_MANIFEST``)."""
    send = send or (lambda opts, chunks, kind: submit(opts, chunks, kind))
    names = [p["phase"] for p in plan["phases"]]
    first = names.index(start) if start else 0
    done: list[tuple[str, Submission]] = []
    previous = list(after)
    for phase in plan["phases"][first:]:
        opts = phase_options(base, phase, counts[phase["phase"]], previous)
        os.makedirs(opts.run_dir, exist_ok=True)
        if sources and sources.get(phase["phase"]) is not None:  # plan once (curator_slurm.runs.manifest)
            from curator_slurm.runs.manifest import attach_manifest

            opts, _ = attach_manifest(opts, sources[phase["phase"]], "submit", dry_run=False)
        plan_json = json.dumps({**phase, "workflow_plan": plan_record(plan)})
        fs.atomic_write_text(os.path.join(opts.run_dir, PLAN_FILE), plan_json)  # a reader never sees half
        record = send(opts, split_shards(opts.shards, *limits), "submit")
        done.append((phase["phase"], record))
        previous = [str(a["job_id"]) for a in record.arrays]
    return done


def check_phases(
    base: SubmitOptions, plan: dict[str, Any], counts: dict[str, int], sources: Mapping[str, Any] | None = None
) -> None:
    """Before a workflow's submission writes or sends anything: what every task of each phase would check as
    it starts (the phase's fingerprint against its ``run.json``, its source tasks against ``sources.json``;
    see ``check_before_submit``), so a workflow whose parameters changed under its run directories is
    refused with the difference, not queued to stop in every task."""
    for phase in plan["phases"]:
        planned = bool(sources and sources.get(phase["phase"]) is not None)
        check_before_submit(phase_options(base, phase, counts[phase["phase"]], ()), phase, manifest=planned)


def workflow_jobs(plan: dict[str, Any]) -> list[str]:
    """The job ids of every submission of every phase of ``plan``."""
    return [str(a["job_id"]) for p in plan["phases"] for sub in load_submissions(p["run_dir"]) for a in sub["arrays"]]


def refuse_if_workflow_busy(plan: dict[str, Any], force: bool = False) -> None:
    """One submission at a time per workflow, as per run (``refuse_if_busy``): refused while a task of any
    phase is queued or running, unless ``force``."""
    busy = active_jobs(workflow_jobs(plan))
    if busy and not force:
        raise OptionError(
            f"{len(busy)} task(s) of workflow {plan['workflow']!r} are still queued or running "
            f"({format_tasks(busy)}); a second submission would do their work twice. Wait "
            f"(curator-slurm status {plan['run_dir']}), scancel them, or, for retry, pass --force"
        )


def preview_phases(
    base: SubmitOptions, plan: dict[str, Any], counts: dict[str, int], limits: tuple[int, int | None]
) -> list[tuple[str, SubmitOptions, list[ArrayChunk]]]:
    """What a dry run of a workflow's submission shows: each phase's options and arrays, each phase behind
    placeholders for the job ids of the phase before (which only sbatch would give)."""
    out = []
    previous: Sequence[str] = ()
    for phase in plan["phases"]:
        opts = phase_options(base, phase, counts[phase["phase"]], previous)
        out.append((phase["phase"], opts, split_shards(opts.shards, *limits)))
        previous = [f"<jobs of {phase['phase']}>"]
    return out


#: In a workflow's run directory: the base options and shard counts of its submission, for `retry`.
WORKFLOW_SUBMISSION = "workflow-submission.json"


def save_submission(run_root: str, base: SubmitOptions, counts: dict[str, int], plan: dict[str, Any]) -> None:
    """Record what `submit` used for every phase, so `retry` can resubmit a phase and those after it."""
    from curator_slurm.workflows.workflow import write_marker

    write_marker(run_root, plan["workflow"], [p["phase"] for p in plan["phases"]], plan.get("warnings") or ())
    path = os.path.join(run_root, WORKFLOW_SUBMISSION)
    fs.atomic_write_text(
        path, json.dumps({"options": dataclasses.asdict(base), "counts": counts, "plan": plan_record(plan)})
    )


def load_submission(run_root: str) -> tuple[SubmitOptions, dict[str, int], dict[str, Any]] | None:
    path = os.path.join(run_root, WORKFLOW_SUBMISSION)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    return SubmitOptions.from_record(saved["options"]), dict(saved["counts"]), saved["plan"]


def first_incomplete_phase(plan: dict[str, Any]) -> tuple[str, int] | None:
    """The first phase (and how many of its source tasks are to do) with work left: a planned source task its
    ledger lacks, a done one whose outputs are gone, or one done from an earlier phase's outputs that were
    recorded again since; None when every phase is complete."""
    from curator_slurm.runs.verify import outstanding

    for phase in plan["phases"]:
        missing = len(outstanding(phase["run_dir"], [task_id for task_id, _ in phase["tasks"]]))
        if missing:
            return phase["phase"], missing
    return None
