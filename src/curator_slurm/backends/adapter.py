"""The stage adapter every executor runs every stage through (:class:`BaseStageAdapter`: sentinels, timing, lineage,
retries one task at a time, and the shard hook of the source stage), and the helpers that push tasks through a
list of adapters. Design: docs/design.md, "The one idea"."""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from curator_slurm import fs
from curator_slurm.backends.retry import NOT_RETRIED, failed_task, retry_delay, stop_if_out_of_space
from curator_slurm.backends.streaming import drain, is_lazy
from curator_slurm.backends.streaming import rows_of as _rows
from curator_slurm.runs.progress import TaskProgress
from curator_slurm.runs.results import SourceResult, StageStats, s3_counts, summarise
from curator_slurm.runs.sharding import Selection, check_source_ids, read_source_list, select
from curator_slurm.runs.stats import note_output
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.writers import LINEAGE_KEY
from curator_slurm.stages.notes import CHARS_KEY, NOTES_KEY, merge_notes
from curator_slurm.tasks import EmptyTask, FailedTask, NoneTask, Task

logger = logging.getLogger(__name__)


class BaseStageAdapter:
    """Runs one stage on lists of tasks: drops sentinels, times the call, keeps lineage, retries
    failures one task at a time, and, for the source stage, keeps only this shard's tasks.

    Args:
        stage: the stage to run.
        shard: the shard whose source tasks the source stage keeps (default: not sharded).
        retry_backoff: seconds before the first retry of a failed task, doubled with every failure.
        sleep: how to wait out a back-off (tests pass a fake).
    """

    def __init__(
        self,
        stage: ProcessingStage,
        shard: ShardSpec | None = None,
        retry_backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stage = stage
        self.shard = shard or ShardSpec.single()
        self.retry_backoff = retry_backoff
        self.sleep = sleep
        self.stats = StageStats(stage.name)
        self.selection: Selection | None = None
        #: Source stage only: every source task it listed, the ones the shards split (less those a frozen source
        #: list leaves out; None when not listed, from a manifest) and the ones this shard keeps.
        self.sources: list[Task] = []
        self.shared: list[Task] | None = None
        self.kept: list[Task] = []
        #: Set when the sources came from a submit-time manifest (curator_slurm.runs.manifest), not a listing.
        self.manifest: Any = None

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        self.stage.setup(worker_metadata)

    def teardown(self) -> None:
        self.stage.teardown()

    def process(self, tasks: list[Task]) -> list[Task]:
        """Outputs of the stage for ``tasks``; failures come back as :class:`FailedTask`."""
        return list(self.stream(tasks))

    def stream(self, tasks: list[Task]) -> Iterator[Task]:
        """:meth:`process`, lazily: a stage that returns an iterator for a task (a reader that yields bounded
        batches) has its outputs handed on one at a time, each made only when the one before has been taken,
        so a large source task goes through the later stages a batch at a time."""
        passed_on = [t for t in tasks if isinstance(t, FailedTask)]
        live = [t for t in tasks if not isinstance(t, (NoneTask, FailedTask))]
        if not live:
            yield from passed_on
            return
        self.stats.tasks_in += len(live)
        self.stats.rows_in += sum(_rows(t) for t in live)
        start = time.perf_counter()
        entries = self._call(live)
        outputs: list[Task | tuple[Task, Iterator[Any]]] = []
        for source, entry in zip(live, entries, strict=True):
            if isinstance(entry, FailedTask):
                self.stats.failures += 1
                self.stats.rows_uncounted += _rows(source)
                outputs.append(entry)
                continue
            if is_lazy(entry):
                if not self.stage.is_source_stage:
                    outputs.append((source, entry))  # drained below, one output at a time
                    continue
                entry = list(entry)  # the shard filter needs every source task
            items = entry if isinstance(entry, list) else [entry]
            wrong = next((i for i in items if i is not None and not isinstance(i, Task)), None)
            if wrong is not None:
                self.stats.failures += 1
                self.stats.rows_uncounted += _rows(source)
                outputs.append(self._wrong_type(source, wrong))
                continue
            outputs.extend(self._with_lineage(source, items))
            self._take_notes(source, items)
        if self.stage.is_source_stage:  # its lazy entries were made lists above: only tasks here
            outputs[:] = self._shard_filter([out for out in outputs if not isinstance(out, tuple)])
        self.stats.seconds += time.perf_counter() - start
        for out in outputs:
            if isinstance(out, tuple):
                yield from self._drain(*out)
            else:
                self._count_out(out)
                yield out
        yield from passed_on

    def _count_out(self, task: Task) -> None:
        if not isinstance(task, FailedTask):
            self.stats.tasks_out += 1
            self.stats.rows_out += _rows(task)
            note_output(self.stats, task)  # its length and token distributions (runs.stats)

    def _drain(self, source: Task, entry: Iterator[Any]) -> Iterator[Task]:
        return drain(self, source, entry)

    def _handed_on(self, source: Task, item: Task, position: int, single: bool) -> Task:
        out = self._lineaged(source, item, position, single)
        self._count_out(out)
        return out

    def _take_notes(self, source: Task, items: list[Any]) -> None:
        """This stage's notes and removed characters off its outputs of ``source``, into its stats (counted
        once: a later stage's ``derive`` would carry them on)."""
        counted = False
        for item in items:
            if isinstance(item, Task):
                counted = self._take_notes_of(item) or counted
        if not counted:
            self.stats.rows_uncounted += _rows(source)

    def _take_notes_of(self, item: Task) -> bool:
        """One output's notes and removed characters into the stats; whether it counted its characters."""
        if NOTES_KEY in item.metadata:
            merge_notes(self.stats.notes, item.metadata.pop(NOTES_KEY))
        chars = item.metadata.pop(CHARS_KEY, None)
        if chars is None:
            return False
        self.stats.chars_dropped += int(chars.get("dropped", 0))
        self.stats.chars_rewritten += int(chars.get("rewritten", 0))
        return True

    def _shard_filter(self, tasks: list[Task]) -> list[Task]:
        """The shard hook: drop every source task that belongs to another shard."""
        good = [t for t in tasks if not isinstance(t, FailedTask)]
        if self.shard.enabled:
            check_source_ids(good, self.stage.name)
        self.sources = good
        if self.shard.source_list:
            wanted = read_source_list(self.shard.source_list)
            good = [t for t in good if t.task_id in wanted]
        self.shared = good
        kept = select(good, self.shard)
        self.selection = Selection.of(good, kept)
        return kept + [t for t in tasks if isinstance(t, FailedTask)]

    def _with_lineage(self, source: Task, items: list[Any]) -> list[Task]:
        """The tasks among ``items`` (what the stage made of ``source``), each with its source task and
        lineage (its position among its siblings, which names the outputs) and the attempts so far."""
        single = len(items) == 1
        return [
            self._lineaged(source, item, position, single)
            for position, item in enumerate(items)
            if item is not None and not isinstance(item, NoneTask)
        ]

    def _lineaged(self, source: Task, item: Task, position: int, single: bool) -> Task:
        """``item``, the output at ``position`` among what the stage made of ``source`` (``single``: the only
        one), with its source task, lineage and attempts."""
        if self.stage.is_source_stage:
            item.source_id = item.task_id
        else:
            # Lineage, not the stage's ids, names the outputs: a stage may build a new task with a
            # random id (``DocumentBatch(data=...)``) or reuse one for several parts.
            if source.source_id is not None or item.source_id is None:
                item.source_id = source.source_id
            parent = source.metadata.get(LINEAGE_KEY, "") if source.metadata else ""
            lineage = parent if single else f"{parent}-{position}" if parent else str(position)
            if lineage or LINEAGE_KEY in item.metadata:
                # A new dict: a stage may have handed several outputs one metadata dict.
                item.metadata = {**item.metadata, LINEAGE_KEY: lineage}
        attempts = max(item.metadata.get("attempts", 1), source.metadata.get("attempts", 1))
        if attempts > 1:
            item.metadata["attempts"] = attempts
        return item

    def _call(self, tasks: list[Task]) -> list[Any]:
        """One entry per task; a task that keeps failing becomes a FailedTask."""
        try:
            entries = self.stage.process_batch(tasks)
        except Exception as first_error:
            stop_if_out_of_space(first_error)
            if self.stage.is_source_stage:
                raise  # listing the work failed: nothing to retry per task, the run cannot start
            if len(tasks) == 1:
                return [self._retry_one(tasks[0], first_error)]
            # One bad task must not fail its neighbours: retry each on its own.
            logger.warning(
                f"stage {self.stage.name!r} failed on a batch of {len(tasks)} tasks: {first_error!r}; "
                "retrying each task on its own"
            )
            return [self._retry_one(t, None) for t in tasks]
        if not isinstance(entries, list) or len(entries) != len(tasks):  # a programming error: fail the run
            raise TypeError(
                f"stage {self.stage.name!r}: process_batch returned {type(entries).__name__} of "
                f"{len(entries) if isinstance(entries, list) else '?'} entries for {len(tasks)} tasks; "
                "return one entry (a task, a list of tasks or None) per input task"
            )
        return entries

    def _wrong_type(self, task: Task, item: object) -> FailedTask:
        """A stage returned something that is not a task: a programming error, failed without retries."""
        hint = (
            "; wrap a table as task.derive(table), which keeps the task's lineage"
            if type(item).__name__ in ("Table", "RecordBatch", "DataFrame")
            else "; build outputs with task.derive(data)"
        )
        error = TypeError(
            f"stage {self.stage.name!r} returned {type(item).__name__}; process() must return a Task, a list of "
            f"Tasks or None{hint}"
        )
        logger.warning(f"stage {self.stage.name!r} failed on task {task.task_id} (attempt 1): {error!r}")
        return failed_task(task, self.stage.name, error)

    def _log_failure(self, task: Task, attempt: int, error: BaseException) -> None:
        will_retry = attempt <= self.stage.max_retries and not isinstance(error, NOT_RETRIED)
        logger.warning(
            f"stage {self.stage.name!r} failed on task {task.task_id} (attempt {attempt}): {error!r}"
            + ("; retrying" if will_retry else "")
        )

    def _retry_one(self, task: Task, first_error: BaseException | None) -> Any:
        """``task`` alone, attempted until it succeeds or ``max_retries`` retries failed (none for an error in
        :data:`NOT_RETRIED`); ``first_error`` is its failure in a batch of one, if it had one."""
        attempt = 0 if first_error is None else 1
        error = first_error
        tb = traceback.format_exc() if first_error is not None else ""
        if first_error is not None:
            self._log_failure(task, attempt, first_error)
        while attempt <= self.stage.max_retries:
            if error is not None and isinstance(error, NOT_RETRIED):
                break
            if attempt > 0 and error is not None:
                self.sleep(retry_delay(self.retry_backoff, attempt))
            attempt += 1
            try:
                entry = self.stage.process_batch([task])[0]
            except Exception as e:
                stop_if_out_of_space(e)
                error, tb = e, traceback.format_exc()
                self._log_failure(task, attempt, e)
                continue
            if attempt > 1:
                for item in entry if isinstance(entry, list) else [entry]:
                    if isinstance(item, Task):
                        item.metadata["attempts"] = max(attempt, item.metadata.get("attempts", 1))
            return entry
        assert error is not None
        return failed_task(task, self.stage.name, error, tb, attempt)


# --------------------------------------------------------------------------------------------------
# Chains of adapters: what a worker (a LocalExecutor process, a Ray actor) runs.


def set_up_adapters(
    stages: list[ProcessingStage] | tuple[ProcessingStage, ...], shard: ShardSpec, retry_backoff: float, worker: int
) -> list[BaseStageAdapter]:
    """An adapter per stage, each set up, for one worker process (``worker``: its pid, 0 in the driver)."""
    adapters = [BaseStageAdapter(s, shard=shard, retry_backoff=retry_backoff) for s in stages]
    for a in adapters:
        a.setup({"worker": worker})
    return adapters


def tear_down_adapters(adapters: list[BaseStageAdapter]) -> None:
    for a in adapters:
        a.teardown()


def run_chain(
    adapters: list[BaseStageAdapter], tasks: list[Task], tick: Callable[[], None] | None = None
) -> list[Task]:
    """Push ``tasks`` through ``adapters`` depth-first, in each stage's ``batch_size``, so only one
    batch per stage is alive at a time (a stage that yields its outputs one at a time, a reader of bounded
    batches, hands each on before it makes the next); returns what left the last stage and every FailedTask.
    ``tick()`` is called after every output of every stage (the live progress of the task in hand)."""
    finals: list[Task] = []

    def push(i: int, batch: list[Task]) -> None:
        if i == len(adapters):
            finals.extend(batch)
            return
        size = adapters[i].stage.batch_size
        after = adapters[i + 1].stage.batch_size if i + 1 < len(adapters) else len(batch) or 1
        for j in range(0, len(batch), size):
            group: list[Task] = []
            for out in adapters[i].stream(batch[j : j + size]):
                if tick is not None:
                    tick()
                if isinstance(out, FailedTask):
                    finals.append(out)
                    continue
                group.append(out)
                if len(group) >= after:
                    push(i + 1, group)
                    group = []
            if group:
                push(i + 1, group)

    push(0, tasks)
    return finals


def run_to_end(
    adapters: list[BaseStageAdapter],
    tasks: list[Task],
    source: Task,
    whole: bool = True,
    tick: Callable[[], None] | None = None,
) -> list[Task]:
    """:func:`run_chain` of ``tasks`` (all of the source task ``source``), then the end of ``source`` in every
    stage (:func:`end_source`); if anything escapes (a stop, the grace period's end), what stages hold open
    for ``source`` is dropped."""
    try:
        finals = run_chain(adapters, tasks, tick)
        return finals + end_source(adapters, source, finals, whole)
    except BaseException:
        for a in adapters:
            with contextlib.suppress(Exception):
                a.stage.end_source(source, True, whole)
        raise


def end_source(adapters: list[BaseStageAdapter], source: Task, finals: list[Task], whole: bool = True) -> list[Task]:
    """Tell each stage in turn that ``source`` ended (failed when a FailedTask is among ``finals``): what one
    publishes goes through the stages after it before those are told; returns what came out. A stage that
    fails to publish fails the source task (the stages after it drop what they hold)."""
    failed = any(isinstance(t, FailedTask) for t in finals)
    out: list[Task] = []
    for i, a in enumerate(adapters):
        try:
            made = a.stage.end_source(source, failed, whole)
        except Exception as e:
            stop_if_out_of_space(e)
            logger.warning(f"stage {a.stage.name!r} failed to end source task {source.task_id}: {e!r}")
            a.stats.failures += 1
            out.append(failed_task(source, a.stage.name, e, traceback.format_exc()))
            failed = True
            continue
        if made:
            after = run_chain(adapters[i + 1 :], made)
            failed = failed or any(isinstance(t, FailedTask) for t in after)
            out.extend(after)
    return out


def run_source_task(adapters: list[BaseStageAdapter], task: Task, progress: TaskProgress | None = None) -> SourceResult:
    """Run one source task through every stage after the source and summarise what came out; ``progress``
    publishes how far it got while it runs."""
    start = time.perf_counter()
    for a in adapters:
        a.stats = StageStats(a.stage.name)
    before = fs.s3_stats()  # this process's object-store counts: the task's are the difference
    if progress is None:
        finals = run_to_end(adapters, [task], task)
    else:
        progress.begin(task.source_id or task.task_id, task.metadata.get("bytes"))
        try:
            finals = run_to_end(adapters, [task], task, tick=progress.tick)
        finally:
            progress.end()
    result = summarise(task.source_id or task.task_id, finals, [a.stats for a in adapters], start)
    result.s3 = s3_counts(before, fs.s3_stats())
    if progress is not None and result.failure is None:
        progress.count(result.stats, result.seconds)  # into this process's stats file
    return result


def list_sources(stage: ProcessingStage, shard: ShardSpec, retry_backoff: float = 1.0) -> BaseStageAdapter:
    """Run the source stage once on the seed task; the adapter holds every listed source task in
    ``sources`` and this shard's in ``kept``."""
    adapter = BaseStageAdapter(stage, shard=shard, retry_backoff=retry_backoff)
    adapter.setup({"driver": True})
    try:
        adapter.kept = adapter.process([EmptyTask()])
    finally:
        adapter.teardown()
    return adapter


def manifest_sources(stage: ProcessingStage, shard: ShardSpec, retry_backoff: float = 1.0) -> BaseStageAdapter:
    """What :func:`list_sources` gives, built from the manifest ``shard.manifest`` instead of running
    ``stage``: the adapter's ``sources`` and ``kept`` are this shard's tasks, its ``selection`` counts the
    whole manifest, and its ``manifest`` is the :class:`~curator_slurm.runs.manifest.ManifestInfo`."""
    from curator_slurm.runs.manifest import load_shard  # pyarrow.parquet: loaded only by a planned array's task

    assert shard.manifest is not None
    tasks, info = load_shard(shard.manifest, shard)
    for t in tasks:
        t.source_id = t.task_id  # as the adapter marks the source stage's outputs
    adapter = BaseStageAdapter(stage, shard=shard, retry_backoff=retry_backoff)
    adapter.sources = adapter.kept = list(tasks)
    adapter.manifest = info
    adapter.selection = Selection(
        kept=len(tasks),
        total=info.count,
        kept_bytes=sum(t.weight for t in tasks),
        total_bytes=sum(w for _, w in info.loads),
    )
    return adapter


__all__ = [
    "BaseStageAdapter",
    "end_source",
    "list_sources",
    "manifest_sources",
    "run_chain",
    "run_source_task",
    "run_to_end",
    "set_up_adapters",
    "tear_down_adapters",
]
