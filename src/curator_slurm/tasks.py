"""Units of work that flow between stages: the :class:`EmptyTask` a pipeline starts from, the source tasks its
first stage makes (usually :class:`FileGroupTask`), and the tasks that descend from them (``source_id``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import pyarrow as pa
import xxhash

from . import fs

T = TypeVar("T")
#: A task type: what :meth:`Task.derive` returns (the deriving task's own, or the ``cls`` it is given).
TaskT = TypeVar("TaskT", bound="Task[Any]")

#: Seed of every id hash in the project. Changing it changes every output name: never do that.
ID_HASH_SEED = 0

#: How source task ids are made; recorded in every run's fingerprint, so a run directory written under
#: another scheme is refused (its ledger's ids would never match) instead of silently redone.
#: 1: hashes of absolute paths. 2: hashes of paths relative to the reader's root.
ID_SCHEME = 2


def id_paths(absolute: list[str], root: str | None) -> list[str]:
    """What a file group's id hashes: the paths relative to ``root`` (always with ``/``), else as given."""
    if root is None:
        return absolute
    return [fs.relative(p, root) for p in absolute]


def content_id(*parts: str) -> str:
    """A short, stable id for content: xxh64 (seed 0) of the parts joined by NUL, as 16 hex digits.

    Stable across processes, hosts and ``PYTHONHASHSEED``, unlike ``hash()``. A file name that is not UTF-8
    (Python gives its bytes as surrogate escapes) hashes as its bytes (``surrogateescape``, as ``os.fsencode``
    does); every valid string hashes as its UTF-8, so no id changes.
    """
    return xxhash.xxh64_hexdigest("\0".join(parts).encode("utf-8", "surrogateescape"), seed=ID_HASH_SEED)


@dataclass(slots=True)
class StagePerf:
    """How long one stage spent on one task and how many rows went in and out."""

    stage: str
    seconds: float
    rows_in: int
    rows_out: int


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a task's documents came from, as readers, the chain of phases, positions and dedup share it.

    Args:
        files: the input files (absolute paths or URIs) the task's documents were read from, in order.
        file_rows: how many documents each of ``files`` gave (None when unknown).
        file_indices: each file's place in the sorted listing of every input (None: its place in ``files``).
        root: the directory the reader was pointed at; ids and positions use paths relative to it.
        upstream_index: for a phase reading an earlier phase's outputs, the upstream task's place among them.
    """

    files: tuple[str, ...] = ()
    file_rows: tuple[int, ...] | None = None
    file_indices: tuple[int, ...] | None = None
    root: str | None = None
    upstream_index: int | None = None

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> Origin:
        """The origin a task's metadata holds (its keys ``files``, ``file_rows``, ``file_indices``, ``root``,
        ``upstream_index``: the form that travels with a task between processes and into the ledger)."""
        rows, indices = metadata.get("file_rows"), metadata.get("file_indices")
        upstream = metadata.get("upstream_index")
        return cls(
            files=tuple(metadata.get("files") or ()),
            file_rows=None if rows is None else tuple(int(r) for r in rows),
            file_indices=None if indices is None else tuple(int(i) for i in indices),
            root=metadata.get("root"),
            upstream_index=None if upstream is None else int(upstream),
        )

    def as_metadata(self) -> dict[str, Any]:
        """The metadata keys of this origin (those that are set), for ``task.derive(data, **origin.as_metadata())``."""
        meta: dict[str, Any] = {"files": list(self.files)}
        if self.file_rows is not None:
            meta["file_rows"] = list(self.file_rows)
        if self.file_indices is not None:
            meta["file_indices"] = list(self.file_indices)
        if self.root is not None:
            meta["root"] = self.root
        if self.upstream_index is not None:
            meta["upstream_index"] = self.upstream_index
        return meta


# Tasks have __slots__ (every subclass too, or it gets a __dict__ again): a driver may hold a million
# source tasks, and the shard filter reads task_id from each; without a per-object dict that is one
# memory access, not three (about 10 % of the filter's time per task, measured by make bench).
@dataclass(slots=True)
class Task(Generic[T]):
    """Base of all tasks.

    ``task_id`` must be deterministic for source tasks (it decides the shard and names the outputs).
    A task created without an id gets a random one and ``has_deterministic_id`` False, which the
    framework refuses for source tasks while sharding is active.
    """

    task_id: str = ""
    dataset_name: str = ""
    data: T = None  # type: ignore[assignment]
    metadata: dict[str, Any] = field(default_factory=dict)
    stage_perf: list[StagePerf] = field(default_factory=list)
    source_id: str | None = None
    has_deterministic_id: bool = field(default=True, repr=False)

    def __post_init__(self) -> None:
        if not self.task_id:
            self.task_id = "rand-" + os.urandom(8).hex()
            self.has_deterministic_id = False

    @property
    def num_items(self) -> int:
        """Rows for batches, files for file groups, 1 otherwise."""
        return 1

    @property
    def origin(self) -> Origin:
        """Where this task's documents came from (typed; see :class:`Origin`)."""
        return Origin.of(self.metadata)

    def where(self) -> str:
        """The input files of this task for a message (its id when it has none)."""
        return ", ".join(self.metadata.get("files") or ()) or self.task_id

    @property
    def weight(self) -> int:
        """Relative cost of this task, used by the balanced shard strategy (bytes when known)."""
        return int(self.metadata.get("bytes", 1))

    @overload
    def derive(self: TaskT, data: Any, task_id: str | None = None, cls: None = None, **metadata: Any) -> TaskT: ...
    @overload
    def derive(self, data: Any, task_id: str | None = None, *, cls: type[TaskT], **metadata: Any) -> TaskT: ...
    def derive(self, data: Any, task_id: str | None = None, cls: type[Task] | None = None, **metadata: Any) -> Task:
        """A new task carrying ``data`` that keeps this task's lineage, name and metadata (a task of this
        task's class, or of ``cls``)."""
        klass = cls or type(self)
        return klass(
            task_id=task_id or self.task_id,
            dataset_name=self.dataset_name,
            data=data,
            metadata={**self.metadata, **metadata},
            stage_perf=list(self.stage_perf),
            source_id=self.source_id,
        )


