"""The run session: one process's source tasks from its listing to its ledger. It claims the run directory,
keeps what is left to do (resume), hands it to an executor as a queue, records each task's fate, and ends
the run with its result or the error that says what did not finish."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from curator_slurm import fs
from curator_slurm.errors import Interrupted, PipelineFailedError, RunDirError, ShardConfigError
from curator_slurm.fs import output_error
from curator_slurm.runs.layout import RUN_FILE
from curator_slurm.runs.options import RunOptions
from curator_slurm.runs.progress import RunProgress
from curator_slurm.runs.queue import WorkQueue
from curator_slurm.runs.record import ledger_record
from curator_slurm.runs.results import PipelineResult, ProgressLog, SourceResult, StageStats
from curator_slurm.runs.rundir import RunDir
from curator_slurm.runs.sharding import Selection
from curator_slurm.runs.signals import GraceExpired, StopSignal, requeue
from curator_slurm.runs.summary import add_s3_counts
from curator_slurm.runs.upstream import Upstream
from curator_slurm.shard import ShardSpec
from curator_slurm.tasks import FailedTask, Task


@dataclass
class Listing:
    """What the source stage listed for this process: every source task (``sources``), the ones of this shard
    (``kept``), how they were chosen (``selection``) and, for a planned array, the manifest they came from."""

    stage: str
    sources: list[Task]
    kept: list[Task]
    selection: Selection | None = None
    manifest: Any = None

    @property
    def total(self) -> int:
        """Source tasks of the whole run (of every shard)."""
        return self.manifest.count if self.manifest is not None else len(self.sources)


@dataclass
class Tally:
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


class RunSession:
    """One process's run of one pipeline: :meth:`start` claims the run directory and decides what is left to do,
    :meth:`drive` records the fate of each source task an executor finishes, :meth:`finish` sums them up and
    raises when the run did not finish.

    Args:
        listing: what the source stage listed (all source tasks, and this shard's).
        stage_names: the names of the pipeline's stages, the source stage's first (for the funnel).
        shard: this process's shard.
        run_dir: where the run is recorded; None records nothing (and resumes nothing).
        fingerprint: what identifies the pipeline's work (:meth:`Pipeline.fingerprint`).
        options: the run's options.
        log: the logger bound to this shard.
        progress_interval: seconds between progress lines in the log.
        upstreams: the earlier phases whose recorded outputs the stages read (their ``upstreams()``): checked
            before any work, and a done task whose inputs were recorded again since is done again.
        existing_outputs: the files the sink could have written that are in its output now (its
            ``existing_outputs``): a run that starts afresh among such files refuses (or clears them).
    """

    def __init__(
        self,
        listing: Listing,
        stage_names: list[str],
        shard: ShardSpec,
        run_dir: RunDir | None,
        fingerprint: dict[str, Any],
        options: RunOptions,
        log: Any,
        progress_interval: float = 30.0,
        upstreams: Sequence[Upstream] = (),
        existing_outputs: Callable[[], list[str]] | None = None,
    ) -> None:
        self.existing_outputs = existing_outputs
        self.listing, self.shard, self.options, self.log = listing, shard, options, log
        self.upstreams = list(upstreams)
        self.fingerprint = fingerprint
        self.run_dir = _usable_run_dir(run_dir, listing, log)
        self.todo: list[Task] = []
        self.stop = StopSignal(options.grace_seconds, log)
        self.tally = Tally([StageStats(n) for n in stage_names], ProgressLog(0, log, progress_interval))
        self.started = time.perf_counter()
        #: The shard's live progress while :meth:`drive` runs with a run directory (executors hand its target
        #: to their workers), else None.
        self.progress: RunProgress | None = None

    # --- claim and resume -----------------------------------------------------------------------------
    def start(self) -> list[Task]:
        """Claim the run directory for this pipeline and shard, check that the inputs are those it was started
        on, and keep the source tasks of this shard that it does not record done (with intact outputs)."""
        mine = self.listing.kept
        if self.upstreams:
            try:
                self._check_upstreams()
            except RunDirError as e:
                if self.run_dir is not None:
                    self.run_dir.record_refusal(self.shard, e)  # an array task's log is not where `failures` looks
                raise
        self.todo = mine if self.run_dir is None else self._resume(self.run_dir, mine)
        self.tally.progress.total = len(self.todo)
        return self.todo

    def _resume(self, run_dir: RunDir, mine: list[Task]) -> list[Task]:
        self._claim(run_dir)
        state = run_dir.state(self.shard, [t.task_id for t in mine])  # only the ledger files that can hold them
        done = {t.task_id for t in mine if t.task_id in state.done}
        if self.listing.manifest is None:  # a file that changed under done work is refused (with a manifest: at submit)
            from curator_slurm.runs.inputs import check_listing

            check_listing(run_dir.path, done, self.shard, mine)
        from curator_slurm.runs.inputs import done_records
        from curator_slurm.runs.verify import lost_of

        records = done_records(run_dir.path, done, self.shard)
        lost = lost_of(records)  # done, but its outputs are gone: done again
        if lost:
            first = "; ".join(problems[0] for problems in list(lost.values())[:3])
            self.log.warning(
                f"{self.shard.label}: doing {len(lost)} done source task(s) again, their outputs are gone: {first}"
            )
        stale = self._stale(records) | self._moved(records, mine)
        todo = [t for t in mine if t.task_id not in done or t.task_id in lost or t.task_id in stale]
        if len(todo) < len(mine):
            self.log.info(
                f"{self.shard.label}: skipping {len(mine) - len(todo)} source tasks already done in {run_dir.path}"
            )
        return todo

    def _refuse_unaccounted_outputs(self, run_dir: RunDir) -> None:
        """A run starting afresh (no ``run.json`` yet) in an output that holds files its sink could have written
        would mix them with its own (rows twice after another partitioning, stale token parts): refuse, naming
        them, or delete them with ``CURATOR_CLEAR_OUTPUT=1``."""
        run_file = os.path.join(run_dir.path, RUN_FILE)
        if self.existing_outputs is None or os.path.exists(run_file):
            return
        found = self.existing_outputs()
        if not found or os.path.exists(run_file):  # listed, then claimed by another process of this run: its own
            return
        if self.options.clear_output:
            for path in found:
                fs.remove(path)
            self.log.warning(f"CURATOR_CLEAR_OUTPUT=1: deleted {len(found)} earlier output file(s), e.g. {found[0]}")
            return
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise RunDirError(
            f"{len(found)} file(s) in the output are no run's that {run_dir.path} records: "
            f"{', '.join(found[:3])}{more}. A run starting afresh there would mix them with its own outputs "
            "(documents twice, stale parts). Delete them, write to another output directory, or set "
            "CURATOR_CLEAR_OUTPUT=1 to have this run delete them first."
        )

    def _check_upstreams(self) -> None:
        """Refuse to start when an output an earlier phase recorded (and this one reads) is gone or changed."""
        from curator_slurm.runs.upstream import check

        roots = sorted({os.path.dirname(u.run_dir) for u in self.upstreams})
        check(
            self.upstreams,
            f"pipeline {self.fingerprint.get('name', '?')!r} ({self.shard.label})",
            "Run the script again (the earlier phase does again the source tasks whose outputs are gone, and "
            "the phases after it follow), or for a submitted run `curator-slurm retry "
            + " ".join(roots)
            + "` (it starts from the earliest phase with lost outputs).",
        )

    def _stale(self, records: dict[str, dict[str, Any]]) -> set[str]:
        """The done tasks whose recorded ``upstream`` digest is not what they would read now: an earlier phase
        recorded its outputs again since (a task redone, inputs added), so they are done again."""
        from curator_slurm.runs.upstream import stale as stale_of

        stale = stale_of(self.upstreams, records)
        if stale:
            names = ", ".join(repr(u.name) for u in self.upstreams)
            self.log.warning(
                f"{self.shard.label}: doing {len(stale)} done source task(s) again: what they read of phase {names} "
                "was recorded again since they were done"
            )
        return stale

    def _moved(self, records: dict[str, dict[str, Any]], mine: list[Task]) -> set[str]:
        """The done tasks whose documents' positions moved since they were done: their files' places in the
        sorted listing of all inputs changed (a file accepted before them), so what they wrote under the old
        positions (dedup keys, ids) would not match what later tasks compute now."""
        moved = {
            t.task_id
            for t in mine
            if t.task_id in records
            and records[t.task_id].get("positions") is not None
            and records[t.task_id]["positions"] != position_base(t)
        }
        if moved:
            self.log.warning(
                f"{self.shard.label}: doing {len(moved)} done source task(s) again: the listing of the inputs "
                "changed, so their documents' positions moved"
            )
        return moved

    def _claim(self, run_dir: RunDir) -> None:
        """The run directory for this pipeline and shard, and the listing against the one it was started on."""
        listing, shard = self.listing, self.shard
        try:
            self._refuse_unaccounted_outputs(run_dir)
            run_dir.claim(self.fingerprint)
            run_dir.claim_shard(shard)
            if self.upstreams:
                from curator_slurm.runs.upstream import save

                save(run_dir.path, self.upstreams)
            if listing.manifest is not None:  # a planned array's task: the plan's digest, not every id
                from curator_slurm.runs.manifest import check_sources

                check_sources(run_dir.path, listing.manifest, self.options.accept_new_inputs)
            else:
                weights = [t.weight for t in listing.sources] if shard.strategy == "balanced" else None
                ids = [t.task_id for t in listing.sources]
                run_dir.check_sources(ids, self.options.accept_new_inputs, weights)
        except (RunDirError, ShardConfigError) as e:
            run_dir.record_refusal(shard, e)  # an array task's log is not where `failures` looks
            raise
        except OSError as e:  # a read-only output, a file where the directory belongs: say so, no traceback
            clear = output_error(e, run_dir.path)
            if clear is e:
                raise
            raise clear from e

    # --- the work -------------------------------------------------------------------------------------
    def queue(self) -> WorkQueue:
        """The source tasks an executor takes, in order (see :class:`WorkQueue`)."""
        return WorkQueue(self.todo)

    def should_stop(self) -> bool:
        """Whether to start no new source task (a stop signal came)."""
        return self.stop()

    def drive(self, results: Callable[[WorkQueue, Callable[[], bool]], Iterable[SourceResult]]) -> None:
        """Run ``results(queue, should_stop)`` (an executor's :meth:`process_sources`), recording each source
        task's fate as it comes, until it is done or a stop signal ends it; while it runs the run directory
        shows this process alive (`status`)."""
        produced: Iterable[SourceResult] = ()
        with ExitStack() as stack:
            record = stack.enter_context(self._recording())
            try:
                with self.stop:
                    produced = results(self.queue(), self.should_stop)
                    for result in produced:
                        self.tally.add(result)
                        record(result)
            except GraceExpired:
                self.log.warning(
                    f"grace period of {self.options.grace_seconds:.0f} s over; abandoning in-flight source tasks"
                )
            finally:
                close = getattr(produced, "close", None)
                if close is not None:  # end the executor's workers now, not whenever the generator is collected
                    close()

    @contextmanager
    def _recording(self) -> Iterator[Callable[[SourceResult], None]]:
        """``record(result)`` for each finished source task, inside this process's liveness marker: the one place
        where a run writes its ledger (nothing without a run directory)."""
        if self.run_dir is None:
            yield lambda result: None
            return
        from curator_slurm.runs.inputs import input_states
        from curator_slurm.runs.liveness import marked
        from curator_slurm.runs.verify import written_files

        read = input_states(self.todo)
        bases = {t.task_id: position_base(t) for t in self.todo}
        upstream = None
        if self.upstreams:
            from curator_slurm.runs.upstream import combined_digest

            upstream = partial(combined_digest, self.upstreams)
        with marked(self.run_dir.path, self.shard.label), self._progress(self.run_dir.path) as progress:
            writer = self.run_dir.writer(self.shard, self.options)  # commits a window of records at a time

            def record(result: SourceResult) -> None:
                progress.finished(result.failure is not None, result.rows_in, result.rows_out)
                line = ledger_record(result)
                if line["status"] == "done":
                    if read.get(result.source_id):
                        line["inputs"] = read[result.source_id]
                    line["written"] = written_files(result.outputs, result.sizes)
                    if upstream is not None:
                        line["upstream"] = upstream(result.source_id)
                    if bases.get(result.source_id) is not None:
                        line["positions"] = bases[result.source_id]
                writer.write(line)

            try:
                yield record
            finally:
                writer.close()

    @contextmanager
    def _progress(self, run_dir: str) -> Iterator[RunProgress]:
        """The shard's live progress (:mod:`curator_slurm.runs.progress`) while the body runs."""
        shard, job = self.shard, self.shard.job
        name = f"{job.array_job_id}_{job.array_task_id}" if job.array_job_id else job.job_id
        interval = self.options.progress_seconds
        self.progress = RunProgress.start(run_dir, f"{shard.index}/{shard.count}", name, interval, len(self.todo))
        try:
            yield self.progress
        finally:
            self.progress.close()
            self.progress = None

    # --- the end --------------------------------------------------------------------------------------
    def finish(self) -> PipelineResult:
        """The run's result, logged; raises :class:`Interrupted` when a stop signal left source tasks undone
        and :class:`PipelineFailedError` when any failed."""
        result = self.result()
        self.log.info(result.summary())
        raise_if_unfinished(result, self.options)
        return result

    def result(self) -> PipelineResult:
        t, listing = self.tally, self.listing
        mine = len(listing.kept)
        t.stats[0].tasks_out = mine
        return PipelineResult(
            shard=self.shard,
            stages=t.stats,
            output_files=sorted(t.outputs),
            output_tasks=t.output_tasks,
            source_tasks_total=listing.total,
            source_tasks_mine=mine,
            source_tasks_skipped=mine - len(self.todo),
            done=t.progress.done,
            failed=t.failed,
            seconds=time.perf_counter() - self.started,
            run_dir=self.run_dir.path if self.run_dir else None,
            stopped_by=self.stop.name,
            tokens=t.tokens,
            s3=t.s3,
        )


def position_base(task: Task) -> str | None:
    """Where a source task's documents sit among all inputs (its files' places in the sorted listing, or its
    place among an earlier phase's tasks), as its done record keeps it; None when its documents have none."""
    meta = task.metadata or {}
    indices, upstream = meta.get("file_indices"), meta.get("upstream_index")
    if indices is None and upstream is None:
        return None
    return json.dumps([indices, upstream], separators=(",", ":"))


def _usable_run_dir(run_dir: RunDir | None, listing: Listing, log: Any) -> RunDir | None:
    """``run_dir``, unless the source stage gives its tasks no deterministic ids (then a re-run could not
    tell which tasks it already did, so nothing is recorded)."""
    if run_dir is not None and not all(t.has_deterministic_id for t in listing.sources):
        log.warning(
            f"source stage {listing.stage!r} gives its tasks no deterministic ids, so progress cannot be "
            f"recorded in {run_dir.path}; a re-run will do all the work again"
        )
        return None
    return run_dir


def raise_if_unfinished(result: PipelineResult, options: RunOptions) -> None:
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


__all__ = ["Listing", "RunSession", "Tally", "raise_if_unfinished"]
