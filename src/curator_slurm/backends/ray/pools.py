"""The actor pools of one run on Ray, owned by one object: :class:`ActorPools` starts them, records which
process and node each actor runs in, replaces a dead actor (counting the death and removing what its writers
left half-written) and ends them. The scheduler (:class:`~curator_slurm.backends.ray.scheduler.Run`) asks it
for actors and tells it of deaths; it never starts or counts one itself."""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.backends.ray.planning import PoolPlan, StageGroup, plan_pools
from curator_slurm.backends.ray.worker import kill, setup_result, start_actor, teardown
from curator_slurm.backends.retry import remove_dead_writers_files
from curator_slurm.shard import ShardSpec, host_name


@dataclass(eq=False)
class Pool:
    """The actors of one stage group; ``idle`` ones may take a call, longest idle first, so that work
    spreads over every actor (and every node they were spread over)."""

    index: int
    group: StageGroup
    first: int  # index of the group's first stage among all stages
    plan: PoolPlan
    actors: list[Any] = field(default_factory=list)
    idle: deque[Any] = field(default_factory=deque)


class ActorPools:
    """Every actor of one run, by pool: start, record, replace, count deaths, end.

    Args:
        shard: the run's shard, handed to every actor's adapters.
        retry_backoff: seconds before the first retry of a failed task (in the actors, and after a death).
        log: the logger of the run.
    """

    def __init__(self, shard: ShardSpec, retry_backoff: float, log: Any) -> None:
        self.shard, self.retry_backoff, self.log = shard, retry_backoff, log
        self.pools: list[Pool] = []
        #: Pids and host names of the actors, by pool (:attr:`StageGroup.name`), in the order they started.
        self.actor_pids: dict[str, list[int]] = {}
        self.actor_hosts: dict[str, list[str]] = {}
        #: Actor deaths so far (each one cost a call an attempt, or was abandoned while stopping).
        self.deaths = 0
        self._where: dict[int, tuple[int, str]] = {}  # id(actor) -> (pid, host)

    def start(
        self, groups: list[StageGroup], sources: int, max_in_flight: int | None, max_actors: int | None
    ) -> tuple[int, float]:
        """Start every pool and wait until each actor has run setup(); returns how many source tasks may be
        in flight and the cluster's CPUs (the cap on CPUs of calls running at once)."""
        import ray

        resources = ray.cluster_resources()
        cpus = float(resources.get("CPU", 0.0)) or 1.0
        in_flight = min(max_in_flight or max(2, math.ceil(2 * cpus)), sources)
        plans = plan_pools(groups, cpus, float(resources.get("GPU", 0.0)), in_flight, max_actors)
        firsts = [sum(len(g.stages) for g in groups[:i]) for i in range(len(groups))]
        self.pools = [Pool(i, g, firsts[i], p) for i, (g, p) in enumerate(zip(groups, plans, strict=True))]
        self.actor_pids = {p.group.name: [] for p in self.pools}
        self.actor_hosts = {p.group.name: [] for p in self.pools}
        starting = {ready: (pool, actor) for pool in self.pools for actor, ready in self._first_actors(pool)}
        try:
            self._wait_until_set_up(starting)
        except BaseException:
            kill(self.actors())
            raise
        self.log.info(
            "ray: actor pools "
            + ", ".join(f"{p.group.name} x{p.plan.actors}" for p in self.pools)
            + f" ready; up to {in_flight} source tasks in flight"
        )
        hosts = Counter(h for group in self.actor_hosts.values() for h in group)
        self.log.info(
            f"ray: actors on {len(hosts)} node(s): " + ", ".join(f"{h} x{n}" for h, n in sorted(hosts.items()))
        )
        return in_flight, cpus

    def _first_actors(self, pool: Pool) -> list[tuple[Any, Any]]:
        return [self.new_actor(pool) for _ in range(pool.plan.actors)]

    def _wait_until_set_up(self, starting: dict[Any, tuple[Pool, Any]]) -> None:
        import ray

        deadline = time.monotonic() + 60.0
        while starting:
            done, _ = ray.wait(list(starting), num_returns=len(starting), timeout=1.0)
            for ref in done:
                pool, actor = starting.pop(ref)
                self.record(pool, actor, setup_result(ref, pool.group.describe()))
                pool.idle.append(actor)
            if starting and time.monotonic() > deadline:
                deadline = float("inf")
                self.log.warning(
                    f"{len(starting)} Ray actors are still starting after 60 s; is the cluster busy or short "
                    "of the resources the stages ask for?"
                )

    def new_actor(self, pool: Pool) -> tuple[Any, Any]:
        """Start one more actor of ``pool`` (it joins ``pool.actors``); returns (handle, reference to its
        setup() result), which the caller hands to :meth:`record` once it is ready."""
        actor, ready = start_actor(
            pool.group.stages, self.shard, self.retry_backoff, pool.plan.num_cpus, pool.plan.num_gpus
        )
        pool.actors.append(actor)
        return actor, ready

    def record(self, pool: Pool, actor: Any, started: tuple[int, str]) -> None:
        """Note the pid and host an actor's setup() reported."""
        pid, host = started
        self._where[id(actor)] = started
        self.actor_pids[pool.group.name].append(pid)
        self.actor_hosts.setdefault(pool.group.name, []).append(host)

    def discard(self, pool: Pool, actor: Any) -> None:
        """Kill an actor and forget it (e.g. one that died before its setup() ran)."""
        pool.actors.remove(actor)
        kill([actor])

    def died(self, pool: Pool, dead: Any) -> None:
        """An actor died running a call: count it, kill what is left of it, and delete the temporary files
        its writers left (only when it ran on this node: a pid names a process on its own node only)."""
        self.deaths += 1
        self.discard(pool, dead)
        pid, host = self._where.pop(id(dead), (0, ""))
        if pid and host == host_name():
            remove_dead_writers_files(list(pool.group.stages), {pid}, self.log)
        # Another node's dead writer leaves its hidden temporary files there (no output is lost: a final
        # name is only written by a rename); removing them needs a temporary name that names its host.

    def actors(self) -> list[Any]:
        return [a for p in self.pools for a in p.actors]

    def close(self, clean: bool, unstarted: set[int]) -> None:
        """End every actor: after a clean run, let those that finished their setup() run their teardown()
        first (``unstarted``: ids of replacements still starting, e.g. waiting for CPUs a dead node had)."""
        actors = self.actors()
        if clean:
            teardown([a for a in actors if id(a) not in unstarted], self.log)
        kill(actors)


__all__ = ["ActorPools", "Pool"]
