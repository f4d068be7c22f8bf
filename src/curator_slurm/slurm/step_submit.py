"""Submitting a script of several steps (:mod:`curator_slurm.runs.steps`) and glue: each step its own array(s) behind
the step before, then, for glue, one plain job behind the last step. Design: docs/design.md, "Steps and glue"."""

from __future__ import annotations

import dataclasses
import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from curator_slurm.errors import OptionError
from curator_slurm.runs.inputs import check_plan_inputs
from curator_slurm.runs.layout import DRIVER_FILE
from curator_slurm.runs.manifest import attach_manifest
from curator_slurm.runs.plan import check_before_submit, save_plan
from curator_slurm.slurm.options import SubmitOptions, option_fields
from curator_slurm.slurm.phases import (
    check_phases,
    parse_phase_resources,
    parse_phase_shards,
    phase_shard_counts,
    refuse_if_workflow_busy,
    save_submission,
    submit_phases,
    with_phase_resources,
)
from curator_slurm.slurm.submit import (
    _directive,
    _run_slurm,
    refuse_if_busy,
    split_shards,
    submission_lock,
    submit,
)


def dependency(after: Sequence[str]) -> tuple[str, ...]:
    """The sbatch arguments that hold a job until every job of ``after`` completed (none without)."""
    return (f"--dependency=afterok:{':'.join(after)}", "--kill-on-invalid-dep=yes") if after else ()


def submit_steps(
    plan: dict[str, Any],
    options_of: Callable[[dict[str, Any]], SubmitOptions],
    limits: tuple[int, int | None],
    phase_shards: str | None = None,
    phase_given: Mapping[str, Sequence[str] | None] | None = None,
    first_after: Sequence[str] = (),
) -> list[tuple[str, list[str]]]:
    """Submit every step of ``plan`` (as ``run_plan`` gives it) in order, each behind the one before (the first
    behind ``first_after``), with the options ``options_of(step)`` makes, a workflow's phases with the
    ``--phase-<option>`` texts of ``phase_given``; then the driver job when the script has glue. Returns
    (what, job ids) per step and for the driver."""
    steps = plan["plans"]
    for step in steps:  # all or nothing: every step is checked before the first is queued
        check_plan_inputs(step)
    done: list[tuple[str, list[str]]] = []
    after: list[str] = list(first_after)
    for k, step in enumerate(steps):
        base = options_of(step)
        opts = dataclasses.replace(
            base,
            env=(*base.env, ("CURATOR_PIPELINE", str(k))),
            sbatch_args=(*base.sbatch_args, *dependency(after)),
            job_name=f"{base.job_name}-step{k}",
        )
        what = f"step {k} ({step.get('kind')} {step.get('pipeline')!r})"
        if step.get("kind") == "workflow":
            names = [p["phase"] for p in step["phases"]]
            counts = phase_shard_counts(step, base.shards, parse_phase_shards(phase_shards, names))
            step = with_phase_resources(step, parse_phase_resources(phase_given or {}, names))
            with submission_lock(step["run_dir"]):
                refuse_if_workflow_busy(step)
                check_phases(opts, step, counts, step.get("phase_sources"))
                save_submission(step["run_dir"], opts, counts, step)
                sent = submit_phases(opts, step, counts, limits, sources=step.get("phase_sources"))
            after = [str(a["job_id"]) for a in sent[-1][1].arrays]
            done.append((what, [str(a["job_id"]) for _, record in sent for a in record.arrays]))
            continue
        sources = step.get("sources_table")
        check_before_submit(opts, step, manifest=sources is not None)
        with submission_lock(opts.run_dir):
            refuse_if_busy(opts.run_dir)
            if sources is not None:
                opts, _ = attach_manifest(opts, sources, "submit", dry_run=False)
            save_plan(opts.run_dir, step)
            record = submit(opts, split_shards(opts.shards, *limits), "submit")
        after = [str(a["job_id"]) for a in record.arrays]
        done.append((what, after))
    if plan.get("glue"):
        done.append(("driver (the script once more: its glue)", [submit_driver(options_of(steps[0]), after)]))
    return done


