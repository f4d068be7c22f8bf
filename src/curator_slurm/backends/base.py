"""What every executor shares: the stage adapter (timing, lineage, retries, and the one place where
source tasks are sharded) and the driver loop that turns per-source-task results into a run result.

Executors differ only in how they push source tasks through the stages after the source stage
(:meth:`BaseExecutor.process_sources`); the source stage always runs in the driver, through
:class:`BaseStageAdapter`, which keeps only this shard's source tasks.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.errors import (
    InputError,
    Interrupted,
    OutputSpaceError,
    PipelineFailedError,
    is_out_of_space,
    out_of_space,
)
from curator_slurm.logs import bound
from curator_slurm.runs.ledger import RunDir
from curator_slurm.runs.options import RunOptions
from curator_slurm.runs.sharding import Selection, check_source_ids, format_bytes, read_source_list, select
from curator_slurm.slurm.control import requeue
from curator_slurm.slurm.env import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.writers import LINEAGE_KEY
from curator_slurm.tasks import DocumentBatch, EmptyTask, FailedTask, FileGroupTask, NoneTask, Task

logger = logging.getLogger(__name__)

#: Errors that retrying cannot help, so they fail on the first attempt: bad data (:class:`InputError`), a
#: programming error in a stage (a wrong argument or attribute, an undefined name, a missing module).
NOT_RETRIED: tuple[type[BaseException], ...] = (InputError, TypeError, AttributeError, NameError, ImportError)


def _rows(task: Task) -> int:
    if isinstance(task, DocumentBatch):
        return task.num_items
    return int(task.metadata.get("rows", 0))


@dataclass
class StageStats:
    """Counts and time for one stage, summed over the tasks it saw."""

    name: str
    tasks_in: int = 0
    tasks_out: int = 0
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    failures: int = 0

    def add(self, other: StageStats) -> None:
        self.tasks_in += other.tasks_in
        self.tasks_out += other.tasks_out
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.seconds += other.seconds
        self.failures += other.failures


@dataclass
class SourceResult:
    """The fate of one source task after everything descending from it has left the pipeline."""

    source_id: str
    outputs: list[str] = field(default_factory=list)
    output_tasks: list[Task] = field(default_factory=list)
    failure: FailedTask | None = None
    attempts: int = 1
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    stats: list[StageStats] = field(default_factory=list)


class BaseStageAdapter:
    """Runs one stage on lists of tasks: drops sentinels, times the call, keeps lineage, retries
    failures one task at a time, and, for the source stage, keeps only this shard's tasks."""

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
        #: Source stage only: every source task it listed, and the ones this shard keeps.
        self.sources: list[Task] = []
        self.kept: list[Task] = []
        #: Set when the sources came from a submit-time manifest (curator_slurm.runs.manifest), not a listing.
        self.manifest: Any = None

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        self.stage.setup(worker_metadata)

    def teardown(self) -> None:
        self.stage.teardown()

    def process(self, tasks: list[Task]) -> list[Task]:
        """Outputs of the stage for ``tasks``; failures come back as :class:`FailedTask`."""
        passed_on = [t for t in tasks if isinstance(t, FailedTask)]
        live = [t for t in tasks if not isinstance(t, (NoneTask, FailedTask))]
        if not live:
            return passed_on
        self.stats.tasks_in += len(live)
        self.stats.rows_in += sum(_rows(t) for t in live)
        start = time.perf_counter()
        entries = self._call(live)
        outputs: list[Task] = []
        for source, entry in zip(live, entries, strict=True):
            if isinstance(entry, FailedTask):
                self.stats.failures += 1
                outputs.append(entry)
                continue
            items = entry if isinstance(entry, list) else [entry]
            wrong = next((i for i in items if i is not None and not isinstance(i, Task)), None)
            if wrong is not None:
                self.stats.failures += 1
                outputs.append(self._wrong_type(source, wrong))
                continue
            parent = source.metadata.get(LINEAGE_KEY, "") if source.metadata else ""
            for position, item in enumerate(items):
                if item is None or isinstance(item, NoneTask):
                    continue
                if self.stage.is_source_stage:
                    item.source_id = item.task_id
                else:
                    # Lineage, not the stage's ids, names the outputs: a stage may build a new task with a
                    # random id (``DocumentBatch(data=...)``) or reuse one for several parts.
                    if source.source_id is not None or item.source_id is None:
                        item.source_id = source.source_id
                    lineage = parent if len(items) == 1 else f"{parent}-{position}" if parent else str(position)
                    if lineage or LINEAGE_KEY in item.metadata:
                        # A new dict: a stage may have handed several outputs one metadata dict.
                        item.metadata = {**item.metadata, LINEAGE_KEY: lineage}
                attempts = max(item.metadata.get("attempts", 1), source.metadata.get("attempts", 1))
                if attempts > 1:
                    item.metadata["attempts"] = attempts
                outputs.append(item)
        if self.stage.is_source_stage:
            outputs = self._shard_filter(outputs)
        elapsed = time.perf_counter() - start
        self.stats.seconds += elapsed
        good = [t for t in outputs if not isinstance(t, FailedTask)]
        self.stats.tasks_out += len(good)
        self.stats.rows_out += sum(_rows(t) for t in good)
        return outputs + passed_on

    def _shard_filter(self, tasks: list[Task]) -> list[Task]:
        """The shard hook: drop every source task that belongs to another shard."""
        good = [t for t in tasks if not isinstance(t, FailedTask)]
        if self.shard.enabled:
            check_source_ids(good, self.stage.name)
        self.sources = good
        if self.shard.source_list:
            wanted = read_source_list(self.shard.source_list)
            good = [t for t in good if t.task_id in wanted]
        kept = select(good, self.shard)
        self.selection = Selection.of(good, kept)
        return kept + [t for t in tasks if isinstance(t, FailedTask)]

    def _call(self, tasks: list[Task]) -> list[Any]:
        """One entry per task; a task that keeps failing becomes a FailedTask."""
        try:
            entries = self.stage.process_batch(tasks)
        except Exception as first_error:
            _stop_if_out_of_space(first_error)
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
        return self._failed(task, error, "", 1)

    def _failed(self, task: Task, error: BaseException, tb: str, attempts: int) -> FailedTask:
        return FailedTask(
            source_id=task.source_id,
            dataset_name=task.dataset_name,
            metadata={"task_id": task.task_id, "files": task.metadata.get("files", task.data)}
            if not isinstance(task, DocumentBatch)
            else {"task_id": task.task_id, "files": task.metadata.get("files", [])},
            stage=self.stage.name,
            error=f"{type(error).__name__}: {error}",
            traceback=tb,
            attempts=max(attempts, 1),
        )

    def _log_failure(self, task: Task, attempt: int, error: BaseException) -> None:
        will_retry = attempt <= self.stage.max_retries and not isinstance(error, NOT_RETRIED)
        logger.warning(
            f"stage {self.stage.name!r} failed on task {task.task_id} (attempt {attempt}): {error!r}"
            + ("; retrying" if will_retry else "")
        )

    def _retry_one(self, task: Task, first_error: BaseException | None) -> Any:
        attempt = 0 if first_error is None else 1
        error = first_error
        tb = traceback.format_exc() if first_error is not None else ""
        if first_error is not None:
            self._log_failure(task, attempt, first_error)
        while attempt <= self.stage.max_retries:
            if error is not None and isinstance(error, NOT_RETRIED):
                break
            if attempt > 0 and error is not None:
                self.sleep(min(self.retry_backoff * 2 ** (attempt - 1), 60.0))
            attempt += 1
            try:
                entry = self.stage.process_batch([task])[0]
            except Exception as e:
                _stop_if_out_of_space(e)
                error, tb = e, traceback.format_exc()
                self._log_failure(task, attempt, e)
                continue
            if attempt > 1:
                for item in entry if isinstance(entry, list) else [entry]:
                    if isinstance(item, Task):
                        item.metadata["attempts"] = max(attempt, item.metadata.get("attempts", 1))
            return entry
        assert error is not None
        return self._failed(task, error, tb, attempt)


