"""Pipeline: an ordered list of stages, checked before any data is read."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from curator_slurm import fs
from curator_slurm._version import __version__
from curator_slurm.backends.adapter import list_sources
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.errors import PipelineBuildError, WorkerStartError, end_scripts_with_message
from curator_slurm.logs import bound, ensure_logging
from curator_slurm.runs.results import PipelineResult
from curator_slurm.runs.rundir import RunDir, default_run_dir_of, local_run_dir
from curator_slurm.runs.sharding import check_source_ids
from curator_slurm.runs.steps import next_step, not_my_step
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import PASSTHROUGH, CompositeStage, ProcessingStage
from curator_slurm.stages.code import code_digests
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.params import FINGERPRINT_SCHEME, fingerprint_params
from curator_slurm.tasks import ID_SCHEME


class Pipeline:
    """``Pipeline(name).add_stage(reader).add_stage(filter).add_stage(writer).run()``.

    Args:
        name: the pipeline's name, in logs and in the run fingerprint (a run under another name is another run).
        stages: stages to add, in order (as :meth:`add_stage` would).
        description: free text about the pipeline; nothing reads it.
    """

    def __init__(self, name: str = "pipeline", stages: list[ProcessingStage] | None = None, description: str = ""):
        self.name = name
        self.description = description
        self.stages: list[ProcessingStage] = []
        for stage in stages or []:
            self.add_stage(stage)

    def add_stage(self, stage: ProcessingStage) -> Pipeline:
        if isinstance(stage, type):
            raise PipelineBuildError(
                f"pipeline {self.name!r}: add_stage got the class {stage.__name__}; pass an instance, "
                f"e.g. {stage.__name__}(...)"
            )
        if not isinstance(stage, ProcessingStage):
            raise PipelineBuildError(
                f"pipeline {self.name!r}: add_stage got {type(stage).__name__}, which is not a ProcessingStage"
            )
        self.stages.append(stage)
        return self

    def describe(self) -> str:
        """The pipeline's stages as text, as NeMo Curator's ``describe()`` gives it: each stage's name,
        resources, batch size, and the fields it reads and writes (``*``: every field that came in)."""
        lines = [
            f"Pipeline: {self.name}",
            f"Description: {self.description or 'No description provided'}",
            f"Stages: {len(self.stages)}",
            "",
        ]
        for i, stage in enumerate(self.stages):
            lines.append(f"Stage {i + 1}: {stage.name}")
            lines.append(f"  Resources: {stage.resources.cpus} CPUs")
            if stage.resources.gpus:
                lines.append(f"    GPUs: {stage.resources.gpus}")
            lines.append(f"  Batch size: {stage.batch_size}")
            try:
                (in_attrs, in_cols), (out_attrs, out_cols) = stage.inputs(), stage.outputs()
            except Exception as e:  # a stage's declaration failing is shown, not raised: this only describes
                lines.append(f"  Error getting stage info: {e}")
                continue
            if in_attrs or in_cols:
                lines.append("  Inputs:")
                lines += [f"    Required attributes: {', '.join(in_attrs)}"] if in_attrs else []
                lines += [f"    Required columns: {', '.join(in_cols)}"] if in_cols else []
            if out_attrs or out_cols:
                lines.append("  Outputs:")
                lines += [f"    Output attributes: {', '.join(out_attrs)}"] if out_attrs else []
                lines += [f"    Output columns: {', '.join(out_cols)}"] if out_cols else []
        lines.append("")
        return "\n".join(lines)

    def build(self) -> list[ProcessingStage]:
        """Decompose composite stages, check that each stage's inputs are produced by the one before,
        and mark the source and sink stages."""
        if not self.stages:
            raise PipelineBuildError(f"pipeline {self.name!r} has no stages; add a reader first")
        flat: list[ProcessingStage] = []
        for stage in self.stages:
            flat.extend(_decompose(stage))
        for i, stage in enumerate(flat):
            stage.is_source_stage = i == 0
            stage.is_sink_stage = i == len(flat) - 1
        # The fields known to reach each stage, each with the stage that made it (None: unknown until run time,
        # e.g. a JSONL reader without ``fields``: nothing is refused then).
        available: dict[str, str] | None = None
        for i, stage in enumerate(flat):
            if i > 0 and available is not None:
                _, needed = stage.inputs()
                missing = [f for f in needed if f not in available]
                if missing:
                    raise PipelineBuildError(_missing_fields(self.name, i, stage.name, missing, available))
            _, produced = stage.outputs()
            if produced is None:
                available = None
            elif PASSTHROUGH in produced:
                if available is not None:
                    available = {**available, **{f: stage.name for f in produced if f != PASSTHROUGH}}
            else:
                available = {f: stage.name for f in produced}
        return flat

    def run(
        self,
        executor: BaseExecutor | None = None,
        shard: ShardSpec | None = None,
        run_dir: str | os.PathLike | None = None,
        options: RunOptions | None = None,
    ) -> PipelineResult:
        """Run on ``executor`` (default: ``LocalExecutor()``).

        ``shard`` defaults to :meth:`ShardSpec.from_env`, so the same script does all the work on a
        laptop and its share of it inside a Slurm array task. Progress is recorded per source task in
        ``run_dir`` (default: ``CURATOR_RUN_DIR``, else ``.curator-run`` inside the writer's output
        directory), and a re-run skips what is already done.
        """
        from curator_slurm.backends.local import LocalExecutor

        multiprocessing = sys.modules.get("multiprocessing")  # not imported here if nothing else did
        if multiprocessing is not None and getattr(multiprocessing.current_process(), "_inheriting", False):
            # A spawned worker re-imports the script as it starts; a pipeline run at import time would
            # then run again in every worker, duplicating the whole job.
            raise WorkerStartError(
                "a spawned worker process is importing a script that runs a pipeline at import time; put the "
                'run under `if __name__ == "__main__":` (or use workers=1)'
            )
        end_scripts_with_message()  # an uncaught CuratorError ends the script with its message, no traceback
        options = options if options is not None else RunOptions.from_env()
        step = next_step()  # the script's n-th run call (curator_slurm.runs.steps)
        stages = self.build()
        spec = shard if shard is not None else ShardSpec.from_env()
        executor = executor or LocalExecutor()
        directory = run_dir or options.run_dir or default_run_dir(stages[-1])
        check_output_dirs(stages, directory)  # a file in the way, a name too long: before any work (or submit)
        if options.plan_out:  # list the work for `curator-slurm plan/submit`; do none of it, and go on
            tasks = self._write_plan(options.plan_out, stages, directory)
            return _nothing(spec, directory, len(tasks))
        if not_my_step(step, options.pipeline):  # a task of another step of this script: nothing to do here
            return _nothing(spec, directory)
        ensure_logging()
        bound(spec.label, spec.job.label).info(
            f"pipeline {self.name!r}: {' -> '.join(s.name for s in stages)} on {type(executor).__name__} "
            f"({spec.label}, {spec.origin})" + (f"; run directory {directory}" if directory else "")
        )
        if spec.job.array_job_id and (waited := fs.start_jitter()):  # CURATOR_S3_START_DELAY: spread a burst
            bound(spec.label, spec.job.label).info(f"waited {waited:.1f} s before starting (CURATOR_S3_START_DELAY)")
        return executor.execute(
            stages,
            spec,
            run_dir=RunDir(directory) if directory else None,
            fingerprint=self.fingerprint(stages),
            options=options,
        )

    def fingerprint(self, stages: list[ProcessingStage] | None = None) -> dict[str, Any]:
        """What identifies this pipeline's work: its name, and each stage's declared name and parameters
        (:func:`~curator_slurm.stages.params.fingerprint_params`), not its class's module, so a stage class
        can move without making its runs unresumable."""
        return {
            "name": self.name,
            "id_scheme": ID_SCHEME,
            "fingerprint_scheme": FINGERPRINT_SCHEME,
            "version": __version__,
            "stages": [_stage_fingerprint(s) for s in (stages if stages is not None else self.build())],
        }

    def plan(self, stages: list[ProcessingStage], run_dir: str | os.PathLike | None) -> tuple[dict[str, Any], list]:
        """What `curator-slurm plan/submit` needs to know of this pipeline: its source tasks (no data is read)."""
        tasks = list_sources(stages[0], ShardSpec.single()).sources
        check_source_ids(tasks, stages[0].name)  # the shards will need deterministic, unique ids
        return {
            "kind": "pipeline",
            "pipeline": self.name,
            "run_dir": local_run_dir(run_dir) if run_dir else None,
            "fingerprint": self.fingerprint(stages),
            "has_bytes": all("bytes" in t.metadata for t in tasks),
            "tasks": [[t.task_id, t.weight] for t in tasks],
        }, tasks

    def _write_plan(self, path: str, stages: list[ProcessingStage], run_dir: str | os.PathLike | None) -> list:
        """Append this pipeline's plan to ``path`` (one JSON line per pipeline or workflow the script runs)."""
        plan, tasks = self.plan(stages, run_dir)
        from curator_slurm.runs.manifest import save_plan_sources

        plan["sources_file"] = save_plan_sources(path, tasks)  # what `submit` turns into a manifest
        append_plan(path, plan)
        return tasks

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, stages={[s.name for s in self.stages]})"


