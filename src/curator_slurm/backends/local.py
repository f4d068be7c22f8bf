"""LocalExecutor, the embedded default: one process, or a pool of worker processes on this node, each source task
through every stage before the next. Design: docs/design.md, "Executors"."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from curator_slurm.backends.adapter import BaseStageAdapter, run_source_task, set_up_adapters, tear_down_adapters
from curator_slurm.backends.forking import choose_start_method, settled_start_method
from curator_slurm.backends.retry import CrashPolicy, remove_dead_writers_files, worker_died
from curator_slurm.backends.run import BaseExecutor, StopCheck
from curator_slurm.errors import WorkerStartError
from curator_slurm.logs import bound, effective_level, ensure_logging
from curator_slurm.runs.progress import ProgressTarget, Publisher, TaskProgress
from curator_slurm.runs.queue import WorkQueue, work_ahead
from curator_slurm.runs.results import SourceResult
from curator_slurm.runs.signals import ignore_stop_signals
from curator_slurm.settings import available_cpus
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import Task

if TYPE_CHECKING:  # the pool's modules are imported only when a pool is used
    from concurrent.futures import Future, ProcessPoolExecutor

_worker_adapters: list[BaseStageAdapter] = []
_worker_progress: TaskProgress | None = None


def _init_worker(
    stages: list[ProcessingStage],
    shard: ShardSpec,
    retry_backoff: float,
    started: Any,
    log_level: int,
    progress: ProgressTarget | None = None,
) -> None:
    global _worker_adapters, _worker_progress
    import multiprocessing
    import multiprocessing.util

    # A forked worker also inherited the driver's handlers, which are not the worker's to run.
    ignore_stop_signals()
    _die_with_driver()
    ensure_logging(log_level, shard.label, shard.job.label)  # spawned: unconfigured; forked: the driver's
    _worker_adapters = set_up_adapters(stages, shard, retry_backoff, multiprocessing.current_process().pid or 0)
    # Pool workers leave through multiprocessing's exit path, which runs Finalize callbacks, not atexit.
    multiprocessing.util.Finalize(None, tear_down_adapters, args=(_worker_adapters,), exitpriority=10)
    if progress is not None:  # this worker's own progress file, removed as it ends
        publisher = Publisher(progress, "worker")
        _worker_progress = TaskProgress(publisher, _worker_adapters)
        multiprocessing.util.Finalize(None, publisher.close, exitpriority=5)
        multiprocessing.util.Finalize(None, _worker_progress.close, exitpriority=6)  # its timer thread first
    with started.get_lock():  # tells the driver that workers can start at all
        started.value += 1


def _die_with_driver() -> None:
    """Make this worker end when its driver does, so a driver killed with SIGKILL (or by the OOM killer)
    leaves no worker behind, blocked forever on a pipe nobody reads.

    On Linux the kernel sends SIGKILL to the worker when its parent dies (``PR_SET_PDEATHSIG``). Everywhere,
    SIGTERM (what `scancel` and a time limit send to every process of the step) ends a worker whose driver
    is gone; while the driver lives, the worker ignores it and the driver decides (it lets in-flight source
    tasks finish, then ends its workers)."""
    import multiprocessing

    driver = multiprocessing.parent_process()  # its sentinel is readable once the driver is gone

    def orphaned() -> bool:
        return driver is not None and not driver.is_alive()

    def on_sigterm(signum: int, frame: object) -> None:
        if orphaned():  # nobody will collect what this worker computes
            os._exit(1)

    signal.signal(signal.SIGTERM, on_sigterm)
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl (an unusual libc): SIGTERM and the check below remain
            pass
    if orphaned():  # the driver died before the request above took effect
        os._exit(1)


def _run_in_worker(tasks: list[Task]) -> list[SourceResult]:
    return [run_source_task(_worker_adapters, task, _worker_progress) for task in tasks]


#: Source tasks are sent to workers in chunks of about this many seconds of work (judged by the tasks done
#: so far; one at a time until then, and for tasks that are slow anyway): each chunk costs the driver a
#: round trip through the pool's threads and pipes (~0.3 ms of CPU), which small tasks cannot afford.
CHUNK_SECONDS = 0.05
MAX_CHUNK = 64


def chunk_size(mean_seconds: float | None) -> int:
    """How many source tasks to send a worker at once when one takes ``mean_seconds`` on average."""
    if not mean_seconds or mean_seconds <= 0:
        return 1
    return max(1, min(MAX_CHUNK, int(CHUNK_SECONDS / mean_seconds)))


#: How worker processes may start; ``None`` chooses (see :func:`choose_start_method`).
START_METHODS = ("fork", "spawn", "forkserver")


class LocalExecutor(BaseExecutor):
    """Run on this node, in this process or in a pool of worker processes.

    Args:
        workers: worker processes, at least 1 (default: the CPUs this process may use, ``SLURM_CPUS_PER_TASK``
            inside Slurm, else the affinity mask); 1 runs every stage in this process.
        retry_backoff: seconds before the first retry of a failed task, doubled with every failure.
        max_crashes: a source task that killed its worker this many times (running alone) is recorded failed.
        progress_interval: seconds between progress lines in the log.
        start_method: how workers start, ``"fork"``, ``"spawn"`` or ``"forkserver"``; ``None`` forks them when
            that is safe and spawns them otherwise.
    """

    def __init__(
        self,
        workers: int | None = None,
        retry_backoff: float = 1.0,
        max_crashes: int = 3,
        progress_interval: float = 30.0,
        start_method: str | None = None,
    ) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"LocalExecutor(workers={workers}): workers must be >= 1")
        if start_method is not None and start_method not in START_METHODS:
            raise ValueError(
                f"LocalExecutor(start_method={start_method!r}): use one of {', '.join(START_METHODS)}, or None to "
                "fork when that is safe and spawn otherwise"
            )
        self.start_method = start_method
        self.workers = workers or available_cpus()
        self.retry_backoff = retry_backoff
        self.max_crashes = max_crashes
        self.progress_interval = progress_interval

    @classmethod
    def for_workers(cls, workers: int | None) -> LocalExecutor:
        return cls(workers=workers)

    def process_sources(
        self, stages: list[ProcessingStage], sources: WorkQueue, shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        workers = min(self.workers, work_ahead(sources))  # a queue under takeover may claim its first group
        if workers <= 1:
            yield from self._in_process(stages, sources, shard, should_stop)
        else:
            yield from _PoolRun(self, stages, sources, shard, workers).results(should_stop)

    def _in_process(
        self, stages: list[ProcessingStage], sources: Iterable[Task], shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        adapters = set_up_adapters(stages, shard, self.retry_backoff, 0)
        progress = TaskProgress(self.progress.publisher, adapters) if self.progress is not None else None
        try:
            for task in sources:
                if should_stop():
                    return
                yield run_source_task(adapters, task, progress)
        finally:
            if progress is not None:
                progress.close()
            tear_down_adapters(adapters)

    def _pool(
        self, stages: list[ProcessingStage], shard: ShardSpec, workers: int, started: Any, method: str
    ) -> ProcessPoolExecutor:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        started.value = 0  # counts this pool's workers only
        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
            initargs=(
                stages,
                shard,
                self.retry_backoff,
                started,
                effective_level(),
                self.progress.target if self.progress is not None else None,
            ),
        )


class _PoolRun:
    """The driver's side of one pool of worker processes running a shard's source tasks: chunks in flight,
    tasks to re-run alone after a worker died (:class:`CrashPolicy` decides), and the pool itself, replaced
    when a worker dies."""

    def __init__(
        self,
        executor: LocalExecutor,
        stages: list[ProcessingStage],
        sources: Iterable[Task],
        shard: ShardSpec,
        workers: int,
    ) -> None:
        import multiprocessing

        self.executor, self.stages, self.shard, self.workers = executor, stages, shard, workers
        self.policy = CrashPolicy(executor.max_crashes, executor.retry_backoff)
        self.started = multiprocessing.get_context("spawn").Value("i", 0)  # workers that finished their set-up
        self.pending = sources if isinstance(sources, WorkQueue) else WorkQueue(sources)
        self.deaths: dict[str, int] = {}
        self.suspects: list[tuple[float, Task]] = []  # (not before, task): re-run one at a time after a death
        self.in_flight: dict[Future[list[SourceResult]], list[Task]] = {}
        self.took, self.finished = 0.0, 0  # seconds and count of the source tasks done so far, for chunk_size()
        self.log = bound(shard.label, shard.job.label)
        # Chosen once: a replacement pool starts its workers the same way, so a script that works with
        # forked workers never has them spawned (re-importing it) after a crash.
        self.method, why = (executor.start_method, "as asked") if executor.start_method else choose_start_method()
        self.log.info(f"starting {workers} worker processes by {self.method} ({why})")
        self.pool = executor._pool(stages, shard, workers, self.started, self.method)

    def results(self, should_stop: StopCheck) -> Iterator[SourceResult]:
        """Every source task's result, in any order; after ``should_stop()`` no new one starts."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            while self.pending or self.suspects or self.in_flight:
                if should_stop() and not self._stop():
                    break
                self._submit()
                broken: list[Task] = []
                for fut in self._wait():
                    chunk = self.in_flight.pop(fut)
                    try:
                        results = fut.result()
                    except BrokenProcessPool:
                        broken.extend(chunk)
                        continue
                    for result in results:
                        self.took, self.finished = self.took + result.seconds, self.finished + 1
                        yield result
                if broken:
                    yield from self._worker_died(broken)
        except BaseException:  # grace period over, or the driver is going down: do not wait for workers
            _end_pool(self.pool, self.stages, self.log)
            raise
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _stop(self) -> bool:
        """Start nothing new; True while calls already running must still be waited for."""
        self.pending.clear()
        self.suspects.clear()
        for fut in [f for f in self.in_flight if f.cancel()]:  # queued, not started: never start it
            del self.in_flight[fut]
        return bool(self.in_flight)

    def _submit(self) -> None:
        """Keep ``2 * workers`` chunks in flight, or one suspect at a time once its back-off is over."""
        now = time.monotonic()
        ready = [i for i, (not_before, _) in enumerate(self.suspects) if not_before <= now]
        if self.suspects:
            if ready and not self.in_flight:
                _, task = self.suspects.pop(ready[-1])
                self.in_flight[self.pool.submit(_run_in_worker, [task])] = [task]
            return
        size = chunk_size(self.took / self.finished if self.finished else None)
        while len(self.in_flight) < 2 * self.workers and self.pending:  # until take() finds nothing more
            chunk = self.pending.take(size)
            if not chunk:
                break
            self.in_flight[self.pool.submit(_run_in_worker, chunk)] = chunk

    def _wait(self) -> set[Future[list[SourceResult]]]:
        """The futures done within a second (so that stop signals are seen promptly), or a nap until the
        next suspect's back-off is over when nothing runs."""
        from concurrent.futures import FIRST_COMPLETED, wait

        if not self.in_flight:
            next_one = min((not_before for not_before, _ in self.suspects), default=time.monotonic())
            time.sleep(min(1.0, max(0.0, next_one - time.monotonic())))
            return set()
        done, _ = wait(self.in_flight, timeout=1.0, return_when=FIRST_COMPLETED)
        return done

    def _worker_died(self, broken: list[Task]) -> Iterator[SourceResult]:
        """A worker died and broke the pool: which one is unknown, so the death counts against every task
        the pool had in flight; :class:`CrashPolicy` says which run again (alone) and which failed."""
        if self.started.value == 0:
            raise WorkerStartError(
                "worker processes die before they can start (the traceback above is theirs). "
                + (
                    "A spawned worker re-imports your script: run the pipeline under `if __name__ == "
                    '"__main__":`, make stage set-up work in a fresh process, or use workers=1'
                    if self.method != "fork"
                    else "Make stage set-up work in a worker process, or use workers=1"
                )
            )
        for fut, chunk in self.in_flight.items():
            fut.cancel()
            broken.extend(chunk)
        self.in_flight.clear()
        now = time.monotonic()
        for task in broken:
            deaths = self.deaths[task.task_id] = self.deaths.get(task.task_id, 0) + 1
            verdict = self.policy.after_death(deaths, alone=len(broken) == 1)
            if verdict.action == "fail":
                yield _crashed(task, deaths)
            else:
                self.suspects.append((now + verdict.delay, task))
        if self.suspects:
            self.log.warning(
                f"a worker process died; re-running {len(self.suspects)} source task(s) one at a time on a new pool"
            )
        # The old pool's threads must be gone before a fork (their results are not wanted).
        _end_pool(self.pool, self.stages, self.log)
        if self.method == "fork" and not self.executor.start_method:
            self.method, why = settled_start_method()
            if self.method != "fork":
                self.log.warning(f"the new pool's workers are spawned: {why}")
        self.pool = self.executor._pool(self.stages, self.shard, self.workers, self.started, self.method)


def _end_pool(pool: ProcessPoolExecutor, stages: list[ProcessingStage], log: Any) -> None:
    """Kill the pool's workers without waiting for their work, then delete what their writers left half-written."""
    old = _worker_pids(pool)
    _kill_workers(pool)
    pool.shutdown(wait=True, cancel_futures=True)
    remove_dead_writers_files(stages, old, log)


def _worker_pids(pool: ProcessPoolExecutor) -> set[int]:
    return set(getattr(pool, "_processes", None) or {})


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()


def _crashed(task: Task, deaths: int) -> SourceResult:
    failure = worker_died(task, "<worker process>", "worker process", deaths)
    return SourceResult(source_id=task.source_id or task.task_id, failure=failure, attempts=deaths)