def _stop_if_out_of_space(error: BaseException) -> None:
    """A full filesystem or quota fails the run at once, not every source task after retries: no task can
    succeed (nor its failure be recorded) until someone frees space."""
    if isinstance(error, OutputSpaceError):
        raise error
    if is_out_of_space(error):
        assert isinstance(error, OSError)
        raise out_of_space(error) from error


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


def run_chain(adapters: list[BaseStageAdapter], tasks: list[Task]) -> list[Task]:
    """Push ``tasks`` through ``adapters`` depth-first, in each stage's ``batch_size``, so only one
    batch per stage is alive at a time; returns what left the last stage and every FailedTask."""
    finals: list[Task] = []

    def push(i: int, batch: list[Task]) -> None:
        if i == len(adapters):
            finals.extend(batch)
            return
        size = adapters[i].stage.batch_size
        for j in range(0, len(batch), size):
            out = adapters[i].process(batch[j : j + size])
            finals.extend(t for t in out if isinstance(t, FailedTask))
            push(i + 1, [t for t in out if not isinstance(t, FailedTask)])

    push(0, tasks)
    return finals


def run_source_task(adapters: list[BaseStageAdapter], task: Task) -> SourceResult:
    """Run one source task through every stage after the source and summarise what came out."""
    start = time.perf_counter()
    for a in adapters:
        a.stats = StageStats(a.stage.name)
    finals = run_chain(adapters, [task])
    return summarise(task.source_id or task.task_id, finals, [a.stats for a in adapters], start)


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


