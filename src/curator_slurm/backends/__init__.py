"""Executors: :class:`LocalExecutor`, ``RayExecutor`` (in ``curator_slurm.backends.ray``, Ray imported lazily),
and the registry that picks one by name (:func:`make_executor`, :func:`register_executor`)."""

from curator_slurm.backends.adapter import BaseStageAdapter
from curator_slurm.backends.local import LocalExecutor
from curator_slurm.backends.registry import EXECUTORS, make_executor, register_executor
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.runs.results import PipelineResult

__all__ = [
    "EXECUTORS",
    "BaseExecutor",
    "BaseStageAdapter",
    "LocalExecutor",
    "PipelineResult",
    "make_executor",
    "register_executor",
]
