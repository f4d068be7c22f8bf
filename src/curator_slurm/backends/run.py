"""The run loop every executor shares (:meth:`BaseExecutor.execute`): list this shard's source tasks,
filter out those a run directory already records done, process the rest (:meth:`BaseExecutor.
process_sources`, the one thing executors implement) while recording each one's fate, then raise if any
failed or a stop signal cut the run short.

The source stage always runs in the driver, through the adapter, which keeps only this shard's source
tasks; every ledger write of a run goes through :func:`_ledger`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.backends.adapter import BaseStageAdapter, list_sources, manifest_sources
from curator_slurm.backends.results import PipelineResult, ProgressLog, SourceResult, StageStats
from curator_slurm.backends.signals import GraceExpired, StopSignal, requeue
from curator_slurm.errors import Interrupted, PipelineFailedError, RunDirError, ShardConfigError
from curator_slurm.fs import output_error
from curator_slurm.logs import bound
from curator_slurm.runs.options import RunOptions
from curator_slurm.runs.rundir import RunDir
from curator_slurm.runs.summary import add_s3_counts
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.notes import merge_notes
from curator_slurm.tasks import FailedTask, Task

#: ``should_stop()``: whether to start no new source task (a :class:`StopSignal` in a run).
StopCheck = Callable[[], bool]


class BaseExecutor:
    """Runs a built pipeline. Subclasses implement :meth:`process_sources`."""

    retry_backoff: float = 1.0
    progress_interval: float = 30.0

    def process_sources(
        self, stages: list[ProcessingStage], sources: list[Task], shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        """Push each source task through ``stages`` (everything after the source stage); yield one
        result per source task, in any order, only after all of its descendants are done. Start no
        new source task once ``should_stop()`` is true."""
        raise NotImplementedError

    def run_source_stage(self, stage: ProcessingStage, shard: ShardSpec, log: Any) -> BaseStageAdapter:
        """Run the source stage in the driver and log what this shard keeps."""
        # --- manifest hook (issue #19): a task of a planned array loads its shard, it lists nothing ---
        if shard.manifest:
            adapter = manifest_sources(stage, shard, self.retry_backoff)
            assert adapter.selection is not None
            log.info(f"{adapter.selection.describe(shard)}, from manifest {shard.manifest}")
            return adapter
        # --- end of the manifest hook ---
        adapter = list_sources(stage, shard, self.retry_backoff)
        assert adapter.selection is not None
        log.info(f"{adapter.selection.describe(shard)}, listed by this process")
        return adapter

    def execute(
        self,
        stages: list[ProcessingStage],
        shard: ShardSpec,
        run_dir: RunDir | None = None,
        fingerprint: dict[str, Any] | None = None,
        options: RunOptions | None = None,
    ) -> PipelineResult:
        """Run ``stages`` (built, source first) for this shard, recording every source task's fate in
        ``run_dir``; raise if any source task failed or a stop signal cut the run short."""
        options = options or RunOptions()
        log = bound(shard.label, shard.job.label)
        start = time.perf_counter()
        source = self.run_source_stage(stages[0], shard, log)  # first: a bad input path must not claim a run dir
        run_dir = _usable_run_dir(run_dir, source, log)
        todo = _resume_filter(source, shard, run_dir, fingerprint or {}, options, log)
        remove_dead_temporaries(stages, log)
        with _marked(run_dir, shard):  # `status` tells a running run from one whose processes are gone
            tally, stopped_by = self._process(stages, todo, shard, run_dir, options, log)
        result = tally.result(source, len(todo), shard, time.perf_counter() - start, run_dir, stopped_by)
        log.info(result.summary())
        _raise_if_unfinished(result, options)
        return result

    def _process(
        self,
        stages: list[ProcessingStage],
        todo: list[Task],
        shard: ShardSpec,
        run_dir: RunDir | None,
        options: RunOptions,
        log: Any,
    ) -> tuple[_Tally, str | None]:
        """Every source task of ``todo`` through the stages after the source, each one's fate recorded as it
        comes, until done or stopped; returns the tally and the stop signal's name (if one came)."""
        tally = _Tally([StageStats(s.name) for s in stages], ProgressLog(len(todo), log, self.progress_interval))
        stop = StopSignal(options.grace_seconds, log)
        results: Iterable[SourceResult] = ()
        with _ledger(run_dir, shard, options, todo) as record:
            try:
                with stop:
                    results = (
                        self.process_sources(stages[1:], todo, shard, stop) if len(stages) > 1 else _passthrough(todo)
                    )
                    for result in results:
                        tally.add(result)
                        record(result)
            except GraceExpired:
                log.warning(f"grace period of {options.grace_seconds:.0f} s over; abandoning in-flight source tasks")
            finally:
                close = getattr(results, "close", None)
                if close is not None:  # end the executor's workers now, not whenever the generator is collected
                    close()
        return tally, stop.name


