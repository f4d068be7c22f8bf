"""Bounded batches of a file reader: the documents of one source task handed on a batch at a time (at most
``batch_rows`` documents, about ``batch_bytes`` bytes), each with the metadata document positions need."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from curator_slurm.errors import InputError
from curator_slurm.stages.notes import add_notes
from curator_slurm.tasks import DocumentBatch, Task

#: A reader's default bound on the bytes of one batch (the Arrow bytes of its documents, about the size of
#: the text read): large enough that the per-batch costs do not show, small enough that a file of a few GB
#: flows through the later stages in visible steps and in bounded memory.
DEFAULT_BATCH_BYTES = 64 << 20


@dataclass(frozen=True)
class BatchBound:
    """At most ``rows`` documents and about ``bytes`` bytes per batch (None: no bound of that kind)."""

    rows: int | None = None
    bytes: int | None = DEFAULT_BATCH_BYTES

    def fits(self, rows: int, size: int) -> bool:
        return (self.rows is None or rows <= self.rows) and (self.bytes is None or size <= self.bytes)

    def rows_per_slice(self, table: pa.Table) -> int | None:
        """How many rows of ``table`` make one bounded slice; None when the whole table fits."""
        if self.fits(table.num_rows, table.nbytes):
            return None
        per_row = table.nbytes / max(table.num_rows, 1)
        limits = [self.rows] if self.rows is not None else []
        if self.bytes is not None:
            limits.append(int(self.bytes // per_row) if per_row > 0 else table.num_rows)
        return max(1, min(limits))


def slices(table: pa.Table, bound: BatchBound) -> Iterator[pa.Table]:
    """``table`` cut into slices of one batch each (itself when it fits, an empty table too)."""
    rows = bound.rows_per_slice(table)
    if rows is None:
        yield table
        return
    for start in range(0, table.num_rows, rows):
        yield table.slice(start, rows)


@dataclass
class Piece:
    """Consecutive documents of one file of a source task: ``file`` (its index in the task's files), the
    ``table`` and the row of its first document (``first_row``), with what the reader noted reading them."""

    file: int
    table: pa.Table
    first_row: int
    notes: list[dict[str, Any]] = field(default_factory=list)


def concat_tables(tables: list[pa.Table], paths: list[str]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowTypeError, pa.ArrowInvalid) as e:
        schemas = "; ".join(
            f"{p}: {t.schema.to_string(show_schema_metadata=False)}" for p, t in zip(paths, tables, strict=True)
        )
        raise InputError(f"{', '.join(paths)}: files of one group have incompatible schemas ({e}): {schemas}") from e


def pack(task: Task, pieces: Iterable[Piece], bound: BatchBound, row_counter: Any) -> Iterator[DocumentBatch]:
    """The batches of ``task`` made of ``pieces`` (in order): consecutive pieces joined while they fit
    ``bound``; a source task whose pieces all fit makes one batch of every file, as it always did.
    ``row_counter`` numbers the records of a piece of a split file (positions ask its ``rows_before``)."""
    group: list[Piece] = []
    rows = size = 0
    for piece in pieces:
        # Parts of one file read one after another may differ in inferred types: never in one batch.
        reparsed = bool(group) and group[-1].file == piece.file and group[-1].table.schema != piece.table.schema
        if group and (reparsed or not bound.fits(rows + piece.table.num_rows, size + piece.table.nbytes)):
            yield batch_of(task, group, row_counter)
            group, rows, size = [], 0, 0
        group.append(piece)
        rows, size = rows + piece.table.num_rows, size + piece.table.nbytes
    if group:
        yield batch_of(task, group, row_counter)


def batch_of(task: Task, group: list[Piece], row_counter: Any) -> DocumentBatch:
    """One batch of ``task``'s documents from consecutive ``group`` pieces, with the metadata positions need."""
    paths: list[str] = list(task.data)
    files: list[int] = []
    file_rows: list[int] = []
    first_rows: list[int] = []
    for piece in group:
        if files and files[-1] == piece.file:
            file_rows[-1] += piece.table.num_rows
        else:
            files.append(piece.file)
            file_rows.append(piece.table.num_rows)
            first_rows.append(piece.first_row)
    table = concat_tables([p.table for p in group], [paths[p.file] for p in group])
    metadata: dict[str, Any] = {
        "files": [paths[k] for k in files],
        "file_rows": file_rows,
        "first_rows": first_rows,
        "row_counter": row_counter,
    }
    indices = task.metadata.get("file_indices")
    if indices is not None:
        metadata["file_indices"] = [indices[k] for k in files]
    elif len(files) < len(paths):
        metadata["file_indices"] = files  # positions number files by their place in the task otherwise
    batch = task.derive(table, cls=DocumentBatch, **metadata)
    assert isinstance(batch, DocumentBatch)
    for piece in group:
        for notes in piece.notes:
            add_notes(batch.metadata, notes.get("counts") or {}, notes.get("damaged") or [])
    return batch


def set_bound(reader: Any, batch_rows: int | None, batch_bytes: int | str | None) -> None:
    """Give ``reader`` (a file reader stage) the bound of its batches: at most ``batch_rows`` documents, about
    ``batch_bytes`` bytes (a size such as ``"256MiB"``); None lifts that bound. Set as instance attributes only
    when they are not the defaults, so the fingerprints of runs that keep them do not change."""
    from curator_slurm.stages.io.partitioning import parse_size

    if batch_rows is not None and (not isinstance(batch_rows, int) or batch_rows < 1):
        raise ValueError(f"batch_rows={batch_rows!r}: give a number of documents >= 1, or None for no bound")
    try:
        size = None if batch_bytes is None else parse_size(batch_bytes)
    except ValueError:
        raise ValueError(f"batch_bytes={batch_bytes!r} is not a size; write e.g. '256MiB', or None") from None
    if size is not None and size < 1:
        raise ValueError(f"batch_bytes={batch_bytes!r}: give a size >= 1 byte, or None for no bound")
    if batch_rows is not None:
        reader.batch_rows = batch_rows
    if size != DEFAULT_BATCH_BYTES:
        reader.batch_bytes = size


__all__ = ["DEFAULT_BATCH_BYTES", "BatchBound", "Piece", "batch_of", "concat_tables", "pack", "set_bound", "slices"]