def summarise(source_id: str, finals: list[Task], stats: list[StageStats], started: float) -> SourceResult:
    """The result of one source task from everything that left its last stage (every executor's)."""
    result = SourceResult(source_id=source_id, stats=stats)
    for t in finals:
        if isinstance(t, FailedTask):
            if result.failure is None:
                result.failure = t
            continue
        result.attempts = max(result.attempts, t.metadata.get("attempts", 1))
        if isinstance(t, FileGroupTask) and "rows" in t.metadata:
            result.outputs.extend(t.data)
        else:
            result.output_tasks.append(t)
    if result.failure is not None:
        result.attempts = max(result.attempts, result.failure.attempts)
    if stats:
        first, last = stats[0], stats[-1]
        result.rows_in = first.rows_in or first.rows_out
        result.rows_out = last.rows_out
    result.seconds = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class FunnelRow:
    """One stage of a run's funnel: documents in and out (a reader reads files: its ``rows_in`` is 0)."""

    stage: str
    rows_in: int
    rows_out: int

    @property
    def dropped(self) -> int:
        """Documents the stage removed (0 for a stage that adds rows or reads files)."""
        return max(self.rows_in - self.rows_out, 0)

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "rows_in": self.rows_in, "rows_out": self.rows_out, "dropped": self.dropped}


def funnel_of_records(records: Iterable[dict[str, Any]]) -> list[FunnelRow]:
    """The funnel of a run directory: the ``stages`` rows of its done records, summed stage by stage
    (records of a ledger written before they carried ``stages`` are left out)."""
    names: list[str] = []
    rows: list[list[int]] = []
    for record in records:
        stages = record.get("stages")
        if record.get("status") != "done" or not isinstance(stages, list):
            continue
        for i, (name, rows_in, rows_out) in enumerate(stages):
            if i == len(names):
                names.append(name)
                rows.append([0, 0])
            rows[i][0] += int(rows_in)
            rows[i][1] += int(rows_out)
    return [FunnelRow(n, r[0], r[1]) for n, r in zip(names, rows, strict=True)]


@dataclass
class PipelineResult:
    """What a run did: per-stage counts, files written, source-task fates."""

    shard: ShardSpec
    stages: list[StageStats]
    output_files: list[str]
    output_tasks: list[Task]
    source_tasks_total: int
    source_tasks_mine: int
    source_tasks_skipped: int
    done: int
    failed: list[FailedTask]
    seconds: float
    run_dir: str | None = None
    stopped_by: str | None = None

    @property
    def rows_in(self) -> int:
        if len(self.stages) < 2:
            return 0
        return self.stages[1].rows_in or self.stages[1].rows_out

    @property
    def rows_out(self) -> int:
        return self.stages[-1].rows_out if self.stages else 0

    def funnel(self) -> list[FunnelRow]:
        """Documents in and out of every stage after the source, summed over the source tasks this run did:
        how many each filter dropped. `curator-slurm status` shows the same for the whole run directory."""
        return [FunnelRow(s.name, s.rows_in, s.rows_out) for s in self.stages[1:]]

    def summary(self) -> str:
        return (
            f"{self.shard.label}: {self.done} source tasks done, {len(self.failed)} failed, "
            f"{self.source_tasks_skipped} already done; {self.rows_in} docs in, {self.rows_out} out, "
            f"{len(self.output_files)} files written in {self.seconds:.2f} s"
        )


