"""LocalExecutor: the embedded default. One process, or a pool of worker processes on this node.

Each source task flows through every stage before the next one starts in the same worker, so
memory is bounded by the size of one source task, not by the corpus. With ``workers > 1`` the
source tasks are spread over a pool of worker processes (each stage set up once per process),
with at most ``2 * workers`` chunks of source tasks in flight (a chunk is one task, or as many small
ones as take about ``CHUNK_SECONDS``, so the driver pays its per-message cost once per chunk).
Workers are forked when that is safe (Linux, and the driver has no other thread that could hold a
lock across the fork): they start in milliseconds with everything the driver imported. Otherwise
they are spawned, a fresh interpreter each that re-imports the script and pyarrow (about a quarter
of a CPU second per worker).

A worker that dies (killed, out of memory) does not lose work: its in-flight source tasks are re-run
one at a time on a fresh pool, so the task that kills its worker is identified and recorded failed
after ``max_crashes`` deaths.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from curator_slurm.backends.adapter import BaseStageAdapter, run_source_task, set_up_adapters, tear_down_adapters
from curator_slurm.backends.results import SourceResult
from curator_slurm.backends.retry import failed_task
from curator_slurm.backends.run import BaseExecutor, StopCheck
from curator_slurm.backends.signals import ignore_stop_signals
from curator_slurm.errors import WorkerStartError
from curator_slurm.logs import bound, effective_level, ensure_logging
from curator_slurm.settings import available_cpus
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import Task

if TYPE_CHECKING:  # the pool's modules are imported only when a pool is used
    from concurrent.futures import Future, ProcessPoolExecutor

_worker_adapters: list[BaseStageAdapter] = []


def _init_worker(
    stages: list[ProcessingStage], shard: ShardSpec, retry_backoff: float, started: Any, log_level: int
) -> None:
    global _worker_adapters
    import multiprocessing
    import multiprocessing.util

    # A forked worker also inherited the driver's handlers, which are not the worker's to run.
    ignore_stop_signals()
    _die_with_driver()
    ensure_logging(log_level, shard.label, shard.job.label)  # spawned: unconfigured; forked: the driver's
    _worker_adapters = set_up_adapters(stages, shard, retry_backoff, multiprocessing.current_process().pid or 0)
    # Pool workers leave through multiprocessing's exit path, which runs Finalize callbacks, not atexit.
    multiprocessing.util.Finalize(None, tear_down_adapters, args=(_worker_adapters,), exitpriority=10)
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
    return [run_source_task(_worker_adapters, task) for task in tasks]


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
    """Run on this node. ``workers`` defaults to the CPUs this process may use
    (``SLURM_CPUS_PER_TASK`` inside Slurm, else the affinity mask). ``start_method`` is how worker
    processes start: ``None`` forks them when that is safe and spawns them otherwise."""

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

    def process_sources(
        self, stages: list[ProcessingStage], sources: list[Task], shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        workers = min(self.workers, len(sources))
        if workers <= 1:
            yield from self._in_process(stages, sources, shard, should_stop)
        else:
            yield from self._in_pool(stages, sources, shard, workers, should_stop)

    def _in_process(
        self, stages: list[ProcessingStage], sources: list[Task], shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        adapters = set_up_adapters(stages, shard, self.retry_backoff, 0)
        try:
            for task in sources:
                if should_stop():
                    return
                yield run_source_task(adapters, task)
        finally:
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
            initargs=(stages, shard, self.retry_backoff, started, effective_level()),
        )

    def _in_pool(
        self,
        stages: list[ProcessingStage],
        sources: list[Task],
        shard: ShardSpec,
        workers: int,
        should_stop: StopCheck,
    ) -> Iterator[SourceResult]:
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        started = multiprocessing.get_context("spawn").Value("i", 0)  # workers that finished their set-up
        pending = list(reversed(sources))
        crashes: dict[str, int] = {}
        suspects: list[Task] = []  # tasks that were running when a worker died: re-run one at a time
        log = bound(shard.label, shard.job.label)
        # Chosen once: a replacement pool starts its workers the same way, so a script that works with
        # forked workers never has them spawned (re-importing it) after a crash.
        method, why = (self.start_method, "as asked") if self.start_method else choose_start_method()
        log.info(f"starting {workers} worker processes by {method} ({why})")
        pool = self._pool(stages, shard, workers, started, method)
        in_flight: dict[Future[list[SourceResult]], list[Task]] = {}
        took, finished = 0.0, 0  # seconds and count of the source tasks done so far, for chunk_size()
        try:
            while pending or suspects or in_flight:
                if should_stop():
                    pending.clear()
                    suspects.clear()
                    for fut in [f for f in in_flight if f.cancel()]:  # queued, not started: never start it
                        del in_flight[fut]
                    if not in_flight:
                        break
                limit = 1 if suspects else 2 * workers
                size = chunk_size(took / finished if finished else None)
                while len(in_flight) < limit and (suspects or pending):
                    chunk = [suspects.pop()] if suspects else [pending.pop() for _ in range(min(size, len(pending)))]
                    in_flight[pool.submit(_run_in_worker, chunk)] = chunk
                done, _ = wait(in_flight, timeout=1.0, return_when=FIRST_COMPLETED)
                broken = False
                for fut in done:
                    chunk = in_flight.pop(fut)
                    try:
                        results = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        for task in chunk:
                            crashes[task.task_id] = crashes.get(task.task_id, 0) + 1
                            if crashes[task.task_id] >= self.max_crashes:
                                yield _crashed(task, crashes[task.task_id])
                            else:
                                suspects.append(task)
                        continue
                    for result in results:
                        took, finished = took + result.seconds, finished + 1
                        yield result
                if broken and started.value == 0:
                    raise WorkerStartError(
                        "worker processes die before they can start (the traceback above is theirs). "
                        + (
                            "A spawned worker re-imports your script: run the pipeline under `if __name__ == "
                            '"__main__":`, make stage set-up work in a fresh process, or use workers=1'
                            if method != "fork"
                            else "Make stage set-up work in a worker process, or use workers=1"
                        )
                    )
                if broken:
                    for fut, chunk in in_flight.items():
                        fut.cancel()
                        for task in chunk:
                            crashes[task.task_id] = crashes.get(task.task_id, 0) + 1
                            suspects.append(task)
                    in_flight.clear()
                    log.warning(
                        f"a worker process died; re-running {len(suspects)} source task(s) one at a time on a new pool"
                    )
                    # The old pool's threads must be gone before a fork (their results are not wanted).
                    _end_pool(pool, stages, log)
                    if method == "fork" and not self.start_method:
                        method, why = _settled_start_method()
                        if method != "fork":
                            log.warning(f"the new pool's workers are spawned: {why}")
                    pool = self._pool(stages, shard, workers, started, method)
        except BaseException:  # grace period over, or the driver is going down: do not wait for workers
            _end_pool(pool, stages, log)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


#: Threads whose library makes them safe across fork (pthread_atfork handlers stop them in the parent
#: and restart them in the child): jemalloc's background purging thread, which importing pyarrow starts.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def choose_start_method() -> tuple[str, str]:
    """``("fork", why)`` when forking this process is safe, else ``("spawn", why)``.

    A fork copies only the calling thread: a lock that another thread held at that moment (a logging
    queue, a client library's event loop, a thread pool at work) stays locked in the child forever.
    So fork only on Linux (macOS forbids it for system frameworks) and only while this process has no
    thread but the calling one, counted by the kernel (``/proc/self/task``) so that native threads
    count too, apart from :data:`FORK_SAFE_THREADS`.
    """
    if not sys.platform.startswith("linux"):
        return "spawn", f"fork is not safe on {sys.platform}"
    try:
        names = []
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as comm:
                names.append(comm.read().strip())
    except OSError:  # a thread that ended while being listed counts as a reason for caution too
        return "spawn", "cannot list this process's threads (/proc/self/task)"
    others = [n for n in names if n not in FORK_SAFE_THREADS]
    if len(others) > 1:
        why = f"this process runs {len(others)} threads; forking it could copy a lock one of them holds"
        if "numpy" in sys.modules:  # pyarrow imports numpy when it is installed
            why += (
                ". numpy is loaded: if the other threads are its BLAS pool (OpenBLAS starts one when imported), "
                "OPENBLAS_NUM_THREADS=1 (OMP_NUM_THREADS=1 for MKL) set before the script starts keeps workers "
                "forking, as does start_method='fork' where every other thread is known to be fork-safe"
            )
        return "spawn", why
    return "fork", "this process runs no other thread"


def _settled_start_method(timeout: float = 2.0) -> tuple[str, str]:
    """:func:`choose_start_method` once the threads of a pool just shut down have left the kernel's
    list too: ``join()`` returns a moment before a thread's last trace in ``/proc/self/task`` goes."""
    import threading
    import time

    deadline = time.monotonic() + timeout
    while True:
        method, why = choose_start_method()
        if method == "fork" or threading.active_count() > 1 or time.monotonic() > deadline:
            return method, why
        time.sleep(0.01)


def _end_pool(pool: ProcessPoolExecutor, stages: list[ProcessingStage], log: Any) -> None:
    """Kill the pool's workers without waiting for their work, then delete what their writers left half-written."""
    old = _worker_pids(pool)
    _kill_workers(pool)
    pool.shutdown(wait=True, cancel_futures=True)
    _remove_temporaries(stages, old, log)


def _worker_pids(pool: ProcessPoolExecutor) -> set[int]:
    return set(getattr(pool, "_processes", None) or {})


def _remove_temporaries(stages: list[ProcessingStage], pids: set[int], log: Any) -> None:
    """Delete what the writers of killed workers left half-written (hidden temporary files; a final
    name is only ever written by a rename, so no output is lost)."""
    for stage in stages:
        remove = getattr(stage, "remove_temporaries", None)  # writers, the shuffle's sorted-file writer
        if remove is not None:
            removed = remove(pids)
            if removed:
                where = getattr(stage, "path", stage.name)
                log.info(f"removed {len(removed)} temporary file(s) that killed workers left in {where}")


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()


def _crashed(task: Task, times: int) -> SourceResult:
    failure = failed_task(
        task,
        "<worker process>",
        f"WorkerDied: the worker process died {times} times while running this source task "
        "(killed, out of memory, or a crash in native code)",
        attempts=times,
    )
    return SourceResult(source_id=task.source_id or task.task_id, failure=failure, attempts=times)
