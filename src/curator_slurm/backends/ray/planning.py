"""Which stages share an actor pool, and how large the pools are: pure functions of the stages and the
cluster's size, importable and checked without Ray."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from curator_slurm.stages.base import ProcessingStage, Resources


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


__all__ = ["PoolPlan", "StageGroup", "fuse_stages", "plan_pools"]
