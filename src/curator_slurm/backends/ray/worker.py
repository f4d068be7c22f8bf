"""The Ray actor (:class:`StageWorker`, a plain class the driver wraps with ``ray.remote``, so this imports without
Ray): the stages of one pool in one worker process, and the driver's side of starting, ending and losing one."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any

from curator_slurm.backends.adapter import BaseStageAdapter, run_to_end, set_up_adapters, tear_down_adapters
from curator_slurm.logs import ROOT, CollectWarnings, configure_logging
from curator_slurm.runs.results import StageStats
from curator_slurm.runs.signals import ignore_stop_signals
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import FailedTask, Task


@dataclass
class CallSummary:
    """What the driver needs from one stage call; the output tasks themselves stay in the object store."""

    stats: list[StageStats]  # one per stage of the pool
    count: int
    failed: list[FailedTask]
    warnings: list[str]
    outputs: list[Task] | None = None  # only for the last stage, whose outputs are small and go to the ledger


class StageWorker:
    """The stages of one pool in one Ray worker process: a :class:`BaseStageAdapter` each, set up once.
    A call runs its tasks through all of them, depth-first, as a LocalExecutor worker does.

    Args:
        stages: the pool's stages, in pipeline order.
        shard: the run's shard.
        retry_backoff: seconds before the first retry of a failed task, doubled with every failure.
    """

    def __init__(self, stages: tuple[ProcessingStage, ...], shard: ShardSpec, retry_backoff: float) -> None:
        self.stages, self.shard, self.retry_backoff = stages, shard, retry_backoff
        self.adapters: list[BaseStageAdapter] = []
        self.warnings: list[str] = []

    def setup(self) -> tuple[int, str]:
        """Set the stages up; returns this process's pid and its node's host name (tests and logs use them)."""
        # SIGTERM stays Ray's: it uses it to stop workers.
        ignore_stop_signals()
        # The stages' warnings (e.g. a retried task) go back to the driver with each call, so the user
        # sees them in the console; everything else stays in Ray's worker log files.
        configure_logging("INFO")
        collect = CollectWarnings(self.warnings.append)
        # The package's lines do not propagate (configure_logging); a stage's own logger reaches the root.
        for name in (ROOT, ""):
            logging.getLogger(name).addHandler(collect)
        self.adapters = set_up_adapters(self.stages, self.shard, self.retry_backoff, os.getpid())
        return os.getpid(), os.uname().nodename

    def teardown(self) -> None:
        tear_down_adapters(self.adapters)

    def process(
        self, tasks: list[Task], start: int, stop: int, deaths: int, inline: bool, whole: bool = False
    ) -> tuple[CallSummary, list[Task] | None]:
        """Run the stages on ``tasks[start:stop]`` (the driver passes a whole upstream output list by
        reference and a slice of it, so the data never travels through the driver), then end their source task
        in each stage (``whole``: the call had the source task itself, so the stages saw all of it)."""
        batch = list(tasks[start:stop])
        for adapter in self.adapters:
            adapter.stats = StageStats(adapter.stage.name)
        self.warnings.clear()
        out = self._after_deaths(batch, deaths, whole) if deaths else run_to_end(self.adapters, batch, batch[0], whole)
        good = [t for t in out if not isinstance(t, FailedTask)]
        summary = CallSummary(
            stats=[a.stats for a in self.adapters],
            count=len(good),
            failed=[t for t in out if isinstance(t, FailedTask)],
            warnings=list(self.warnings),
            outputs=good if inline else None,
        )
        return summary, (None if inline else good)

    def _after_deaths(self, batch: list[Task], deaths: int, whole: bool) -> list[Task]:
        """Re-run a task whose earlier attempts killed their workers: those deaths count against each
        stage's retry budget, and every output records the deaths plus the attempts made here."""
        stages = [a.stage for a in self.adapters]
        budgets = [s.max_retries for s in stages]
        # Count this call's attempts afresh (the adapters record retries in metadata["attempts"]), then
        # add the deaths; what upstream pools needed stays the floor.
        upstream = max([t.metadata.pop("attempts", 1) for t in batch], default=1)
        for stage in stages:
            stage.max_retries = max(0, stage.max_retries - deaths)
        try:
            out = run_to_end(self.adapters, batch, batch[0], whole)
        finally:
            for stage, budget in zip(stages, budgets, strict=True):
                stage.max_retries = budget
        for item in out:
            if isinstance(item, FailedTask):
                item.attempts += deaths
            else:
                item.metadata["attempts"] = max(upstream, deaths + item.metadata.get("attempts", 1))
        return out


# --------------------------------------------------------------------------------------------------
# The driver's side of an actor.

#: ``ray.remote(StageWorker)``, made once per driver process (Ray exports the class on first use).
_REMOTE_WORKER: Any = None


def start_actor(
    stages: tuple[ProcessingStage, ...],
    shard: ShardSpec,
    retry_backoff: float,
    num_cpus: float,
    num_gpus: float,
) -> tuple[Any, Any]:
    """Start one actor running ``stages``; returns (handle, reference to its setup() result)."""
    import ray

    global _REMOTE_WORKER
    if _REMOTE_WORKER is None:
        _REMOTE_WORKER = ray.remote(StageWorker)
    actor = _REMOTE_WORKER.options(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        max_restarts=0,
        max_concurrency=1,
        scheduling_strategy="SPREAD",
    ).remote(stages, shard, retry_backoff)
    return actor, actor.setup.remote()


def setup_result(ref: Any, describe: str) -> tuple[int, str]:
    """The (pid, host) an actor's setup() returned, or a clear error naming the stages (``describe``)
    whose setup failed."""
    import ray

    try:
        pid, host = ray.get(ref)
        return int(pid), str(host)
    except Exception as e:
        raise RuntimeError(f"{describe}: setup() failed on a Ray worker: {e}") from e


def teardown(actors: list[Any], log: Any) -> None:
    """Call every actor's teardown() (the stage's, once per actor, as LocalExecutor does per process)."""
    import ray

    refs = [a.teardown.remote() for a in actors]
    for ref in refs:
        try:
            ray.get(ref, timeout=60)
        except Exception as e:
            log.warning(f"a stage's teardown() failed on a Ray worker: {e}")


def kill(actors: list[Any]) -> None:
    import ray

    for actor in actors:
        with contextlib.suppress(Exception):  # already gone, or Ray itself is going down
            ray.kill(actor, no_restart=True)


def death_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for "the process running this call is gone" (as opposed to the call raising)."""
    from ray import exceptions as rx

    return (rx.RayActorError, rx.WorkerCrashedError, rx.OutOfMemoryError, rx.ObjectLostError, rx.NodeDiedError)


__all__ = ["CallSummary", "StageWorker", "death_errors", "kill", "setup_result", "start_actor", "teardown"]
