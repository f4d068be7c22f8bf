"""The queue an executor takes a process's source tasks from: its own, in order, one chunk at a time."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from curator_slurm.tasks import Task


class WorkQueue:
    """The source tasks this process may start, handed out in order as an executor asks for them.

    Executors take tasks with :meth:`take` (or iterate) instead of holding a list, so that what a process does
    is decided as it goes: a task is handed out only when the executor is about to start it.

    Args:
        tasks: this process's source tasks, in the order to do them.
    """

    def __init__(self, tasks: Iterable[Task]) -> None:
        self._own: deque[Task] = deque(tasks)

    def __len__(self) -> int:
        """Tasks known and not handed out yet (more may come later: a hint for sizing, not a promise)."""
        return len(self._own)

    def take(self, n: int = 1) -> list[Task]:
        """Up to ``n`` tasks to start now; an empty list when there is nothing left to do."""
        out: list[Task] = []
        while self._own and len(out) < n:
            out.append(self._own.popleft())
        return out

    def __iter__(self) -> Iterator[Task]:
        while chunk := self.take(1):
            yield chunk[0]

    def clear(self) -> None:
        """Hand out nothing more (a stop signal came)."""
        self._own.clear()


__all__ = ["WorkQueue"]
