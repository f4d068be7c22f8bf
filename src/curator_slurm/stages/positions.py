"""Where each document comes from: its *position*, (input path relative to the reader's root, row in that file),
computed from what the reader recorded in the batch's metadata only when a stage asks (:func:`document_positions`).
Design: docs/design.md, section Document positions and ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.stages.text.compute import cast
from curator_slurm.tasks import DocumentBatch, id_paths

#: Rows per file that a document key can tell apart: keys are ``file_index << ROW_BITS | row``.
ROW_BITS = 32


class RowCounter(Protocol):
    """What numbers the records of a piece of a split file: a reader class (its classmethod) or a reader
    (whose settings decide which records make documents)."""

    def rows_before(self, path: str, offset: int) -> int: ...


@dataclass(frozen=True)
class Positions:
    """The positions of a batch's rows: parallel arrays, one entry per row."""

    paths: pa.Array  # string: input path relative to the reader's root (bytes that are not UTF-8 as \xNN)
    rows: np.ndarray  # int64: row of the document in that file (0-based, blank JSONL lines not counted)
    file_indices: np.ndarray  # int64: the file's place in the sorted listing of every input file
    #: Each file's path relative to the root as the OS names it (bytes that are not UTF-8 as surrogate escapes,
    #: which :func:`~.tasks.content_id` hashes as those bytes), and which of them each row is in.
    names: tuple[str, ...] = ()
    which: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    @property
    def keys(self) -> np.ndarray:
        """One int64 per row that sorts as (path, row) does: ``file_index << 32 | row``."""
        return (self.file_indices << ROW_BITS) | self.rows


def document_positions(batch: DocumentBatch) -> Positions:
    """The position of every row of ``batch``, which must come straight from a reader (or through stages
    that kept every row): a stage that dropped rows before this makes the positions unknowable."""
    meta, origin = batch.metadata, batch.origin
    files, file_rows = list(origin.files), origin.file_rows
    where = f"task {batch.task_id}" + (f" ({', '.join(files)})" if files else "")
    if meta.get("files") is None or file_rows is None:
        raise InputError(
            f"{where}: this batch does not say which files its rows came from, so document positions (ids, "
            "deduplication) cannot be computed; read it with JsonlReader or ParquetReader"
        )
    if sum(file_rows) != batch.num_items:
        raise InputError(
            f"{where}: the reader read {sum(file_rows)} rows but this batch has {batch.num_items}; a stage "
            "before this one dropped or added rows, so positions are lost. Put the stage that needs positions "
            "(AddId, deduplication) right after the reader, before any filter"
        )
    relative = id_paths(files, origin.root)
    first = [int(r) for r in meta.get("first_rows") or [0] * len(files)]
    byte_range = meta.get("byte_range")
    if byte_range is not None:
        first[0] += rows_before(files[0], int(byte_range[0]), meta.get("row_counter"))
    indices = origin.file_indices or range(len(files))
    counts = np.asarray(file_rows, dtype=np.int64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.arange(int(counts.sum()), dtype=np.int64) - starts + np.repeat(np.asarray(first, np.int64), counts)
    if len(rows) and int(rows.max()) >= 1 << ROW_BITS:
        raise InputError(f"{where}: a file has more than 2**{ROW_BITS} rows; split it into smaller files")
    which = np.repeat(np.arange(len(files), dtype=np.int32), counts)
    shown = pa.array([fs.printable(p) for p in relative], pa.string())
    paths = pa.DictionaryArray.from_arrays(pa.array(which, pa.int32()), shown)
    return Positions(
        paths=cast(paths, pa.string()),
        rows=rows,
        file_indices=np.repeat(np.asarray(list(indices), np.int64), counts),
        names=tuple(relative),
        which=which,
    )


def rows_before(path: str, offset: int, counter: RowCounter | None = None) -> int:
    """How many documents of ``path`` come before byte ``offset`` (the start of a piece of a split file), as
    the reader class ``counter`` numbers its records (its ``rows_before``); without one, by the file's
    ending: row groups wholly before it for Parquet, non-blank lines starting before it for JSONL."""
    if offset <= 0:
        return 0
    if counter is not None:
        return int(counter.rows_before(path, offset))
    from curator_slurm.stages.io.jsonl import jsonl_rows_before
    from curator_slurm.stages.io.parquet import parquet_rows_before

    return parquet_rows_before(path, offset) if path.lower().endswith(".parquet") else jsonl_rows_before(path, offset)


def relative_path(path: str, root: str | None) -> str:
    """``path`` as positions name it: relative to ``root`` with ``/`` separators."""
    return id_paths([fs.absolute(path)], root)[0]
