"""The ledger: one record per finished source task in ``<run dir>/ledger/*.jsonl``, one file per writer, appended a
window at a time after the window's outputs are durable, partitioned by shard. Design: docs/design.md, "The
ledger"; format: docs/reference.md."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import xxhash

from curator_slurm._lazy import LazyModule
from curator_slurm.errors import is_out_of_space, out_of_space
from curator_slurm.runs.durable import best_sync_method, make_durable
from curator_slurm.runs.layout import LEDGER_DIR
from curator_slurm.runs.ledger_keeper import SummaryKeeper
from curator_slurm.runs.readfile import LEDGER_BYTES, UnreadableFileError, read_bytes
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.io.writers import defer_output_sync

logger = logging.getLogger(__name__)

pj = LazyModule("pyarrow.json")


_STATUS_SCHEMA = pa.schema([("source", pa.string()), ("status", pa.string())])


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


#: The damaged ledger lines (line 0: the whole file) this process met, by file, each with why: each is
#: warned about once (status reads a file more than once), and `status --verify` lists them.
_DAMAGED: dict[str, dict[int, str]] = {}


def _warn(path: str, lineno: int, why: str) -> None:
    seen = _DAMAGED.setdefault(path, {})
    if lineno not in seen:
        seen[lineno] = why
        where = f"{path}:{lineno}: damaged ledger record" if lineno else f"{path}: ledger file"
        logger.warning(f"{where} skipped ({why}); its source task(s) are done again")


def damaged_records(run_dir: str) -> list[str]:
    """The damaged ledger lines of ``run_dir`` that this process skipped while reading it, ``file:line: why``."""
    directory = os.path.join(os.path.abspath(run_dir), LEDGER_DIR) + os.sep
    return [
        f"{path}:{line}: {why}" if line else f"{path}: {why}"
        for path, lines in sorted(_DAMAGED.items())
        if os.path.abspath(path).startswith(directory)
        for line, why in sorted(lines.items())
    ]


def complete_lines(path: str) -> bytes:
    """The file's complete records: its bytes up to its last newline (a torn last line, the writer killed, is
    dropped), without the lines that are not UTF-8 (bit rot: each is warned about, naming the file and line,
    and its task is done again). A file that is not a regular file of bounded size is warned about and read
    as empty (:mod:`curator_slurm.runs.readfile`)."""
    try:
        data = read_bytes(path, LEDGER_BYTES)
    except FileNotFoundError:
        return b""
    except (OSError, UnreadableFileError) as e:
        _warn(path, 0, str(e).removeprefix(f"{path}: "))
        return b""
    data = data[: data.rfind(b"\n") + 1]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        lines = data.split(b"\n")[:-1]
        kept = []
        for lineno, line in enumerate(lines, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                _warn(path, lineno, f"not UTF-8 at byte {e.start}")
                continue
            kept.append(line + b"\n")
        data = b"".join(kept)
    return data


def parse_lines(path: str, data: bytes) -> list[dict[str, Any]]:
    """The records of ``data`` (:func:`complete_lines` of ``path``) one line at a time, for a file that
    pyarrow's reader could not parse whole: a line that is not a JSON object is warned about and skipped."""
    records = []
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            _warn(path, lineno, f"not JSON: {e}")
            continue
        if not isinstance(record, dict):
            _warn(path, lineno, f"a JSON {type(record).__name__}, not an object")
            continue
        records.append(record)
    return records


def iter_records(path: str) -> Iterator[dict[str, Any]]:
    """Every complete record of the run directory ``path``, file by file (full detail, slower)."""
    return _records_of(ledger_files(path))


def done_outputs(path: str) -> dict[str, list[str]]:
    """Each done source task of the run directory ``path`` and the outputs its last done record lists, sorted."""
    outputs: dict[str, list[str]] = {}
    for record in iter_records(path):
        source, files = record.get("source"), record.get("outputs")
        if record.get("status") == "done" and isinstance(source, str):
            outputs[source] = sorted(f for f in files if isinstance(f, str)) if isinstance(files, list) else []
    return outputs


def _records_of(files: Iterable[str]) -> Iterator[dict[str, Any]]:
    for name in files:
        yield from parse_lines(name, complete_lines(name))


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
            records = parse_lines(name, data)
            sources = [r.get("source") if isinstance(r.get("source"), str) else None for r in records]
            statuses = [r.get("status") for r in records]
        state.records += len(sources)
        for source, status in zip(sources, statuses, strict=True):
            if source is None:
                continue
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


