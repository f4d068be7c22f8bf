"""What a failure becomes, the same for every executor: which errors are worth another attempt, how long
to wait before it, which end the run at once, and the :class:`FailedTask` recorded for a task that gave up
(a stage raised, returned something that is not a task, or its worker process died)."""

from __future__ import annotations

from typing import Any

from curator_slurm.errors import InputError, OutputError, OutputSpaceError, is_out_of_space, out_of_space
from curator_slurm.tasks import FailedTask, Task

#: Errors that retrying cannot help, so they fail on the first attempt: bad data (:class:`InputError`), an
#: output place that cannot be written (:class:`OutputError`: no permission, read-only), a programming error
#: in a stage (a wrong argument or attribute, an undefined name, a missing module).
NOT_RETRIED: tuple[type[BaseException], ...] = (
    InputError,
    OutputError,
    TypeError,
    AttributeError,
    NameError,
    ImportError,
)

#: The longest wait between two attempts, however many there were.
MAX_RETRY_DELAY = 60.0


def retry_delay(backoff: float, attempt: int) -> float:
    """Seconds to wait before the attempt after failed attempt number ``attempt`` (1 for the first):
    ``backoff`` doubled with every failure, at most :data:`MAX_RETRY_DELAY`, so a flaky filesystem gets
    time to recover without a stuck task waiting for ever."""
    return min(backoff * 2 ** (attempt - 1), MAX_RETRY_DELAY)


def stop_if_out_of_space(error: BaseException) -> None:
    """A full filesystem or quota fails the run at once, not every source task after retries: no task can
    succeed (nor its failure be recorded) until someone frees space."""
    if isinstance(error, OutputSpaceError):
        raise error
    if is_out_of_space(error):
        assert isinstance(error, OSError)
        raise out_of_space(error) from error


def describe(task: Task) -> dict[str, Any]:
    """What the ledger says about a failed task: its id and its files (``metadata["files"]``, else the data
    of a file group, else none), so that a failure names the input to look at."""
    files = task.metadata.get("files")
    if files is None:
        files = task.data if isinstance(task.data, list) else []
    return {"task_id": task.task_id, "files": files}


def failed_task(
    task: Task, stage: str, error: BaseException | str, traceback: str = "", attempts: int = 1
) -> FailedTask:
    """The :class:`FailedTask` that stands for ``task`` once ``stage`` gave up on it after ``attempts``
    attempts: ``error`` is the last exception (shown as ``Type: message``) or a sentence of its own."""
    return FailedTask(
        source_id=task.source_id,
        dataset_name=task.dataset_name,
        metadata=describe(task),
        stage=stage,
        error=error if isinstance(error, str) else f"{type(error).__name__}: {error}",
        traceback=traceback,
        attempts=max(attempts, 1),
    )


__all__ = ["MAX_RETRY_DELAY", "NOT_RETRIED", "describe", "failed_task", "retry_delay", "stop_if_out_of_space"]
