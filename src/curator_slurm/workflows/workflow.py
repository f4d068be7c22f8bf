"""Workflows: global steps (deduplication) as phases, each an ordinary pipeline with its own run directory,
started when every source task of the phase before is done; inside an array task for one phase
(``CURATOR_PHASE``), only that phase's shard runs. Design: docs/design.md, section Workflows and phase inputs."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from curator_slurm import fs
from curator_slurm.backends.adapter import list_sources
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.errors import CuratorError, PipelineBuildError, end_scripts_with_message
from curator_slurm.pipeline import Pipeline, append_plan, check_output_dirs
from curator_slurm.runs.layout import PLAN_FILE, WORKFLOW_FILE, phase_run_dir
from curator_slurm.runs.ledger import load_status, shard_layout
from curator_slurm.runs.liveness import marked
from curator_slurm.runs.results import PipelineResult
from curator_slurm.runs.rundir import default_run_dir_of
from curator_slurm.runs.steps import inside_step, next_step, not_my_step
from curator_slurm.runs.upstream import Upstream
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec

logger = logging.getLogger(__name__)

#: The file that marks a directory as a workflow's run directory (the phases' run directories are inside).


class PhaseNotReadyError(CuratorError, RuntimeError):
    """A phase was asked to start before every source task of the phase before it was done."""


@dataclass(frozen=True)
class PhaseResources:
    """What one phase's Slurm array asks for by default, as a workflow declares it in code (None: not declared,
    the submission's own option applies); ``curator-slurm submit``'s ``--phase-<option>`` overrides it. The
    fields are the per-phase options of ``submit`` (same names and values as its plain options).

    Args:
        time: time limit per task, e.g. ``"30:00:00"``.
        mem: memory per node, e.g. ``"16G"``.
        cpus_per_task: CPUs per array task.
        partition: the partition.
        throttle: at most this many of the phase's tasks at once.
        gpus_per_task: GPUs per array task.
        sbatch_args: extra sbatch options, e.g. ``("--qos=high",)``, after the submission's own.
    """

    time: str | None = None
    mem: str | None = None
    cpus_per_task: int | None = None
    partition: str | None = None
    throttle: int | None = None
    gpus_per_task: int | None = None
    sbatch_args: tuple[str, ...] = ()

    def declared(self) -> dict[str, Any]:
        """The fields that are set, as JSON values."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items() if v}


@dataclass(frozen=True)
class Phase:
    """One step of a workflow: a pipeline, and how many shards it should have when submitted.

    Args:
        name: the phase's name, a plain directory name unique in its workflow (its run directory's).
        pipeline: what the phase runs.
        default_shards: the array tasks ``submit`` gives it when ``--phase-shards`` does not say.
        max_shards: the most shards that can have work (e.g. its buckets); None: no limit known.
        resources: the Slurm resources of its array by default (see docs/reference.md, "Resources per phase").
    """

    name: str
    pipeline: Pipeline
    #: Array tasks ``curator-slurm submit`` gives this phase when ``--phase-shards`` does not say;
    #: None: the ``--shards`` of the submission.
    default_shards: int | None = None
    #: Most shards that can have work (e.g. the number of buckets of a bucket phase); None: no limit known.
    max_shards: int | None = None
    resources: PhaseResources = PhaseResources()


@dataclass
class WorkflowResult:
    """What each phase that ran in this process did, in order."""

    phases: dict[str, PipelineResult] = field(default_factory=dict)
    seconds: float = 0.0
    planned: bool = False

    @property
    def last(self) -> PipelineResult | None:
        return next(reversed(self.phases.values()), None)

    def summary(self) -> str:
        parts = [f"{name}: {r.done} done, {len(r.failed)} failed, {r.source_tasks_skipped} skipped"
                 for name, r in self.phases.items()]  # fmt: skip
        return f"{len(self.phases)} phase(s) in {self.seconds:.2f} s; " + "; ".join(parts)


