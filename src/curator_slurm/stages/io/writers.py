"""JSONL and Parquet writers: one file per source task (parts past a size limit), named by the source task, written
under a hidden temporary name as batches come and renamed as the source task ends, fsynced unless the run ledger
took that over (:func:`defer_output_sync`).
Design: docs/design.md, section Readers and writers."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Collection
from typing import Any, BinaryIO

import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import OutputError
from curator_slurm.fs import TMP_MARK, atomic_write, remove_temporaries
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.outputs import (
    DEFAULT_MAX_FILE_SIZE,
    JSONL_COMPRESSIONS,
    Naming,
    OpenOutput,
    Part,
    append,
    compressed,
    discard,
    publish,
)
from curator_slurm.tasks import DocumentBatch, FileGroupTask, Task

#: ``pyarrow.parquet`` imports ``pyarrow.fs``, which loads the S3, GCS, Azure and HDFS bindings and ``ssl``:
#: about 25 ms of CPU in every array task, for a writer that only needs ``pyarrow._parquet``. The writer
#: calls that module's ParquetWriter with the arguments ``pyarrow.parquet.write_table`` gives it; a test
#: checks that both write the same bytes. A pyarrow whose private writer takes other arguments gets the
#: public function instead (same file, slower start); another test checks the fast path is the one taken.
_parquet = LazyModule("pyarrow._parquet")
pq = LazyModule("pyarrow.parquet")

__all__ = [
    "LINEAGE_KEY",
    "TMP_MARK",
    "BaseWriter",
    "JsonlWriter",
    "ParquetWriter",
    "atomic_write",
    "defer_output_sync",
    "output_stem",
    "output_sync_deferred",
    "remove_temporaries",
]

#: ``task.metadata`` key under which the stage adapter records a task's position within its source task:
#: ``""`` while every stage so far gave one output per input, else the output's index at each stage
#: that gave several, joined by ``-`` (``"2"``, ``"2-0"``). Stages need not (and should not) set it.
LINEAGE_KEY = "_lineage"


def output_stem(task: Task) -> str:
    """The file name (without extension) of ``task``'s output: ``<source id>`` for the usual one output
    per source task, ``<source id>-<lineage>`` when a stage split it. Depends only on the source task and
    the output's position within it, so it is the same in every shard, executor and re-run."""
    stem = task.source_id or task.task_id
    lineage = task.metadata.get(LINEAGE_KEY, "") if task.metadata else ""
    if lineage:
        stem = f"{stem}-{lineage}"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)


#: How many open run ledgers of this process make the outputs they record durable themselves.
_sync_deferred = 0


def defer_output_sync(deferred: bool) -> None:
    """Say that a run ledger of this process now makes the sink's outputs durable before it records them
    (``True``), or no longer does (``False``, once per ``True``). While one does, a sink writer renames its
    file into place without an fsync of its own. Worker processes forked afterwards inherit the setting.
    It is per process: a pipeline run at the same time in another thread of this process, without a run
    directory, would skip the fsync too (run such pipelines one after another, or in their own processes)."""
    global _sync_deferred
    _sync_deferred = max(0, _sync_deferred + (1 if deferred else -1))


def output_sync_deferred() -> bool:
    """Whether a run ledger of this process makes the sink's outputs durable (see :func:`defer_output_sync`)."""
    return _sync_deferred > 0


def _json_default(value: Any) -> Any:
    return str(value)  # dates, times, decimals: their text (bytes never get here: columns of bytes are refused)


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinite float inside it (lists, dicts) made None: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _holds_bytes(type_: pa.DataType) -> bool:
    """Whether a column of ``type_`` holds bytes anywhere (itself, or a field of a struct, list or map)."""
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_fixed_size_binary(type_):
        return True
    if getattr(pa.types, "is_binary_view", lambda _: False)(type_):
        return True
    if pa.types.is_dictionary(type_):
        return _holds_bytes(type_.value_type)
    return any(_holds_bytes(type_.field(i).type) for i in range(type_.num_fields))


