"""Live progress: one small JSON file per working process, ``<run dir>/progress/<host>-<pid>.json``, saying what it
is doing now, replaced atomically about every ``interval`` seconds (by a timer thread while a batch is inside a
stage) and removed as the process ends (a killed one's stays). Read by :mod:`curator_slurm.runs.progress_read`."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Protocol

from curator_slurm.errors import RunDirError
from curator_slurm.runs.layout import PROGRESS_DIR
from curator_slurm.runs.liveness import process_alive, process_start
from curator_slurm.runs.readfile import load_json
from curator_slurm.runs.stats import StatsFile

#: The directory of a run directory that holds the progress files.
#: Seconds between two publications of one process, by default (``CURATOR_PROGRESS_SECONDS``).
DEFAULT_INTERVAL = 10.0
#: The shortest wait of the timer thread that publishes while a batch is inside a stage (interval 0 publishes
#: at every batch; the thread then looks this often).
MIN_BEAT = 0.1


@dataclass(frozen=True)
class ProgressTarget:
    """Where and as whom the processes of one run publish (picklable: it is handed to worker processes).

    Args:
        run_dir: the run directory.
        shard: the shard's label (``3/16``).
        job: the Slurm array task (``123_4``) or job id, None outside Slurm.
        interval: seconds between two publications of one process at most (0: at every batch).
        driver: the pid of the process that runs the shard (its workers' files name it).
    """

    run_dir: str
    shard: str
    job: str | None
    interval: float = DEFAULT_INTERVAL
    driver: int = 0


class Publisher:
    """One process's progress file: ``update(**fields)`` changes what it says, ``publish()`` writes it (to a
    hidden temporary name, then renamed over the old one), ``close()`` removes it. Writing is best effort: a
    full or read-only run directory loses progress, never work.

    Args:
        target: where to publish and the shard's identity.
        role: ``"driver"`` (the process that runs the shard) or ``"worker"`` (a process it started).
        clock: the monotonic clock that spaces publications (tests pass their own).
    """

    def __init__(self, target: ProgressTarget, role: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.target, self.clock = target, clock
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.directory = os.path.join(target.run_dir, PROGRESS_DIR)
        self.path = os.path.join(self.directory, f"{self.host}-{self.pid}.json")
        self.state: dict[str, Any] = {
            "role": role,
            "shard": target.shard,
            "job": target.job,
            "host": self.host,
            "pid": self.pid,
            "start": process_start(self.pid),
            "driver": target.driver or self.pid,
            "interval": target.interval,
            "started": round(time.time(), 3),
        }
        self.next = 0.0  # clock() after which the next publication is due
        self.written = False
        #: Held while the state changes or is written: the timer thread of :class:`TaskProgress` publishes too.
        self.lock = threading.RLock()
        _PUBLISHERS.add(self)

    def due(self) -> bool:
        return self.clock() >= self.next

    def update(self, **fields: Any) -> None:
        with self.lock:
            self.state.update(fields)

    def publish(self) -> None:
        """Write the file now."""
        with self.lock:
            self.next = self.clock() + self.target.interval
            self.state["updated"] = round(time.time(), 3)
            data = json.dumps(self.state, separators=(",", ":")).encode()
            self._write(data)

    def _write(self, data: bytes) -> None:
        temporary = os.path.join(self.directory, f".{self.host}-{self.pid}.tmp")
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(temporary, "wb") as f:
                f.write(data)
            os.replace(temporary, self.path)
            self.written = True
        except OSError:
            pass

    def close(self) -> None:
        """Remove the file: this process no longer works in the run."""
        if self.written:
            with suppress(OSError):
                os.unlink(self.path)
            self.written = False


class _Stats(Protocol):
    rows_in: int
    rows_out: int


class _Adapter(Protocol):
    """A stage adapter as progress reads it (read-only: an adapter's ``stats`` is its own ``StageStats``)."""

    @property
    def stats(self) -> _Stats: ...


#: Every publisher of this process: a forked child gets fresh locks (one held by a thread at the fork would
#: never be released in the child, where that thread does not exist).
_PUBLISHERS: weakref.WeakSet[Publisher] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for publisher in list(_PUBLISHERS):
        publisher.lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class TaskProgress:
    """What a process publishes about the source task it is running: :meth:`begin` it, :meth:`tick` after
    every batch a stage handled (a clock read; the file is written only when due), :meth:`end` it. The counts
    are the stage adapters' own (documents the first stage made or took, documents the last one let out).
    Each done task's stage stats go into the process's stats file (:meth:`count`). While a task is in hand, a
    daemon thread publishes whenever the file is due, so a task whose one batch
    spends minutes in a stage shows its documents read and stays fresh (a frozen process stops refreshing it);
    the thread starts with the first task of each process (a forked child starts its own) and :meth:`close`
    stops it.

    Args:
        publisher: this process's progress file.
        adapters: the stage adapters the source tasks go through, the first stage after the source first.
    """

    def __init__(self, publisher: Publisher, adapters: Sequence[_Adapter]) -> None:
        self.publisher, self.adapters = publisher, adapters
        self.task: str | None = None
        self.began = 0.0
        self.done = 0
        self.shown = False  # the file names the task in hand
        self.thread: threading.Thread | None = None
        self.thread_pid = 0  # the process the thread runs in (a forked child has none)
        self.wake = threading.Event()
        self.stopped = False
        target = publisher.target
        self.stats = StatsFile(target.run_dir, target.shard, target.job, target.interval)

    def count(self, stats: Sequence[Any], seconds: float) -> None:
        """A source task ended done: its stages' stats go into this process's stats file (:mod:`.stats`)."""
        self.stats.add(stats, seconds)

    def begin(self, task_id: str, size: int | None) -> None:
        if self.thread_pid != os.getpid():
            self._start_thread()
        with self.publisher.lock:
            self.task, self.began, self.shown = task_id, time.perf_counter(), False
            self.publisher.update(source_task=task_id, bytes=size, task_started=round(time.time(), 3))
            self.tick()

    def tick(self) -> None:
        if self.task is None or not self.publisher.due():
            return
        with self.publisher.lock:
            self._publish()

    def _publish(self) -> None:
        if self.task is None:
            return
        first, last = self.adapters[0].stats, self.adapters[-1].stats
        seconds = time.perf_counter() - self.began
        docs_in = first.rows_in or first.rows_out
        self.publisher.update(
            docs_in=docs_in,
            docs_out=last.rows_out,
            seconds=round(seconds, 3),
            docs_per_second=round(docs_in / seconds, 1) if seconds > 0 else None,
            tasks_done=self.done,
        )
        self.publisher.publish()
        self.shown = True

    def end(self) -> None:
        """The task in hand is over; a file that named it now says the process is between tasks."""
        with self.publisher.lock:
            self.done += 1
            self.task = None
            if self.shown:
                self.publisher.update(
                    source_task=None, docs_in=0, docs_out=0, seconds=0.0, docs_per_second=None, tasks_done=self.done
                )
                self.publisher.publish()
                self.shown = False

    def _start_thread(self) -> None:
        self.wake, self.stopped, self.thread_pid = threading.Event(), False, os.getpid()
        self.thread = threading.Thread(target=self._beat, name="curator-progress", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        """The timer thread: publish whenever the file is due while a task is in hand."""
        publisher = self.publisher
        interval = max(publisher.target.interval, MIN_BEAT)
        while not self.stopped:  # never woken by a task (a thread switch per task costs more than a look)
            wait = max(publisher.next - publisher.clock(), MIN_BEAT) if self.task is not None else interval
            self.wake.wait(wait)
            self.wake.clear()
            if self.stopped:
                return
            if self.task is not None and publisher.due():
                with publisher.lock:
                    self._publish()

    def close(self) -> None:
        """Stop the timer thread and write the stats file (the progress file stays: :meth:`Publisher.close`
        removes it)."""
        self.stats.close()
        self.stopped = True
        self.wake.set()
        if self.thread is not None and self.thread_pid == os.getpid() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        self.thread, self.thread_pid = None, 0


@dataclass
class RunProgress:
    """A shard's progress while its run session drives it: the driver's file (``publisher``) and what its
    executor hands to the worker processes it starts (``target``)."""

    target: ProgressTarget
    publisher: Publisher

    @classmethod
    def start(cls, run_dir: str, shard: str, job: str | None, interval: float, total: int) -> RunProgress:
        """The driver's progress, published at once (with ``total`` source tasks to do), after removing the
        files that processes of this host which are gone (killed) left behind."""
        prune(run_dir)
        target = ProgressTarget(run_dir, shard, job, interval, os.getpid())
        publisher = Publisher(target, "driver")
        publisher.update(tasks_total=total, tasks_done=0, tasks_failed=0, docs_in=0, docs_out=0)
        publisher.publish()
        return cls(target, publisher)

    def finished(self, failed: bool, rows_in: int, rows_out: int) -> None:
        """A source task of this shard ended (in any process): counted, published when due."""
        p = self.publisher
        key = "tasks_failed" if failed else "tasks_done"
        p.update(
            **{key: int(p.state.get(key, 0)) + 1},
            shard_docs_in=int(p.state.get("shard_docs_in", 0)) + rows_in,
            shard_docs_out=int(p.state.get("shard_docs_out", 0)) + rows_out,
        )
        if p.due():
            p.publish()

    def close(self) -> None:
        """The shard's run is over: its file goes, and so do those its workers left (they have ended)."""
        self.publisher.close()
        prune(self.target.run_dir, driver=self.target.driver)


def prune(run_dir: str, driver: int | None = None) -> None:
    """Remove the progress files of processes of this host that are gone; with ``driver``, also every file of
    that driver's processes that are gone (its workers, at its end)."""
    directory = os.path.join(run_dir, PROGRESS_DIR)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    host = socket.gethostname()
    for name in names:
        if not name.startswith(f"{host}-") or not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:  # a regular file of bounded size (runs.readfile): a FIFO in its place is not waited on
            state = load_json(path)
            gone = process_alive(state.get("host"), int(state["pid"]), state.get("start")) is False
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RunDirError):
            continue
        if gone and (driver is None or state.get("driver") == driver):
            with suppress(OSError):
                os.unlink(path)


__all__ = [
    "DEFAULT_INTERVAL",
    "MIN_BEAT",
    "PROGRESS_DIR",
    "ProgressTarget",
    "Publisher",
    "RunProgress",
    "TaskProgress",
    "prune",
]