class Workflow:
    """``Workflow(name, work_dir, [Phase(...), ...]).run()``: phases in order, each complete before the next.

    Args:
        name: the workflow's name.
        work_dir: the directory of its intermediate files (local or object storage); its run directories are
            under ``<work_dir>/.curator-run``.
        phases: its phases, in order, with unique names.
        warnings: what the run should say of itself (a recipe's departures from the method it is named
            after): kept in ``workflow.json``, and repeated first by `status` and the report.
    """

    def __init__(
        self, name: str, work_dir: str | os.PathLike, phases: list[Phase], warnings: Sequence[str] = ()
    ) -> None:
        if not phases:
            raise PipelineBuildError(f"workflow {name!r} has no phases")
        names = [p.name for p in phases]
        if len(set(names)) != len(names):
            raise PipelineBuildError(f"workflow {name!r}: phase names must be unique, got {names}")
        for phase in phases:
            if not phase.name or os.sep in phase.name or phase.name.startswith("."):
                raise PipelineBuildError(f"workflow {name!r}: phase name {phase.name!r} must be a plain directory name")
        self.name = name
        self.work_dir = fs.absolute(work_dir)  # may be on object storage (shuffle buckets); the run root is not
        self.phases = list(phases)
        self.warnings = tuple(warnings)

    @property
    def run_root(self) -> str:
        """The workflow's run directory: ``<work dir>/.curator-run``, one subdirectory per phase (a local
        directory named after the work directory when that is on object storage: ``default_run_dir_of``)."""
        return default_run_dir_of(self.work_dir)

    def run_dir(self, phase: Phase | str) -> str:
        """The run directory of ``phase`` (a name or a :class:`Phase`)."""
        return phase_run_dir(self.run_root, phase if isinstance(phase, str) else phase.name)

    def output_of(self, phase: str | None = None) -> str:
        """Where ``phase`` (default: the last) writes what it outputs: the path of its sink writer. A later step of
        a script reads it from here, never by spelling the workflow's layout itself."""
        chosen = self.phases[-1] if phase is None else self.phase(phase)
        sink = chosen.pipeline.build()[-1]
        path = getattr(sink, "path", None)
        if path is None:
            raise PipelineBuildError(f"workflow {self.name!r}: phase {chosen.name!r} ends in {sink.name!r}, no writer")
        return os.fspath(path)

    def upstream(self, phase: str, per_task: bool = False) -> Upstream:
        """``phase`` as a stage of a later step reads it: by what its ledger records
        (:class:`~curator_slurm.runs.upstream.Upstream`)."""
        self.phase(phase)  # a phase that does not exist is an error naming the ones that do
        return Upstream(phase, self.run_dir(phase), per_task)

    def phase(self, name: str) -> Phase:
        for p in self.phases:
            if p.name == name:
                return p
        raise PipelineBuildError(
            f"CURATOR_PHASE={name!r}: workflow {self.name!r} has no such phase; its phases are "
            f"{[p.name for p in self.phases]}"
        )

    # --- running ------------------------------------------------------------------------------------
    def run(
        self,
        executor: BaseExecutor | None = None,
        shard: ShardSpec | None = None,
        options: RunOptions | None = None,
    ) -> WorkflowResult:
        """Run every phase in order, or only the phase named by ``CURATOR_PHASE`` (an array task of one
        phase). A phase whose predecessor is not complete is refused with what is missing."""
        end_scripts_with_message()  # an uncaught CuratorError ends the script with its message, no traceback
        options = options if options is not None else RunOptions.from_env()
        spec = shard if shard is not None else ShardSpec.from_env()
        step = next_step()  # the script's n-th run call (curator_slurm.runs.steps)
        self.check_outputs()
        if options.plan_out:
            append_plan(options.plan_out, self.plan(options.plan_out))
            return WorkflowResult(planned=True)
        if not_my_step(step, options.pipeline):  # a task of another step of this script: nothing to do here
            return WorkflowResult()
        todo = self.phases if options.phase is None else [self.phase(options.phase)]
        self._write_marker(first=todo[0] is self.phases[0] and not spec.manifest)
        phase_options = dataclasses.replace(options, run_dir=None, phase=None)
        result = WorkflowResult()
        start = time.perf_counter()
        # `status` sees the marker between phases; refused beside a process that would do the same tasks.
        layout = shard_layout(spec) if spec.enabled and spec.count > 1 else None
        with marked(self.run_root, f"workflow {self.name}", layout=layout, guard=True), inside_step():
            self._run_phases(todo, executor, spec, phase_options, result)
        result.seconds = time.perf_counter() - start
        return result

    def _run_phases(
        self,
        todo: list[Phase],
        executor: BaseExecutor | None,
        spec: ShardSpec,
        phase_options: RunOptions,
        result: WorkflowResult,
    ) -> None:
        for phase in todo:
            index = self.phases.index(phase)
            if index > 0:
                self.require_complete(self.phases[index - 1], before=phase)
                if not spec.manifest:  # from a manifest, submit/retry compared the files, the readers check them
                    self.require_unchanged(self.phases[:index], before=phase)
            result.phases[phase.name] = phase.pipeline.run(
                executor, shard=spec, run_dir=self.run_dir(phase), options=phase_options
            )

    def check_outputs(self) -> None:
        """Before any phase works (and at submit): an :class:`~curator_slurm.errors.OutputError` when a
        directory any phase writes into, or the run directory, cannot be made (a file in the way, a name too
        long), as a pipeline refuses it, instead of an OSError when the phase that writes there starts."""
        for phase in self.phases:
            check_output_dirs(phase.pipeline.build(), self.run_dir(phase))

    def missing(self, phase: Phase) -> tuple[list[str], dict[str, dict[str, Any]]]:
        """The source tasks of ``phase`` that are not done, and the failure records among them.

        The tasks are those `curator-slurm submit` planned for the phase (its ``plan.json``) when there is
        one: every task of the next phase then checks without listing the input again, and agrees with
        the phase's own tasks, which follow that plan (a file added since is in neither). Otherwise the
        phase's source stage lists them."""
        ids = planned_ids(self.run_dir(phase))
        if ids is None:
            stages = phase.pipeline.build()
            ids = [t.task_id for t in list_sources(stages[0], ShardSpec.single()).sources]
        state = load_status(self.run_dir(phase))
        missing = [i for i in ids if i not in state.done]
        return missing, {i: state.failed[i] for i in missing if i in state.failed}

    def require_complete(self, phase: Phase, before: Phase) -> None:
        missing, failed = self.missing(phase)
        if not missing:
            return
        detail = "; ".join(
            f"{i} failed in stage {r.get('stage')!r}: {(str(r.get('error') or '').splitlines() or [''])[0]}"
            for i, r in list(failed.items())[:3]
        )
        raise PhaseNotReadyError(
            f"workflow {self.name!r}: phase {before.name!r} cannot start: {len(missing)} source task(s) of phase "
            f"{phase.name!r} are not done ({len(failed)} failed" + (f": {detail}" if detail else "") + "; "
            f"first missing: {', '.join(missing[:3])}). Finish it first: re-run the script (done work is skipped), "
            f"or `curator-slurm retry {self.run_root}`; in an array, each phase must be its own array "
            "(`curator-slurm submit` does that)."
        )

    def require_unchanged(self, earlier: list[Phase], before: Phase) -> None:
        """Refuse to start ``before`` when a file that an ``earlier`` phase read changed since (its rows
        there and here would disagree: a file appended after the hash phase kept its duplicates)."""
        from curator_slurm.runs.inputs import afresh_hint, check_recorded

        check_recorded(
            [(f"phase {p.name!r} of workflow {self.name!r}", self.run_dir(p)) for p in earlier],
            afresh_hint(self.run_dir(before)),
        )

    # --- planning -----------------------------------------------------------------------------------
    def plan(self, plan_out: str | None = None) -> dict[str, Any]:
        """Every phase's source tasks, for `curator-slurm plan/submit` (no data is read). A phase whose
        source lists what an earlier phase writes gives ids that do not depend on those files. With
        ``plan_out``, each phase's full source tasks are saved beside it, for its manifest."""
        from curator_slurm.runs.manifest import save_plan_sources

        phases = []
        for phase in self.phases:
            stages = phase.pipeline.build()
            plan, tasks = phase.pipeline.plan(stages, self.run_dir(phase))
            if plan_out:
                plan["sources_file"] = save_plan_sources(plan_out, tasks, tag=f"-{phase.name}")
            plan.update(phase=phase.name, default_shards=phase.default_shards, max_shards=phase.max_shards)
            plan["resources"] = phase.resources.declared()
            phases.append(plan)
        first = phases[0]
        plan = {
            "kind": "workflow",
            "workflow": self.name,
            "pipeline": self.name,
            "run_dir": self.run_root,
            "has_bytes": first["has_bytes"],
            "tasks": first["tasks"],
            "phases": phases,
        }
        return {**plan, "warnings": list(self.warnings)} if self.warnings else plan

    def _write_marker(self, first: bool = False) -> None:
        """``workflow.json``; on the first start of the first phase (no marker yet), only once that phase's
        inputs were listed: a start that fails on a missing input leaves no workflow behind for `status`."""
        if first and not os.path.exists(os.path.join(self.run_root, WORKFLOW_FILE)):
            list_sources(self.phases[0].pipeline.build()[0], ShardSpec.single())  # an InputError ends it here
        write_marker(
            self.run_root, self.name, [p.name for p in self.phases], document_phases(self.phases), self.warnings
        )


