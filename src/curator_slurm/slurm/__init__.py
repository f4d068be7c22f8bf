"""Everything that knows about Slurm: the environment, shard assignment, and job submission."""

from curator_slurm.slurm.env import JobInfo, ShardSpec, available_cpus
from curator_slurm.slurm.sharding import balanced_assignment, hash_assignment, select, shard_of

__all__ = [
    "JobInfo",
    "ShardSpec",
    "available_cpus",
    "balanced_assignment",
    "hash_assignment",
    "select",
    "shard_of",
]