class _LedgerFile:
    """One ledger file a writer appends to (its own shard's, or the partition of a shard it took tasks from),
    with the summary kept beside it (:mod:`curator_slurm.runs.ledger_keeper`); opened on first use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.size = 0
        self.summary = SummaryKeeper(path)

    def append(self, lines: list[bytes]) -> None:
        if self.fd is None:  # created on first use, so a shard with no work leaves no file
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # Whole lines, unbuffered. A commit cut short (a signal, a full disk) is done again by close(): records
        # may repeat (harmless: done is done) after at most one torn line, which readers skip.
        data = memoryview(b"".join(lines))
        size = len(data)
        while data:
            data = data[os.write(self.fd, data) :]
        os.fsync(self.fd)
        self.size += size

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LedgerWriter:
    """Appends this process's records to its own ledger file, a window at a time (group commit).

    ``write`` buffers a record and commits the window once it holds ``window`` records, or its first record
    is ``window_seconds`` old, or its tasks ran ``window_seconds`` in all; ``close`` commits the rest. A
    commit makes every output the window's records list durable, then appends their lines with one fsync per
    file (docs/design.md, "The ledger"). ``window=1`` commits every record at once. While the writer is open,
    the sink writers of this process and of the workers it forks leave the fsync of each file to it.

    Args:
        run_dir: the run directory; the file goes into its ``ledger/``, named after ``shard`` and this process.
        shard: this process's shard and job, named in the file's name and in every record.
        window: records per commit, at least 1.
        window_seconds: a window's age (or its tasks' summed run time) that commits it.
        sync: how outputs are made durable: ``"auto"`` (``syncfs`` where it reports errors), ``"syncfs"``,
            ``"fsync"``.
        clock: the clock that ages windows (monotonic seconds).
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
        self._shard, self._directory = shard, directory
        self._writer = f"{tag}-{job.host}-{os.getpid()}-{os.urandom(4).hex()}"
        self.path = os.path.join(directory, ledger_file_name(shard, self._writer))
        self.window, self.window_seconds, self.clock = window, window_seconds, clock
        self.sync = best_sync_method() if sync == "auto" else sync
        self._files: dict[int | None, _LedgerFile] = {}  # by partition: None for this shard's own file
        self._lines: list[tuple[int | None, bytes]] = []
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

    def write(self, record: dict[str, Any], partition: int | None = None) -> None:
        """Buffer ``record``; commit the window if it is full or old enough. ``partition``: the index of the
        shard whose partition the record goes to, when it is not this shard's (a source task taken over from
        that shard: its owner, restarted, reads its own partition and must find it done)."""
        full = {**record, **self._common, "time": round(time.time(), 3)}
        line = json.dumps(full, separators=(",", ":"))
        where = None if partition == self._shard.index else partition
        self._file(where).summary.add(full)
        now = self.clock()
        if not self._lines:
            self._opened = now
        self._lines.append((where, line.encode("utf-8") + b"\n"))
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
        """Make the window's outputs durable, then append its records with one fsync per file."""
        if not self._lines:
            return
        by_file: dict[int | None, list[bytes]] = {}
        for partition, line in self._lines:
            by_file.setdefault(partition, []).append(line)
        try:
            make_durable(self._outputs, self.sync)
            for partition, lines in by_file.items():
                self._file(partition).append(lines)
        except OSError as e:  # at worst a torn last line, which readers ignore
            if is_out_of_space(e):
                raise out_of_space(e, os.path.dirname(self.path)) from e
            raise
        self._lines, self._outputs, self._work = [], [], 0.0
        for partition in by_file:
            file = self._file(partition)
            file.summary.commit(file.size)

    def _file(self, partition: int | None) -> _LedgerFile:
        """The ledger file of ``partition`` (None: this shard's)."""
        if partition not in self._files:
            path = self.path
            if partition is not None:
                name = ledger_file_name(dataclasses.replace(self._shard, index=partition), self._writer)
                path = os.path.join(self._directory, name)
            self._files[partition] = _LedgerFile(path)
        return self._files[partition]

    def close(self) -> None:
        """Commit what is buffered and close the files; sink writers fsync their own files again."""
        try:
            self.commit()
        finally:
            if self._deferring:
                defer_output_sync(False)
                self._deferring = False
            for file in self._files.values():
                file.close()
            self._files.clear()
