"""The queue an executor takes a process's source tasks from: its own, in order, one chunk at a time; under
takeover, each group claimed as it is reached, then groups of other shards that no live process holds."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING

from curator_slurm.runs.inputs import position_base
from curator_slurm.tasks import Task

if TYPE_CHECKING:
    from curator_slurm.runs.takeover import Takeover, Work

logger = logging.getLogger(__name__)

#: A held claim is checked again (has another process taken it over?) at most this often, before a task starts.
RECHECK_SECONDS = 1.0


class WorkQueue:
    """The source tasks this process may start, handed out in order as an executor asks for them.

    Executors take tasks with :meth:`take` (or iterate) instead of holding a list, so that what a process does
    is decided as it goes: a task is handed out only when the executor is about to start it. Under takeover
    (``takeover`` given), the queue claims each group of this shard's tasks before it hands out the first of
    them, skips the groups another live process holds, and once its own are exhausted claims groups of other
    shards (:meth:`Takeover.steal`); executors need not know. A task is handed out only under a claim this
    process holds, checked again before each task at most every :data:`RECHECK_SECONDS`.

    Args:
        tasks: this process's source tasks, in the order to do them (without takeover).
        takeover: this process's share of the work under takeover, or None.
    """

    def __init__(self, tasks: Iterable[Task] = (), takeover: Takeover | None = None) -> None:
        self.takeover = takeover
        self._current: deque[Task] = deque() if takeover is not None else deque(tasks)
        self._groups: Iterator[Work] | None = takeover.own_work() if takeover is not None else None
        self._work: Work | None = None
        self._checked = 0.0
        self._exhausted = False
        #: Source tasks of other shards handed out, by id: the index of the shard that owns each.
        self.taken: dict[str, int] = {}
        #: Tasks of this shard it stopped handing out because another process took their claim over.
        self.lost = 0
        #: What the source tasks taken over read (``runs.inputs.input_states``), by id, for their done records.
        self.inputs: dict[str, dict] = {}
        #: Where the documents of the source tasks taken over sit (``runs.inputs.position_base``), by id.
        self.positions: dict[str, str | None] = {}

    def __len__(self) -> int:
        """Tasks known and not handed out yet, this shard's groups not reached yet included (fewer may come, if
        other processes take some, or more, from other shards: a hint for sizing, not a promise)."""
        own = self.takeover.own_left if self.takeover is not None and self._groups is not None else 0
        return len(self._current) + own

    def __bool__(self) -> bool:
        """False once it has handed out everything (:meth:`take` found nothing more, or :meth:`clear`)."""
        return not self._exhausted

    def take(self, n: int = 1) -> list[Task]:
        """Up to ``n`` tasks to start now; an empty list when there is nothing left to do."""
        out: list[Task] = []
        while len(out) < n and not self._exhausted:
            if not self._current:
                self._next()
                continue
            if self._work is not None and self._superseded():
                continue
            task = self._current.popleft()
            if self._work is not None and self.takeover is not None and self._work.shard != self.takeover.me:
                self.taken[task.task_id] = self._work.shard
                self.positions[task.task_id] = position_base(task)
            out.append(task)
        return out

    def prime(self) -> int:
        """:func:`len`, after claiming the next group when none is at hand: whether there is work at all."""
        if not self._current and not self._exhausted:
            self._next()
        return len(self)

    def _next(self) -> None:
        """The next group to hand out: this shard's next, else one of another shard; none: exhausted."""
        work = None
        if self._groups is not None:
            work = next(self._groups, None)
            if work is None and self.takeover is not None:
                self._groups = None
        if work is None and self.takeover is not None:
            work = self.takeover.steal()
        if work is None:
            self._exhausted = True
            self._work = None
            return
        self._work, self._checked = work, time.monotonic()
        self._current = deque(work.tasks)
        self.inputs.update(work.inputs)

    def _superseded(self) -> bool:
        """Whether another process took the held claim over (it judged this one dead): its tasks that were
        not handed out are dropped (that process does them)."""
        now = time.monotonic()
        if self._work is None or self.takeover is None or now - self._checked < RECHECK_SECONDS:
            return False
        self._checked = now
        if not self.takeover.board.superseded(self._work.claim):
            return False
        logger.warning(
            f"another process took over group {self._work.claim.group} of shard {self._work.shard} (it judged this "
            f"one dead); leaving it the {len(self._current)} task(s) of that group not started here"
        )
        if self._work.shard == self.takeover.me:
            self.lost += len(self._current)
        self._current.clear()
        return True

    def __iter__(self) -> Iterator[Task]:
        while chunk := self.take(1):
            yield chunk[0]

    def clear(self) -> None:
        """Hand out nothing more (a stop signal came)."""
        self._current.clear()
        self._exhausted = True

    def finish(self) -> None:
        """The run ended with every task handed out done: takers need not look at this shard again."""
        if self.takeover is not None and self._exhausted and self._groups is None:
            self.takeover.finish()


def work_ahead(sources: Sized | WorkQueue) -> int:
    """How many source tasks an executor can count on now (a :class:`WorkQueue` claims its next group first)."""
    return sources.prime() if isinstance(sources, WorkQueue) else len(sources)


__all__ = ["RECHECK_SECONDS", "WorkQueue", "work_ahead"]
