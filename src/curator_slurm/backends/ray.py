"""RayExecutor: the stages after the source run in pools of Ray actors.

Why Ray at all: one array task may want more CPUs (or GPUs) than one node has, or stages with very
different needs (a GPU classifier next to CPU filters). The contract is LocalExecutor's: the driver
runs the source stage, applies the shard filter, writes the ledger and handles stop signals
(:meth:`BaseExecutor.execute`); this module only pushes source tasks through the later stages and
yields one :class:`SourceResult` per source task once everything descending from it is done.

How it works:

* Consecutive stages that ask for the same ``Resources`` form one group (:func:`fuse_stages`), and
  each group gets one pool of actors. An actor runs its group's stages one after the other, in
  memory, as a LocalExecutor worker does; a stage with other needs (a GPU model between CPU
  filters) gets a pool of its own. ``fuse=False`` gives every stage its own pool.
* A pool has as many actors as its ``Resources`` fit into the cluster (:func:`plan_pools`), so any
  pool can use every CPU when it is the bottleneck. Ray is asked for a scaled-down CPU share per
  actor so that all pools fit at once; the driver, not Ray, caps how many calls run at the same
  time (their CPUs add up to the cluster's plus one call), which keeps the machine busy without
  oversubscribing it. Each actor wraps each of its stages in a :class:`BaseStageAdapter` (timing,
  lineage, per-task retries, :class:`FailedTask`) and calls ``setup()`` once.
* Between pools, data stays in Ray's object store: a call returns a small summary (stats, failures,
  warnings) and, separately, its output tasks; the driver hands the *reference* to the next pool's
  calls, so pyarrow tables go from actor to actor without passing through the driver.
* Backpressure: at most ``max_in_flight`` source tasks are active, each actor runs one call at a
  time, and a source task's data is released when it is done, so memory depends on the size of a
  source task, not of the corpus.
* An actor that dies (killed, out of memory, native crash) costs the call one attempt: the call is
  re-run on a replacement actor (batches one task at a time, like a raised exception), and after
  ``max_retries + 1`` attempts (the largest of the group's stages) the task is recorded failed with
  a ``WorkerDied`` error naming the group's stages.
* Ray is imported only here, inside methods, so ``import curator_slurm`` never imports it. With
  ``RAY_ADDRESS`` set (or ``address=``) the executor joins that cluster; in a process where Ray is
  already initialised it uses that; otherwise it starts a local Ray sized to the CPUs this process
  may use, with its files under ``/tmp/curator-ray-<job>-<pid>`` and its logs kept out of the
  console, and shuts down only what it started.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.backends.base import (
    BaseExecutor,
    BaseStageAdapter,
    SourceResult,
    StageStats,
    run_chain,
    set_up_adapters,
    summarise,
    tear_down_adapters,
)
from curator_slurm.errors import CuratorError
from curator_slurm.logs import ROOT, CollectWarnings, bound, configure_logging
from curator_slurm.slurm.env import ShardSpec, available_cpus, ray_address, ray_expected_nodes
from curator_slurm.stages.base import ProcessingStage, Resources
from curator_slurm.tasks import DocumentBatch, FailedTask, Task

logger = logging.getLogger(__name__)

#: Signals whose handlers ``ray.init`` replaces (it makes SIGTERM exit the driver at once); the
#: driver's own handlers (:class:`StopSignal`) must survive it.
_DRIVER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)

#: Ray logs this notice at WARNING on every local start; it is Ray's default, not the user's concern.
_RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


# --------------------------------------------------------------------------------------------------
# Which stages share a pool, and how large the pools are: pure functions, checked without a cluster.


@dataclass(frozen=True, eq=False)
class StageGroup:
    """Consecutive stages that share one actor pool: each actor runs all of them, one after the other,
    so their data passes from stage to stage in the actor's memory, as in a LocalExecutor worker."""

    stages: tuple[ProcessingStage, ...]

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.stages)

    @property
    def resources(self) -> Resources:
        return self.stages[0].resources  # the same for every stage of a group

    @property
    def batch_size(self) -> int:
        return self.stages[0].batch_size

    @property
    def max_retries(self) -> int:
        """A dead worker cannot say which of the group's stages it was running: its deaths are charged
        to the group, whose budget is the most generous of its stages'."""
        return max(s.max_retries for s in self.stages)

    def describe(self) -> str:
        names = ", ".join(repr(s.name) for s in self.stages)
        return f"stage {names}" if len(self.stages) == 1 else f"stages {names}"


