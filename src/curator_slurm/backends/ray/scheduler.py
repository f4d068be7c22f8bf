"""The driver's scheduling state for one run on Ray: which source tasks are in flight, which stage calls
are queued, running or waiting out a back-off, which actor is idle; what to do when a call returns and when
its actor died."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.backends.ray.pools import ActorPools, Pool
from curator_slurm.backends.ray.worker import CallSummary, death_errors, setup_result
from curator_slurm.backends.retry import CrashPolicy, worker_died
from curator_slurm.backends.run import StopCheck
from curator_slurm.runs.queue import WorkQueue
from curator_slurm.runs.results import SourceResult, StageStats, summarise
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import FailedTask, Task


@dataclass(eq=False)
class _Source:
    """A source task in flight: how many calls are still out, and what came out so far."""

    task: Task
    stats: list[StageStats]
    started: float
    pending: int = 0
    finals: list[Task] = field(default_factory=list)
    abandoned: bool = False


@dataclass(eq=False)
class _Call:
    """One stage call: ``inputs[start:stop]``, where inputs is a list (the source task) or a reference
    to an upstream call's outputs."""

    source: _Source
    pool: int  # index of the pool (the stage group) that runs it
    inputs: Any
    start: int
    stop: int
    deaths: int = 0
    not_before: float = 0.0


