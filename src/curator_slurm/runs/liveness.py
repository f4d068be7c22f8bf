"""Which processes are working in a run directory right now: one marker per process, ``live/<host>-<pid>``, that
`status` can check, and its heartbeat. Design: docs/design.md, "Status tells the truth, fast"."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from curator_slurm.errors import RunDirError
from curator_slurm.runs.layout import LIVE_DIR
from curator_slurm.runs.readfile import UnreadableFileError, count, load_json, number, text

logger = logging.getLogger(__name__)


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


#: A marker of another host with a heartbeat is stale once it went untouched for this many beats.
STALE_BEATS = 6


@contextmanager
def marked(
    run_dir: str, what: str, beat: float | None = None, layout: str | None = None, guard: bool = False
) -> Iterator[float | None]:
    """While in the body, ``run_dir`` holds this process's marker (``what`` says what it does there); with
    ``beat``, a heartbeat touches it every ``beat`` seconds (:func:`heartbeat`). Yields ``beat`` when the
    heartbeat runs, else None.

    ``layout``: how this process shares the run's source tasks with others (the shard layout of a sharded
    process, ``runs.ledger.shard_layout``; None: it does all of them). With ``guard``, refused
    (:class:`~curator_slurm.errors.RunDirError`, before the body) while another process works in ``run_dir``
    that does not share the work the same way (:func:`refuse_beside`)."""
    host, pid = socket.gethostname(), os.getpid()
    directory = os.path.join(run_dir, LIVE_DIR)
    path = os.path.join(directory, f"{host}-{pid}")
    try:
        os.makedirs(directory, exist_ok=True)
        _prune(directory, host)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"host": host, "pid": pid, "start": _start_time(pid), "what": what, "layout": layout,
                       "beat": beat}, f)  # fmt: skip
    except OSError:  # a read-only or full run directory: the run reports that itself; status then knows less
        path = ""
    if guard and path:
        try:
            refuse_beside(run_dir, path, layout, what)
        except RunDirError:
            with suppress(OSError):
                os.unlink(path)
            raise
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


def refuse_beside(run_dir: str, mine: str, layout: str | None, what: str) -> None:
    """Raise :class:`~curator_slurm.errors.RunDirError` when another process works in ``run_dir`` (its marker
    is not ``mine``) and the two would do the same source tasks: either does all of them (``layout`` None),
    or they split them another way. Processes that split them the same way (the array tasks of one job, the
    shards of one `local`) share the run directory; a process's own ancestors (the `local` or workflow that
    started it) do not count. A marker of another host counts while its heartbeat is fresh (measured by the
    filesystem's clock, against ``mine`` just written); one without a heartbeat cannot be judged from here."""
    directory, host = os.path.dirname(mine), socket.gethostname()
    ancestors = _ancestors(os.getpid())
    try:
        names = sorted(os.listdir(directory))
        now = os.stat(mine).st_mtime
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if path == mine:
            continue
        try:
            marker = load_json(path)
            touched = os.stat(path).st_mtime
        except (OSError, ValueError, RunDirError):
            continue
        if not isinstance(marker, dict) or count(marker.get("pid"), None) is None:
            continue
        theirs, pid = text(marker.get("layout")), marker["pid"]
        if layout is not None and theirs == layout:
            continue  # the same split of the work: shards of one array
        if marker.get("host") == host:
            if pid in ancestors or not _same_process(pid, text(marker.get("start"))):
                continue
        else:
            beat = number(marker.get("beat"))
            if beat is None or now - touched >= STALE_BEATS * beat:
                continue
        raise RunDirError(
            f"{run_dir}: another process works in this run directory ({marker.get('host')}:{pid}, "
            f"{marker.get('what')}) and {what} beside it would do the same source tasks twice"
            + (" (it splits them another way)" if layout is not None and theirs is not None else "")
            + ". Wait for it to end (curator-slurm status), or stop it first; array tasks of one job, and the "
            "shards of one `curator-slurm local`, share a run directory"
        )


def _ancestors(pid: int) -> set[int]:
    """The parent of process ``pid``, its parent, and so on (from /proc; empty where it cannot be read)."""
    found: set[int] = set()
    while pid > 1 and pid not in found:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
        found.add(pid)
        pid = parent
    found.discard(os.getpid())
    found.add(pid)
    return found


def _prune(directory: str, host: str) -> None:
    """Remove the markers of processes of this host that ended without removing them (killed)."""
    for name in os.listdir(directory):
        if not name.startswith(f"{host}-"):
            continue
        path = os.path.join(directory, name)
        marker = _marker(path)
        if marker is not None and not _same_process(marker[1], marker[2]):
            with suppress(OSError):
                os.unlink(path)


def _marker(path: str) -> tuple[str | None, int, str | None, str | None] | None:
    """(host, pid, start, what) of the marker ``path``; None when it is gone, being written, or damaged (a marker
    that is not a regular file of bounded size is not read: :mod:`curator_slurm.runs.readfile`)."""
    try:
        marker = load_json(path)
    except UnreadableFileError as e:
        logger.warning(f"process marker skipped: {e}")
        return None
    except (OSError, ValueError, RunDirError):
        return None
    if not isinstance(marker, dict) or count(marker.get("pid"), None) is None:
        return None
    return text(marker.get("host")), marker["pid"], text(marker.get("start")), text(marker.get("what"))


@dataclass(frozen=True)
class Live:
    """The processes of a run directory: ``alive`` (checked on this host), ``elsewhere`` (markers of other
    hosts, which cannot be checked from here) and ``gone`` (markers of processes that ended without
    removing them: killed)."""

    alive: tuple[str, ...] = ()
    elsewhere: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    #: Of ``alive``, those stopped (SIGSTOP, a debugger): alive, but doing nothing until they continue.
    frozen: tuple[str, ...] = ()

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
    alive, elsewhere, gone, frozen = [], [], [], []
    for name in names:
        path = os.path.join(directory, name)
        marker = _marker(path)
        if marker is None:
            continue  # being written, removed while we looked, or damaged
        label = f"{marker[0]}:{marker[1]} ({marker[3]})"
        pid = marker[1]
        if marker[0] != host:
            elsewhere.append(label)
        elif _same_process(pid, marker[2]):
            alive.append(label)
            if _stopped(pid):
                frozen.append(label)
        else:
            gone.append(label)
    return Live(tuple(alive), tuple(elsewhere), tuple(gone), tuple(frozen))


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` of this host is stopped (state T or t in /proc: SIGSTOP, a debugger)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return bool(fields) and fields[0] in ("T", "t")


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
