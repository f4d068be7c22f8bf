"""RayExecutor: the stages after the source run in pools of Ray actors; Ray is imported only inside functions.
Modules: ``planning`` (pools, pure), ``pools`` (the actors), ``worker`` (one actor), ``scheduler`` (the driver's
state), ``session`` (joining or starting Ray), ``executor``. Design: docs/design.md, "Executors"."""

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