@dataclass
class _Tally:
    """What the finished source tasks of a run add up to."""

    stats: list[StageStats]  # one per stage, the source stage's first
    progress: ProgressLog
    outputs: list[str] = field(default_factory=list)
    output_tasks: list[Task] = field(default_factory=list)
    failed: list[FailedTask] = field(default_factory=list)
    tokens: int | None = None
    s3: dict[str, Any] | None = None

    def add(self, result: SourceResult) -> None:
        self.s3 = add_s3_counts(self.s3, result.s3)
        if result.tokens is not None:
            self.tokens = (self.tokens or 0) + result.tokens
        for total, part in zip(self.stats[1:], result.stats or [], strict=False):
            total.add(part)  # a task whose worker died has no per-stage stats
        self.outputs.extend(result.outputs)
        self.output_tasks.extend(result.output_tasks)
        if result.failure is not None:
            self.failed.append(result.failure)
        self.progress.update(result)

    def result(
        self,
        source: BaseStageAdapter,
        todo: int,
        shard: ShardSpec,
        seconds: float,
        run_dir: RunDir | None,
        stopped_by: str | None,
    ) -> PipelineResult:
        mine = len(source.kept)
        self.stats[0].tasks_out = mine
        return PipelineResult(
            shard=shard,
            stages=self.stats,
            output_files=sorted(self.outputs),
            output_tasks=self.output_tasks,
            source_tasks_total=source.manifest.count if source.manifest is not None else len(source.sources),
            source_tasks_mine=mine,
            source_tasks_skipped=mine - todo,
            done=self.progress.done,
            failed=self.failed,
            seconds=seconds,
            run_dir=run_dir.path if run_dir else None,
            stopped_by=stopped_by,
            tokens=self.tokens,
            s3=self.s3,
        )


def _usable_run_dir(run_dir: RunDir | None, source: BaseStageAdapter, log: Any) -> RunDir | None:
    """``run_dir``, unless the source stage gives its tasks no deterministic ids (then a re-run could not
    tell which tasks it already did, so nothing is recorded)."""
    if run_dir is not None and not all(t.has_deterministic_id for t in source.sources):
        log.warning(
            f"source stage {source.stage.name!r} gives its tasks no deterministic ids, so progress cannot be "
            f"recorded in {run_dir.path}; a re-run will do all the work again"
        )
        return None
    return run_dir


def _resume_filter(
    source: BaseStageAdapter,
    shard: ShardSpec,
    run_dir: RunDir | None,
    fingerprint: dict[str, Any],
    options: RunOptions,
    log: Any,
) -> list[Task]:
    """This shard's source tasks that ``run_dir`` does not record done, after claiming it for this pipeline
    and shard and checking that the inputs are those it was started on (all of them without a run dir)."""
    mine = source.kept
    if run_dir is None:
        return mine
    try:
        run_dir.claim(fingerprint)
        run_dir.claim_shard(shard)
        if source.manifest is not None:  # manifest hook: the plan's digest, not every id
            from curator_slurm.runs.manifest import check_sources

            check_sources(run_dir.path, source.manifest, options.accept_new_inputs)
        else:
            weights = [t.weight for t in source.sources] if shard.strategy == "balanced" else None
            run_dir.check_sources([t.task_id for t in source.sources], options.accept_new_inputs, weights)
    except (RunDirError, ShardConfigError) as e:
        run_dir.record_refusal(shard, e)  # an array task's log is not where `failures` looks
        raise
    except OSError as e:  # a read-only output, a file where the directory belongs: say so, no traceback
        clear = output_error(e, run_dir.path)
        if clear is e:
            raise
        raise clear from e
    state = run_dir.state(shard, [t.task_id for t in mine])  # only the ledger files that can hold their records
    done = {t.task_id for t in mine if t.task_id in state.done}
    if source.manifest is None:  # a file that changed under done work is refused (with a manifest: at submit)
        from curator_slurm.runs.inputs import check_listing

        check_listing(run_dir.path, done, shard, mine)
    from curator_slurm.runs.verify import lost_outputs

    lost = lost_outputs(run_dir.path, done, shard)  # done, but its outputs are gone: done again
    if lost:
        first = "; ".join(problems[0] for problems in list(lost.values())[:3])
        log.warning(f"{shard.label}: doing {len(lost)} done source task(s) again, their outputs are gone: {first}")
    todo = [t for t in mine if t.task_id not in done or t.task_id in lost]
    if len(todo) < len(mine):
        log.info(f"{shard.label}: skipping {len(mine) - len(todo)} source tasks already done in {run_dir.path}")
    return todo


def remove_dead_temporaries(stages: list[ProcessingStage], log: Any) -> None:
    """Before any work: delete what writers on this host that are gone (kill -9, a node's OOM killer, a crashed
    earlier run of any executor) left half-written in the stages' output directories, and say what was left
    (temporary files of other hosts' writers, which may be alive). Every stage that writes files through
    :func:`curator_slurm.fs.atomic_write` and defines ``remove_dead_temporaries()`` takes part."""
    for stage in stages:
        clean = getattr(stage, "remove_dead_temporaries", None)
        if clean is None:
            continue
        cleanup = clean()
        if cleanup.removed:
            log.info(cleanup.describe())
        elif cleanup.other_hosts:
            log.warning(cleanup.describe())


