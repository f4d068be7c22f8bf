"""RayExecutor: the stages after the source run in pools of Ray actors.

Why Ray at all: one array task may want more CPUs (or GPUs) than one node has, or stages with very
different needs (a GPU classifier next to CPU filters). The contract is LocalExecutor's: the driver
runs the source stage, applies the shard filter, writes the ledger and handles stop signals
(:meth:`BaseExecutor.execute`); this package only pushes source tasks through the later stages and
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
* An actor that dies (killed, out of memory, native crash) is replaced, and its call follows the crash
  policy LocalExecutor follows too (:class:`~curator_slurm.backends.retry.CrashPolicy`): a batch is re-run
  one task at a time, a lone task after a back-off, and after ``max_retries + 1`` deaths (the largest of the
  group's stages) the task is recorded failed with a ``WorkerDied`` error naming the group's stages. The
  temporary files the dead actor's writers left are deleted.
* Ray is imported only here, inside functions, so ``import curator_slurm`` never imports it. With
  ``RAY_ADDRESS`` set (or ``address=``) the executor joins that cluster; in a process where Ray is
  already initialised it uses that; otherwise it starts a local Ray sized to the CPUs this process
  may use, with its files under ``/tmp/curator-ray-<job>-<pid>`` and its logs kept out of the
  console, and shuts down only what it started.

The package's modules: ``planning`` (which stages share a pool and how large the pools are; pure, no Ray),
``pools`` (:class:`ActorPools`, the one owner of a run's actors: start, record, replace, count deaths),
``worker`` (the actor, and the driver's side of one), ``scheduler`` (the driver's state for one run),
``session`` (joining or starting Ray, and undoing it) and ``executor`` (:class:`RayExecutor`, the glue).
"""

from curator_slurm.backends.ray.executor import RayExecutor
from curator_slurm.backends.ray.planning import PoolPlan, StageGroup, fuse_stages, plan_pools
from curator_slurm.backends.ray.pools import ActorPools
from curator_slurm.backends.ray.session import RayNodesMissingError
from curator_slurm.settings import ray_address

__all__ = [
    "ActorPools",
    "PoolPlan",
    "RayExecutor",
    "RayNodesMissingError",
    "StageGroup",
    "fuse_stages",
    "plan_pools",
    "ray_address",
]
