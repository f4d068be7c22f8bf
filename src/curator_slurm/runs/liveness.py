"""Which processes are working in a run directory right now: one marker per process, ``live/<host>-<pid>``, that
`status` can check, and its heartbeat. Design: docs/design.md, "Status tells the truth, fast"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from curator_slurm.runs.layout import LIVE_DIR


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), None where unknown or when
    the process has ended (a zombie, not reaped yet, does no work): with the pid it tells a process from a
    later one that reused its pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


@contextmanager
def marked(run_dir: str, what: str, beat: float | None = None) -> Iterator[float | None]:
    """While in the body, ``run_dir`` holds this process's marker (``what`` says what it does there); with
    ``beat``, a heartbeat touches it every ``beat`` seconds (:func:`heartbeat`). Yields ``beat`` when the
    heartbeat runs, else None."""
    host, pid = socket.gethostname(), os.getpid()
    directory = os.path.join(run_dir, LIVE_DIR)
    path = os.path.join(directory, f"{host}-{pid}")
    try:
        os.makedirs(directory, exist_ok=True)
        _prune(directory, host)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"host": host, "pid": pid, "start": _start_time(pid), "what": what}, f)
    except OSError:  # a read-only or full run directory: the run reports that itself; status then knows less
        path = ""
    beating = heartbeat(path, beat) if path and beat else None
    try:
        yield beat if beating is not None else None
    finally:
        if beating is not None:
            beating.kill()
            beating.wait()
        if path:
            with suppress(OSError):
                os.unlink(path)


def heartbeat(path: str, seconds: float) -> subprocess.Popen[bytes] | None:
    """A small process that touches ``path`` every ``seconds`` while this process lives, so that processes
    of other hosts can tell it is alive by the file's age (``runs.claims.holder_alive``): a process, not a
    thread, so that it beats while this one is busy in a stage and worker processes can still be forked. It
    ends within ``seconds`` of this process's death, and with the job (it is in the same process group);
    None when it cannot start."""
    loop = 'while kill -0 "$1" 2>/dev/null && touch -c "$2" 2>/dev/null; do sleep "$3"; done'
    try:
        return subprocess.Popen(
            ["sh", "-c", loop, "curator-heartbeat", str(os.getpid()), path, f"{seconds:g}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _prune(directory: str, host: str) -> None:
    """Remove the markers of processes of this host that ended without removing them (killed)."""
    for name in os.listdir(directory):
        if not name.startswith(f"{host}-"):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                marker = json.load(f)
            if not _same_process(int(marker["pid"]), marker.get("start")):
                os.unlink(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue


@dataclass(frozen=True)
class Live:
    """The processes of a run directory: ``alive`` (checked on this host), ``elsewhere`` (markers of other
    hosts, which cannot be checked from here) and ``gone`` (markers of processes that ended without
    removing them: killed)."""

    alive: tuple[str, ...] = ()
    elsewhere: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()

    @property
    def running(self) -> int:
        """How many may still be working."""
        return len(self.alive) + len(self.elsewhere)


def live_processes(run_dir: str) -> Live:
    """What the markers in ``run_dir`` say, each checked against the processes of this host."""
    directory = os.path.join(run_dir, LIVE_DIR)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return Live()
    host = socket.gethostname()
    alive, elsewhere, gone = [], [], []
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                marker = json.load(f)
            pid = int(marker["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or removed while we looked
        label = f"{marker.get('host')}:{pid} ({marker.get('what')})"
        if marker.get("host") != host:
            elsewhere.append(label)
        elif _same_process(pid, marker.get("start")):
            alive.append(label)
        else:
            gone.append(label)
    return Live(tuple(alive), tuple(elsewhere), tuple(gone))


def _same_process(pid: int, start: str | None) -> bool:
    """Whether ``pid`` is still the process that wrote a marker (same start time, where it is known)."""
    if start is not None:
        return _start_time(pid) == start
    return _pid_exists(pid)


def process_start(pid: int) -> str | None:
    """What a marker records of process ``pid`` to tell it from a later process with the same pid."""
    return _start_time(pid)


def process_alive(host: str | None, pid: int, start: str | None) -> bool | None:
    """Whether the process ``pid`` of ``host`` that recorded ``start`` (:func:`process_start`) still runs: None
    for another host's (it cannot be checked from here)."""
    if host != socket.gethostname():
        return None
    return _same_process(pid, start)


def refuse_if_live(run_dirs: list[str], what: str) -> None:
    """Refuse to start ``what`` while a process (of this host, or one that cannot be checked) works in
    any of ``run_dirs``: both would take the same source tasks and do them twice."""
    for directory in run_dirs:
        live = live_processes(directory)
        if live.running:
            from curator_slurm.errors import OptionError

            raise OptionError(
                f"{live.running} process(es) are working in {directory} right now "
                f"({', '.join((*live.alive, *live.elsewhere)[:3])}); {what} beside them would do their source "
                "tasks twice. Wait for them (curator-slurm status), or stop them first"
            )


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = [
    "LIVE_DIR",
    "Live",
    "heartbeat",
    "live_processes",
    "marked",
    "process_alive",
    "process_start",
    "refuse_if_live",
]