class BaseWriter(ProcessingStage[DocumentBatch, FileGroupTask]):
    """One output file per source task (rolled over into numbered parts at ``max_file_size`` bytes), named by
    the source task (:func:`output_stem`), written under a temporary name as its batches come and published
    when the source task ends (:meth:`end_source`), into ``path``.

    Args:
        path: the output directory, local or ``s3://``.
        fields: the fields written (default all).
        max_file_size: an output part is closed, and the next begun, once it holds this many bytes.
        fan_out: put each output into a subdirectory ``ab/cd/`` from a hash of its name (for phases that write
            many thousands of files: a directory keeps about ``files / 65536`` entries).
    """

    extension = ""

    def __init__(
        self,
        path: str | os.PathLike,
        fields: list[str] | None = None,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        fan_out: bool = False,
    ) -> None:
        self.path = os.fspath(path) if fs.is_local(os.fspath(path)) else fs.absolute(path)
        self.fields = list(fields) if fields else None
        if max_file_size < 1:
            raise ValueError(f"{type(self).__name__}(max_file_size={max_file_size}): give a number of bytes >= 1")
        self.max_file_size = max_file_size
        if fan_out:  # set only when asked: other runs keep their fingerprint
            self.fan_out = True
        self._open: dict[str, OpenOutput] = {}

    fan_out: bool = False
    fingerprint_exclude = frozenset({"_open"})

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_open": {}}  # what a process has open is its own

    def __copy__(self) -> Any:  # a copy (``with_``) keeps its own open outputs
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._open = {}
        return new

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], list(self.fields or [])

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def output_dirs(self) -> list[str]:
        return [self.path]

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        fs.makedirs(self.path)

    def teardown(self) -> None:
        for out in self._open.values():  # source tasks that never ended here: nothing of them is published
            discard(out)
        self._open.clear()

    def remove_temporaries(self, pids: Collection[int]) -> list[str]:
        """The temporary files that processes ``pids`` (killed while writing) left in ``path``, deleted."""
        return remove_temporaries(self.path, pids)

    def remove_dead_temporaries(self) -> fs.Cleanup:
        """The temporary files that writers on this host which are gone left in ``path``, deleted (a resume
        calls it, whichever executor runs it); others' are left and counted."""
        return fs.remove_dead_temporaries(self.path)

    def existing_outputs(self) -> list[str]:
        """The files now in ``path`` that this writer could have written (by their names; hidden ones are
        never outputs): what a run starting afresh there must not mix with its own."""
        if not self.extension:
            return []
        if not self.fan_out:
            return fs.finished_files(self.path, self.extension)
        subdirs = [d for d in fs.finished_files(self.path, "") if fs.isdir(d) and len(fs.basename(d)) == 2]
        found = [f for d in subdirs for e in fs.finished_files(d, "") for f in fs.finished_files(e, self.extension)]
        return sorted(found)

    def naming(self) -> Naming:
        return Naming(self.path, self.fan_out)

    def output_path(self, task: DocumentBatch) -> str:
        """Where the output of ``task``'s source task goes when it is one file."""
        return self.naming().final(task.source_id or task.task_id, 0, 1, self.extension)

    def new_part(self, stem: str) -> Part:
        """A new part of the output ``stem``, its files open under temporary names in ``path``."""
        raise NotImplementedError

    def check(self, table: pa.Table) -> None:
        """Refuse a table this format cannot hold, before any file is made (nothing by default)."""

    #: Whether a batch with no rows still gets a file (Parquet keeps the schema; JSONL would be 0 bytes).
    write_empty = True

    def receipt(self, task: DocumentBatch, rows: int, **metadata: Any) -> FileGroupTask:
        """What the writer hands on for a batch it took: no file yet (the source task's comes at its end)."""
        return FileGroupTask(
            task_id=task.task_id,
            dataset_name=task.dataset_name,
            data=[],
            metadata={"rows": rows, "sizes": [], **metadata},
            stage_perf=task.stage_perf,
            source_id=task.source_id,
        )

    def opened(self, task: DocumentBatch) -> OpenOutput:
        """The open output of ``task``'s source task (begun with this batch when there is none)."""
        key = task.source_id or task.task_id
        out = self._open.get(key)
        if out is None:
            fs.makedirs(self.path)
            out = self._open[key] = OpenOutput(output_stem(task), task.dataset_name)
        return out

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.data.select(self.fields) if self.fields else task.data
        if table.num_rows or self.write_empty:
            self.check(table)
            out = self.opened(task)
            if table.num_rows or not out.parts:
                key = task.source_id or task.task_id
                append(out, table, lambda: self.new_part(key), self.max_file_size, key, self.path)
        return self.receipt(task, table.num_rows)

    def end_source(self, source: Task, failed: bool, whole: bool = True) -> list[Task]:
        """Publish the output of ``source`` (every part, named by the source task, or, when this process saw
        only a slice of its batches, by the first of them), or drop it when ``failed``."""
        key = source.source_id or source.task_id
        out = self._open.pop(key, None)
        if out is None:
            return []
        if failed or out.broken is not None:
            discard(out)
            return []
        # The sink's outputs are the ones a run ledger records, so it may leave their fsync to the ledger.
        sync = not (self.is_sink_stage and output_sync_deferred())
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in key) if whole else out.stem
        paths, sizes = publish(out, self.naming(), stem, sync)
        return [
            FileGroupTask(
                task_id=key,
                dataset_name=out.dataset_name,
                data=paths,
                metadata={"rows": 0, "sizes": sizes, **out.extra},
                source_id=key,
            )
        ]