def as_table(data: Any) -> Any:
    """``data`` as a ``pyarrow.Table`` when it is a pandas DataFrame (its index left out, as a filtered frame's
    row labels are not data); anything else as it is."""
    if type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas"):
        table = pa.Table.from_pandas(data, preserve_index=False)
        # pandas' Arrow-backed strings come as large_string; the stages' kernels read string.
        large = [i for i, f in enumerate(table.schema) if pa.types.is_large_string(f.type)]
        for i in large:
            table = table.set_column(i, table.field(i).name, table.column(i).cast(pa.string()))
        return table.replace_schema_metadata(None)
    return data


@dataclass(slots=True, init=False)
class DocumentBatch(Task[pa.Table]):
    """A batch of documents as a ``pyarrow.Table``.

    As NeMo Curator's, it may be built from a pandas DataFrame (``DocumentBatch(data=df, dataset_name=...,
    _metadata=batch._metadata, _stage_perf=batch._stage_perf)``, what a NeMo stage written on pandas returns):
    the frame becomes a table at once, so every stage after it reads Arrow. :meth:`to_pandas` gives a stage a
    DataFrame (the ``pandas`` extra) and :meth:`to_pyarrow` the table.

    Args:
        task_id: the task's id (kept by :meth:`derive`; a source task's decides its shard).
        dataset_name: the name of the data set.
        data: a ``pyarrow.Table``, or a pandas DataFrame (converted).
        metadata: what travels with the task (its origin, among others); ``_metadata`` is NeMo's spelling.
        stage_perf: the time each stage took; ``_stage_perf`` is NeMo's spelling.
        source_id: the source task it descends from.
        has_deterministic_id: False for a task given no id (a random one is made).
    """

    def __init__(
        self,
        task_id: str = "",
        dataset_name: str = "",
        data: Any = None,
        metadata: dict[str, Any] | None = None,
        stage_perf: list[StagePerf] | None = None,
        source_id: str | None = None,
        has_deterministic_id: bool = True,
        *,
        _metadata: dict[str, Any] | None = None,
        _stage_perf: list[StagePerf] | None = None,
    ) -> None:
        meta = metadata if metadata is not None else _metadata
        perf = stage_perf if stage_perf is not None else _stage_perf
        Task.__init__(  # the dataclass's own, which calls __post_init__
            self,
            task_id,
            dataset_name,
            as_table(data),
            dict(meta) if meta is not None else {},
            list(perf) if perf is not None else [],
            source_id,
            has_deterministic_id,
        )

    @property
    def _metadata(self) -> dict[str, Any]:
        """NeMo Curator's name of :attr:`metadata`."""
        return self.metadata

    @property
    def _stage_perf(self) -> list[StagePerf]:
        """NeMo Curator's name of :attr:`stage_perf`."""
        return self.stage_perf

    @property
    def num_items(self) -> int:
        return 0 if self.data is None else self.data.num_rows

    def to_pyarrow(self) -> pa.Table:
        """The documents as a ``pyarrow.Table`` (what :attr:`data` holds)."""
        return self.data

    def to_pandas(self) -> Any:
        """The documents as a pandas DataFrame, a new one each call (needs the ``pandas`` extra)."""
        from .extras import load

        load("pandas", "DocumentBatch.to_pandas", "pandas")
        return self.data.to_pandas()

    def get_columns(self) -> list[str]:
        """The names of the batch's fields (NeMo Curator's)."""
        return [] if self.data is None else list(self.data.column_names)

    @overload
    def derive(self, data: Any, task_id: str | None = None, cls: None = None, **metadata: Any) -> DocumentBatch: ...
    @overload
    def derive(self, data: Any, task_id: str | None = None, *, cls: type[TaskT], **metadata: Any) -> TaskT: ...
    def derive(self, data: Any, task_id: str | None = None, cls: type[Task] | None = None, **metadata: Any) -> Task:
        # Not super(): a slots dataclass is a new class, which zero-argument super() does not know.
        return Task.derive(self, as_table(data), task_id=task_id, cls=cls or DocumentBatch, **metadata)


