"""JSONL and Parquet writers: one file per batch, named by its lineage (:func:`output_stem`), written under a
hidden temporary name and renamed, fsynced unless the run ledger took that over (:func:`defer_output_sync`).
Design: docs/design.md, section Readers and writers."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
from collections.abc import Collection, Iterator
from typing import Any, BinaryIO

import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import OutputError
from curator_slurm.fs import TMP_MARK, atomic_write, remove_temporaries
from curator_slurm.stages.base import ProcessingStage
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


#: What :class:`JsonlWriter` takes for ``compression``: the file ending of each.
JSONL_COMPRESSIONS = {None: ".jsonl", "gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
#: The gzip level of compressed JSONL (zlib's own default: about datatrove's size, at a third of level 9's time).
GZIP_LEVEL = 6


class _Unclosable(io.RawIOBase):
    """``f`` for a compressing stream that closes what it wraps: writes go through, a close leaves ``f`` open (the
    atomic write still flushes, measures and renames it)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


@contextlib.contextmanager
def compressed(f: BinaryIO, compression: str | None) -> Iterator[Any]:
    """A stream writing into ``f``, compressed with ``compression`` (None: ``f`` itself), always the same bytes
    for the same data however it is written in pieces: gzip with no file name and time 0 in its header
    (:data:`GZIP_LEVEL`); zstd one frame from pyarrow's streaming compressor at its fixed default level, with
    no content size in the header."""
    if compression is None:
        yield f
    elif compression == "gzip":
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=GZIP_LEVEL, mtime=0) as stream:
            yield stream
    else:
        stream = pa.CompressedOutputStream(_Unclosable(f), compression)
        try:
            yield stream
        finally:
            stream.close()


class BaseWriter(ProcessingStage[DocumentBatch, FileGroupTask]):
    """One output file per batch, named by its lineage (:func:`output_stem`), written atomically into ``path``.

    Args:
        path: the output directory, local or ``s3://``.
        fields: the fields written (default all).
    """

    extension = ""

    def __init__(self, path: str | os.PathLike, fields: list[str] | None = None) -> None:
        self.path = os.fspath(path) if fs.is_local(os.fspath(path)) else fs.absolute(path)
        self.fields = list(fields) if fields else None

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], list(self.fields or [])

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def output_dirs(self) -> list[str]:
        return [self.path]

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        fs.makedirs(self.path)

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
        return fs.finished_files(self.path, self.extension) if self.extension else []

    def output_path(self, task: DocumentBatch) -> str:
        return fs.join(self.path, output_stem(task) + self.extension)

    def write_table(self, table: pa.Table, f: BinaryIO) -> None:
        raise NotImplementedError

    def check(self, table: pa.Table) -> None:
        """Refuse a table this format cannot hold, before any file is made (nothing by default)."""

    #: Whether a batch with no rows still gets a file (Parquet keeps the schema; JSONL would be 0 bytes).
    write_empty = True

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.data.select(self.fields) if self.fields else task.data
        final = self.output_path(task)
        written, sizes = [final], []
        if table.num_rows or self.write_empty:
            self.check(table)
            fs.makedirs(self.path)
            # The sink's outputs are the ones a run ledger records, so it may leave their fsync to the ledger.
            sync = not (self.is_sink_stage and output_sync_deferred())
            sizes.append(atomic_write(final, lambda f: self.write_table(table, f), sync=sync))
        else:
            written = []
        return FileGroupTask(
            task_id=task.task_id,
            dataset_name=task.dataset_name,
            data=written,
            metadata={"rows": table.num_rows, "sizes": sizes},
            stage_perf=task.stage_perf,
            source_id=task.source_id,
        )


class JsonlWriter(BaseWriter):
    """Write each batch as a ``.jsonl`` file (UTF-8, one compact JSON object per line), or compressed:
    ``compression="gzip"`` (``.jsonl.gz``) or ``"zstd"`` (``.jsonl.zst``), the same bytes in every run.

    A NaN or infinite float is written as ``null`` (JSON has none; pandas' ``to_json`` does the same). A column
    of bytes is refused, naming it: decode it to text first, or write Parquet.

    Args:
        path: the output directory, local or ``s3://``.
        fields: the fields written (default all).
        compression: None, ``"gzip"`` or ``"zstd"``.
    """

    name = "jsonl_writer"
    extension = ".jsonl"
    write_empty = False  # an empty .jsonl carries nothing, and readers refuse 0-byte files

    def __init__(
        self, path: str | os.PathLike, fields: list[str] | None = None, compression: str | None = None
    ) -> None:
        super().__init__(path, fields)
        if compression not in JSONL_COMPRESSIONS:
            raise ValueError(
                f"JsonlWriter(compression={compression!r}): give 'gzip' (.jsonl.gz), 'zstd' (.jsonl.zst) or None"
            )
        if compression is not None:  # set only when given: uncompressed runs keep their fingerprint
            self.compression = compression
            self.extension = JSONL_COMPRESSIONS[compression]

    compression: str | None = None

    def check(self, table: pa.Table) -> None:
        binary = [field.name for field in table.schema if _holds_bytes(field.type)]
        if binary:
            raise OutputError(
                f"{self.path}: column(s) {binary} hold bytes, which JSON cannot; decode them to text in a stage "
                "before the writer, leave them out (the writer's fields=[...]), or write Parquet (ParquetWriter)"
            )

    def write_table(self, table: pa.Table, f: BinaryIO) -> None:
        self.check(table)
        encode = json.JSONEncoder(
            ensure_ascii=False, separators=(",", ":"), default=_json_default, allow_nan=False
        ).encode
        with compressed(f, self.compression) as out:
            for batch in table.to_batches(max_chunksize=8192):
                rows = batch.to_pylist()
                try:
                    lines = [encode(row) for row in rows]
                except ValueError:  # a NaN or infinity somewhere in the batch: null, as pandas writes it
                    lines = [encode(_finite(row)) for row in rows]
                if lines:
                    out.write(("\n".join(lines) + "\n").encode("utf-8"))


class ParquetWriter(BaseWriter):
    """Write each batch as a ``.parquet`` file.

    Args:
        path: the output directory, local or ``s3://``.
        fields: the fields written (default all).
        compression: Parquet's codec (``"snappy"``, ``"zstd"``, ``"gzip"``, ``"none"``, ...).
    """

    name = "parquet_writer"
    extension = ".parquet"

    def __init__(self, path: str | os.PathLike, fields: list[str] | None = None, compression: str = "snappy") -> None:
        super().__init__(path, fields)
        self.compression = compression

    def write_table(self, table: pa.Table, f: BinaryIO) -> None:
        try:
            writer = _parquet.ParquetWriter(
                f,
                table.schema,
                version="2.6",
                compression=self.compression,
                use_dictionary=True,
                write_statistics=True,
                writer_engine_version="V2",
                data_page_version="1.0",
            )
        except (AttributeError, TypeError):  # not the private writer this was written for; nothing written yet
            pq.write_table(table, f, compression=self.compression)
            return
        try:
            writer.write_table(table, row_group_size=None)
        finally:
            writer.close()