class _JsonlPart(Part):
    """A JSONL part: lines appended to one (compressed) stream, ended at :meth:`finish`."""

    def __init__(self, main: fs.AtomicFile, ending: str, writer: JsonlWriter) -> None:
        super().__init__(main, ending)
        self.writer = writer
        self.stack = contextlib.ExitStack()
        self.stream = self.stack.enter_context(compressed(main.file, writer.compression))

    def write(self, table: pa.Table) -> bool:
        self.writer.write_table(table, self.stream)
        return True

    def size(self) -> int:
        self.stream.flush()
        return self.main.size()

    def finish(self) -> None:
        self.stack.close()


class _ParquetPart(Part):
    """A Parquet part: one row group per batch of one schema (a batch of another that cannot be cast to it
    begins the next part), the footer written at :meth:`finish`."""

    def __init__(self, main: fs.AtomicFile, ending: str, compression: str) -> None:
        super().__init__(main, ending)
        self.compression = compression
        self.writer: Any = None
        self.schema: pa.Schema | None = None

    def write(self, table: pa.Table) -> bool:
        if self.schema is None:
            self.writer = parquet_writer(self.main.file, table.schema, self.compression)
            self.schema = table.schema
        elif table.schema != self.schema:
            try:
                table = table.cast(self.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError):
                return False
        self.writer.write_table(table, row_group_size=None)
        return True

    def finish(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def parquet_writer(f: BinaryIO, schema: pa.Schema, compression: str) -> Any:
    """A Parquet writer into ``f`` with the settings ``pyarrow.parquet.write_table`` gives it, made by
    ``pyarrow._parquet`` when that takes them (see the note at the top of the module), else by ``pyarrow.parquet``."""
    try:
        return _parquet.ParquetWriter(
            f,
            schema,
            version="2.6",
            compression=compression,
            use_dictionary=True,
            write_statistics=True,
            writer_engine_version="V2",
            data_page_version="1.0",
        )
    except (AttributeError, TypeError):  # not the private writer this was written for; nothing written yet
        return pq.ParquetWriter(f, schema, compression=compression)


class JsonlWriter(BaseWriter):
    """Write each source task's documents as one ``.jsonl`` file (UTF-8, one compact JSON object per line; parts
    ``-p0``, ``-p1``, ... past ``max_file_size``), or compressed: ``compression="gzip"`` (``.jsonl.gz``) or
    ``"zstd"`` (``.jsonl.zst``), the same bytes in every run.

    A NaN or infinite float is written as ``null`` (JSON has none; pandas' ``to_json`` does the same). A column
    of bytes is refused, naming it: decode it to text first, or write Parquet.

    Args:
        path: the output directory, local or ``s3://``.
        fields: the fields written (default all).
        compression: None, ``"gzip"`` or ``"zstd"``.
        max_file_size: an output part is closed, and the next begun, once it holds this many bytes.
        fan_out: put each output into a subdirectory ``ab/cd/`` from a hash of its name.
    """

    name = "jsonl_writer"
    extension = ".jsonl"
    write_empty = False  # an empty .jsonl carries nothing, and readers refuse 0-byte files

    def __init__(
        self,
        path: str | os.PathLike,
        fields: list[str] | None = None,
        compression: str | None = None,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        fan_out: bool = False,
    ) -> None:
        super().__init__(path, fields, max_file_size, fan_out)
        if compression not in JSONL_COMPRESSIONS:
            raise ValueError(
                f"JsonlWriter(compression={compression!r}): give 'gzip' (.jsonl.gz), 'zstd' (.jsonl.zst) or None"
            )
        if compression is not None:  # set only when given: uncompressed runs keep their fingerprint
            self.compression = compression
            self.extension = JSONL_COMPRESSIONS[compression]

    compression: str | None = None

    def new_part(self, stem: str) -> Part:
        return _JsonlPart(fs.AtomicFile(fs.join(self.path, stem + self.extension)), self.extension, self)

    def check(self, table: pa.Table) -> None:
        binary = [field.name for field in table.schema if _holds_bytes(field.type)]
        if binary:
            raise OutputError(
                f"{self.path}: column(s) {binary} hold bytes, which JSON cannot; decode them to text in a stage "
                "before the writer, leave them out (the writer's fields=[...]), or write Parquet (ParquetWriter)"
            )

    def write_table(self, table: pa.Table, out: Any) -> None:
        """``table``'s rows as JSON lines into the (compressing) stream ``out``."""
        self.check(table)
        encode = json.JSONEncoder(
            ensure_ascii=False, separators=(",", ":"), default=_json_default, allow_nan=False
        ).encode
        for batch in table.to_batches(max_chunksize=8192):
            rows = batch.to_pylist()
            try:
                lines = [encode(row) for row in rows]
            except ValueError:  # a NaN or infinity somewhere in the batch: null, as pandas writes it
                lines = [encode(_finite(row)) for row in rows]
            if lines:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))


class ParquetWriter(BaseWriter):
    """Write each source task's documents as one ``.parquet`` file (a row group per batch; parts ``-p0``,
    ``-p1``, ... past ``max_file_size``, or where a batch's schema cannot be cast to the part's).

    Args:
        path: the output directory, local or ``s3://``.
        fields: the fields written (default all).
        compression: Parquet's codec (``"snappy"``, ``"zstd"``, ``"gzip"``, ``"none"``, ...).
        max_file_size: an output part is closed, and the next begun, once it holds this many bytes.
        fan_out: put each output into a subdirectory ``ab/cd/`` from a hash of its name.
    """

    name = "parquet_writer"
    extension = ".parquet"

    def __init__(
        self,
        path: str | os.PathLike,
        fields: list[str] | None = None,
        compression: str = "snappy",
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        fan_out: bool = False,
    ) -> None:
        super().__init__(path, fields, max_file_size, fan_out)
        self.compression = compression

    def new_part(self, stem: str) -> Part:
        main = fs.AtomicFile(fs.join(self.path, stem + self.extension))
        return _ParquetPart(main, self.extension, self.compression)
