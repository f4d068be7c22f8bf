"""The hash shuffle that joins the phases of a workflow through the shared filesystem: :class:`BucketWriter` (rows
sorted by bucket, one row group per bucket), :class:`BucketSource` (one task per bucket) and :class:`BucketReader`.
Design: docs/design.md, "Deduplication"; format: docs/reference.md, "Workflows and deduplication"."""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.writers import output_stem
from curator_slurm.stages.text.compute import call, filter_table
from curator_slurm.tasks import DocumentBatch, EmptyTask, FileGroupTask, content_id

pq = LazyModule("pyarrow.parquet")

BUCKET = "bucket"
_SPLIT = np.uint64(11400714819323198485)  # Fibonacci hashing: spreads keys that differ in low bits


def bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each uint64/int64 key: a multiplicative hash of the key, modulo ``buckets``.

    Keys are hashes already, but mixing again keeps buckets even when a caller passes something regular
    (e.g. document keys)."""
    mixed = keys.astype(np.uint64, copy=False) * _SPLIT
    return (mixed >> np.uint64(32)) % np.uint64(buckets)


class SortedFileWriter(ProcessingStage[DocumentBatch, FileGroupTask]):
    """Write each batch sorted by ``column`` into ``<path>/<output stem>.parquet`` (its source task's id, and its
    place among the batches of that task when there are several: ``output_stem``), atomically, with ``column``'s
    statistics in every row group, so a reader can pick the row groups of a value or a range from the footer.
    Row groups hold one value each (``group_rows=None``) or ``group_rows`` rows. A batch with no rows writes no
    file: the next phase reads what the ledger records, where that task is done with no output.

    Args:
        path: the directory of the files (local, or a URI).
        column: the column each file is sorted by, with its statistics in every row group.
        group_rows: rows per row group; None: one row group per value of ``column``.
        compression: Parquet's codec; a shuffle of many small row groups that is read once may prefer "lz4"
            (measured on fuzzy dedup's bands: 2x faster to write, 3x to read, 18 % larger than zstd).
    """

    name = "sorted_file_writer"

    def __init__(
        self, path: str | os.PathLike, column: str, group_rows: int | None = None, compression: str = "zstd"
    ) -> None:
        self.path = os.fspath(path) if fs.is_local(os.fspath(path)) else fs.absolute(path)
        self.column = column
        self.group_rows = group_rows
        self.compression = compression

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.column]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        fs.makedirs(self.path)

    def remove_temporaries(self, pids: Collection[int]) -> list[str]:
        """The temporary files that processes ``pids`` (workers killed while writing) left in ``path``, deleted."""
        return fs.remove_temporaries(self.path, pids)

    def remove_dead_temporaries(self) -> fs.Cleanup:
        """What writers on this host that are gone left half-written in ``path``, deleted (on resume)."""
        return fs.remove_dead_temporaries(self.path)

    def existing_outputs(self) -> list[str]:
        """The files now in ``path`` that this writer could have written."""
        return fs.finished_files(self.path, ".parquet")

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.data
        if self.column not in table.column_names:
            raise InputError(f"stage {self.name!r}: the batch of task {task.task_id} has no {self.column!r} column")
        values = table.column(self.column).to_numpy()
        order = np.argsort(values, kind="stable")
        table = call("take", table, pa.array(order))
        if self.group_rows is None:
            bounds = np.flatnonzero(np.diff(values[order])) + 1
        else:
            bounds = np.arange(self.group_rows, table.num_rows, self.group_rows)
        pieces = np.split(np.arange(table.num_rows), bounds) if table.num_rows else []
        final = fs.join(self.path, f"{output_stem(task)}.parquet")
        if not pieces:
            return FileGroupTask(
                task_id=task.task_id,
                dataset_name=task.dataset_name,
                data=[],
                metadata={"rows": 0, "sizes": []},
                source_id=task.source_id,
            )

        def write(f: BinaryIO) -> None:
            writer = pq.ParquetWriter(f, table.schema, compression=self.compression, write_statistics=[self.column])
            try:
                for piece in pieces:
                    writer.write_table(table.slice(int(piece[0]), len(piece)), row_group_size=len(piece))
            finally:
                writer.close()

        size = fs.atomic_write(final, write)
        return FileGroupTask(
            task_id=task.task_id,
            dataset_name=task.dataset_name,
            data=[final],
            metadata={"rows": table.num_rows, "sizes": [size]},
            source_id=task.source_id,
        )


class BucketWriter(SortedFileWriter):
    """The map side of the shuffle: a batch with a ``bucket`` column, one row group per bucket.

    Args:
        path: the shuffle directory (local, or a URI).
        compression: Parquet's codec (see :class:`SortedFileWriter`).
    """

    name = "bucket_writer"

    def __init__(self, path: str | os.PathLike, compression: str = "zstd") -> None:
        super().__init__(path, BUCKET, compression=compression)


class BucketSource(ProcessingStage[EmptyTask, FileGroupTask]):
    """One source task per bucket of a shuffle directory: the reduce side's work list.

    Ids depend only on the shuffle's name and the bucket number, so they are known (for planning and
    submission) before the phase that writes the files has run. The files are those the ``upstream`` phase's
    ledger records (never a listing of the directory), found when the task runs.

    Args:
        path: the shuffle directory.
        buckets: the number of buckets, at least 1: one source task each.
        shuffle_name: names the tasks' ids, with the bucket number.
        upstream: the phase that wrote the files, whose ledger says which.
    """

    name = "bucket_source"

    fingerprint_exclude = frozenset({"upstream"})  # where the earlier phase is recorded, not what this does

    def __init__(self, path: str | os.PathLike, buckets: int, shuffle_name: str, upstream: Upstream) -> None:
        if buckets < 1:
            raise ValueError(f"buckets={buckets} must be >= 1")
        self.path = os.fspath(path)
        self.buckets = buckets
        self.shuffle_name = shuffle_name
        self.upstream = upstream

    def upstreams(self) -> list[Any]:
        return [self.upstream]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in super().params().items() if k != "path"}  # like inputs: not where it is mounted

    def process(self, task: EmptyTask) -> list[FileGroupTask]:
        return [
            FileGroupTask(
                task_id=content_id(self.shuffle_name, f"bucket={b}"),
                dataset_name=self.shuffle_name,
                data=[],
                metadata={
                    "bucket": b,
                    "shuffle_dir": fs.absolute(self.path),
                    "upstream": self.upstream.as_json(),
                    "bytes": 1,
                },
            )
            for b in range(self.buckets)
        ]


def shuffle_files(upstream: Upstream) -> list[str]:
    """The Parquet files the phase ``upstream`` recorded (a shuffle, a list of keys), sorted."""
    return files_of(upstream, suffix=".parquet")


#: Footers already parsed in this process: a bucket task opens every file of the shuffle, and one worker
#: runs many bucket tasks over the same files, so each footer is parsed once per process, not once per
#: bucket (keyed by path, size and mtime, so a rewritten file is read afresh).
_FOOTERS: dict[tuple[str, int, int, str], tuple[Any, list[tuple[int, int] | None]]] = {}
_FOOTER_CACHE_SIZE = 8192


def column_ranges(path: str, column: str) -> tuple[Any, list[tuple[int, int] | None]]:
    """The footer of a Parquet file and, per row group, the (min, max) statistics of ``column`` (None for an
    empty group or one without statistics)."""
    if fs.is_local(path):
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns, column)
    else:  # an object is never rewritten in place under one name by a run: its size tells versions apart
        key = (path, fs.size(path), 0, column)
    cached = _FOOTERS.get(key)
    if cached is not None:
        return cached
    meta = pq.read_metadata(path if fs.is_local(path) else fs.open_input(path))
    index = meta.schema.to_arrow_schema().get_field_index(column)
    ranges: list[tuple[int, int] | None] = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        stats = group.column(index).statistics if index >= 0 else None
        ranges.append((stats.min, stats.max) if group.num_rows and stats is not None and stats.has_min_max else None)
    if len(_FOOTERS) >= _FOOTER_CACHE_SIZE:
        _FOOTERS.clear()
    _FOOTERS[key] = (meta, ranges)
    return meta, ranges


def read_overlapping(path: str, column: str, low: int, high: int, columns: list[str] | None = None) -> pa.Table | None:
    """The row groups of ``path`` whose ``column`` statistics overlap ``[low, high]`` (whole groups; the
    caller filters rows), or None when none does."""
    meta, ranges = column_ranges(path, column)
    groups = [i for i, r in enumerate(ranges) if r is not None and r[0] <= high and r[1] >= low]
    if not groups:
        return None
    with pq.ParquetFile(path if fs.is_local(path) else fs.open_input(path), metadata=meta) as f:
        return f.read_row_groups(groups, columns=columns, use_threads=False)  # small groups: threads cost more


def read_bucket(files: list[str], bucket: int, columns: list[str] | None = None) -> pa.Table | None:
    """The rows of ``bucket`` from every file: the row groups whose bucket statistics say ``bucket``."""
    tables = [t for t in (read_overlapping(path, BUCKET, bucket, bucket, columns) for path in files) if t is not None]
    if not tables:
        return None
    table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    if columns is not None and BUCKET not in columns:
        return table
    return filter_table(table, pa.array(table.column(BUCKET).to_numpy() == bucket))


class BucketReader(ProcessingStage[FileGroupTask, DocumentBatch]):
    """Read one bucket (the source task from :class:`BucketSource`) from every file of the shuffle."""

    name = "bucket_reader"

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], None

    def process(self, task: FileGroupTask) -> DocumentBatch | None:
        files = shuffle_files(Upstream.of(task.metadata["upstream"]))
        table = read_bucket(files, int(task.metadata["bucket"]))
        if table is None:
            return None
        return task.derive(table, cls=DocumentBatch, files=files)
