"""Executors. ``RayExecutor`` lives in ``curator_slurm.backends.ray`` and imports Ray lazily."""

from curator_slurm.backends.base import BaseExecutor, BaseStageAdapter, PipelineResult
from curator_slurm.backends.local import LocalExecutor

__all__ = ["BaseExecutor", "BaseStageAdapter", "LocalExecutor", "PipelineResult"]
