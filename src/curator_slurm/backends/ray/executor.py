"""RayExecutor: its arguments and the glue of a run: get Ray, start the pools, run the scheduler, undo."""

from __future__ import annotations

import time
from collections.abc import Iterator

from curator_slurm.backends.ray.planning import fuse_stages
from curator_slurm.backends.ray.pools import ActorPools
from curator_slurm.backends.ray.scheduler import Run
from curator_slurm.backends.ray.session import SessionOptions, connect, disconnect
from curator_slurm.backends.run import BaseExecutor, StopCheck
from curator_slurm.logs import bound
from curator_slurm.runs.queue import WorkQueue, work_ahead
from curator_slurm.runs.results import SourceResult
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage


class RayExecutor(BaseExecutor):
    """Run the stages after the source in pools of Ray actors, one per group of stages with equal
    ``Resources`` (or one per stage with ``fuse=False``).

    Args:
        address: a Ray cluster to join (default ``RAY_ADDRESS``; ``"local"`` forces a new local Ray).
        num_cpus: CPUs of a local Ray this executor starts (default: the CPUs this process may use).
        max_in_flight: source tasks active at once (default twice the cluster's CPUs).
        max_actors_per_stage: caps every pool (default: as many as the stage's resources fit).
        retry_backoff: seconds before the first retry of a failed task, doubled with every failure.
        progress_interval: seconds between progress lines in the log.
        temp_dir: where a local Ray keeps its sockets, logs and spilled objects.
        object_store_memory: bytes of a local Ray's object store (default: Ray's).
        fuse: consecutive stages with equal ``Resources`` share one pool, each actor running all of them
            (default); ``False`` gives every stage a pool of its own, its data passed on through Ray.
        node_wait_seconds: joining a cluster with ``CURATOR_RAY_NODES`` set (a multi-node array task), how
            long to wait for that many nodes; fewer is a :class:`RayNodesMissingError` naming them.
    """

    requires = ("ray",)

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        max_in_flight: int | None = None,
        max_actors_per_stage: int | None = None,
        retry_backoff: float = 1.0,
        progress_interval: float = 30.0,
        temp_dir: str | None = None,
        object_store_memory: int | None = None,
        fuse: bool = True,
        node_wait_seconds: float = 300.0,
    ) -> None:
        for name, value in (
            ("num_cpus", num_cpus),
            ("max_in_flight", max_in_flight),
            ("max_actors_per_stage", max_actors_per_stage),
        ):
            if value is not None and value < 1:
                raise ValueError(f"RayExecutor({name}={value}): must be >= 1")
        self.address = address
        #: How long to wait for the nodes a multi-node array task started (``CURATOR_RAY_NODES``) to join.
        self.node_wait_seconds = node_wait_seconds
        self.num_cpus = num_cpus
        self.max_in_flight = max_in_flight
        self.max_actors_per_stage = max_actors_per_stage
        self.retry_backoff = retry_backoff
        self.progress_interval = progress_interval
        self.temp_dir = temp_dir
        self.object_store_memory = object_store_memory
        self.fuse = fuse
        #: Seconds the last run spent getting Ray (``ray_seconds``) and its actors ready (``actor_seconds``).
        self.ray_seconds = 0.0
        self.actor_seconds = 0.0
        #: The actor pools of the last run (None before any), which :attr:`actor_pids`, :attr:`actor_hosts`
        #: and :attr:`deaths` report on.
        self.actors: ActorPools | None = None

    @classmethod
    def for_workers(cls, workers: int | None) -> RayExecutor:
        return cls(num_cpus=workers)

    @property
    def actor_pids(self) -> dict[str, list[int]]:
        """Pids of the actors of the last run, by pool (:attr:`StageGroup.name`), for diagnostics and tests."""
        return self.actors.actor_pids if self.actors else {}

    @property
    def actor_hosts(self) -> dict[str, list[str]]:
        """Host name of each actor's node, in the order of :attr:`actor_pids`."""
        return self.actors.actor_hosts if self.actors else {}

    @property
    def deaths(self) -> int:
        """Actor deaths in the last run (each one cost a call an attempt, or was abandoned while stopping)."""
        return self.actors.deaths if self.actors else 0

    def session_options(self) -> SessionOptions:
        return SessionOptions(
            self.address, self.num_cpus, self.temp_dir, self.object_store_memory, self.node_wait_seconds
        )

    # --- the run ------------------------------------------------------------------------------------
    def process_sources(
        self, stages: list[ProcessingStage], sources: WorkQueue, shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        """LocalExecutor's contract on Ray: one result per source task once all its descendants are
        done; no new source task once ``should_stop()``; on any exit the actors go, and Ray too if
        this executor started it."""
        if not stages:
            yield from (SourceResult(source_id=t.source_id or t.task_id, output_tasks=[t]) for t in sources)
            return
        if should_stop() or not work_ahead(sources):  # a queue under takeover may claim its first group
            return
        log = bound(shard.label, shard.job.label)
        start = time.perf_counter()
        self.actors = None
        session = connect(self.session_options(), shard, log)
        self.ray_seconds = time.perf_counter() - start
        log.info(f"ray: using {session.where} ({self.ray_seconds:.1f} s)")
        actors = self.actors = ActorPools(shard, self.retry_backoff, log)
        run: Run | None = None
        clean = False
        try:
            groups = fuse_stages(stages, self.fuse)
            in_flight, cpus = actors.start(groups, len(sources), self.max_in_flight, self.max_actors_per_stage)
            cpu_cap = cpus + max([1.0, *(s.resources.cpus for s in stages)])
            run = Run(actors, stages, should_stop, log, in_flight, cpu_cap)
            self.actor_seconds = time.perf_counter() - start - self.ray_seconds
            yield from run.results(sources)
            clean = True
        finally:
            try:
                actors.close(clean, {id(a) for _, a in run.starting.values()} if run else set())
            finally:
                disconnect(session, keep_files=not clean or actors.deaths > 0, log=log)


__all__ = ["RayExecutor"]
