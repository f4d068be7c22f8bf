"""Everything that knows about Slurm: the environment (the one module that reads it), submission of
arrays and phases, and control (squeue, requeue). What a run leaves on disk is in :mod:`curator_slurm.runs`."""

from curator_slurm.runs.sharding import balanced_assignment, hash_assignment, select, shard_of
from curator_slurm.settings import available_cpus
from curator_slurm.shard import JobInfo, ShardSpec

__all__ = [
    "JobInfo",
    "ShardSpec",
    "available_cpus",
    "balanced_assignment",
    "hash_assignment",
    "select",
    "shard_of",
]