def fuse_stages(stages: Sequence[ProcessingStage], fuse: bool = True) -> list[StageGroup]:
    """Group consecutive stages that ask for the same ``Resources`` (with ``fuse``), else one group per
    stage. A fused group costs one actor where per-stage pools cost one per stage, and its data never
    goes through Ray's object store; a stage with other needs (a GPU model) starts a pool of its own."""
    groups: list[list[ProcessingStage]] = []
    for stage in stages:
        if fuse and groups and groups[-1][-1].resources == stage.resources:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return [StageGroup(tuple(g)) for g in groups]


@dataclass(frozen=True)
class PoolPlan:
    """How many actors a stage gets, and the CPU and GPU share each one asks Ray for."""

    stage: str
    actors: int
    num_cpus: float
    num_gpus: float


def plan_pools(
    stages: Sequence[StageGroup | ProcessingStage],
    cluster_cpus: float,
    cluster_gpus: float = 0.0,
    max_in_flight: int | None = None,
    max_actors_per_stage: int | None = None,
) -> list[PoolPlan]:
    """One pool per stage (or group of stages), as large as its ``Resources`` fit in the cluster.

    Every pool may use the whole cluster (so whichever stage is slow gets all the CPUs), which means
    the pools together ask for more than there is; each actor's CPU request is scaled down by the
    same factor so that Ray can place them all, and the executor limits how many calls run at once
    instead. GPUs cannot be shared that way: a stage that needs more GPUs than the cluster has is
    refused here, before any actor starts.
    """
    sizes: list[int] = []
    for stage in stages:
        cpus, gpus = stage.resources.cpus, stage.resources.gpus
        if gpus > cluster_gpus:
            raise ValueError(
                f"stage {stage.name!r} asks for {gpus:g} GPU(s) per actor but the Ray cluster has "
                f"{cluster_gpus:g}; run on a GPU node or give the stage Resources(gpus=0)"
            )
        n = math.floor(cluster_cpus / cpus) if cpus > 0 else math.ceil(cluster_cpus)
        if gpus > 0:
            n = min(n, math.floor(cluster_gpus / gpus))
        for cap in (max_in_flight, max_actors_per_stage):
            if cap is not None:
                n = min(n, cap)
        sizes.append(max(1, n))
    demand = sum(n * s.resources.cpus for n, s in zip(sizes, stages, strict=True))
    scale = min(1.0, cluster_cpus / demand) if demand > 0 else 1.0
    return [
        # Rounded down to Ray's resource precision so that the requests never add up to more than the cluster.
        PoolPlan(s.name, n, math.floor(s.resources.cpus * scale * 10_000) / 10_000, s.resources.gpus)
        for n, s in zip(sizes, stages, strict=True)
    ]


# --------------------------------------------------------------------------------------------------
# The actor. A plain class, wrapped with ray.remote by the driver, so this module imports without Ray.


@dataclass
class _CallSummary:
    """What the driver needs from one stage call; the output tasks themselves stay in the object store."""

    stats: list[StageStats]  # one per stage of the pool
    count: int
    failed: list[FailedTask]
    warnings: list[str]
    outputs: list[Task] | None = None  # only for the last stage, whose outputs are small and go to the ledger


