"""A child process that extracts pages for an HTML extractor under a per-page time limit: a page that runs past
it (in C code a signal cannot interrupt) is stopped by killing the child, which is forked again for the next
page; a child that dies on a page is told from a time-out, by its signal or exit status."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What became of one page: ``value`` (the extractor's result) when ``kind`` is ``"ok"``; else ``kind``
    is ``"error"`` (the extractor raised: ``value`` is (exception type name, repr)), ``"timeout"`` or
    ``"died"`` (``value`` says how the child ended)."""

    kind: str
    value: Any = None


class ChildFailed(RuntimeError):
    """The extraction child could not start (its set-up raised): the real error, never a time-out."""


def _child_main(conn: Connection, stage: Any) -> None:
    """The child's loop: ``("begin",)`` resets per-task state, ``("page", i, html)`` extracts one page,
    ``("replay", pages)`` extracts pages whose results are not wanted (to rebuild per-task state)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the driver's handlers are not the child's to run
    for sig in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    _die_with_parent()
    try:
        stage.load()
    except BaseException as e:
        import traceback

        conn.send(("failed", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "begin":
            stage.begin()
        elif message[0] == "page":
            conn.send((message[1], *_extract(stage, message[2])))
        elif message[0] == "replay":
            for html in message[1]:
                _extract(stage, html)
            conn.send(("replayed",))


def _extract(stage: Any, html: str) -> tuple[str, Any]:
    try:
        return "ok", stage.extract(html)
    except Exception as e:
        return "error", (type(e).__name__, repr(e)[:500])


def _die_with_parent() -> None:
    """On Linux the kernel kills this child when its parent dies (a worker killed after its grace period)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class PagePool:
    """One forked child that runs ``stage.extract`` page by page, each under ``limit`` seconds of wall time.

    Args:
        stage: the extractor (its ``load``, ``begin`` and ``extract`` run in the child; a copy is forked).
        limit: seconds a page may take before the child is killed and the page given up.
    """

    def __init__(self, stage: Any, limit: float) -> None:
        self.stage, self.limit = stage, limit
        self.pid: int | None = None
        self.conn: Connection | None = None
        self.restarts = 0
        self._feeder: _Feeder | None = None

    # --- the child ------------------------------------------------------------------------------------
    def start(self) -> None:
        parent, child = Pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the parent's code
            code = 0
            try:
                parent.close()
                _child_main(child, self.stage)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        child.close()
        self.pid, self.conn = pid, parent
        try:
            ready = parent.recv() if parent.poll(max(60.0, self.limit)) else ("failed", "no answer within 60 s")
        except (EOFError, OSError):
            ready = ("failed", f"the child ended while setting up ({self._reap()})")
        if ready[0] != "ready":
            self.kill()
            raise ChildFailed(f"{type(self.stage).__name__}: the extraction process could not start: {ready[1]}")

    def kill(self) -> str:
        """Kill the child (if any) and say how it ended."""
        how = "not running"
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            how = self._reap(block=True)
        if self._feeder is not None:  # blocked sending to the child, if at all, until its death broke the pipe
            self._feeder.stop()
            self._feeder = None
        if self.conn is not None:
            self.conn.close()
        self.pid, self.conn = None, None
        return how

    def _reap(self, block: bool = False) -> str:
        if self.pid is None:
            return "not running"
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return "gone"
        if pid == 0:
            return "still running"
        if os.WIFSIGNALED(status):
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        return f"exit status {os.WEXITSTATUS(status)}"

    # --- pages ----------------------------------------------------------------------------------------
    def run(self, pages: list[str], replay: Callable[[int], list[str]]) -> Iterator[tuple[int, Outcome]]:
        """(index, outcome) of each of ``pages`` in order. The pages are handed to the child ahead of time, at
        most :data:`WINDOW` unanswered, by a thread of their own (so a page that never ends blocks only that
        thread); a page's time starts when the child answers the page before it (or when the first is sent).
        After a kill, the new child is first handed ``replay(i)``: the pages before ``i`` whose per-task state
        (a duplicate-paragraph cache) it must rebuild, then the pages after the one killed."""
        if self.conn is None:
            self.start()
        assert self.conn is not None
        self.conn.send(("begin",))
        i = 0
        while i < len(pages):
            self._feeder = feeder = _Feeder(self.conn, pages, i)
            started, restart = time.monotonic(), False
            for k in range(i, len(pages)):
                outcome = self._wait(started + self.limit)
                started = time.monotonic()
                if outcome is None or outcome.kind == "died":
                    outcome = outcome or Outcome("timeout", self.kill())
                    self._restart(replay(k + 1))
                    restart = True
                feeder.answered()
                yield k, outcome
                if restart:
                    i = k + 1
                    break
            else:
                i = len(pages)
            feeder.stop()

    def _wait(self, deadline: float) -> Outcome | None:
        """The outcome of the page the child works on; None when ``deadline`` passes first."""
        assert self.conn is not None
        try:
            if not self.conn.poll(max(deadline - time.monotonic(), 0.0)):
                return None
            message = self.conn.recv()
        except (EOFError, OSError):
            return Outcome("died", self.kill())
        return Outcome(message[1], message[2])

    def _restart(self, replay: list[str]) -> None:
        self.kill()
        self.restarts += 1
        self.start()
        assert self.conn is not None
        self.conn.send(("begin",))
        if replay:
            self.conn.send(("replay", replay))
            ok = self.conn.poll(self.limit * len(replay) + 60)
            if not ok or self.conn.recv() != ("replayed",):
                self.kill()
                self.start()
                self.conn.send(("begin",))


#: Pages handed to the extraction child ahead of the one it works on (so it never waits for the parent).
WINDOW = 8


class _Feeder:
    """A thread sending ``pages[first:]`` to the child, at most :data:`WINDOW` of them unanswered; it ends at
    the last page, at :meth:`stop`, or when the child is gone (the pipe broken)."""

    def __init__(self, conn: Connection, pages: list[str], first: int) -> None:
        self.conn, self.pages, self.next = conn, pages, first
        self.slots = threading.Semaphore(WINDOW)
        self.stopped = False
        self.thread = threading.Thread(target=self._send, name="extraction-feeder", daemon=True)
        self.thread.start()

    def _send(self) -> None:
        while self.next < len(self.pages):
            self.slots.acquire()
            if self.stopped:
                return
            try:
                self.conn.send(("page", self.next, self.pages[self.next]))
            except (OSError, ValueError):  # the child was killed (or its pipe closed): nothing more to send
                return
            self.next += 1

    def answered(self) -> None:
        self.slots.release()

    def stop(self) -> None:
        """End the thread (after :meth:`PagePool.kill` when it may be blocked sending to a stuck child)."""
        self.stopped = True
        self.slots.release()
        self.thread.join()
