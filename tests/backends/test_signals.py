"""The stop signal on its own: what a signal does to the driver's loop, the grace period, handlers put
back, workers that leave stop signals to the driver. The end-to-end versions stop a real run
(test_stop_signal.py, test_grace_without_sigalrm.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from curator_slurm.runs.signals import (
    DRIVER_SIGNALS,
    STOP_SIGNALS,
    GraceExpired,
    StopSignal,
    handlers_kept,
    ignore_stop_signals,
    restore_handlers,
    save_handlers,
)
from support.helpers import clean_env


class Log:
    """What the stop signal logs, kept for the test to read."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, line: str) -> None:
        self.lines.append(line)


@pytest.fixture(autouse=True)
def _handlers_back() -> Iterator[None]:
    """Whatever a test does to the handlers, the next one starts from pytest's."""
    saved = save_handlers(DRIVER_SIGNALS)
    yield
    restore_handlers(saved)


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_a_stop_signal_means_start_no_new_source_task(sig: int) -> None:
    log = Log()
    with StopSignal(grace=600, log=log) as stop:
        assert stop() is False and stop.name is None
        os.kill(os.getpid(), sig)  # delivered to the main thread before kill() returns
        assert stop() is True
        assert stop.name == signal.Signals(sig).name
        os.kill(os.getpid(), sig)  # a second one within the grace period changes nothing
        assert stop() is True
    assert len(log.lines) == 1 and "in-flight ones get 600 s to finish" in log.lines[0]


def test_handlers_are_put_back_on_exit() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGUSR1, mine)
    before = save_handlers(STOP_SIGNALS)
    with StopSignal(grace=600, log=Log()):
        assert all(signal.getsignal(s) != before[s] for s in STOP_SIGNALS)
    assert save_handlers(STOP_SIGNALS) == before
    assert signal.getsignal(signal.SIGUSR1) is mine


def test_after_the_grace_period_the_check_raises() -> None:
    with pytest.raises(GraceExpired), StopSignal(grace=0.0, log=Log()) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        # The check raises, or the timer's repeated signal does, whichever comes first.
        for _ in range(1000):
            stop()
            time.sleep(0.01)


def test_no_thread_of_the_stop_signal_outlives_it() -> None:
    """Its timer thread is gone on exit, so a later pool may fork (LocalExecutor forks only while the driver
    runs no other thread) and the timer's signal never reaches the handler restored after it."""
    before = set(threading.enumerate())
    with StopSignal(grace=600, log=Log()) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop()  # the in-flight work finishes well within the grace period
    assert set(threading.enumerate()) == before


def test_a_driver_blocked_in_a_stage_is_interrupted_after_the_grace_period() -> None:
    """workers=1: the driver runs the stage itself; the timer's signal wakes it from a blocking call."""
    with pytest.raises(GraceExpired), StopSignal(grace=0.05, log=Log()):
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(30)  # never slept out: GraceExpired ends it


def test_grace_expired_gets_past_a_stage_that_catches_every_exception() -> None:
    assert issubclass(GraceExpired, BaseException) and not issubclass(GraceExpired, Exception)


def test_outside_the_main_thread_no_handler_is_touched() -> None:
    before = save_handlers(STOP_SIGNALS)
    seen: list[object] = []

    def in_thread() -> None:
        with StopSignal(grace=600, log=Log()) as stop:
            seen.append(stop())
        with handlers_kept():
            seen.append(save_handlers(STOP_SIGNALS))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [False, {}]
    assert save_handlers(STOP_SIGNALS) == before


def test_handlers_kept_undoes_what_a_library_does_to_them() -> None:
    """As ray.init replaces SIGTERM's handler with one that exits at once."""
    before = save_handlers([signal.SIGTERM, signal.SIGUSR1])
    with handlers_kept():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    assert save_handlers([signal.SIGTERM, signal.SIGUSR1]) == before


def test_a_worker_survives_the_stop_signals_its_driver_handles() -> None:
    code = (
        "import os, signal\n"
        "from curator_slurm.runs.signals import ignore_stop_signals\n"
        "ignore_stop_signals()\n"
        "for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):\n"
        "    os.kill(os.getpid(), sig)\n"
        "print('alive')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "alive"), done.stderr
    # Without it, the first of them ends the process (SIGUSR1's default action).
    plain = code.replace("ignore_stop_signals()\n", "")
    assert subprocess.run([sys.executable, "-c", plain], env=clean_env(), timeout=60).returncode == -signal.SIGUSR1


def test_ignore_stop_signals_leaves_sigterm_alone() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ignore_stop_signals()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)] == [signal.SIG_IGN] * 3