class _StageWorker:
    """The stages of one pool in one Ray worker process: a :class:`BaseStageAdapter` each, set up once.
    A call runs its tasks through all of them, depth-first, as a LocalExecutor worker does."""

    def __init__(self, stages: tuple[ProcessingStage, ...], shard: ShardSpec, retry_backoff: float) -> None:
        self.stages, self.shard, self.retry_backoff = stages, shard, retry_backoff
        self.adapters: list[BaseStageAdapter] = []
        self.warnings: list[str] = []

    def setup(self) -> tuple[int, str]:
        """Set the stages up; returns this process's pid and its node's host name (tests and logs use them)."""
        # Stop signals are the driver's business (it lets in-flight work finish); SIGUSR1/2 would
        # otherwise kill the worker by default. SIGTERM stays Ray's: it uses it to stop workers.
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, signal.SIG_IGN)
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
        self, tasks: list[Task], start: int, stop: int, deaths: int, inline: bool
    ) -> tuple[_CallSummary, list[Task] | None]:
        """Run the stages on ``tasks[start:stop]`` (the driver passes a whole upstream output list by
        reference and a slice of it, so the data never travels through the driver)."""
        batch = list(tasks[start:stop])
        for adapter in self.adapters:
            adapter.stats = StageStats(adapter.stage.name)
        self.warnings.clear()
        out = self._after_deaths(batch, deaths) if deaths else run_chain(self.adapters, batch)
        good = [t for t in out if not isinstance(t, FailedTask)]
        summary = _CallSummary(
            stats=[a.stats for a in self.adapters],
            count=len(good),
            failed=[t for t in out if isinstance(t, FailedTask)],
            warnings=list(self.warnings),
            outputs=good if inline else None,
        )
        return summary, (None if inline else good)

    def _after_deaths(self, batch: list[Task], deaths: int) -> list[Task]:
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
            out = run_chain(self.adapters, batch)
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
# The driver side.

#: ``ray.remote(_StageWorker)``, made once per driver process (Ray exports the class on first use).
_REMOTE_WORKER: Any = None


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


@dataclass(eq=False)
class _Pool:
    """The actors of one stage group; ``idle`` ones may take a call, longest idle first, so that work
    spreads over every actor (and every node they were spread over)."""

    index: int
    group: StageGroup
    first: int  # index of the group's first stage among all stages
    plan: PoolPlan
    actors: list[Any] = field(default_factory=list)
    idle: deque[Any] = field(default_factory=deque)


@dataclass
class _Session:
    """What this executor did to get Ray, so that it undoes exactly that."""

    started: bool
    where: str
    temp_dir: str | None = None


def _default_temp_dir(shard: ShardSpec) -> str:
    """A short, per-job, per-process directory: Ray's unix socket paths under it must stay below the
    107-character limit, and concurrent runs (srun steps share a job id) must not share it."""
    base = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    job = shard.job.job_id
    return os.path.join(base, f"curator-ray-{job}-{os.getpid()}" if job else f"curator-ray-{os.getpid()}")


