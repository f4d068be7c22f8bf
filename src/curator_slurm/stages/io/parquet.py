"""Reading Parquet files: whole, the row groups that start in a byte range, and where a range's rows begin."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError

pq = LazyModule("pyarrow.parquet")


@contextlib.contextmanager
def parquet_errors(path: str, where: str) -> Iterator[None]:
    """pyarrow's low-level errors while reading a Parquet file, as one InputError that names it."""
    try:
        yield
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise InputError(f"{path}: no such file; was it removed after the run started?") from e
        raise InputError(f"{where}: not a readable Parquet file ({e}); it may be truncated or not Parquet") from e


def require_fields(fields: list[str] | None, names: list[str], where: str) -> None:
    missing = [f for f in fields or [] if f not in names]
    if missing:
        raise InputError(f"{where}: missing field(s) {missing}; the file has {names}")


def parquet_names(path: str) -> list[str]:
    with parquet_errors(path, path):
        return list(pq.read_schema(parquet_source(path)).names)


def read_parquet(path: str, fields: list[str] | None = None) -> pa.Table:
    """Read one Parquet file, turning pyarrow's low-level errors into one that names the file."""
    with parquet_errors(path, path):
        if fields is not None:
            require_fields(fields, pq.read_schema(parquet_source(path)).names, path)
        return pq.read_table(parquet_source(path), columns=fields)


def parquet_source(path: str) -> Any:
    """What pyarrow's Parquet functions read: a local path as it is (a name that is not UTF-8 opened by its
    bytes), a URI opened through the layer (its row groups and footer then come by ranged reads)."""
    return fs.native_source(path) if fs.is_local(path) else fs.open_input(path)


def parquet_rows_before(path: str, offset: int) -> int:
    """How many rows of a Parquet file lie in the row groups that start before byte ``offset``."""
    if offset <= 0:
        return 0
    with pq.ParquetFile(parquet_source(path)) as f:
        meta = f.metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        return sum(g.num_rows for g in groups if row_group_start(g) < offset)


def row_group_start(group: Any) -> int:
    """The offset of a row group's first byte: its earliest column chunk page (a dictionary page comes
    before the data pages)."""
    starts = []
    for i in range(group.num_columns):
        column = group.column(i)
        starts.append(column.data_page_offset)
        if column.has_dictionary_page and column.dictionary_page_offset:
            starts.append(column.dictionary_page_offset)
    return min(starts, default=0)


def read_parquet_range(path: str, start: int, end: int, fields: list[str] | None = None) -> pa.Table | None:
    """The row groups of a Parquet file that start in ``[start, end)``; None when none does (row groups
    are not cut, so a range smaller than one row group may hold none)."""
    where = f"{path} (bytes {start}-{end})"
    with parquet_errors(path, where), pq.ParquetFile(parquet_source(path)) as parquet:
        require_fields(fields, parquet.schema_arrow.names, where)
        meta = parquet.metadata
        # A start at or past the end (metadata that is off) belongs to the last piece, so no row is lost.
        last = end >= fs.size(path)
        starts = [row_group_start(meta.row_group(i)) for i in range(meta.num_row_groups)]
        groups = [i for i, at in enumerate(starts) if start <= at and (at < end or last)]
        if not groups:
            return None
        return parquet.read_row_groups(groups, columns=fields)


def select_fields(table: pa.Table, fields: list[str] | None, path: str) -> pa.Table:
    if fields is None:
        return table
    require_fields(fields, table.column_names, path)
    return table.select(fields)