def document_phases(phases: list[Phase]) -> list[str]:
    """The phases that write documents (their last stage is a writer of documents or tokens), in order: the
    workflow's own numbers (`status`) follow the documents through them; the others write side data (buckets,
    signatures, edges)."""
    from curator_slurm.stages.io.writers import BaseWriter

    return [p.name for p in phases if isinstance(p.pipeline.build()[-1], BaseWriter)]


def phase_upstream(work_dir: str | os.PathLike, phase: str, per_task: bool = False) -> Upstream:
    """The phase ``phase`` of the workflow whose work directory is ``work_dir``, as a later phase's stage reads
    it: by the outputs its ledger records (:class:`~curator_slurm.runs.upstream.Upstream`)."""
    return Upstream(phase, phase_run_dir(default_run_dir_of(fs.absolute(work_dir)), phase), per_task)


def write_marker(
    run_root: str, name: str, phases: list[str], documents: list[str] | None = None, warnings: Sequence[str] = ()
) -> None:
    """``workflow.json`` in the run root names the phases in order, for `curator-slurm status`, those that write
    ``documents`` (:func:`document_phases`) and the workflow's warnings; written by `submit` (so status works
    before any task ran) and by every run."""

    fs.makedirs(run_root)  # a file in the way: an OutputError naming it
    path = os.path.join(run_root, WORKFLOW_FILE)
    payload: dict[str, Any] = {"workflow": name, "phases": phases}
    if warnings:
        payload["warnings"] = list(warnings)
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        found = None
    if documents is None and isinstance(found, dict) and found.get("phases") == phases:
        documents = found.get("documents")  # `submit` does not know them: a run's stay
    if documents is not None:
        payload["documents"] = documents
    if found != payload:
        fs.atomic_write_text(path, json.dumps(payload))


