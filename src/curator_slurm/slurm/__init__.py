"""What talks to Slurm: submission of arrays and phases (sbatch options declared once), control (squeue),
a run's status over its ledger and its jobs, and `curator-slurm local`. What every run needs (the shard
spec, the job identity, the settings read from the environment) is in the neutral core
(:mod:`curator_slurm.shard`, :mod:`curator_slurm.settings`), re-exported here; what a run leaves on disk
is in :mod:`curator_slurm.runs`."""

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
