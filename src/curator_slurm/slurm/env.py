"""The shard spec, the job identity and the environment's settings under their former home: re-exported from the
neutral core (:mod:`curator_slurm.shard`, :mod:`curator_slurm.settings`) for scripts that import them from here."""

from __future__ import annotations

from curator_slurm.settings import (
    STRATEGIES,
    available_cpus,
    job_environment,
    ray_address,
    ray_expected_nodes,
    run_options,
)
from curator_slurm.shard import JobInfo, ShardSpec

__all__ = [
    "STRATEGIES",
    "JobInfo",
    "ShardSpec",
    "available_cpus",
    "job_environment",
    "ray_address",
    "ray_expected_nodes",
    "run_options",
]
