"""Executors. ``RayExecutor`` lives in ``curator_slurm.backends.ray`` and imports Ray lazily."""

from curator_slurm.backends.adapter import BaseStageAdapter
from curator_slurm.backends.local import LocalExecutor
from curator_slurm.backends.results import PipelineResult
from curator_slurm.backends.run import BaseExecutor

__all__ = ["BaseExecutor", "BaseStageAdapter", "LocalExecutor", "PipelineResult"]
