"""The run directory and its per-source-task ledger.

Layout of a run directory::

    run.json              pipeline fingerprint (stage names and parameters), written once, atomically
    sources.json          count and digest of the source task ids the first process saw
    ledger/*.jsonl        one append-only file per process: one JSON record per finished source task

Every process writes only its own ledger file, one line per record, so a thousand array tasks on a
shared filesystem never contend for a lock and a killed process leaves at worst a torn last line, which
readers ignore. A million source tasks make a million lines in a few hundred files, not a million files.

Group commit: records are appended a window at a time (``window`` records, or ``window_seconds`` of wall
time or of the tasks' own run time, whichever comes first; the rest when the writer closes). Before a
window's lines are written, every output they list is made durable (one ``syncfs`` per filesystem on
Linux >= 5.8, else an fsync of each file and of its directory); then the lines are appended with one
fsync. So an output is in place and durable before any record says ``done``, and the sink writer need not
fsync each file itself (``curator_slurm.stages.writers.defer_output_sync``). A crash loses at most the
window not yet committed: its source tasks are done again on resume, and rewrite the same files.

Partitions: a ledger file's name says which shard wrote it, ``p.<layout>.<index>.<writer>.jsonl``, where
the layout is the shard assignment (``h<count>`` hash, ``b<count>`` balanced, ``m<count>-<manifest>`` a
submitted plan). A task of that layout reads only its own index's files (the records of the tasks it owns)
plus every file of another layout (another shard count or strategy, e.g. a retry; of another hash layout
only the partitions its own task ids hash into) and every file of the old flat naming
(``<job>-<host>-<pid>-<random>.jsonl``), so a task of a 10,000-task array starts in milliseconds while a
change of shard count stays correct (it reads more). ``load_status(path)`` (``status``) reads them all.
Under the balanced strategy with ``CURATOR_ACCEPT_NEW_INPUTS`` the assignment can move a task to another
index of the same layout; that task is then done again (same output files), as the acceptance warns.

A record is ``{"source": id, "status": "done"|"failed", ...}``; ``done`` carries the outputs, rows
in/out, seconds and attempts, ``failed`` the stage, error, traceback and attempts; both carry the
shard and the Slurm job, array task and restart ids and the host. A source task is done if any record
says so (a later failure of the same task cannot undo outputs that were renamed into place).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import xxhash

from curator_slurm._lazy import LazyModule
from curator_slurm.errors import RunDirError, ShardConfigError, is_out_of_space, out_of_space
from curator_slurm.runs.options import RunOptions
from curator_slurm.slurm.env import ShardSpec
from curator_slurm.stages.writers import defer_output_sync

logger = logging.getLogger(__name__)

pj = LazyModule("pyarrow.json")

LEDGER_DIR = "ledger"
RUN_FILE = "run.json"
SOURCES_FILE = "sources.json"
#: Claim files: ``claims/<job id>/step<step>-r<restart>-shard<i>of<n>``, one per shard done in a Slurm job step.
CLAIMS_DIR = "claims"
#: Where a run directory goes when none is given and the sink writes files: inside its output directory.
DEFAULT_RUN_DIR_NAME = ".curator-run"

_STATUS_SCHEMA = pa.schema([("source", pa.string()), ("status", pa.string())])


def source_digest(task_ids: Sequence[str]) -> str:
    """Order-independent digest of a set of source task ids."""
    h = xxhash.xxh64(seed=0)
    for t in sorted(task_ids):
        h.update(t.encode("utf-8") + b"\n")
    return h.hexdigest()


#: What to do about a damaged file that runs write (run.json, sources.json).
RERUN_REMEDY = "restore it, or delete it and run the pipeline again to write it afresh"


def read_json(path: str, remedy: str) -> dict[str, Any]:
    """A JSON file of the run directory. A damaged one (a full disk, an interrupted copy) is a
    RunDirError that names the file and the place, and says what to do (``remedy``)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RunDirError(f"{path}: not UTF-8 text (byte {e.start}); {remedy}") from e
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg}); {remedy}") from e
    if not isinstance(value, dict):
        raise RunDirError(f"{path}: holds a JSON {type(value).__name__}, not an object; {remedy}")
    return value