@contextmanager
def _marked(run_dir: RunDir | None, shard: ShardSpec) -> Iterator[None]:
    """This process's marker in ``run_dir`` while it works there (:mod:`curator_slurm.runs.liveness`)."""
    if run_dir is None:
        yield
        return
    from curator_slurm.runs.liveness import marked

    with marked(run_dir.path, shard.label):
        yield


@contextmanager
def _ledger(
    run_dir: RunDir | None, shard: ShardSpec, options: RunOptions, todo: list[Task]
) -> Iterator[Callable[[SourceResult], None]]:
    """``record(result)`` for each finished source task: the one place where a run writes its ledger
    (nothing without a run directory); the writer is closed when the run ends, however it ends. A done
    record keeps what its task's files were as the run started (``inputs``), for the next start to compare."""
    if run_dir is None:
        yield lambda result: None
        return
    from curator_slurm.runs.inputs import input_states
    from curator_slurm.runs.verify import written_files

    read = input_states(todo)
    writer = run_dir.writer(shard, options)  # commits a window of records at a time

    def record(result: SourceResult) -> None:
        line = ledger_record(result)
        if line["status"] == "done":
            if read.get(result.source_id):
                line["inputs"] = read[result.source_id]
            line["written"] = written_files(result.outputs)  # for `status --verify` and a re-run to check
        writer.write(line)

    try:
        yield record
    finally:
        writer.close()


def ledger_record(result: SourceResult) -> dict[str, Any]:
    """The ledger record of one finished source task."""
    if result.failure is None:
        record = {
            "source": result.source_id,
            "status": "done",
            "outputs": result.outputs,
            "rows_in": result.rows_in,
            "rows_out": result.rows_out,
            "seconds": round(result.seconds, 4),
            "attempts": result.attempts,
            # Rows in and out of every stage after the source, for the run's funnel (`status`).
            "stages": [stage_entry(s) for s in result.stats],
        }
        notes: dict[str, Any] = {}
        for s in result.stats:  # why stages dropped documents, and damaged inputs (stages.notes)
            merge_notes(notes, s.notes, prefix=f"{s.name}: ")
        if notes:
            record["notes"] = notes
        if result.tokens is not None:  # a writer that counts tokens (MegatronTokenizerWriter): `status` sums them
            record["tokens"] = result.tokens
        if result.s3:  # object-store requests and retries (`status` sums them)
            record["s3"] = result.s3
        return record
    f = result.failure
    return {
        "source": result.source_id,
        "status": "failed",
        "stage": f.stage,
        "error": f.error,
        "traceback": f.traceback,
        "attempts": result.attempts,
        "task_id": f.metadata.get("task_id"),
        "files": f.metadata.get("files"),
        "seconds": round(result.seconds, 4),
        **({"s3": result.s3} if result.s3 else {}),
    }


def stage_entry(s: StageStats) -> list[Any]:
    """A stage's entry in a done record's ``stages``: ``[name, rows_in, rows_out]``, then the characters it
    removed, ``chars_dropped, chars_rewritten``, when it counted them for every document it took in (a stage
    that took none removed none: its entry stays short)."""
    entry: list[Any] = [s.name, s.rows_in, s.rows_out]
    if s.rows_in and s.chars_known:
        entry += [s.chars_dropped, s.chars_rewritten]
    return entry


def _raise_if_unfinished(result: PipelineResult, options: RunOptions) -> None:
    """Raise :class:`Interrupted` when a stop signal left source tasks undone (requeueing the job when a
    time limit's warning signal asked for it), :class:`PipelineFailedError` when any source task failed."""
    shard, failed = result.shard, result.failed
    todo = result.source_tasks_mine - result.source_tasks_skipped
    left = todo - result.done - len(failed)
    if result.stopped_by is not None and left > 0:  # a signal after the last task changes nothing
        # Only a warning signal (--signal=B:USR1@...) requeues: SIGTERM is also what `scancel` sends,
        # and a cancelled task must stay cancelled.
        requeued = options.requeue and result.stopped_by in ("SIGUSR1", "SIGUSR2") and requeue(shard.job)
        raise Interrupted(
            f"stopped by {result.stopped_by} ({shard.label}): {result.done} source tasks done, {left} left for a "
            + ("requeued run" if requeued else "re-run of the same command (done work is skipped)"),
            result=result,
        )
    if failed:
        first = "; ".join(f"{f.source_id} [{f.stage}] {f.error.splitlines()[0] if f.error else ''}" for f in failed[:3])
        where = f"; records in {result.run_dir}" if result.run_dir else ""
        raise PipelineFailedError(
            f"{len(failed)} of {todo} source tasks failed after retries ({shard.label}): {first}"
            + (" ..." if len(failed) > 3 else "")
            + where,
            result=result,
        )


def _passthrough(tasks: list[Task]) -> Iterator[SourceResult]:
    for t in tasks:
        yield SourceResult(source_id=t.task_id, output_tasks=[t])


__all__ = ["BaseExecutor", "StopCheck", "ledger_record"]
