"""A stage's outputs made one at a time: the adapter hands each on to the later stages before the stage makes
the next (a reader that yields bounded batches of a large source task)."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeGuard

from curator_slurm.backends.retry import NOT_RETRIED, failed_task, retry_delay, stop_if_out_of_space
from curator_slurm.runs.results import StageStats
from curator_slurm.tasks import DocumentBatch, NoneTask, Task

if TYPE_CHECKING:
    from curator_slurm.backends.adapter import BaseStageAdapter


def rows_of(task: Task) -> int:
    """Documents of a batch, the rows a written file group says it holds, else 0."""
    if isinstance(task, DocumentBatch):
        return task.num_items
    return int(task.metadata.get("rows", 0))


def is_lazy(entry: object) -> TypeGuard[Iterator[Any]]:
    """Whether a stage's entry for a task is an iterator of outputs (not a task, a list or None)."""
    return isinstance(entry, Iterator)


def _timed(stats: StageStats, entry: Iterator[Any], skip: int) -> Iterator[Any]:
    """The items of ``entry`` after the first ``skip``, the time spent making each added to ``stats``."""
    index = 0
    while True:
        start = time.perf_counter()
        try:
            item = next(entry)
        except StopIteration:
            return
        finally:
            stats.seconds += time.perf_counter() - start
        index += 1
        if index > skip:
            yield item


def drain(adapter: BaseStageAdapter, source: Task, entry: Iterator[Any]) -> Iterator[Task]:
    """The outputs the iterator ``entry`` makes of ``source``, one at a time, each with its lineage: its
    parent's when the iterator makes one output (as a stage returning one task), else its position
    (``-0``, ``-1``, ...; known by fetching the next output before handing on one). The time spent in the
    iterator is the stage's. An error fails ``source`` after the stage's retries, each retry skipping what
    was already handed on."""
    made = 0  # outputs (None included) fetched from the iterator, what lineage positions count
    held: tuple[Task, int] | None = None
    attempt, counted = 1, False
    lazy: Iterator[Any] | None = entry
    while True:
        try:
            if lazy is None:  # a retry: the stage starts the task again
                lazy = _again(adapter, source)
            for item in _timed(adapter.stats, lazy, skip=made - (held is not None)):
                if item is not None and not isinstance(item, Task):
                    adapter.stats.failures += 1
                    yield adapter._wrong_type(source, item)
                    return
                made += 1
                if held is not None:
                    yield adapter._handed_on(source, *held, single=False)
                held = None
                if item is not None and not isinstance(item, NoneTask):
                    counted = adapter._take_notes_of(item) or counted
                    held = (item, made - 1)
            break
        except Exception as error:
            stop_if_out_of_space(error)
            adapter._log_failure(source, attempt, error)
            if attempt > adapter.stage.max_retries or isinstance(error, NOT_RETRIED):
                adapter.stats.failures += 1
                yield failed_task(source, adapter.stage.name, error, traceback.format_exc(), attempt)
                return
            adapter.sleep(retry_delay(adapter.retry_backoff, attempt))
            attempt += 1
            lazy = None
            made -= held is not None  # the held output is made again
            held = None
    if held is not None:
        yield adapter._handed_on(source, *held, single=made == 1)
    if not counted:
        adapter.stats.rows_uncounted += rows_of(source)


def _again(adapter: BaseStageAdapter, source: Task) -> Iterator[Any]:
    """The stage's outputs of ``source`` made afresh (a retry), as an iterator whatever the stage returns."""
    entry = adapter.stage.process_batch([source])[0]
    return entry if is_lazy(entry) else iter(entry if isinstance(entry, list) else [entry])
