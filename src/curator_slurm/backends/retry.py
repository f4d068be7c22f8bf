"""What a failure becomes, the same for every executor: which errors are worth another attempt, how long
to wait before it, which end the run at once, and the :class:`FailedTask` recorded for a task that gave up
(a stage raised, returned something that is not a task, or its worker process died)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from curator_slurm.errors import InputError, OutputError, OutputSpaceError, is_out_of_space, out_of_space
from curator_slurm.stages.base import ProcessingStage
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


@dataclass(frozen=True)
class Crash:
    """What to do with a task whose worker process died: ``"alone"``: run it again at once, on its own (it
    shared the dead worker with other tasks, so which one killed it is unknown); ``"retry"``: run it again,
    still alone, ``delay`` seconds from now; ``"fail"``: give up and record it failed."""

    action: str
    delay: float = 0.0


@dataclass(frozen=True)
class CrashPolicy:
    """What a worker's death means for the tasks it was running, the same for LocalExecutor and RayExecutor.

    Every death counts against every task the dead worker was running (an executor that cannot tell which
    of its workers died, as a broken process pool, counts it against all it had in flight). A task that
    shared the death with others runs again alone, at once, so the culprit is found without blaming the
    others; a task that dies alone ``max_attempts`` times in all is failed; before that it runs again
    after the same back-off as a raised exception (:func:`retry_delay`)."""

    max_attempts: int
    backoff: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts={self.max_attempts}: a task gets at least one attempt")

    def after_death(self, deaths: int, alone: bool) -> Crash:
        """The verdict for a task whose worker died: ``deaths`` counted against it so far, this one included;
        ``alone``: whether it was the only task the dead worker (or pool) was running."""
        if not alone:
            return Crash("alone")
        if deaths >= self.max_attempts:
            return Crash("fail")
        return Crash("retry", retry_delay(self.backoff, deaths))


def worker_died(task: Task, stage: str, where: str, deaths: int, error: BaseException | None = None) -> FailedTask:
    """The :class:`FailedTask` of a task that killed its worker ``deaths`` times (``where``: which worker)."""
    last = f"; last error: {type(error).__name__}: {_first_line(error)}" if error is not None else ""
    return failed_task(
        task,
        stage,
        f"WorkerDied: the {where} died {deaths} times while running this source task "
        f"(killed, out of memory, or a crash in native code){last}",
        traceback=str(error) if error is not None else "",
        attempts=deaths,
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def remove_dead_writers_files(stages: list[ProcessingStage], pids: Collection[int], log: Any) -> int:
    """Delete what the writers among ``stages`` left half-written in the killed processes ``pids`` (hidden
    temporary files; a final name is only ever written by a rename, so no output is lost); returns how many.
    Both executors call it when a worker dies."""
    removed = 0
    for stage in stages:
        remove = getattr(stage, "remove_temporaries", None)  # writers, the shuffle's sorted-file writer
        if remove is not None and pids:
            names = remove(pids)
            if names:
                removed += len(names)
                where = getattr(stage, "path", stage.name)
                log.info(f"removed {len(names)} temporary file(s) that killed workers left in {where}")
    return removed


__all__ = [
    "MAX_RETRY_DELAY",
    "NOT_RETRIED",
    "Crash",
    "CrashPolicy",
    "describe",
    "failed_task",
    "remove_dead_writers_files",
    "retry_delay",
    "stop_if_out_of_space",
    "worker_died",
]
