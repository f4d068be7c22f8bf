"""RayExecutor: the stages after the source run in pools of Ray actors (see the package's docstring for
how). This module holds its arguments and the glue: get Ray, start the pools, run the scheduler, undo."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from curator_slurm.backends.ray.planning import StageGroup, fuse_stages, plan_pools
from curator_slurm.backends.ray.scheduler import Pool, Run
from curator_slurm.backends.ray.session import SessionOptions, connect, disconnect
from curator_slurm.backends.ray.worker import kill, setup_result, start_actor, teardown
from curator_slurm.backends.results import SourceResult
from curator_slurm.backends.run import BaseExecutor, StopCheck
from curator_slurm.extras import require
from curator_slurm.logs import bound
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import Task


class RayExecutor(BaseExecutor):
    """Run the stages after the source in pools of Ray actors, one per group of stages with equal
    ``Resources`` (or one per stage with ``fuse=False``).

    ``address``: a Ray cluster to join (default ``RAY_ADDRESS``; ``"local"`` forces a new local Ray).
    ``num_cpus``: CPUs of a local Ray this executor starts (default: the CPUs this process may use).
    ``max_in_flight``: source tasks active at once (default twice the cluster's CPUs).
    ``max_actors_per_stage``: caps every pool (default: as many as the stage's resources fit).
    ``fuse``: consecutive stages with equal ``Resources`` share one pool, each actor running all of
    them (default); ``False`` gives every stage a pool of its own, its data passed on through Ray.
    ``temp_dir``: where a local Ray keeps its sockets, logs and spilled objects.
    ``node_wait_seconds``: joining a cluster with ``CURATOR_RAY_NODES`` set (a multi-node array task),
    how long to wait for that many nodes; fewer is a :class:`RayNodesMissingError` naming them.
    """

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
        require("ray", "RayExecutor")
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
        #: Pids of the actors of the last run, by pool (:attr:`StageGroup.name`), for diagnostics and tests.
        self.actor_pids: dict[str, list[int]] = {}
        #: Host name of each actor's node, in the order of :attr:`actor_pids`.
        self.actor_hosts: dict[str, list[str]] = {}
        #: Actor deaths in the last run (each one cost a call an attempt, or was abandoned while stopping).
        self.deaths = 0

    def session_options(self) -> SessionOptions:
        return SessionOptions(
            self.address, self.num_cpus, self.temp_dir, self.object_store_memory, self.node_wait_seconds
        )

    # --- actors -------------------------------------------------------------------------------------
    def new_actor(self, pool: Pool, shard: ShardSpec) -> tuple[Any, Any]:
        """Start one actor of ``pool``; returns (handle, reference to its setup() result)."""
        return start_actor(pool.group.stages, shard, self.retry_backoff, pool.plan.num_cpus, pool.plan.num_gpus)

    def _start_pools(
        self, groups: list[StageGroup], sources: int, shard: ShardSpec, log: Any
    ) -> tuple[list[Pool], int, float]:
        """Start every pool and wait until each actor has run setup(); returns the pools, how many
        source tasks may be in flight, and the cluster's CPUs (the cap on CPUs of calls running at once)."""
        import ray

        resources = ray.cluster_resources()
        cpus = float(resources.get("CPU", 0.0)) or 1.0
        in_flight = min(self.max_in_flight or max(2, math.ceil(2 * cpus)), sources)
        plans = plan_pools(groups, cpus, float(resources.get("GPU", 0.0)), in_flight, self.max_actors_per_stage)
        firsts = [sum(len(g.stages) for g in groups[:i]) for i in range(len(groups))]
        pools = [Pool(i, g, firsts[i], p) for i, (g, p) in enumerate(zip(groups, plans, strict=True))]
        self.actor_pids = {p.group.name: [] for p in pools}
        self.actor_hosts = {p.group.name: [] for p in pools}
        starting: dict[Any, tuple[Pool, Any]] = {}
        try:
            for pool in pools:
                for _ in range(pool.plan.actors):
                    actor, ready = self.new_actor(pool, shard)
                    pool.actors.append(actor)
                    starting[ready] = (pool, actor)
            deadline = time.monotonic() + 60.0
            while starting:
                done, _ = ray.wait(list(starting), num_returns=len(starting), timeout=1.0)
                for ref in done:
                    pool, actor = starting.pop(ref)
                    self.record_actor(pool, setup_result(ref, pool.group.describe()))
                    pool.idle.append(actor)
                if starting and time.monotonic() > deadline:
                    deadline = float("inf")
                    log.warning(
                        f"{len(starting)} Ray actors are still starting after 60 s; is the cluster busy or short "
                        "of the resources the stages ask for?"
                    )
        except BaseException:
            kill([a for p in pools for a in p.actors])
            raise
        log.info(
            "ray: actor pools "
            + ", ".join(f"{p.group.name} x{p.plan.actors}" for p in pools)
            + f" ready; up to {in_flight} source tasks in flight"
        )
        hosts = Counter(h for group in self.actor_hosts.values() for h in group)
        log.info(f"ray: actors on {len(hosts)} node(s): " + ", ".join(f"{h} x{n}" for h, n in sorted(hosts.items())))
        return pools, in_flight, cpus

    def record_actor(self, pool: Pool, started: tuple[int, str]) -> None:
        pid, host = started
        self.actor_pids[pool.group.name].append(pid)
        self.actor_hosts.setdefault(pool.group.name, []).append(host)

    # --- the run ------------------------------------------------------------------------------------
    def process_sources(
        self, stages: list[ProcessingStage], sources: list[Task], shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        """LocalExecutor's contract on Ray: one result per source task once all its descendants are
        done; no new source task once ``should_stop()``; on any exit the actors go, and Ray too if
        this executor started it."""
        if not stages:
            yield from (SourceResult(source_id=t.source_id or t.task_id, output_tasks=[t]) for t in sources)
            return
        if not sources or should_stop():
            return
        log = bound(shard.label, shard.job.label)
        start = time.perf_counter()
        session = connect(self.session_options(), shard, log)
        self.ray_seconds = time.perf_counter() - start
        log.info(f"ray: using {session.where} ({self.ray_seconds:.1f} s)")
        self.deaths = 0
        run = Run(self, stages, shard, should_stop, log)
        clean = False
        try:
            groups = fuse_stages(stages, self.fuse)
            run.pools, run.in_flight, cpus = self._start_pools(groups, len(sources), shard, log)
            run.cpu_cap = cpus + max([1.0, *(s.resources.cpus for s in stages)])
            self.actor_seconds = time.perf_counter() - start - self.ray_seconds
            yield from run.results(sources)
            clean = True
        finally:
            actors = [a for p in run.pools for a in p.actors]
            unstarted = {id(a) for _, a in run.starting.values()}  # e.g. waiting for CPUs a dead node had
            try:
                if clean:
                    teardown([a for a in actors if id(a) not in unstarted], log)
                kill(actors)
            finally:
                disconnect(session, keep_files=not clean or self.deaths > 0, log=log)


__all__ = ["RayExecutor"]
