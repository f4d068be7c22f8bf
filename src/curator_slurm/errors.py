"""Errors users meet; each message names the file, field or variable at fault and how to fix it."""

from __future__ import annotations


class CuratorError(Exception):
    """Base of all curator-slurm errors."""


class InputError(CuratorError, ValueError):
    """Bad input data: the message starts with ``path`` or ``path:line``."""


class PipelineBuildError(CuratorError, ValueError):
    """The pipeline's stages do not fit together."""


class ShardConfigError(CuratorError, ValueError):
    """An environment variable that controls sharding has a bad value."""


class RunDirError(CuratorError, RuntimeError):
    """The run directory belongs to a different pipeline or input set."""


class PipelineFailedError(CuratorError, RuntimeError):
    """Some source tasks failed after all retries; ``result`` holds what did succeed."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class Interrupted(PipelineFailedError):
    """A stop signal (preemption, time limit) ended the run early; a re-run resumes it."""


class WorkerStartError(CuratorError, RuntimeError):
    """No worker process of a pool got through its start-up (e.g. a script without a main guard)."""


class OptionError(CuratorError, ValueError):
    """A bad option value (a command-line option or a :class:`~curator_slurm.slurm.submit.SubmitOptions` field)."""


class OutputSpaceError(CuratorError, OSError):
    """The filesystem of an output or run directory is full, or its quota is used up (ENOSPC, EDQUOT)."""