@dataclass(slots=True)
class FileGroupTask(Task[list[str]]):
    """A group of file paths: the usual source task, and what writers report as written."""

    @classmethod
    def from_paths(
        cls, paths: list[str], dataset_name: str = "", root: str | None = None, **metadata: Any
    ) -> FileGroupTask:
        """A file group whose id hashes its sorted paths (so listing order never matters).

        With ``root`` (the directory a reader was pointed at), the id hashes the paths relative to it, so the
        same data reached through another mount point, or moved, keeps its ids (and its outputs' names, and
        what the ledger says is done). Without it the absolute paths are hashed. ``data`` is always absolute (a
        URI keeps its scheme: :func:`curator_slurm.fs.absolute`).
        """
        absolute = sorted(fs.absolute(p) for p in paths)
        if "bytes" not in metadata:
            metadata["bytes"] = sum(fs.size(p) for p in absolute)
        if root is not None:
            metadata["root"] = fs.absolute(root)
        return cls(
            task_id=content_id(*id_paths(absolute, metadata.get("root"))),
            dataset_name=dataset_name,
            data=absolute,
            metadata=metadata,
        )

    @classmethod
    def from_range(
        cls, path: str, start: int, end: int, dataset_name: str = "", root: str | None = None, **metadata: Any
    ) -> FileGroupTask:
        """The piece ``[start, end)`` of one file: it holds the lines (JSONL) or row groups (Parquet) that
        start in that range. Its id hashes the path (relative to ``root`` when given) and the range, so
        pieces of one file never share an id with it or each other."""
        absolute = fs.absolute(path)
        metadata.update(bytes=end - start, byte_range=[start, end])
        if root is not None:
            metadata["root"] = fs.absolute(root)
        return cls(
            task_id=content_id(*id_paths([absolute], metadata.get("root")), f"bytes={start}-{end}"),
            dataset_name=dataset_name,
            data=[absolute],
            metadata=metadata,
        )

    @property
    def num_items(self) -> int:
        return len(self.data or [])


@dataclass(slots=True)
class EmptyTask(Task[None]):
    """The seed a pipeline starts from: the source stage turns it into source tasks."""

    task_id: str = "empty"


@dataclass(slots=True)
class NoneTask(Task[None]):
    """A filtered slot (a stage returned nothing, or the shard filter dropped the task); later stages skip it."""

    task_id: str = "none"


@dataclass(slots=True)
class FailedTask(Task[None]):
    """A task whose stage raised after all retries; carries the error for the ledger."""

    task_id: str = "failed"
    stage: str = ""
    error: str = ""
    traceback: str = ""
    attempts: int = 0


SENTINELS = (EmptyTask, NoneTask, FailedTask)