def _stage_fingerprint(stage: ProcessingStage) -> dict[str, Any]:
    """A stage in the fingerprint: its declared name, its parameters and, when it is made of user code (a custom
    stage, filter, modifier or function), a digest of that code's source, so an edited class is a change too."""
    entry: dict[str, Any] = {"name": stage.name, "params": fingerprint_params(stage)}
    code = code_digests(stage)
    if code:
        entry["code"] = code
    return entry


def check_output_dirs(stages: list[ProcessingStage], *directories: str | os.PathLike | None) -> None:
    """An :class:`~curator_slurm.errors.OutputError` before any work when a directory the stages write into
    (or one of ``directories``, e.g. the run directory) cannot be made: a file in the way, a name too long."""
    for path in [*(os.fspath(d) for d in directories if d), *(d for s in stages for d in s.output_dirs())]:
        fs.check_output_dir(path)


def _nothing(spec: ShardSpec, directory: str | os.PathLike | None, total: int = 0) -> PipelineResult:
    """The result of a run call that did no work here (plan mode, or another step's task)."""
    return PipelineResult(
        shard=spec,
        stages=[],
        output_files=[],
        output_tasks=[],
        source_tasks_total=total,
        source_tasks_mine=0,
        source_tasks_skipped=0,
        done=0,
        failed=[],
        seconds=0.0,
        run_dir=os.fspath(directory) if directory else None,
    )