def render_driver_script(opts: SubmitOptions, after: Sequence[str]) -> str:
    """The sbatch script of the driver job: the script as a plain process (no shard, no step, no run
    directory of ours), behind ``after``; its log is ``<logs>/driver-<job id>.log``."""
    lines = ["#!/bin/bash", _directive("job-name", f"{opts.job_name}-driver")]
    lines.append(_directive("output", os.path.join(opts.logs_dir, "driver-%j.log")))
    for name, option in option_fields():
        if option.directive and getattr(opts, name) is not None and name != "signal":
            lines.append(_directive(option.directive, getattr(opts, name)))
    lines.extend(f"#SBATCH {arg}" for arg in (*opts.sbatch_args, *dependency(after)))
    lines += ["", "set -euo pipefail", f"cd {shlex.quote(opts.workdir)}", *opts.env_setup]
    lines.append(f"exec {shlex.join([opts.python, opts.script, *opts.script_args])}")
    return "\n".join(lines) + "\n"


def submit_driver(opts: SubmitOptions, after: Sequence[str]) -> str:
    """sbatch the driver job (see :func:`render_driver_script`); its id, also appended to
    ``<run dir>/driver-jobs.txt``."""
    from curator_slurm.settings import job_environment
    from curator_slurm.slurm.submit import sbatch_command

    os.makedirs(os.path.join(opts.run_dir, "sbatch"), exist_ok=True)
    os.makedirs(opts.logs_dir, exist_ok=True)
    path = os.path.join(opts.run_dir, "sbatch", f"driver-{time.strftime('%Y%m%d-%H%M%S')}.sh")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_driver_script(opts, after))
    job = _run_slurm(sbatch_command(path), env=job_environment()).strip().splitlines()[-1].split(";")[0]
    with open(os.path.join(opts.run_dir, DRIVER_FILE), "a", encoding="utf-8") as f:
        f.write(f"{job} {os.path.join(opts.logs_dir, f'driver-{job}.log')}\n")
    return job


def preview_steps(plan: dict[str, Any], options_of: Callable[[dict[str, Any]], SubmitOptions]) -> str:
    """What a dry run of a submission of steps shows: each step and its run directory, and the driver job."""
    lines = [
        f"# === step {k}: {step.get('kind')} {step.get('pipeline')!r} (CURATOR_PIPELINE={k}) into "
        f"{step['run_dir']}" + (", behind the step before" if k else "")
        for k, step in enumerate(plan["plans"])
    ]
    text = "\n".join(lines) + "\n"
    if plan.get("glue"):
        driver = render_driver_script(options_of(plan["plans"][0]), ["<jobs of the last step>"])
        text += f"# === then the driver job (the glue), behind the last step:\n{driver}"
    return text


def format_steps(sent: list[tuple[str, list[str]]], plan: dict[str, Any]) -> str:
    """What `submit` prints after a submission of steps."""
    lines = [f"{what}: job(s) {', '.join(jobs)}" for what, jobs in sent]
    lines.append(f"run directories: {' '.join(step['run_dir'] for step in plan['plans'])}")
    lines.append("follow each with: curator-slurm status <run directory>")
    if plan.get("glue"):
        lines.append(f"the driver job's log: see {os.path.join(plan['plans'][0]['run_dir'], DRIVER_FILE)}")
    return "\n".join(lines)


def refuse_run_dir_for_steps(run_dir: str | None, steps: int) -> None:
    """--run-dir names one run directory; a script of several steps has one per step."""
    if run_dir and steps > 1:
        raise OptionError(
            f"--run-dir {run_dir}: this script runs {steps} pipelines/workflows, each with its own run directory "
            "(inside its output); leave --run-dir out"
        )


__all__ = [
    "dependency",
    "format_steps",
    "preview_steps",
    "refuse_run_dir_for_steps",
    "render_driver_script",
    "submit_driver",
    "submit_steps",
]
