"""Errors users meet; each message names the file, field or variable at fault and how to fix it."""

from __future__ import annotations

import errno
import os
import sys
from typing import Any


class CuratorError(Exception):
    """Base of all curator-slurm errors."""


class InputError(CuratorError, ValueError):
    """Bad input data: the message starts with ``path`` or ``path:line``."""


class PipelineBuildError(CuratorError, ValueError):
    """The pipeline's stages do not fit together."""


class FingerprintError(PipelineBuildError):
    """A stage holds a value that cannot be put into the run fingerprint in a form that is the same in every
    process (a lock, a loaded model); the message names the stage, the attribute and the fix."""


class FilterError(CuratorError, TypeError):
    """A document filter returned something a filter cannot use (a keep decision that is not a bool, scores
    that do not fit one column); the message names the filter class and what it returned. Not retried."""


class SettingError(CuratorError, ValueError):
    """A ``CURATOR_*`` or ``SLURM_*`` variable has a value that cannot be used; the message names it."""


class ShardConfigError(SettingError):
    """A setting that decides this process's shard (count, index, strategy, source list) is invalid."""


class RunDirError(CuratorError, RuntimeError):
    """The run directory belongs to a different pipeline or input set."""


class PipelineFailedError(CuratorError, RuntimeError):
    """Some source tasks failed after all retries; ``result`` holds what did succeed.

    Args:
        message: what failed, and what to do.
        result: the run's :class:`~curator_slurm.runs.results.PipelineResult`, or None.
    """

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class Interrupted(PipelineFailedError):
    """A stop signal (preemption, time limit) ended the run early; a re-run resumes it."""


class WorkerStartError(CuratorError, RuntimeError):
    """No worker process of a pool got through its start-up (e.g. a script without a main guard)."""


class OptionError(CuratorError, ValueError):
    """A bad option value (a command-line option or a :class:`~curator_slurm.slurm.submit.SubmitOptions` field)."""


class OutputError(CuratorError, OSError):
    """An output (or run) directory cannot be written: no permission, a read-only filesystem, a file in the way.
    The message names the place and the fix; retrying cannot help, so no executor retries it."""


class OutputSpaceError(CuratorError, OSError):
    """The filesystem of an output or run directory is full, or its quota is used up (ENOSPC, EDQUOT)."""


#: errno values of a full filesystem or an exhausted quota: nothing to retry until someone frees space.
OUT_OF_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_out_of_space(error: BaseException) -> bool:
    """Whether ``error`` says the filesystem is full or the quota used up."""
    return isinstance(error, OSError) and error.errno in OUT_OF_SPACE_ERRNOS


def out_of_space(error: OSError, directory: str | None = None) -> OutputSpaceError:
    """An :class:`OutputSpaceError` that names the directory (given, or that of the file in ``error``)
    and the remedy."""
    where = directory or (os.path.dirname(os.fspath(error.filename)) if error.filename else None)
    what = "the quota is used up" if error.errno == errno.EDQUOT else "no space left on the device"
    new = OutputSpaceError(
        f"{where or 'the output filesystem'}: {what} ({os.strerror(error.errno or 0)}). Free space there (or "
        "raise the quota, or write to another directory), then run the same command again: finished source "
        "tasks are skipped"
    )
    new.errno = error.errno
    return new


def _print_curator_error(kind: type[BaseException], error: BaseException, traceback: Any) -> None:
    """``sys.excepthook`` of a script that runs a pipeline: an uncaught :class:`CuratorError` (a run directory
    of other parameters, a bad setting, an output in the way, failed source tasks) is printed in one line,
    ``<script>: <error class>: <message>``, without a traceback (its message names the place and the fix); the
    interpreter then exits with status 1. Anything else is a bug: the previous hook prints its traceback."""
    if isinstance(error, CuratorError):
        script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "curator-slurm"
        print(f"{script}: {type(error).__name__}: {error}", file=sys.stderr)
        return
    _PREVIOUS_HOOK[0](kind, error, traceback)


_PREVIOUS_HOOK: list[Any] = [sys.__excepthook__]


def end_scripts_with_message() -> None:
    """Install :func:`_print_curator_error` as ``sys.excepthook`` (every run calls it), unless the script
    or its host (IPython, a debugger) installed a hook of its own."""
    if sys.excepthook is sys.__excepthook__:
        _PREVIOUS_HOOK[0] = sys.excepthook
        sys.excepthook = _print_curator_error