def _missing_fields(pipeline: str, index: int, stage: str, missing: list[str], available: dict[str, str]) -> str:
    """The build-time refusal of a stage that needs fields no earlier stage makes: the stage, the fields, and
    which stage makes each field that does reach it."""
    by_stage: dict[str, list[str]] = {}
    for name, maker in available.items():
        by_stage.setdefault(maker, []).append(name)
    made = "; ".join(f"{maker!r} produces {', '.join(sorted(names))}" for maker, names in by_stage.items())
    return (
        f"pipeline {pipeline!r}: stage {index} {stage!r} needs field(s) {missing}, which no stage before it produces "
        f"({made or 'no fields reach it'}). Read the field (e.g. fields=[...] on the reader), add a stage that makes "
        "it (an extractor with add_language=True makes 'language'), or point the stage at an existing field."
    )


def _decompose(stage: ProcessingStage) -> list[ProcessingStage]:
    if not isinstance(stage, CompositeStage):
        return [stage]
    parts = stage.decompose()
    if not parts:
        raise PipelineBuildError(f"composite stage {stage.name!r} decomposed into no stages")
    out: list[ProcessingStage] = []
    for part in parts:
        out.extend(_decompose(part))
    return out


def default_run_dir(sink: ProcessingStage) -> str | None:
    """``<output dir>/.curator-run`` when the sink writes files (the same for every shard), else None; for an
    output on object storage a local directory named after it (``runs.rundir.default_run_dir_of``)."""
    if isinstance(sink, BaseWriter):
        return default_run_dir_of(sink.path)
    return None


def append_plan(path: str, plan: dict[str, Any]) -> None:
    """Add one plan (a pipeline's or a workflow's) as a JSON line: a script may run several."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(plan, default=str) + "\n")