def _death_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for "the process running this call is gone" (as opposed to the call raising)."""
    from ray import exceptions as rx

    return (rx.RayActorError, rx.WorkerCrashedError, rx.OutOfMemoryError, rx.ObjectLostError, rx.NodeDiedError)


def _describe(task: Task) -> dict[str, Any]:
    """The ``metadata`` of a FailedTask for ``task``, exactly as BaseStageAdapter builds it."""
    if isinstance(task, DocumentBatch):
        return {"task_id": task.task_id, "files": task.metadata.get("files", [])}
    return {"task_id": task.task_id, "files": task.metadata.get("files", task.data)}


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

    # --- Ray itself ---------------------------------------------------------------------------------
    def _connect(self, shard: ShardSpec, log: Any) -> _Session:
        import ray

        if ray.is_initialized():
            return _Session(started=False, where="the Ray instance this process already uses")
        address = self.address or ray_address()
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
        saved = _save_handlers()
        auth_logger = logging.getLogger(_RAY_AUTH_LOGGER)
        auth_level = auth_logger.level
        auth_logger.setLevel(logging.ERROR)
        try:
            if address and address != "local":
                _match_ray_start_auth()
                ray.init(address=address, **quiet)
                try:
                    nodes = self._wait_for_nodes(ray, ray_expected_nodes(), address, shard, log)
                except BaseException:
                    ray.shutdown()
                    raise
                return _Session(started=True, where=f"the Ray cluster at {address} ({nodes} node(s))")
            temp_dir = self.temp_dir or _default_temp_dir(shard)
            os.makedirs(temp_dir, exist_ok=True)
            cpus = self.num_cpus or available_cpus()
            ray.init(
                num_cpus=cpus,
                include_dashboard=False,
                _temp_dir=temp_dir,
                object_store_memory=self.object_store_memory,
                **quiet,
            )
            return _Session(started=True, where=f"a local Ray ({cpus} CPUs, files in {temp_dir})", temp_dir=temp_dir)
        finally:
            auth_logger.setLevel(auth_level)
            _restore_handlers(saved)

    def _wait_for_nodes(self, ray: Any, expected: int | None, address: str, shard: ShardSpec, log: Any) -> int:
        """Alive nodes of the cluster, after waiting up to ``node_wait_seconds`` for ``expected`` of them
        (``CURATOR_RAY_NODES``, exported by a multi-node array task): actors are placed on the nodes there
        are when they start, so a node that joins late would idle, and one that never joins is a broken
        task (wrong address, token or firewall), which :class:`RayNodesMissingError` names."""
        deadline = time.monotonic() + self.node_wait_seconds
        while True:
            alive = [_node_label(node) for node in ray.nodes() if node.get("Alive")]
            if expected is None or len(alive) >= expected:
                if expected is not None:
                    log.info(f"ray: {len(alive)} of {expected} node(s) joined: {', '.join(sorted(alive))}")
                return len(alive)
            if time.monotonic() >= deadline:
                missing = _missing_slurm_nodes(shard.job.job_id, [a.split(" ")[0] for a in alive])
                raise RayNodesMissingError(
                    f"ray: only {len(alive)} of {expected} nodes (CURATOR_RAY_NODES) joined the Ray cluster at "
                    f"{address} within {self.node_wait_seconds:.0f} s (joined: {', '.join(sorted(alive)) or 'none'}"
                    + (f"; missing: {', '.join(missing)}" if missing else "")
                    + "). The missing node's `ray start` output in this task's log says why (an address it "
                    "cannot reach, authentication, a firewall); RayExecutor(node_wait_seconds=...) sets the wait"
                )
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def _disconnect(self, session: _Session, keep_files: bool, log: Any) -> None:
        import ray

        if not session.started:
            return
        ray.shutdown()
        if session.temp_dir is not None:
            if keep_files:
                log.warning(f"Ray's logs of this run are kept in {session.temp_dir}")
            else:
                shutil.rmtree(session.temp_dir, ignore_errors=True)

    # --- actors -------------------------------------------------------------------------------------
    def _new_actor(self, pool: _Pool, shard: ShardSpec) -> tuple[Any, Any]:
        """Start one actor of ``pool``; returns (handle, reference to its setup() result)."""
        import ray

        global _REMOTE_WORKER
        if _REMOTE_WORKER is None:
            _REMOTE_WORKER = ray.remote(_StageWorker)
        actor = _REMOTE_WORKER.options(
            num_cpus=pool.plan.num_cpus,
            num_gpus=pool.plan.num_gpus,
            max_restarts=0,
            max_concurrency=1,
            scheduling_strategy="SPREAD",
        ).remote(pool.group.stages, shard, self.retry_backoff)
        return actor, actor.setup.remote()

    def _start_pools(
        self, groups: list[StageGroup], sources: int, shard: ShardSpec, log: Any
    ) -> tuple[list[_Pool], int, float]:
        """Start every pool and wait until each actor has run setup(); returns the pools, how many
        source tasks may be in flight, and the cluster's CPUs (the cap on CPUs of calls running at once)."""
        import ray

        resources = ray.cluster_resources()
        cpus = float(resources.get("CPU", 0.0)) or 1.0
        in_flight = min(self.max_in_flight or max(2, math.ceil(2 * cpus)), sources)
        plans = plan_pools(groups, cpus, float(resources.get("GPU", 0.0)), in_flight, self.max_actors_per_stage)
        firsts = [sum(len(g.stages) for g in groups[:i]) for i in range(len(groups))]
        pools = [_Pool(i, g, firsts[i], p) for i, (g, p) in enumerate(zip(groups, plans, strict=True))]
        self.actor_pids = {p.group.name: [] for p in pools}
        self.actor_hosts = {p.group.name: [] for p in pools}
        starting: dict[Any, tuple[_Pool, Any]] = {}
        try:
            for pool in pools:
                for _ in range(pool.plan.actors):
                    actor, ready = self._new_actor(pool, shard)
                    pool.actors.append(actor)
                    starting[ready] = (pool, actor)
            deadline = time.monotonic() + 60.0
            while starting:
                done, _ = ray.wait(list(starting), num_returns=len(starting), timeout=1.0)
                for ref in done:
                    pool, actor = starting.pop(ref)
                    self._record_actor(pool, _setup_result(ref, pool))
                    pool.idle.append(actor)
                if starting and time.monotonic() > deadline:
                    deadline = float("inf")
                    log.warning(
                        f"{len(starting)} Ray actors are still starting after 60 s; is the cluster busy or short "
                        "of the resources the stages ask for?"
                    )
        except BaseException:
            _kill([a for p in pools for a in p.actors])
            raise
        log.info(
            "ray: actor pools "
            + ", ".join(f"{p.group.name} x{p.plan.actors}" for p in pools)
            + f" ready; up to {in_flight} source tasks in flight"
        )
        hosts = Counter(h for group in self.actor_hosts.values() for h in group)
        log.info(f"ray: actors on {len(hosts)} node(s): " + ", ".join(f"{h} x{n}" for h, n in sorted(hosts.items())))
        return pools, in_flight, cpus

    def _record_actor(self, pool: _Pool, started: tuple[int, str]) -> None:
        pid, host = started
        self.actor_pids[pool.group.name].append(pid)
        self.actor_hosts.setdefault(pool.group.name, []).append(host)

    # --- the run ------------------------------------------------------------------------------------
    def process_sources(
        self,
        stages: list[ProcessingStage],
        sources: list[Task],
        shard: ShardSpec,
        should_stop: Callable[[], bool],
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
        session = self._connect(shard, log)
        self.ray_seconds = time.perf_counter() - start
        log.info(f"ray: using {session.where} ({self.ray_seconds:.1f} s)")
        self.deaths = 0
        run = _Run(self, stages, shard, should_stop, log)
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
                    _teardown([a for a in actors if id(a) not in unstarted], log)
                _kill(actors)
            finally:
                self._disconnect(session, keep_files=not clean or self.deaths > 0, log=log)


class _Run:
    """The driver's scheduling state for one ``process_sources`` call."""

    def __init__(
        self,
        executor: RayExecutor,
        stages: list[ProcessingStage],
        shard: ShardSpec,
        should_stop: Callable[[], bool],
        log: Any,
    ) -> None:
        self.executor, self.stages, self.shard, self.should_stop, self.log = executor, stages, shard, should_stop, log
        self.pools: list[_Pool] = []
        self.in_flight = 1
        self.cpu_cap = 1.0  # CPUs that running calls may add up to (see _dispatch)
        self.active: set[_Source] = set()
        self.queues: list[deque[_Call]] = [deque() for _ in stages]
        self.delayed: list[_Call] = []  # calls to retry after a worker died, once their back-off is over
        self.running: dict[Any, tuple[_Call, Any, Any]] = {}  # summary ref -> (call, actor, outputs ref)
        self.starting: dict[Any, tuple[_Pool, Any]] = {}  # setup ref of a replacement actor -> (pool, actor)
        self.busy_cpus = 0.0
        self.any_abandoned = False
        self.failed_starts = 0  # replacement actors that died before their setup() ran

    def results(self, sources: list[Task]) -> Iterator[SourceResult]:
        """Admit source tasks (at most ``in_flight`` at once), dispatch their calls, and yield each one
        when its last call is back."""
        import ray

        pending = deque(sources)
        while True:
            if self.should_stop():
                pending.clear()
            while pending and len(self.active) < self.in_flight:
                task = pending.popleft()
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
                source = self._finished(ref)
                if source is not None and source.pending == 0 and source in self.active:
                    self.active.discard(source)
                    if not source.abandoned:
                        yield _summarise(source)

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
                    call.inputs, call.start, call.stop, call.deaths, pool.index == last
                )
                self.running[summary_ref] = (call, actor, outputs_ref)
                self.busy_cpus += cost

    def _finished(self, ref: Any) -> _Source | None:
        """Account for one finished call (or a replacement actor that is ready); returns its source task."""
        import ray

        if ref in self.starting:
            pool, actor = self.starting.pop(ref)
            try:
                self.executor._record_actor(pool, _setup_result(ref, pool))
            except RuntimeError as e:
                if self.should_stop():
                    self._abandon_all(f"a replacement Ray worker could not start while stopping ({e})")
                    return None
                if not isinstance(e.__cause__, _death_errors()) or self.failed_starts >= _MAX_FAILED_STARTS:
                    raise
                # Its process or node died before setup() ran (e.g. placed on a node that had just died and
                # was not yet known dead): not the stage's fault, so start another, a bounded number of times.
                self.failed_starts += 1
                self.log.warning(
                    f"a replacement Ray worker of {pool.group.describe()} died before it started "
                    f"({_first_line(e.__cause__)}); starting another ({self.failed_starts} of {_MAX_FAILED_STARTS})"
                )
                pool.actors.remove(actor)
                _kill([actor])
                again, ready = self.executor._new_actor(pool, self.shard)
                pool.actors.append(again)
                self.starting[ready] = (pool, again)
                return None
            pool.idle.append(actor)
            return None
        call, actor, outputs_ref = self.running.pop(ref)
        pool, source = self.pools[call.pool], call.source
        self.busy_cpus = max(0.0, self.busy_cpus - pool.group.resources.cpus)
        source.pending -= 1
        try:
            summary: _CallSummary = ray.get(ref)
        except _death_errors() as error:
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
        self.executor.deaths += 1
        pool.actors.remove(dead)
        _kill([dead])
        stopping = self.should_stop()
        try:
            actor, ready = self.executor._new_actor(pool, self.shard)
        except Exception as e:
            if not stopping:
                raise
            self._abandon_all(f"a dead Ray worker cannot be replaced while stopping ({e})")
            return
        pool.actors.append(actor)
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
        """What to do with a call whose worker died: retry each of its tasks on its own (the dead
        one's attempt counts only when it was alone, as with a raised exception), or, after
        ``max_retries + 1`` deaths, give up on it as a FailedTask."""
        import ray

        group, log = self.pools[call.pool].group, self.log
        if call.stop - call.start > 1:
            log.warning(
                f"a Ray worker of {group.describe()} died running a batch of {call.stop - call.start} tasks; "
                "retrying them one at a time"
            )
            return [_Call(call.source, call.pool, call.inputs, j, j + 1) for j in range(call.start, call.stop)]
        attempts = call.deaths + 1
        if attempts <= group.max_retries:
            log.warning(
                f"a Ray worker of {group.describe()} died (attempt {attempts} of {group.max_retries + 1}); "
                f"retrying on a new worker: {type(error).__name__}"
            )
            delay = min(self.executor.retry_backoff * 2 ** (attempts - 1), 60.0)
            return [
                _Call(call.source, call.pool, call.inputs, call.start, call.stop, attempts, time.monotonic() + delay)
            ]
        try:
            task = (call.inputs if isinstance(call.inputs, list) else ray.get(call.inputs))[call.start]
        except Exception:  # the input itself is lost: describe the source task instead
            task = call.source.task
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return [
            FailedTask(
                source_id=task.source_id,
                dataset_name=task.dataset_name,
                metadata=_describe(task),
                stage=group.name,
                error=f"WorkerDied: the Ray worker process running {group.describe()} died on each of {attempts} "
                f"attempts at this task (killed, out of memory, or a crash in native code); last error: "
                f"{type(error).__name__}: {first_line}",
                traceback=str(error),
                attempts=attempts,
            )
        ]


