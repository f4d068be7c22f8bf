"""Takeover claims: which process may start a group of a shard's source tasks (its owner, or one taker), as
files created atomically in the run directory (removed once the shard's tasks are all done), and whether the
holder of a claim may still be working."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass

from curator_slurm.runs.layout import TAKEOVER_DIR
from curator_slurm.runs.liveness import LIVE_DIR, _start_time
from curator_slurm.shard import ShardSpec

#: Seconds between the heartbeats of a process that holds claims inside a Slurm job (where processes of other
#: hosts may judge it): its marker in ``live/`` is touched that often.
HEARTBEAT_SECONDS = 10.0
#: A holder on another host that keeps a heartbeat is dead once its marker was not touched for this many beats.
STALE_BEATS = 6

#: The runs of this process that hold claims now (their nonces): a claim of this process with another nonce
#: was made by a run of it that has ended (a script that runs the same pipeline twice).
_ACTIVE: set[str] = set()


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: enough for any process to tell whether it may still be working."""

    host: str
    pid: int
    #: The process's start time (clock ticks since boot): with the pid, it tells the process from a later one.
    start: str | None
    #: Which run of the process (a script may run one pipeline twice in one process).
    nonce: str
    #: The holder's own shard, ``i/N``.
    shard: str
    #: ``SLURM_JOB_ID`` and ``SLURM_RESTART_COUNT``: a requeued job runs again under the same id, the earlier
    #: run ended.
    job: str | None = None
    restart: int = 0
    #: Seconds between the touches of the holder's marker ``live/<host>-<pid>`` by its heartbeat; None: no
    #: heartbeat (then a holder on another host is never judged dead).
    beat: float | None = None

    @classmethod
    def of(cls, shard: ShardSpec, beat: float | None = None) -> Holder:
        """This process, working on ``shard``."""
        pid = os.getpid()
        job = shard.job
        label = f"{shard.index}/{shard.count}"
        return cls(job.host, pid, _start_time(pid), os.urandom(6).hex(), label, job.job_id, job.restart_count, beat)

    @property
    def marker(self) -> str:
        """The name of the holder's marker in ``live/`` (:func:`curator_slurm.runs.liveness.marked`)."""
        return f"{self.host}-{self.pid}"

    def describe(self) -> str:
        return f"{self.host}:{self.pid} (shard {self.shard})"


@contextmanager
def holding(holder: Holder) -> Iterator[Holder]:
    """While in the body, the claims of ``holder`` (this process) count as held by a live process."""
    _ACTIVE.add(holder.nonce)
    try:
        yield holder
    finally:
        _ACTIVE.discard(holder.nonce)


def holder_alive(run_dir: str, holder: Holder, me: Holder) -> bool:
    """Whether the holder of a claim may still be working, as ``me`` can tell.

    On this host the answer is certain: the pid must run and have the recorded start time (a pid reused by a
    later process does not count), and a run of this very process must not have ended. On another host: a run
    of the same Slurm job with a lower restart count has ended (Slurm runs one instance of a job at a time); a
    holder with a heartbeat is dead once its marker went untouched for :data:`STALE_BEATS` beats, measured by
    the filesystem's clock, or is gone (its process removed it as it ended); a holder without a heartbeat
    cannot be judged from here and counts as alive (its work is then done by a re-run, not by a taker)."""
    if holder.host == me.host:
        if holder.pid == me.pid and holder.start == me.start:
            return holder.nonce in _ACTIVE
        return process_alive(holder.pid, holder.start)
    if holder.job is not None and holder.job == me.job and holder.restart < me.restart:
        return False
    if holder.beat is None:
        return True
    age = heartbeat_age(run_dir, holder, me)
    return age is not None and age < STALE_BEATS * holder.beat


