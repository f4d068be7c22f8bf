"""What talks to Slurm: submission of arrays and phases, control (squeue), a run's status over its ledger and its
jobs, and `curator-slurm local`. The shard spec and job identity (neutral core) are re-exported here."""

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
