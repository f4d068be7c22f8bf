"""Moved: the adapter to :mod:`~curator_slurm.backends.adapter`, the run loop to :mod:`~curator_slurm.backends.run`,
results to :mod:`~curator_slurm.backends.results`, signals to :mod:`~curator_slurm.backends.signals`."""

from curator_slurm.backends.adapter import (
    BaseStageAdapter,
    list_sources,
    run_chain,
    run_source_task,
    set_up_adapters,
    tear_down_adapters,
)
from curator_slurm.backends.results import (
    FunnelRow,
    PipelineResult,
    ProgressLog,
    SourceResult,
    StageStats,
    funnel_of_records,
    summarise,
)
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.backends.signals import GraceExpired, StopSignal

__all__ = [
    "BaseExecutor",
    "BaseStageAdapter",
    "FunnelRow",
    "GraceExpired",
    "PipelineResult",
    "ProgressLog",
    "SourceResult",
    "StageStats",
    "StopSignal",
    "funnel_of_records",
    "list_sources",
    "run_chain",
    "run_source_task",
    "set_up_adapters",
    "summarise",
    "tear_down_adapters",
]