def process_alive(pid: int, start: str | None) -> bool:
    """Whether process ``pid`` of this host runs and is the one that started at ``start`` (None: any)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here, or not ours to read: whether the pid exists is all that can be told
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return False
    return start is None or fields[19] == start


def heartbeat_age(run_dir: str, holder: Holder, me: Holder) -> float | None:
    """Seconds since ``holder``'s heartbeat last touched its marker, by the filesystem's clock (``me`` touches its
    own marker to read it, so clocks of different hosts do not matter); None when the marker is gone."""
    directory = os.path.join(run_dir, LIVE_DIR)
    try:
        theirs = os.stat(os.path.join(directory, holder.marker)).st_mtime
    except FileNotFoundError:
        return None
    mine = os.path.join(directory, me.marker)
    try:
        os.utime(mine)
        now = os.stat(mine).st_mtime
    except OSError:  # no marker of this process: this host's clock
        now = time.time()
    return max(0.0, now - theirs)


@dataclass(frozen=True)
class Claim:
    """Generation ``generation`` of the claim of group ``group`` of shard ``shard``: the file
    ``<shard>/<group>-<generation>``. A new generation is created only when the holder of the last one is dead."""

    shard: int
    group: int
    generation: int

    @property
    def name(self) -> str:
        return f"{self.group}-{self.generation}"


class ClaimBoard:
    """The claims of one way of splitting source tasks over shards (a namespace: every process that splits the
    same list the same way shares one), in ``<run dir>/takeover/<namespace>/``.

    Args:
        run_dir: the run directory.
        namespace: the namespace's name (see :func:`curator_slurm.runs.takeover.claim_namespace`).
        me: this process.
        alive: whether a claim's holder may still be working; default :func:`holder_alive`.
    """

    def __init__(self, run_dir: str, namespace: str, me: Holder, alive: Callable[[Holder], bool] | None = None) -> None:
        self.run_dir, self.me = run_dir, me
        self.root = os.path.join(run_dir, TAKEOVER_DIR, namespace)
        self._alive = alive or (lambda holder: holder_alive(run_dir, holder, me))
        self._payload = json.dumps(asdict(me), sort_keys=True).encode()

    def shard_dir(self, shard: int) -> str:
        return os.path.join(self.root, str(shard))

    def register(self, shard: int) -> None:
        """Say that ``shard``'s owner has started: from now on takers may take its unclaimed groups (and a
        ``.end`` that an earlier run of it left no longer keeps them away: this run may have work left)."""
        os.makedirs(self.shard_dir(shard), exist_ok=True)
        with suppress(FileNotFoundError):
            os.unlink(os.path.join(self.root, f"{shard}.end"))

    def finish(self, shard: int) -> None:
        """Say that every group of ``shard`` is done or held: takers need not look at it again."""
        fd = os.open(os.path.join(self.root, f"{shard}.end"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)

    def retire(self, shard: int) -> None:
        """Every source task of ``shard`` is done (its owner read it in the ledger as it ended): its claims hold
        nothing any more, so they go, with its directory and ``.end``; takers no longer see the shard at all, and
        a finished array leaves no claim behind. A claim being made right now (its hidden temporary file keeps
        the directory) leaves the directory there, marked finished."""
        directory = self.shard_dir(shard)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            names = []
        for name in names:
            if not name.startswith("."):  # a taker's half-made claim is its own to remove
                with suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError:
            self.finish(shard)
            return
        with suppress(FileNotFoundError):
            os.unlink(os.path.join(self.root, f"{shard}.end"))

    def open_shards(self) -> list[int]:
        """The shards whose owner has started and that are not finished: where takers look for work."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        ended = {n[: -len(".end")] for n in names if n.endswith(".end")}
        return sorted(int(n) for n in names if n.isdigit() and n not in ended)

    def generations(self, shard: int) -> dict[int, int]:
        """The last generation of each claimed group of ``shard``."""
        try:
            names = os.listdir(self.shard_dir(shard))
        except FileNotFoundError:
            return {}
        out: dict[int, int] = {}
        for name in names:
            group, sep, generation = name.partition("-")
            if sep and group.isdigit() and generation.isdigit():
                out[int(group)] = max(out.get(int(group), -1), int(generation))
        return out

    def holder(self, claim: Claim) -> Holder | None:
        """Who holds ``claim``; None when its file cannot be read as a holder (damaged)."""
        with open(os.path.join(self.shard_dir(claim.shard), claim.name), "rb") as f:
            raw = f.read()
        try:
            return Holder(**json.loads(raw))
        except (ValueError, TypeError):
            return None

    def alive(self, holder: Holder | None) -> bool:
        """Whether ``holder`` may still be working (a damaged claim's holder is not)."""
        return holder is not None and self._alive(holder)

    def late(self, holder: Holder) -> bool:
        """Whether ``holder``, on another host, missed two heartbeats or more (but is not judged dead yet)."""
        if holder.host == self.me.host or holder.beat is None:
            return False
        age = heartbeat_age(self.run_dir, holder, self.me)
        return age is None or age > 2 * holder.beat

    def create(self, claim: Claim) -> bool:
        """Create ``claim``'s file naming this process; True when this process created it.

        The file is written under a temporary name and hard-linked to the claim's name: ``link()`` fails on an
        existing name, atomically, on local and NFS filesystems alike, so of any number of processes exactly one
        creates a given claim, and a reader never sees it half-written. (A retried NFS link whose first attempt
        succeeded answers "exists": the temporary file's link count then says it was this process.)"""
        directory = self.shard_dir(claim.shard)
        tmp = os.path.join(directory, f".{claim.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # the shard was retired (every task done): nothing to claim
            return False
        try:
            os.write(fd, self._payload)
        finally:
            os.close(fd)
        try:
            os.link(tmp, os.path.join(directory, claim.name))
            return True
        except FileExistsError:
            return os.stat(tmp).st_nlink == 2
        finally:
            os.unlink(tmp)

    def claim(self, shard: int, group: int, worth_taking: Callable[[], bool] = lambda: True) -> Claim | None:
        """Claim ``group`` of ``shard`` for this process: its first claim, or, when the holder of its last one is
        dead and ``worth_taking()`` (some of its tasks are not done), the next generation. None when a process
        that may be working holds it (or it is not worth taking)."""
        generation = 0
        while True:
            if self.create(Claim(shard, group, generation)):
                return Claim(shard, group, generation)
            last = Claim(shard, group, max(generation, self.generations(shard).get(group, generation)))
            try:
                holder = self.holder(last)
            except OSError:  # cannot be read now: count it as held
                return None
            if self.alive(holder) or not worth_taking():
                return None
            generation = last.generation + 1

    def superseded(self, claim: Claim) -> bool:
        """Whether another process took ``claim`` over (it judged this process dead): then start none of its
        tasks any more."""
        later = Claim(claim.shard, claim.group, claim.generation + 1)
        return os.path.exists(os.path.join(self.shard_dir(claim.shard), later.name))


__all__ = [
    "HEARTBEAT_SECONDS",
    "STALE_BEATS",
    "Claim",
    "ClaimBoard",
    "Holder",
    "heartbeat_age",
    "holder_alive",
    "holding",
    "process_alive",
]