#: Replacement actors of one run that may die before their setup() ran before the run gives up.
_MAX_FAILED_STARTS = 8


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _summarise(source: _Source) -> SourceResult:
    task = source.task
    return summarise(task.source_id or task.task_id, source.finals, source.stats, source.started)


class RayNodesMissingError(CuratorError, RuntimeError):
    """Fewer nodes than ``CURATOR_RAY_NODES`` joined the Ray cluster within ``node_wait_seconds``."""


def _node_label(node: dict[str, Any]) -> str:
    """``host (address)`` of a node as ``ray.nodes()`` describes it."""
    host = str(node.get("NodeManagerHostname") or "?")
    return f"{host} ({node.get('NodeManagerAddress', '?')})"


def _missing_slurm_nodes(job_id: str | None, joined_hosts: Sequence[str]) -> list[str]:
    """The nodes of Slurm job ``job_id`` whose name is not among the joined Ray nodes' host names (short
    names compared), to name them in the error; empty when Slurm cannot say (not in a job, no scontrol,
    or node names unlike host names)."""
    if not job_id or shutil.which("scontrol") is None:
        return []
    try:
        job = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        nodelist = next((f.split("=", 1)[1] for f in job.split() if f.startswith("NodeList=")), "")
        names = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10, check=True
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []
    joined = {h.split(".")[0] for h in joined_hosts}
    missing = [n for n in names if n.split(".")[0] not in joined]
    return missing if len(missing) < len(names) else []


