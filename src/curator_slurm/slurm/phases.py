"""Submitting a workflow: one array (or several) per phase, all at once, each phase behind every array of the phase
before (``afterok``), each phase an ordinary run in its own run directory. Design: docs/design.md, "Slurm
submission"."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from curator_slurm import fs
from curator_slurm.errors import CuratorError, OptionError
from curator_slurm.runs.layout import PLAN_FILE
from curator_slurm.runs.plan import check_before_submit, plan_record
from curator_slurm.slurm.control import active_jobs
from curator_slurm.slurm.options import phase_flag, phase_option_fields
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


def parse_phase_resources(
    given: Mapping[str, Sequence[str] | None], phases: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The ``--phase-<option>`` values (``given``: field name -> the texts given, see ``add_phase_arguments``)
    as ``{phase: {field: value}}``. ``PHASE=VALUE`` parts are separated by commas; a part without ``=`` goes on
    the value before it (``--phase-partition base=a,b`` is partitions ``a,b``). A repeatable option
    (``sbatch_args``) takes one ``PHASE=ARG`` per flag, its commas kept."""
    types = {f.name: str(f.type) for f in dataclasses.fields(SubmitOptions)}
    flags = dict(phase_option_fields())
    out: dict[str, dict[str, Any]] = {}
    for name, texts in given.items():
        flag = phase_flag(name, flags[name])
        many = types[name].startswith("tuple")
        for text in texts or ():
            pairs: list[list[str]] = []
            for part in [text] if many else text.split(","):
                phase, sep, value = part.partition("=")
                if sep and phase.strip() and not phase.strip().startswith("-"):
                    pairs.append([phase.strip(), value])
                elif pairs and not many:
                    pairs[-1][1] += "," + part
                else:
                    raise PhaseOptionError(f"{flag} {text!r}: {part!r} is not PHASE=VALUE, e.g. {flag} merge=...")
            for phase, value in pairs:
                if phase not in phases:
                    raise PhaseOptionError(f"{flag} {text!r}: no phase {phase!r}; the phases are {list(phases)}")
                if not value.strip():
                    raise PhaseOptionError(f"{flag} {text!r}: no value for phase {phase!r}")
                out.setdefault(phase, {})[name] = _phase_value(flag, phase, value.strip(), types[name], out)
    return out


def phase_option_texts(parsed: Mapping[str, Any]) -> dict[str, list[str] | None]:
    """The ``--phase-<option>`` texts of parsed arguments (``add_phase_arguments``'): field name -> the values."""
    return {name: parsed.get(f"phase_{name}") for name, _ in phase_option_fields()}


def refuse_phase_options(script: str, given: Mapping[str, Sequence[str] | None], phase_shards: str | None) -> None:
    """Per-phase options for a script that runs no workflow: refused, naming them (they would do nothing)."""
    flags = [phase_flag(name, option) for name, option in phase_option_fields() if given.get(name)]
    flags += ["--phase-shards"] if phase_shards else []
    if flags:
        raise PhaseOptionError(f"{', '.join(flags)}: {script} runs no workflow, so no phases; use the plain option")


def _phase_value(flag: str, phase: str, value: str, kind: str, so_far: dict[str, dict[str, Any]]) -> Any:
    if kind.startswith("tuple"):
        return (*so_far.get(phase, {}).get("sbatch_args", ()), value)
    if kind.startswith("int"):
        if not value.isdigit() or int(value) < 1:
            raise PhaseOptionError(f"{flag}: {phase}={value!r} is not a whole number >= 1")
        return int(value)
    return value


def with_phase_resources(plan: dict[str, Any], given: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``plan`` with each phase's ``resources``: what the workflow declared for it, with the command line's
    per-phase values (``given``, from :func:`parse_phase_resources`) over them. Saved with the plan, so a
    retry of the workflow asks for the same."""
    phases = [{**p, "resources": {**p.get("resources", {}), **given.get(p["phase"], {})}} for p in plan["phases"]]
    return {**plan, "phases": phases}


def resource_notes(plan: dict[str, Any], given: Mapping[str, Mapping[str, Any]], plain: Mapping[str, Any]) -> list[str]:
    """Where a workflow's declared default for a phase wins over a plain option given (``plain``, field values):
    one line each, with how to change it, so the rule (per phase beats every phase) never surprises."""
    notes = []
    for phase in plan["phases"]:
        for name, value in phase.get("resources", {}).items():
            mine = name in given.get(phase["phase"], {})
            if name in plain and name != "sbatch_args" and not mine and plain[name] != value:
                flag = phase_flag(name, dict(phase_option_fields())[name])
                notes.append(
                    f"phase {phase['phase']!r} keeps {value} for --{flag[8:]}, the workflow's default for it, "
                    f"over {plain[name]}; {flag} {phase['phase']}={plain[name]} to change it"
                )
    return notes


def parse_dependency(text: str | None) -> list[str]:
    """``--dependency 123,456_7`` -> ``["123", "456_7"]``: jobs (or array tasks) the first array waits for."""
    jobs = [j.strip() for j in (text or "").split(",") if j.strip()]
    for job in jobs:
        if not re.fullmatch(r"\d+(_\d+)?", job):
            raise PhaseOptionError(f"--dependency {text!r}: {job!r} is not a job id (e.g. 1234 or 1234_5)")
    return jobs


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
    ``CURATOR_PHASE``, its ``resources`` (over the base's; its sbatch arguments after the base's) and a
    dependency on the job ids ``after`` (the arrays of the phase before)."""
    extra: tuple[str, ...] = ()
    if after:
        extra = (f"--dependency=afterok:{':'.join(after)}", "--kill-on-invalid-dep=yes")
    resources = dict(phase.get("resources") or {})
    own = tuple(resources.pop("sbatch_args", ()))
    try:
        base = dataclasses.replace(base, **resources)
    except OptionError as e:
        raise PhaseOptionError(f"phase {phase['phase']!r}: {e}") from e
    return dataclasses.replace(
        base,
        shards=shards,
        run_dir=phase["run_dir"],
        job_name=f"{base.job_name}-{phase['phase']}",
        env=(*base.env, ("CURATOR_PHASE", phase["phase"])),
        sbatch_args=(*base.sbatch_args, *own, *extra),
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
    base: SubmitOptions,
    plan: dict[str, Any],
    counts: dict[str, int],
    limits: tuple[int, int | None],
    after: Sequence[str] = (),
) -> list[tuple[str, SubmitOptions, list[ArrayChunk]]]:
    """What a dry run of a workflow's submission shows: each phase's options and arrays, the first behind
    ``after``, each other behind placeholders for the job ids of the phase before (which only sbatch would give)."""
    out = []
    previous: Sequence[str] = after
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

    write_marker(run_root, plan["workflow"], [p["phase"] for p in plan["phases"]], warnings=plan.get("warnings") or ())
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