def _write_once(path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Create ``path`` with ``payload`` unless it exists; return what the file holds.

    The content goes to a hidden temporary file that is hard-linked into place, so a reader never sees
    a half-written file and exactly one of many concurrent creators wins. When the file exists (every
    process but the first), nothing is written at all; the temporary file never outlives the call.
    """
    if os.path.exists(path):
        return read_json(path, RERUN_REMEDY)
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
        return payload
    except FileExistsError:
        return read_json(path, RERUN_REMEDY)
    except OSError as e:
        if is_out_of_space(e):
            raise out_of_space(e, directory) from e
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass
class LedgerState:
    """What the ledger says: done source ids, and the latest failure record of each failed one."""

    done: set[str] = field(default_factory=set)
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: int = 0


#: File-name prefix of a partitioned ledger file: ``p.<layout>.<index>.<writer>.jsonl``.
PARTITION_PREFIX = "p."


def shard_layout(shard: ShardSpec) -> str:
    """The name of ``shard``'s assignment of source tasks to shards: the same for every shard of one array
    (and its re-runs), another one when the shard count, the strategy or the submitted plan changes."""
    if shard.manifest:
        name = os.path.basename(os.path.normpath(shard.manifest))
        return f"m{shard.count}-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    return f"{'b' if shard.strategy == 'balanced' else 'h'}{shard.count}"


def ledger_file_name(shard: ShardSpec, writer: str) -> str:
    """The name of the ledger file that ``shard``'s process ``writer`` (``<job>-<host>-<pid>-<random>``)
    appends to: the shard's partition, then the writer."""
    return f"{PARTITION_PREFIX}{shard_layout(shard)}.{shard.index}.{writer}.jsonl"


class _Concerns:
    """Which ledger files may hold records of the source tasks shard ``shard`` owns: its own partition's,
    every file of another layout or of the old flat naming; but of another hash layout (``h<count>``, a
    pure function of the id) only the partitions that ``task_ids``, when given, hash into."""

    def __init__(self, shard: ShardSpec, task_ids: Iterable[str] | None) -> None:
        self.layout, self.index = shard_layout(shard), shard.index
        self.task_ids = None if task_ids is None else [t.encode("utf-8") for t in task_ids]
        self._hashed: dict[int, set[int]] = {}  # count -> the indices task_ids hash into

    def __call__(self, name: str) -> bool:
        if not name.startswith(PARTITION_PREFIX):
            return True
        parts = name.split(".", 3)
        if len(parts) < 4 or not parts[2].isdigit():
            return True
        layout, index = parts[1], int(parts[2])
        if layout == self.layout:
            return index == self.index
        if self.task_ids is None or layout[:1] != "h" or not layout[1:].isdigit():
            return True
        count = int(layout[1:])
        if count not in self._hashed:
            h = xxhash.xxh64_intdigest
            self._hashed[count] = {h(t) % count for t in self.task_ids} if count else set()
        return index in self._hashed[count]


def ledger_files(path: str, shard: ShardSpec | None = None, task_ids: Iterable[str] | None = None) -> list[str]:
    """The ledger files of run directory ``path``: all, or those that may concern ``shard`` and its source
    tasks ``task_ids`` (see :class:`_Concerns`)."""
    directory = os.path.join(path, LEDGER_DIR)
    if not os.path.isdir(directory):
        return []
    names = [f for f in os.listdir(directory) if f.endswith(".jsonl")]
    if shard is not None:
        concerns = _Concerns(shard, task_ids)
        names = [f for f in names if concerns(f)]
    return sorted(os.path.join(directory, f) for f in names)


def complete_lines(path: str) -> bytes:
    """The file's bytes up to its last newline: a torn last line (the writer was killed) is dropped."""
    with open(path, "rb") as f:
        data = f.read()
    return data[: data.rfind(b"\n") + 1]


def iter_records(path: str) -> Iterator[dict[str, Any]]:
    """Every complete record of the run directory ``path``, file by file (full detail, slower)."""
    return _records_of(ledger_files(path))


def _records_of(files: Iterable[str]) -> Iterator[dict[str, Any]]:
    for name in files:
        for lineno, line in enumerate(complete_lines(name).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                logger.warning(f"{name}:{lineno}: unreadable ledger record skipped")


def load_status(path: str, shard: ShardSpec | None = None, task_ids: Iterable[str] | None = None) -> LedgerState:
    """Done and failed source ids of a run directory; fast (pyarrow's JSON parser) for large ledgers.

    With ``shard``, only the ledger files that can hold records of its source tasks are read (its own
    partition, other layouts, old flat files; of another hash layout only the partitions its source tasks
    ``task_ids``, when given, hash into): what a task needs at its start. Without, every file."""
    state = LedgerState()
    failed_ids: set[str] = set()
    files = ledger_files(path, shard, task_ids)
    for name in files:
        data = complete_lines(name)
        if not data:
            continue
        try:
            table = pj.read_json(
                pa.BufferReader(data),
                # One thread: the driver reads the ledger before it starts its workers, and pyarrow's
                # thread pool, once started, would keep them from being forked (LocalExecutor).
                read_options=pj.ReadOptions(use_threads=False),
                parse_options=pj.ParseOptions(explicit_schema=_STATUS_SCHEMA, unexpected_field_behavior="ignore"),
            )
            sources, statuses = table.column("source").to_pylist(), table.column("status").to_pylist()
        except pa.ArrowInvalid:  # a damaged line in the middle: fall back to line-by-line
            records = []
            for line in data.splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
            sources = [r.get("source") for r in records]
            statuses = [r.get("status") for r in records]
        state.records += len(sources)
        for source, status in zip(sources, statuses, strict=True):
            if status == "done":
                state.done.add(source)
            elif status == "failed":
                failed_ids.add(source)
    pending_failed = failed_ids - state.done
    if pending_failed:
        for record in _records_of(files):
            if record.get("status") == "failed" and record.get("source") in pending_failed:
                state.failed[record["source"]] = record
    return state


#: Default window of the group commit: at most this many records ...
DEFAULT_WINDOW = 1000
#: ... or this many seconds, of wall time since the window's first record or of its tasks' run time.
DEFAULT_WINDOW_SECONDS = 0.5
#: How outputs are made durable: ``auto`` (syncfs on Linux >= 5.8, where it reports write-back errors; else
#: fsync), ``syncfs`` or ``fsync`` (each file, then each directory).
SYNC_METHODS = ("auto", "syncfs", "fsync")


class LedgerWriter:
    """Appends this process's records to its own ledger file, a window at a time (group commit).

    ``write`` buffers a record and commits the window once it holds ``window`` records, or its first record
    is ``window_seconds`` old, or its tasks ran ``window_seconds`` in all; ``close`` commits the rest. A
    commit makes every output the window's records list durable, then appends their lines with one fsync
    (see the module docstring). ``window=1`` commits every record at once. While the writer is open, the
    sink writers of this process and of the workers it forks leave the fsync of each file to it.
    """

    def __init__(
        self,
        run_dir: str,
        shard: ShardSpec,
        window: int = DEFAULT_WINDOW,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        sync: str = "auto",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window < 1:
            raise ValueError(f"LedgerWriter(window={window}): a window holds at least 1 record")
        if sync not in SYNC_METHODS:
            raise ValueError(f"LedgerWriter(sync={sync!r}): use one of {', '.join(SYNC_METHODS)}")
        directory = os.path.join(run_dir, LEDGER_DIR)
        os.makedirs(directory, exist_ok=True)
        job = shard.job
        tag = f"{job.array_job_id}_{job.array_task_id}" if job.array_job_id else (job.job_id or "local")
        writer = f"{tag}-{job.host}-{os.getpid()}-{os.urandom(4).hex()}"
        self.path = os.path.join(directory, ledger_file_name(shard, writer))
        self.window, self.window_seconds, self.clock = window, window_seconds, clock
        self.sync = _sync_method() if sync == "auto" else sync
        self._fd: int | None = None
        self._lines: list[bytes] = []
        self._outputs: list[str] = []
        self._opened = 0.0  # clock() at the window's first record
        self._work = 0.0  # the run time of the window's tasks, summed
        self._common = {
            "shard": f"{shard.index}/{shard.count}",
            "job_id": job.job_id,
            "array_job_id": job.array_job_id,
            "array_task_id": job.array_task_id,
            "restart_count": job.restart_count,
            "host": job.host,
            "pid": os.getpid(),
        }
        defer_output_sync(True)
        self._deferring = True

    @property
    def pending(self) -> int:
        """Records written but not yet committed (what a crash now would lose)."""
        return len(self._lines)

    def write(self, record: dict[str, Any]) -> None:
        """Buffer ``record``; commit the window if it is full or old enough."""
        line = json.dumps({**record, **self._common, "time": round(time.time(), 3)}, separators=(",", ":"))
        now = self.clock()
        if not self._lines:
            self._opened = now
        self._lines.append(line.encode("utf-8") + b"\n")
        self._outputs.extend(record.get("outputs") or ())
        seconds = record.get("seconds")
        self._work += float(seconds) if isinstance(seconds, (int, float)) else 0.0
        if (
            len(self._lines) >= self.window
            or now - self._opened >= self.window_seconds
            or self._work >= self.window_seconds
        ):
            self.commit()

    def commit(self) -> None:
        """Make the window's outputs durable, then append its records with one fsync."""
        if not self._lines:
            return
        try:
            make_durable(self._outputs, self.sync)
            if self._fd is None:  # created on first use, so a shard with no work leaves no file
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            # Whole lines, unbuffered. A commit cut short (a signal, a full disk) is done again by close():
            # records may repeat (harmless: done is done) after at most one torn line, which readers skip.
            data = memoryview(b"".join(self._lines))
            while data:
                data = data[os.write(self._fd, data) :]
            os.fsync(self._fd)
        except OSError as e:  # at worst a torn last line, which readers ignore
            if is_out_of_space(e):
                raise out_of_space(e, os.path.dirname(self.path)) from e
            raise
        self._lines, self._outputs, self._work = [], [], 0.0

    def close(self) -> None:
        """Commit what is buffered and close the file; sink writers fsync their own files again."""
        try:
            self.commit()
        finally:
            if self._deferring:
                defer_output_sync(False)
                self._deferring = False
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _sync_method() -> str:
    """``syncfs`` where it reports write-back errors (Linux >= 5.8), else ``fsync``."""
    if not sys.platform.startswith("linux"):
        return "fsync"
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return "fsync"
    return "syncfs" if (major, minor) >= (5, 8) else "fsync"


_libc: Any = None


def syncfs(fd: int) -> None:
    """``syncfs(2)``: write back everything dirty on the filesystem that holds ``fd``, and wait for it."""
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(_libc, "syncfs", None)
    if call is None:  # a C library without it
        raise OSError(errno.ENOSYS, "syncfs: not in this C library")
    if call(fd) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"syncfs: {os.strerror(err)}")


def make_durable(paths: Sequence[str], method: str = "fsync") -> None:
    """Make the files ``paths`` (already renamed into place) and their names durable.

    ``fsync``: an fsync of each file (on a fresh descriptor, which flushes the file's dirty pages whoever
    wrote them on this node) and of each directory. ``syncfs``: one ``syncfs`` per filesystem the files
    are on, which writes back the files and the directory entries together, far cheaper for many small
    files (but it also waits for anything else dirty on that filesystem)."""
    if not paths:
        return
    directories = sorted({os.path.dirname(os.path.abspath(p)) for p in paths})
    if method == "syncfs":
        devices: set[int] = set()
        for directory in directories:
            fd = os.open(directory, os.O_RDONLY)
            try:
                device = os.fstat(fd).st_dev
                if device not in devices:
                    devices.add(device)
                    syncfs(fd)
            except OSError as e:
                if e.errno not in (errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                method = "fsync"  # no syncfs here after all: each file on its own
                break
            finally:
                os.close(fd)
        if method == "syncfs":
            return
    for path in [*paths, *directories]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class RunDir:
    """A run directory: checks that it belongs to this pipeline and input set, and hands out the ledger."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.path.abspath(os.fspath(path))

    def __repr__(self) -> str:
        return f"RunDir({self.path!r})"

    def claim(self, fingerprint: dict[str, Any]) -> None:
        """Record the pipeline fingerprint, or check it matches the one recorded by the first process."""
        os.makedirs(self.path, exist_ok=True)
        want = {"fingerprint": fingerprint_digest(fingerprint), "pipeline": fingerprint}
        have = _write_once(os.path.join(self.path, RUN_FILE), want)
        if have.get("fingerprint") != want["fingerprint"]:
            raise RunDirError(
                f"{self.path} belongs to another pipeline: it was created by fingerprint {have.get('fingerprint')}, "
                f"this pipeline is {want['fingerprint']}; {_difference(have.get('pipeline'), fingerprint)}. Use "
                "another run directory (run_dir= or CURATOR_RUN_DIR) or delete it to start over."
            )

    def check_sources(
        self, task_ids: Sequence[str], accept_new_inputs: bool = False, weights: Sequence[int] | None = None
    ) -> None:
        """Make sure this process sees the same source tasks as the first one did, and, when ``weights``
        are given (the balanced strategy assigns by them), the same sizes."""
        want = source_record(task_ids, weights)
        have = _write_once(os.path.join(self.path, SOURCES_FILE), want)
        _compare_sources(self.path, have, want, weights is not None, accept_new_inputs)

    def claim_shard(self, shard: ShardSpec) -> None:
        """Inside a Slurm job, record that this process does ``shard`` in this job step (a claim file
        per shard and step under ``claims/<job id>/``); a second process of the same step that claims it
        (two srun ranks given the same ``SLURM_PROCID``, or the script started twice in one batch step)
        is refused, so the work is not done twice while another shard's is never done."""
        job = shard.job
        if not job.job_id:
            return
        step = job.step_id or "batch"
        directory = os.path.join(self.path, CLAIMS_DIR, job.job_id)
        os.makedirs(directory, exist_ok=True)
        name = f"step{step}-r{job.restart_count}-shard{shard.index}of{shard.count}"
        me = f"{job.host} {os.getpid()} procid={job.procid}"
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            with open(path, encoding="utf-8") as f:
                holder = f.read().strip()
            if holder.split(" procid=")[0] == me.split(" procid=")[0]:
                return  # this very process (a second pipeline of the same script)
            if _ended_here(holder, job.host):  # an earlier run of the script in this step, since ended
                with open(path, "w", encoding="utf-8") as f:
                    f.write(me + "\n")
                return
            raise ShardConfigError(
                f"{shard.label} is already being done by another process of job {job.job_id} step {step} ({holder}; "
                f"this one: {me}); two processes of one step computed the same shard ({shard.origin}). Every task of "
                "an srun step needs its own SLURM_PROCID (srun sets it: do not override it), and every array task "
                "its own SLURM_ARRAY_TASK_ID / CURATOR_SHARD_INDEX; or start the script once per step"
            ) from None
        except OSError as e:
            if is_out_of_space(e):
                raise out_of_space(e, directory) from e
            raise
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(me + "\n")

    def state(self, shard: ShardSpec | None = None, task_ids: Iterable[str] | None = None) -> LedgerState:
        """What the ledger says; with ``shard`` (and its source tasks ``task_ids``), what it says about that
        shard's source tasks (and possibly more): only the files that can hold their records are read (see
        :func:`load_status`)."""
        return load_status(self.path, shard, task_ids)

    def writer(self, shard: ShardSpec, options: RunOptions | None = None) -> LedgerWriter:
        """This process's ledger writer, with the group-commit window of ``options``."""
        options = options or RunOptions()
        return LedgerWriter(self.path, shard, options.ledger_window, options.ledger_window_seconds)


def _ended_here(holder: str, host: str) -> bool:
    """Whether the claim ``holder`` (``host pid ...``) is a process of this host that no longer runs."""
    parts = holder.split()
    if len(parts) < 2 or parts[0] != host or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def source_record(task_ids: Sequence[str], weights: Sequence[int] | None = None) -> dict[str, Any]:
    """What ``sources.json`` holds for these source task ids (and weights, under the balanced strategy)."""
    want: dict[str, Any] = {"count": len(task_ids), "digest": source_digest(task_ids)}
    if weights is not None:
        want["weights_digest"] = source_digest([f"{t}\t{w}" for t, w in zip(task_ids, weights, strict=False)])
    return want


def check_submission(
    run_dir: str,
    fingerprint: dict[str, Any] | None,
    task_ids: Sequence[str],
    weights: Sequence[int] | None = None,
    accept_new_inputs: bool = False,
) -> None:
    """Before any array is submitted into ``run_dir``: what every task would check as it starts (the
    pipeline's fingerprint against ``run.json``, the listed source tasks against ``sources.json``), so a
    submission that could only fail in every task is refused with the reason, not queued. Writes nothing."""
    run_file = os.path.join(run_dir, RUN_FILE)
    if fingerprint is not None and os.path.exists(run_file):
        have = read_json(run_file, RERUN_REMEDY)
        digest = fingerprint_digest(fingerprint)
        if have.get("fingerprint") != digest:
            raise RunDirError(
                f"{run_dir} belongs to another pipeline: it was created by fingerprint {have.get('fingerprint')}, "
                f"this pipeline is {digest}; {_difference(have.get('pipeline'), fingerprint)}. Every array task "
                "would stop at once. Submit with another --run-dir (or output directory), or delete the run "
                "directory to start over."
            )
    sources_file = os.path.join(run_dir, SOURCES_FILE)
    if os.path.exists(sources_file):
        have = read_json(sources_file, RERUN_REMEDY)
        _compare_sources(run_dir, have, source_record(task_ids, weights), weights is not None, accept_new_inputs)


def _compare_sources(
    path: str, have: dict[str, Any], want: dict[str, Any], weighted: bool, accept_new_inputs: bool
) -> None:
    """Raise (or warn, when new inputs are accepted) if ``want`` lists other source tasks than ``have``."""
    want = dict(want)
    same_ids = have.get("digest") == want["digest"]
    if same_ids:
        if not weighted or have.get("weights_digest", want["weights_digest"]) == want["weights_digest"]:
            return
        want["digest"] = f"{want['digest']}, with other file sizes"
    if not same_ids and have.get("count") == want["count"]:
        message = (
            f"{path}: this process lists the same number of source tasks as the first one "
            f"({want['count']}) but with other ids (digest {have.get('digest')}, now {want['digest']}): the "
            "source stage probably does not give deterministic ids (uuid4(), hash() of a string, a counter "
            "over an unordered listing, a time stamp), so shards cannot agree on who does what"
        )
        if not accept_new_inputs:
            raise RunDirError(
                message + ". Derive each source task id from the work itself, e.g. "
                "curator_slurm.tasks.content_id(*sorted_paths) or FileGroupTask.from_paths, then start over "
                "with a new run directory. If the inputs were really renamed or replaced, use a new run "
                "directory too."
            )
        logger.warning(message + "; going on because new inputs are accepted (outputs may be duplicated)")
        return
    message = (
        f"{path}: the inputs changed since this run started: the first process saw {have.get('count')} "
        f"source tasks (digest {have.get('digest')}), this one sees {want['count']} (digest {want['digest']})"
    )
    if not accept_new_inputs:
        raise RunDirError(
            message + ". Shards that list different inputs cannot split them exactly once. Restore the "
            "inputs, use a new run directory, or set CURATOR_ACCEPT_NEW_INPUTS=1 to go on anyway."
        )
    logger.warning(message + "; going on because new inputs are accepted")


def fingerprint_digest(fingerprint: dict[str, Any]) -> str:
    return xxhash.xxh64_hexdigest(json.dumps(fingerprint, sort_keys=True, default=str).encode("utf-8"))


def _difference(old: Any, new: dict[str, Any]) -> str:
    """The first difference between two fingerprints, in words."""
    if not isinstance(old, dict):
        return "the recorded fingerprint is unreadable"
    if old.get("id_scheme", 1) != new.get("id_scheme", 1):
        return (
            f"it was written with source-task id scheme {old.get('id_scheme', 1)} (1: absolute paths), this "
            f"version uses scheme {new.get('id_scheme', 1)} (2: paths relative to the reader's root), so none of "
            "its records can match"
        )
    if old.get("name") != new.get("name"):
        return f"pipeline name was {old.get('name')!r}, now {new.get('name')!r}"
    before, after = old.get("stages", []), new.get("stages", [])
    if [s.get("name") for s in before] != [s.get("name") for s in after]:
        return f"stages were {[s.get('name') for s in before]}, now {[s.get('name') for s in after]}"
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        for key in sorted(set(b.get("params", {})) | set(a.get("params", {}))):
            was, now = b.get("params", {}).get(key), a.get("params", {}).get(key)
            if was != now:
                return f"stage {i} {a.get('name')!r}: {key} was {was!r}, now {now!r}"
        if b.get("type") != a.get("type"):
            return f"stage {i} {a.get('name')!r}: type was {b.get('type')}, now {a.get('type')}"
    return "the fingerprints differ"