def planned_ids(run_dir: str) -> list[str] | None:
    """The source task ids in the ``plan.json`` that `curator-slurm submit` wrote into a phase's run
    directory, or None when there is none (a run started by hand lists its sources itself)."""

    try:
        with open(os.path.join(run_dir, PLAN_FILE), encoding="utf-8") as f:
            tasks = json.load(f).get("tasks")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(t[0]) for t in tasks] if isinstance(tasks, list) else None


def workflow_phases(run_root: str) -> list[str] | None:
    """The phase names of the workflow whose run directory is ``run_root``, or None if it is not one."""

    path = os.path.join(run_root, WORKFLOW_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return list(json.load(f)["phases"])


def workflow_warnings(run_root: str) -> list[str]:
    """The warnings a workflow recorded of itself in ``workflow.json`` (none when it is not a workflow's)."""
    try:
        with open(os.path.join(run_root, WORKFLOW_FILE), encoding="utf-8") as f:
            found = json.load(f).get("warnings") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [str(w) for w in found] if isinstance(found, list) else []


def workflow_document_phases(run_root: str) -> list[str] | None:
    """The phases of the workflow at ``run_root`` that write documents, as its runs recorded them (None: not
    recorded, a workflow only submitted so far or run by an older version)."""
    try:
        with open(os.path.join(run_root, WORKFLOW_FILE), encoding="utf-8") as f:
            documents = json.load(f).get("documents")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(d) for d in documents] if isinstance(documents, list) else None