class ProgressLog:
    """Logs progress at most every ``interval`` seconds, so long runs show they are alive."""

    def __init__(self, total: int, log: Any, interval: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.total, self.log, self.interval, self.clock = total, log, interval, clock
        self.start = self.last = clock()
        self.done = self.failed = self.rows_in = self.rows_out = 0

    def update(self, result: SourceResult) -> None:
        self.done += result.failure is None
        self.failed += result.failure is not None
        self.rows_in += result.rows_in
        self.rows_out += result.rows_out
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            finished = self.done + self.failed
            elapsed = now - self.start
            eta = elapsed / finished * (self.total - finished) if finished else float("nan")
            self.log.info(
                f"progress: {finished}/{self.total} source tasks ({100 * finished / max(self.total, 1):.1f}%), "
                f"{self.failed} failed; {self.rows_in} docs in, {self.rows_out} out; "
                f"{self.rows_in / max(elapsed, 1e-9):.0f} docs/s; ETA {eta:.0f} s"
            )


class GraceExpired(BaseException):
    """Raised in the driver when in-flight work outlives the grace period after a stop signal.

    A BaseException so that no stage's ``except Exception`` swallows it."""


class StopSignal:
    """Turns SIGTERM, SIGUSR1 and SIGUSR2 into "start no new source task" (preemption, time limits).

    In-flight source tasks get ``grace`` seconds to finish; then :class:`GraceExpired` is raised in the
    driver: by the next ``should_stop()`` check of the executor's loop, or, when the driver is busy in a
    stage's own code (``workers=1``), by a timer thread that sends the stop signal again to the main
    thread, whose handler then raises. SIGALRM is never used, so a stage may use it for its own time-outs. Handlers
    are installed only in the main thread and restored on exit.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)

    def __init__(self, grace: float, log: Any) -> None:
        self.grace, self.log = grace, log
        self.signum: int | None = None
        self.deadline: float | None = None
        self._old: dict[int, Any] = {}
        self._timer: threading.Timer | None = None

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._stop)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def __call__(self) -> bool:
        """Whether to start no new source task; raises :class:`GraceExpired` once the grace period is over."""
        if self.expired():
            raise GraceExpired()
        return self.signum is not None

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def name(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum is not None else None

    def _stop(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            if self.expired():  # the timer's interruption (or a late signal) after the grace period
                raise GraceExpired()
            return
        self.signum = signum
        self.deadline = time.monotonic() + self.grace
        self.log.warning(
            f"received {signal.Signals(signum).name}: starting no new source tasks; in-flight ones get "
            f"{self.grace:.0f} s to finish"
        )
        # A daemon thread, started only now: before a stop signal the driver has no thread of ours (its
        # workers are forked only while it runs none).
        # The signal itself, sent to the main thread: unlike _thread.interrupt_main it also wakes a
        # blocking call (a stage sleeping or reading) so that the handler runs at once.
        main = threading.main_thread().ident
        assert main is not None
        self._timer = threading.Timer(self.grace, signal.pthread_kill, args=(main, signum))
        self._timer.daemon = True
        self._timer.start()


class BaseExecutor:
    """Runs a built pipeline. Subclasses implement :meth:`process_sources`."""

    retry_backoff: float = 1.0
    progress_interval: float = 30.0

    def process_sources(
        self,
        stages: list[ProcessingStage],
        sources: list[Task],
        shard: ShardSpec,
        should_stop: Callable[[], bool],
    ) -> Iterator[SourceResult]:
        """Push each source task through ``stages`` (everything after the source stage); yield one
        result per source task, in any order, only after all of its descendants are done. Start no
        new source task once ``should_stop()`` is true."""
        raise NotImplementedError

    def run_source_stage(self, stage: ProcessingStage, shard: ShardSpec, log: Any) -> BaseStageAdapter:
        """Run the source stage in the driver and log what this shard keeps."""
        # --- manifest hook (issue #19): a task of a planned array loads its shard, it lists nothing ---
        if shard.manifest:
            from curator_slurm.runs.manifest import source_adapter

            adapter = source_adapter(stage, shard, self.retry_backoff)
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
        mine = source.kept
        todo = mine
        ledger = None
        if run_dir is not None and not all(t.has_deterministic_id for t in source.sources):
            log.warning(
                f"source stage {stages[0].name!r} gives its tasks no deterministic ids, so progress cannot be "
                f"recorded in {run_dir.path}; a re-run will do all the work again"
            )
            run_dir = None
        if run_dir is not None:
            run_dir.claim(fingerprint or {})
            run_dir.claim_shard(shard)
            if source.manifest is not None:  # manifest hook: the plan's digest, not every id
                from curator_slurm.runs.manifest import check_sources

                check_sources(run_dir.path, source.manifest, options.accept_new_inputs)
            else:
                weights = [t.weight for t in source.sources] if shard.strategy == "balanced" else None
                run_dir.check_sources([t.task_id for t in source.sources], options.accept_new_inputs, weights)
            state = run_dir.state()
            todo = [t for t in mine if t.task_id not in state.done]
            if len(todo) < len(mine):
                log.info(f"{shard.label}: skipping {len(mine) - len(todo)} source tasks already done in {run_dir.path}")
            ledger = run_dir.writer(shard)
        stats = [StageStats(s.name) for s in stages]
        outputs: list[str] = []
        output_tasks: list[Task] = []
        failed: list[FailedTask] = []
        progress = ProgressLog(len(todo), log, self.progress_interval)
        stop = StopSignal(options.grace_seconds, log)
        results: Iterable[SourceResult] = ()
        try:
            with stop:
                results = self.process_sources(stages[1:], todo, shard, stop) if len(stages) > 1 else _passthrough(todo)
                for result in results:
                    for total_stats, part in zip(stats[1:], result.stats or [], strict=False):
                        total_stats.add(part)  # a task whose worker died has no per-stage stats
                    outputs.extend(result.outputs)
                    output_tasks.extend(result.output_tasks)
                    if result.failure is not None:
                        failed.append(result.failure)
                    if ledger is not None:
                        ledger.write(_record(result))
                    progress.update(result)
        except GraceExpired:
            log.warning(f"grace period of {options.grace_seconds:.0f} s over; abandoning in-flight source tasks")
        finally:
            close = getattr(results, "close", None)
            if close is not None:  # end the executor's workers now, not whenever the generator is collected
                close()
            if ledger is not None:
                ledger.close()
        stats[0].tasks_out = len(mine)
        result = PipelineResult(
            shard=shard,
            stages=stats,
            output_files=sorted(outputs),
            output_tasks=output_tasks,
            source_tasks_total=source.manifest.count if source.manifest is not None else len(source.sources),
            source_tasks_mine=len(mine),
            source_tasks_skipped=len(mine) - len(todo),
            done=progress.done,
            failed=failed,
            seconds=time.perf_counter() - start,
            run_dir=run_dir.path if run_dir else None,
            stopped_by=stop.name,
        )
        log.info(result.summary())
        left = len(todo) - progress.done - progress.failed
        if stop.name is not None and left > 0:  # a signal after the last task changes nothing
            # Only a warning signal (--signal=B:USR1@...) requeues: SIGTERM is also what `scancel` sends,
            # and a cancelled task must stay cancelled.
            requeued = options.requeue and stop.name in ("SIGUSR1", "SIGUSR2") and requeue(shard.job)
            raise Interrupted(
                f"stopped by {stop.name} ({shard.label}): {progress.done} source tasks done, {left} left for a "
                + ("requeued run" if requeued else "re-run of the same command (done work is skipped)"),
                result=result,
            )
        if failed:
            first = "; ".join(
                f"{f.source_id} [{f.stage}] {f.error.splitlines()[0] if f.error else ''}" for f in failed[:3]
            )
            where = f"; records in {run_dir.path}" if run_dir else ""
            raise PipelineFailedError(
                f"{len(failed)} of {len(todo)} source tasks failed after retries ({shard.label}): {first}"
                + (" ..." if len(failed) > 3 else "")
                + where,
                result=result,
            )
        return result


def _record(result: SourceResult) -> dict[str, Any]:
    """The ledger record of one finished source task."""
    if result.failure is None:
        return {
            "source": result.source_id,
            "status": "done",
            "outputs": result.outputs,
            "rows_in": result.rows_in,
            "rows_out": result.rows_out,
            "seconds": round(result.seconds, 4),
            "attempts": result.attempts,
            # Rows in and out of every stage after the source, for the run's funnel (`status`).
            "stages": [[s.name, s.rows_in, s.rows_out] for s in result.stats],
        }
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
    }


def _passthrough(tasks: list[Task]) -> Iterator[SourceResult]:
    for t in tasks:
        yield SourceResult(source_id=t.task_id, output_tasks=[t])


__all__ = [
    "BaseExecutor",
    "BaseStageAdapter",
    "FunnelRow",
    "PipelineResult",
    "SourceResult",
    "StageStats",
    "format_bytes",
    "funnel_of_records",
    "list_sources",
    "run_source_task",
    "summarise",
]
