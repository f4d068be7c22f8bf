"""Stop signals: the driver turns them into "start no new source task" with a grace period for the work in flight;
workers leave them to the driver; handlers that a library replaces (``ray.init``) are put back."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from curator_slurm.shard import JobInfo

#: What a stop means: preemption (SIGTERM, also `scancel`) or a time limit's warning (``--signal=B:USR1@...``).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)

#: Every signal whose handler the driver may have set (:class:`StopSignal`; SIGINT and SIGALRM by the user).
DRIVER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)

logger = logging.getLogger(__name__)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def save_handlers(signals: Iterable[int]) -> dict[int, Any]:
    """The current handler of each of ``signals`` ({} outside the main thread, where none can be set)."""
    return {sig: signal.getsignal(sig) for sig in signals} if _in_main_thread() else {}


def restore_handlers(saved: dict[int, Any]) -> None:
    """Put back what :func:`save_handlers` saw; a handler not set from Python (``None``) stays as it is."""
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


@contextmanager
def handlers_kept(signals: Iterable[int] = DRIVER_SIGNALS) -> Iterator[None]:
    """Undo whatever the body does to the handlers of ``signals`` (``ray.init`` makes SIGTERM exit at once)."""
    saved = save_handlers(signals)
    try:
        yield
    finally:
        restore_handlers(saved)


def ignore_stop_signals() -> None:
    """In a worker process: stop signals are the driver's business (it lets in-flight work finish, then ends
    its workers), and SIGUSR1/2 would otherwise kill the worker. SIGINT too: Ctrl-C reaches the whole process
    group. SIGTERM is left to the caller (a pool worker ends on it once orphaned; Ray stops its workers by it)."""
    if _in_main_thread():
        for sig in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_IGN)


class GraceExpired(BaseException):
    """Raised in the driver when in-flight work outlives the grace period after a stop signal.

    A BaseException so that no stage's ``except Exception`` swallows it."""


class StopSignal:
    """Turns SIGTERM, SIGUSR1 and SIGUSR2 into "start no new source task" (preemption, time limits), and
    Ctrl-C (SIGINT) too, so that it ends with the usual summary instead of a traceback; a second Ctrl-C
    abandons the in-flight work at once (still with the summary).

    In-flight source tasks get ``grace`` seconds to finish; then :class:`GraceExpired` is raised in the
    driver: by the next ``should_stop()`` check of the executor's loop, or, when the driver is busy in a
    stage's own code (``workers=1``), by a timer thread that sends the stop signal again to the main
    thread, whose handler then raises. SIGALRM is never used, so a stage may use it for its own time-outs.
    Handlers are installed only in the main thread and restored on exit.

    Args:
        grace: seconds the in-flight source tasks get after a stop signal.
        log: the logger that says what the signal did.
    """

    SIGNALS = (*STOP_SIGNALS, signal.SIGINT)

    def __init__(self, grace: float, log: Any) -> None:
        self.grace, self.log = grace, log
        self.signum: int | None = None
        self.deadline: float | None = None
        self._old: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        self._leaving = False

    def __enter__(self) -> StopSignal:
        self._old = save_handlers(self.SIGNALS)
        for sig in self._old:
            signal.signal(sig, self._stop)
        return self

    def __exit__(self, *exc: object) -> None:
        self._leaving = True  # the timer's signal, if already on its way, now changes nothing
        if self._timer is not None:
            self._timer.cancel()
            # Gone before the handlers are restored: its signal must not reach the caller's handler (SIGTERM's
            # default ends the process), and no thread of ours may outlive the run (a pool forks only when
            # the driver runs no other thread).
            self._timer.join()
        restore_handlers(self._old)

    def __call__(self) -> bool:
        """Whether to start no new source task; raises :class:`GraceExpired` once the grace period is over."""
        if self.expired():
            raise GraceExpired()
        return self.signum is not None

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def name(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum is not None else None

    def _stop(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            if signum == signal.SIGINT and not self._leaving:  # Ctrl-C again: do not wait for the grace period
                self.deadline = time.monotonic()
                raise GraceExpired()
            if self.expired() and not self._leaving:  # the timer's interruption (or a late signal) after the grace
                raise GraceExpired()
            return
        self.signum = signum
        self.deadline = time.monotonic() + self.grace
        self.log.warning(
            f"received {signal.Signals(signum).name}: starting no new source tasks; in-flight ones get "
            f"{self.grace:.0f} s to finish" + (" (Ctrl-C again abandons them)" if signum == signal.SIGINT else "")
        )
        # A daemon thread, started only now: before a stop signal the driver has no thread of ours (its
        # workers are forked only while it runs none).
        # The signal itself, sent to the main thread: unlike _thread.interrupt_main it also wakes a
        # blocking call (a stage sleeping or reading) so that the handler runs at once.
        main = threading.main_thread().ident
        assert main is not None
        self._timer = threading.Timer(self.grace, signal.pthread_kill, args=(main, signum))
        self._timer.daemon = True
        self._timer.start()


def requeue(job: JobInfo) -> bool:
    """Ask Slurm to requeue this job (it must have been submitted with ``--requeue``); True on success.

    After the requeue the job starts again with ``SLURM_RESTART_COUNT`` one higher and resumes from
    the ledger.
    """
    import shutil  # here, not at the top: every array task imports this module, few ever requeue
    import subprocess

    if not job.job_id:
        logger.warning("requeue requested, but this process is not part of a Slurm job; not requeued")
        return False
    if shutil.which("scontrol") is None:
        logger.warning("requeue requested, but scontrol is not on PATH; not requeued")
        return False
    proc = subprocess.run(["scontrol", "requeue", job.job_id], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        logger.warning(f"scontrol requeue {job.job_id} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return False
    logger.info(f"requeued job {job.job_id}; it will resume from the ledger")
    return True


__all__ = [
    "DRIVER_SIGNALS",
    "STOP_SIGNALS",
    "GraceExpired",
    "StopSignal",
    "handlers_kept",
    "ignore_stop_signals",
    "requeue",
    "restore_handlers",
    "save_handlers",
]