def _setup_result(ref: Any, pool: _Pool) -> tuple[int, str]:
    """The (pid, host) an actor's setup() returned, or a clear error naming the stage whose setup failed."""
    import ray

    try:
        pid, host = ray.get(ref)
        return int(pid), str(host)
    except Exception as e:
        raise RuntimeError(f"{pool.group.describe()}: setup() failed on a Ray worker: {e}") from e


def _teardown(actors: list[Any], log: Any) -> None:
    """Call every actor's teardown() (the stage's, once per actor, as LocalExecutor does per process)."""
    import ray

    refs = [a.teardown.remote() for a in actors]
    for ref in refs:
        try:
            ray.get(ref, timeout=60)
        except Exception as e:
            log.warning(f"a stage's teardown() failed on a Ray worker: {e}")


def _kill(actors: list[Any]) -> None:
    import ray

    for actor in actors:
        with contextlib.suppress(Exception):  # already gone, or Ray itself is going down
            ray.kill(actor, no_restart=True)


def _match_ray_start_auth() -> None:
    """Use token authentication to join a cluster when ``ray start`` would (a token is available and
    ``RAY_AUTH_MODE`` is unset): Ray >= 2.5x enables it in ``ray start --head`` then, but a driver's
    ``ray.init(address=...)`` does not, and fails with InvalidAuthToken. Ray's own helper, so the rule
    stays Ray's; absent in Ray versions without token authentication."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _save_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in _DRIVER_SIGNALS}


def _restore_handlers(saved: dict[int, Any]) -> None:
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


__all__ = ["PoolPlan", "RayExecutor", "RayNodesMissingError", "StageGroup", "fuse_stages", "plan_pools", "ray_address"]
