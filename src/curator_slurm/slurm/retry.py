"""Planning a retry: which source tasks of a submitted run are not done, with how many shards and which options to
submit them again, and the frozen list (or manifest) of them; a workflow is retried from its first incomplete phase."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from curator_slurm.errors import OptionError
from curator_slurm.runs.inputs import check_plan_inputs, plan_inputs
from curator_slurm.runs.layout import RETRIES_DIR
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.manifest import ManifestInfo, attach_manifest
from curator_slurm.runs.plan import PLAN_FILE, check_before_submit, planned_task_ids, run_plan
from curator_slurm.runs.rundir import source_record
from curator_slurm.runs.sharding import write_source_list
from curator_slurm.runs.verify import outstanding
from curator_slurm.slurm.phases import (
    first_incomplete_phase,
    load_submission,
    refuse_if_workflow_busy,
)
from curator_slurm.slurm.submit import SubmitOptions, load_submissions, refuse_if_busy

#: Options a retry never takes from the command line: the run's own.
_KEEP = ("shards", "run_dir")


@dataclass(frozen=True)
class RetryPlan:
    """What a retry of a pipeline's run submits: ``opts`` for the ``remaining`` source tasks (of ``total``;
    ``failed`` of them failed, the rest never finished); ``opts`` is None when every task is done. The
    tasks take their work from ``source_list`` (``CURATOR_SOURCE_LIST``, written unless on a dry run) or
    from ``manifest`` (``CURATOR_MANIFEST``; None on a dry run)."""

    opts: SubmitOptions | None
    total: int
    remaining: int
    failed: int
    source_list: str | None = None
    manifest: ManifestInfo | None = None


def plan_retry(
    run_dir: str, shards: int | None, options: Mapping[str, Any], dry_run: bool = False, force: bool = False
) -> RetryPlan:
    """The retry of ``run_dir`` (nothing to submit when every source task is done), with ``shards`` (default: about as
    many source tasks per shard as the first submission had) and the user's ``options`` (field values, see
    ``option_values``) over the last submission's. The script is planned again, as every retry task would
    list its work, and refused when its work changed as the tasks would refuse it. Refused while a task of
    the run is queued or running, unless ``force``."""
    run_dir = os.path.abspath(run_dir)
    submissions = load_submissions(run_dir)
    if not submissions or not os.path.exists(os.path.join(run_dir, PLAN_FILE)):
        raise OptionError(f"{run_dir} has no submission to retry; submit it first with curator-slurm submit")
    all_ids = planned_task_ids(run_dir)
    state = load_status(run_dir)
    remaining = outstanding(run_dir, all_ids)  # not done, done with lost outputs, or done from stale inputs
    if not remaining:
        return RetryPlan(None, total=len(all_ids), remaining=0, failed=0)
    refuse_if_busy(run_dir, force)
    per_shard = max(len(all_ids) / int(submissions[0]["shards"]), 1.0)
    shards = shards or max(1, math.ceil(len(remaining) / per_shard))
    source_list = os.path.join(run_dir, RETRIES_DIR, f"retry-{len(submissions)}-{int(time.time())}.ids")
    last = submissions[-1]
    previous = {k: v for k, v in last["options"].items() if k not in (*_KEEP, "env")}
    opts = SubmitOptions.from_record(
        previous, script=last["script"], script_args=last["script_args"], shards=shards, run_dir=run_dir
    ).with_arguments(options, keep=_KEEP)
    opts = replace(opts, env=(("CURATOR_SOURCE_LIST", source_list),), sbatch_args=_without_dependency(opts.sbatch_args))
    plan = run_plan(opts.script, opts.script_args, cwd=opts.workdir)
    sources = plan.pop("sources_table", None)
    plan_inputs(sources, run_dir)  # the files as they are now, against what the run read
    if sources is not None:
        opts = replace(opts, strategy=opts.strategy or "balanced")
    check_before_submit(opts, plan, manifest=sources is not None)
    total, failed = len(all_ids), len(state.failed)
    if sources is None:
        if not dry_run:
            os.makedirs(os.path.dirname(source_list), exist_ok=True)
            write_source_list(source_list, remaining)
        return RetryPlan(opts, total, len(remaining), failed, source_list=source_list)
    # A manifest of the remaining tasks, checked against the whole plan's digest.
    import pyarrow as pa
    import pyarrow.compute as pc

    left = sources.filter(pc.is_in(sources.column("task_id"), value_set=pa.array(remaining, type=pa.string())))
    opts = replace(opts, env=())
    everything = source_record([t[0] for t in plan["tasks"]])
    opts, info = attach_manifest(opts, left, "retry", dry_run, everything)
    return RetryPlan(opts, total, len(remaining), failed, manifest=info)


def _without_dependency(args: tuple[str, ...]) -> tuple[str, ...]:
    """sbatch arguments without a dependency on earlier jobs (a phase's on the phase before): the jobs a
    retry would wait for have ended, and Slurm would cancel it at once (``--kill-on-invalid-dep``)."""
    return tuple(a for a in args if not a.startswith(("--dependency", "--kill-on-invalid-dep")))


@dataclass(frozen=True)
class WorkflowRetry:
    """What a retry of a workflow submits: from ``phase`` (``missing`` of its source tasks not done) on,
    with ``opts`` as the base of every phase and ``counts`` shards per phase; ``phase`` is None when every
    phase of the workflow (``plan``) is complete."""

    opts: SubmitOptions
    counts: dict[str, int]
    plan: dict[str, Any]
    phase: str | None
    missing: int = 0
    #: Each phase's planned source tasks (a table for its manifest), as the retry planned them.
    sources: dict[str, Any] | None = None

    @property
    def later(self) -> list[str]:
        """The phases after ``phase``, which run again behind it."""
        names = [p["phase"] for p in self.plan["phases"]]
        return names[names.index(self.phase) + 1 :]


def plan_workflow_retry(
    run_root: str, shards: int | None, options: Mapping[str, Any], force: bool = False
) -> WorkflowRetry:
    """The retry of the workflow whose run directory is ``run_root`` (nothing to submit when every phase
    is complete): its first incomplete phase (with ``shards`` if given) and every phase after it, with the user's
    ``options`` over those of the submission. Refused while a task of any phase is queued or running."""
    saved = load_submission(run_root)
    if saved is None:
        raise OptionError(f"{run_root} has no workflow submission to retry; submit it first with curator-slurm submit")
    base, counts, plan = saved
    incomplete = first_incomplete_phase(plan)
    if incomplete is None:
        return WorkflowRetry(base, counts, plan, None)
    phase, missing = incomplete
    refuse_if_workflow_busy(plan, force)
    if shards:
        counts = {**counts, phase: shards}
    opts = base.with_arguments(options, keep=_KEEP)
    # Plan again, as the first submission did: each phase's tasks then load a manifest whose files were
    # compared with what every phase read (a file appended since is refused here, not read by the tasks).
    fresh = run_plan(opts.script, opts.script_args, cwd=opts.workdir).get("phase_sources") or {}
    check_plan_inputs(plan, fresh)
    return WorkflowRetry(opts, counts, plan, phase, missing, sources=fresh)