class Run:
    """The driver's scheduling state for one ``process_sources`` call.

    Args:
        actors: the run's pools, already started.
        stages: the stages after the source, in pipeline order.
        should_stop: whether to admit no new source task.
        log: the logger of the run.
        in_flight: source tasks active at once at most.
        cpu_cap: CPUs that running calls may add up to (see :meth:`_dispatch`).
    """

    def __init__(
        self,
        actors: ActorPools,
        stages: list[ProcessingStage],
        should_stop: StopCheck,
        log: Any,
        in_flight: int,
        cpu_cap: float,
    ) -> None:
        self.actors, self.stages, self.should_stop, self.log = actors, stages, should_stop, log
        self.pools: list[Pool] = actors.pools
        self.in_flight = in_flight
        self.cpu_cap = cpu_cap
        self.active: set[_Source] = set()
        self.queues: list[deque[_Call]] = [deque() for _ in stages]
        self.delayed: list[_Call] = []  # calls to retry after a worker died, once their back-off is over
        self.running: dict[Any, tuple[_Call, Any, Any]] = {}  # summary ref -> (call, actor, outputs ref)
        self.starting: dict[Any, tuple[Pool, Any]] = {}  # setup ref of a replacement actor -> (pool, actor)
        self.busy_cpus = 0.0
        self.any_abandoned = False
        self.failed_starts = 0  # replacement actors that died before their setup() ran

    def results(self, sources: Iterable[Task]) -> Iterator[SourceResult]:
        """Admit source tasks (at most ``in_flight`` at once, each taken from the queue as it is admitted),
        dispatch their calls, and yield each one when its last call is back."""
        import ray

        pending = sources if isinstance(sources, WorkQueue) else WorkQueue(sources)
        while True:
            if self.should_stop():
                pending.clear()
            while len(self.active) < self.in_flight and (taken := pending.take(1)):
                task = taken[0]
                source = _Source(task, [StageStats(s.name) for s in self.stages], time.perf_counter(), pending=1)
                self.queues[0].append(_Call(source, 0, [task], 0, 1))
                self.active.add(source)
            self._drop_abandoned()
            if not self.active:
                return
            now = time.monotonic()
            for call in [c for c in self.delayed if c.not_before <= now]:
                self.delayed.remove(call)
                self.queues[call.pool].append(call)
            self._dispatch()
            waiting = list(self.running) + list(self.starting)
            next_retry = min((c.not_before for c in self.delayed), default=None)
            if not waiting:
                if next_retry is None:
                    raise RuntimeError("RayExecutor: source tasks are in flight but no call is running or queued")
                time.sleep(max(0.0, next_retry - time.monotonic()))
                continue
            # A bounded wait, so that stop signals (handled between calls into Ray) are seen promptly.
            timeout = 1.0 if next_retry is None else max(0.0, min(1.0, next_retry - time.monotonic()))
            done, _ = ray.wait(waiting, num_returns=1, timeout=timeout)
            for ref in done:
                finished = self._finished(ref)
                if finished is not None and finished.pending == 0 and finished in self.active:
                    self.active.discard(finished)
                    if not finished.abandoned:
                        yield _summarise(finished)

    def _drop_abandoned(self) -> None:
        """Forget queued and delayed calls of abandoned source tasks, and those tasks once nothing of
        theirs is running."""
        if not self.any_abandoned:
            return
        for queue in self.queues:
            for call in [c for c in queue if c.source.abandoned]:
                queue.remove(call)
                call.source.pending -= 1
        for call in [c for c in self.delayed if c.source.abandoned]:
            self.delayed.remove(call)
            call.source.pending -= 1
        for source in [s for s in self.active if s.abandoned and s.pending == 0]:
            self.active.discard(source)

    def _dispatch(self) -> None:
        """Give queued calls to idle actors, downstream stages first (finishing source tasks frees
        memory sooner than starting new work), while the CPUs of running calls fit the cluster plus
        one call's worth: that one extra call is ready to run the moment another finishes, which hides
        the driver's round trip between a call's end and the next call's start."""
        last = len(self.pools) - 1
        for pool in reversed(self.pools):
            queue, cost = self.queues[pool.index], pool.group.resources.cpus
            while queue and pool.idle and self.busy_cpus + cost <= self.cpu_cap + 1e-9:
                call = queue.popleft()
                actor = pool.idle.popleft()
                summary_ref, outputs_ref = actor.process.options(num_returns=2).remote(
                    call.inputs, call.start, call.stop, call.deaths, pool.index == last, pool.index == 0
                )
                self.running[summary_ref] = (call, actor, outputs_ref)
                self.busy_cpus += cost

    def _finished(self, ref: Any) -> _Source | None:
        """Account for one finished call (or a replacement actor that is ready); returns its source task."""
        import ray

        if ref in self.starting:
            pool, actor = self.starting.pop(ref)
            try:
                self.actors.record(pool, actor, setup_result(ref, pool.group.describe()))
            except RuntimeError as e:
                if self.should_stop():
                    self._abandon_all(f"a replacement Ray worker could not start while stopping ({e})")
                    return None
                if not isinstance(e.__cause__, death_errors()) or self.failed_starts >= _MAX_FAILED_STARTS:
                    raise
                # Its process or node died before setup() ran (e.g. placed on a node that had just died and
                # was not yet known dead): not the stage's fault, so start another, a bounded number of times.
                self.failed_starts += 1
                self.log.warning(
                    f"a replacement Ray worker of {pool.group.describe()} died before it started "
                    f"({_first_line(e.__cause__)}); starting another ({self.failed_starts} of {_MAX_FAILED_STARTS})"
                )
                self.actors.discard(pool, actor)
                again, ready = self.actors.new_actor(pool)
                self.starting[ready] = (pool, again)
                return None
            pool.idle.append(actor)
            return None
        call, actor, outputs_ref = self.running.pop(ref)
        pool, source = self.pools[call.pool], call.source
        self.busy_cpus = max(0.0, self.busy_cpus - pool.group.resources.cpus)
        source.pending -= 1
        try:
            summary: CallSummary = ray.get(ref)
        except death_errors() as error:
            self._worker_died(call, actor, error)
            return source
        pool.idle.append(actor)
        for line in summary.warnings:
            self.log.warning(line)
        for k, stats in enumerate(summary.stats):
            source.stats[pool.first + k].add(stats)
        source.finals.extend(summary.failed)
        if call.pool == len(self.pools) - 1:
            source.finals.extend(summary.outputs or [])
        else:
            size = self.pools[call.pool + 1].group.batch_size
            for j in range(0, summary.count, size):
                self.queues[call.pool + 1].append(
                    _Call(source, call.pool + 1, outputs_ref, j, min(j + size, summary.count))
                )
                source.pending += 1
        return source

    def _worker_died(self, call: _Call, dead: Any, error: BaseException) -> None:
        """Replace the dead actor and retry (or fail) its call; while stopping, give its source task up."""
        pool, source = self.pools[call.pool], call.source
        self.actors.died(pool, dead)
        stopping = self.should_stop()
        try:
            actor, ready = self.actors.new_actor(pool)
        except Exception as e:
            if not stopping:
                raise
            self._abandon_all(f"a dead Ray worker cannot be replaced while stopping ({e})")
            return
        self.starting[ready] = (pool, actor)
        if stopping:
            # Not recorded, so a re-run of the same command does it again.
            source.abandoned = self.any_abandoned = True
            self.log.warning(f"a Ray worker of {pool.group.describe()} died while stopping: {error}")
            return
        for retry in self._after_death(call, error):
            if isinstance(retry, _Call):
                source.pending += 1
                self.delayed.append(retry)
            else:
                source.finals.append(retry)
                # Which of the group's stages the worker died in is unknown: counted at the first.
                source.stats[pool.first].tasks_in += 1
                source.stats[pool.first].failures += 1

    def _abandon_all(self, why: str) -> None:
        """While stopping, whatever killed a worker (e.g. a job-wide SIGTERM) is likely taking Ray down:
        give up the in-flight source tasks; they are not recorded, so a re-run does them again."""
        self.log.warning(f"{why}; abandoning {len(self.active)} in-flight source task(s) for a re-run")
        self.any_abandoned = True
        for source in self.active:
            source.abandoned = True

    def _after_death(self, call: _Call, error: BaseException) -> list[_Call | FailedTask]:
        """What to do with a call whose worker died, as :class:`CrashPolicy` says (the same as
        LocalExecutor's): a batch is retried one task at a time, a lone task after a back-off, until it
        died ``max_retries + 1`` times; then it is given up as a FailedTask."""
        import ray

        group, log = self.pools[call.pool].group, self.log
        attempts = call.deaths + 1
        policy = CrashPolicy(group.max_retries + 1, self.actors.retry_backoff)
        verdict = policy.after_death(attempts, alone=call.stop - call.start == 1)
        if verdict.action == "alone":
            log.warning(
                f"a Ray worker of {group.describe()} died running a batch of {call.stop - call.start} tasks; "
                "retrying them one at a time"
            )
            return [
                _Call(call.source, call.pool, call.inputs, j, j + 1, attempts) for j in range(call.start, call.stop)
            ]
        if verdict.action == "retry":
            log.warning(
                f"a Ray worker of {group.describe()} died (attempt {attempts} of {group.max_retries + 1}); "
                f"retrying on a new worker: {type(error).__name__}"
            )
            not_before = time.monotonic() + verdict.delay
            return [_Call(call.source, call.pool, call.inputs, call.start, call.stop, attempts, not_before)]
        try:
            task = (call.inputs if isinstance(call.inputs, list) else ray.get(call.inputs))[call.start]
        except Exception:  # the input itself is lost: describe the source task instead
            task = call.source.task
        return [worker_died(task, group.name, f"Ray worker process running {group.describe()}", attempts, error)]


#: Replacement actors of one run that may die before their setup() ran before the run gives up.
_MAX_FAILED_STARTS = 8


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _summarise(source: _Source) -> SourceResult:
    task = source.task
    return summarise(task.source_id or task.task_id, source.finals, source.stats, source.started)


__all__ = ["Pool", "Run"]
