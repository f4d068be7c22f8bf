"""JSONL and Parquet readers: a file group in, one :class:`DocumentBatch` out."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.stages.base import CompositeStage, ProcessingStage
from curator_slurm.stages.io.batching import (
    DEFAULT_BATCH_BYTES,
    BatchBound,
    Piece,
    concat_tables,  # noqa: F401 - imported from here too
    pack,
    set_bound,
    slices,
)
from curator_slurm.stages.io.columns import FILE_PATH, SchemaLike, check_file_path_field, to_schema
from curator_slurm.stages.io.jsonl import MAX_LINE_BYTES, iter_jsonl, jsonl_rows_before, read_jsonl
from curator_slurm.stages.io.parquet import (
    parquet_errors,
    parquet_names,
    parquet_rows_before,
    parquet_source,
    read_parquet,
    read_parquet_range,
    require_fields,
    row_group_start,
)
from curator_slurm.stages.io.partitioning import FilePartitioningStage, input_root, list_inputs, parse_size
from curator_slurm.tasks import DocumentBatch, FileGroupTask

pq = LazyModule("pyarrow.parquet")


def _check_planned_sizes(task: FileGroupTask) -> None:
    """A task rebuilt from a plan made before it ran knows each file's size when it was planned
    (``metadata["file_sizes"]``): an input removed or changed since then is refused here, naming the file,
    instead of being read as something other than what was planned."""
    sizes = task.metadata.get("file_sizes")
    if not sizes:
        return
    for path, planned in zip(task.data, sizes, strict=False):
        if not fs.exists(path):
            raise InputError(
                f"{path}: the file was removed after the run was planned (at submit); restore it, "
                "or submit the run again to plan the inputs as they are now"
            )
        now = fs.size(path)
        if now != planned:
            raise InputError(
                f"{path}: the file is {now} bytes but was {planned} when the run was planned (at submit); "
                "restore it, or submit the run again (into a new run directory if outputs exist) to "
                "plan the inputs as they are now"
            )


class FileReaderStage(ProcessingStage[FileGroupTask, DocumentBatch]):
    """The public base of file readers: reads the files of a group into batches of at most ``batch_rows``
    documents and about ``batch_bytes`` bytes (:mod:`.batching`), handed on one at a time; a group that fits
    one batch makes one batch, whose id is the group's id.

    A subclass implements :meth:`read_file` (a whole file into a table, one row per document, in the file's
    order) and, if its files can be cut into record-aligned byte ranges (``split_files``), :meth:`read_range`
    (the records that *start* in ``[start, end)``) and :meth:`rows_before` (how many records start before an
    offset); to read a large file in bounded memory it overrides :meth:`tables`. The base records which files
    each batch came from, so positions (relative path, record number), ids and deduplication work for every
    reader without knowing its format.
    """

    #: The bound of a batch: at most this many documents (None: no bound) ...
    batch_rows: int | None = None
    #: ... and about this many bytes (the Arrow bytes of its documents; None: no bound). Instance attributes
    #: only when set, so runs that keep the defaults keep their fingerprints.
    batch_bytes: int | None = DEFAULT_BATCH_BYTES

    def __init__(
        self, fields: list[str] | None = None, schema: SchemaLike | None = None, file_path_field: str | None = FILE_PATH
    ) -> None:
        self.fields = list(fields) if fields else None
        self._schema = to_schema(schema) if schema is not None else None
        #: The declared types as text: what the run fingerprint records.
        self.schema = {f.name: str(f.type) for f in self._schema} if self._schema is not None else None
        #: The column naming each document's source file (:data:`FILE_PATH`); None: no such column.
        self.file_path_field = check_file_path_field(file_path_field)

    # --- the source file of each document ---------------------------------------------------------------
    def names_source(self) -> bool:
        """Whether documents get the :attr:`file_path_field` column: always when every field is read, else
        when ``fields`` asks for it."""
        name = getattr(self, "file_path_field", None)
        return bool(name) and (self.fields is None or name in self.fields)

    def file_fields(self) -> list[str] | None:
        """The fields to read from a file: ``fields`` without the source-file column, which a file need not
        have (the reader makes it then)."""
        if self.fields is None or not self.names_source():
            return self.fields
        return [f for f in self.fields if f != self.file_path_field]

    def source_name(self, task: FileGroupTask | DocumentBatch, path: str) -> str:
        """What the source-file column says for ``path``: its path relative to the task's input root, with ``/``
        (for an object store's URI too), so the same on every machine, mount point, shard, re-run and store (a
        run on S3 writes what the same run on local disk writes); the path as given when there is no root. A name
        that is not UTF-8 is shown with its bytes as ``\\xNN`` (as positions show it: a column holds text)."""
        root = task.metadata.get("root")
        try:
            return fs.printable(path if root is None else fs.relative(path, root))
        except ValueError:  # not under the root (another filesystem): the whole path or URI says it
            return fs.printable(path)

    def with_source(self, table: pa.Table, source: str, where: str) -> pa.Table:
        """``table`` with the source-file column (unless it has one: a document read from an earlier phase keeps
        the file it came from), its columns those of ``fields`` in their order when given."""
        if not self.names_source():
            return table
        name = self.file_path_field
        assert name is not None
        if name not in table.column_names:
            table = table.append_column(name, pa.repeat(pa.scalar(source, pa.string()), table.num_rows))
        if self.fields is None:
            return table
        require_fields(self.fields, table.column_names, where)
        return table.select(self.fields)

    @property
    def bound(self) -> BatchBound:
        return BatchBound(self.batch_rows, self.batch_bytes)

    def read_file(self, path: str) -> pa.Table:
        raise NotImplementedError

    def read_range(self, path: str, start: int, end: int) -> pa.Table | None:
        """The records of ``path`` that start in ``[start, end)``; None when none does."""
        raise InputError(
            f"{path} (bytes {start}-{end}): {type(self).__name__} cannot read part of a file; "
            "partition these files without split_files"
        )

    @classmethod
    def rows_before(cls, path: str, offset: int) -> int:
        """How many records of ``path`` start before byte ``offset``: the record number of the first record of
        a piece that starts there. Only readers that read byte ranges need it."""
        raise InputError(f"{path}: {cls.__name__} cannot count the records before byte {offset}")

    def tables(self, path: str, byte_range: tuple[int, int] | None, bound: BatchBound) -> Iterator[Any]:
        """The documents of ``path`` (of the records that start in ``byte_range``) in file order, as tables of
        one batch at most (``bound``), or :class:`Piece` objects that carry the reader's notes; a whole file
        yields at least one. This reads the whole file (:meth:`read_file`) and slices it; a reader that can read
        a file a part at a time overrides it, to read a large file in bounded memory."""
        if byte_range is not None:
            table = self.read_range(path, *byte_range)
            if table is None:  # no record starts in this piece of the file
                return
        else:
            table = self.read_file(path)
        yield from slices(table, bound)

    def row_counter(self) -> Any:
        """What numbers the records of a piece of a split file (positions call its ``rows_before``)."""
        return type(self)

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], []

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], self.fields

    def process(self, task: FileGroupTask) -> DocumentBatch | None:
        """Every document of ``task`` in one batch (None when a piece of a split file holds no record); a
        pipeline reads it a batch at a time instead (:meth:`stream`)."""
        _check_planned_sizes(task)
        unbounded = BatchBound(None, None)
        return next(pack(task, self._pieces(task, unbounded), unbounded, self.row_counter()), None)

    def stream(self, task: FileGroupTask) -> Iterator[DocumentBatch]:
        """The documents of ``task`` in batches of at most :attr:`bound`, made one at a time as they are taken."""
        _check_planned_sizes(task)
        return pack(task, self._pieces(task, self.bound), self.bound, self.row_counter())

    def process_batch(self, tasks: list[FileGroupTask]) -> list[Any]:
        """One iterator of bounded batches per task (:meth:`stream`), which the stage adapter hands on one
        batch at a time; a subclass that overrides :meth:`process` is called as any stage is."""
        if type(self).process is not FileReaderStage.process:
            return super().process_batch(tasks)
        return [self.stream(t) for t in tasks]

    def _pieces(self, task: FileGroupTask, bound: BatchBound) -> Iterator[Piece]:
        byte_range = task.metadata.get("byte_range")
        for k, path in enumerate(task.data):
            first = 0
            cut = (int(byte_range[0]), int(byte_range[1])) if byte_range else None
            source = self.source_name(task, path) if self.names_source() else ""
            for table in self.tables(path, cut, bound):
                piece = table if isinstance(table, Piece) else Piece(k, table, first)
                piece.file, piece.first_row = k, first
                piece.table = self.with_source(piece.table, source, path)
                yield piece
                first += piece.table.num_rows


class JsonlReaderStage(FileReaderStage):
    name = "jsonl_reader"

    #: The longest line read (bytes); an instance attribute only when set, so runs that keep the default keep
    #: the fingerprint they had before the option existed.
    max_line_bytes: int = MAX_LINE_BYTES

    def _jsonl_fields(self) -> list[str] | None:
        """The fields taken from a file's records: every one when ``fields`` asks for the source-file column
        (kept if the file has it; :meth:`with_source` then selects ``fields``; parsing reads every field anyway)."""
        return None if self.file_fields() != self.fields else self.fields

    def read_file(self, path: str) -> pa.Table:
        table = read_jsonl(path, self._jsonl_fields(), schema=self._schema, max_line_bytes=self.max_line_bytes)
        assert table is not None  # only a byte range can hold no record
        return table

    def read_range(self, path: str, start: int, end: int) -> pa.Table | None:
        return read_jsonl(path, self._jsonl_fields(), (start, end), self._schema, self.max_line_bytes)

    def tables(self, path: str, byte_range: tuple[int, int] | None, bound: BatchBound) -> Iterator[Any]:
        """A part of about ``bound.bytes`` of lines read and parsed at a time (:func:`iter_jsonl`)."""
        fields = self._jsonl_fields()
        parts = iter_jsonl(path, fields, byte_range, self._schema, self.max_line_bytes, bound.bytes)
        for table in parts:
            yield from slices(table, bound)

    @classmethod
    def rows_before(cls, path: str, offset: int) -> int:
        return jsonl_rows_before(path, offset)


class ParquetReaderStage(FileReaderStage):
    name = "parquet_reader"

    def _parquet_fields(self, names: Any) -> list[str] | None:
        """The columns read from a file whose columns are ``names`` (a callable giving them, asked only when
        needed): ``fields``, with the source-file column only if the file has it."""
        wanted = self.file_fields()
        if wanted == self.fields:
            return wanted
        column = self.file_path_field
        return [*(wanted or []), *([column] if column is not None and column in names() else [])]

    def read_file(self, path: str) -> pa.Table:
        return read_parquet(path, self._parquet_fields(lambda: parquet_names(path)))

    def read_range(self, path: str, start: int, end: int) -> pa.Table | None:
        return read_parquet_range(path, start, end, self._parquet_fields(lambda: parquet_names(path)))

    def tables(self, path: str, byte_range: tuple[int, int] | None, bound: BatchBound) -> Iterator[Any]:
        """A file (or piece) that fits one batch as :meth:`read_file` reads it; a larger one a row group at a
        time, each cut to the bound."""
        where = path if byte_range is None else f"{path} (bytes {byte_range[0]}-{byte_range[1]})"
        with parquet_errors(path, where), pq.ParquetFile(parquet_source(path)) as parquet:
            meta = parquet.metadata
            groups = list(range(meta.num_row_groups))
            if byte_range is not None:
                last = byte_range[1] >= fs.size(path)
                starts = [row_group_start(meta.row_group(i)) for i in groups]
                groups = [i for i in groups if byte_range[0] <= starts[i] and (starts[i] < byte_range[1] or last)]
            size = sum(meta.row_group(i).total_byte_size for i in groups)
            if len(groups) <= 1 or bound.fits(sum(meta.row_group(i).num_rows for i in groups), size):
                yield from super().tables(path, byte_range, bound)
                return
            fields = self._parquet_fields(lambda: parquet.schema_arrow.names)
            require_fields(fields, parquet.schema_arrow.names, where)
            for i in groups:
                yield from slices(parquet.read_row_group(i, columns=fields), bound)

    @classmethod
    def rows_before(cls, path: str, offset: int) -> int:
        return parquet_rows_before(path, offset)


class FileReader(CompositeStage[FileGroupTask, DocumentBatch]):
    """The public base of reader composites: a :class:`FilePartitioningStage` (the source stage: lists the
    files under ``file_paths`` and groups them into source tasks with deterministic ids) and a
    :class:`FileReaderStage` (``reader_class``) that reads each group. A subclass sets ``reader_class``,
    ``default_extensions`` and whether it ``can_split`` files into byte ranges; deduplication workflows take
    any such reader (they call :meth:`with_fields`, :meth:`input_files` and :meth:`input_root`).

    Args:
        file_paths: a file, a directory (listed recursively) or a list of them, local or ``s3://``.
        files_per_partition: files per source task (not with ``blocksize``); default one file per task.
        blocksize: the size of a source task's files together, e.g. ``"512MiB"`` (not with ``files_per_partition``).
        fields: the fields to read (default all).
        file_extensions: the endings or globs to take instead of the reader's own.
        limit: read only the first this many source tasks.
        split_files: cut files larger than ``blocksize`` into record-aligned byte ranges.
        schema: the types of the fields, for formats whose types come from the data.
        batch_rows: the most documents in a batch (None: no bound).
        batch_bytes: about the most bytes in a batch, e.g. ``"256MiB"`` (None: no bound).
        file_path_field: the column naming each document's file (None: no such column).
    """

    #: The endings listed when no ``file_extensions`` is given. What the run fingerprint records (as the
    #: partitioner's ``file_extensions``); the names actually taken are :attr:`read_extensions`.
    default_extensions: tuple[str, ...] = ()
    #: The endings taken by default, in any case (``.JSONL``); with :attr:`decompresses`, each also followed by
    #: any compression ending the layer decodes (:data:`fs.COMPRESSIONS`). Empty: as default.
    read_extensions: tuple[str, ...] = ()
    decompresses = False
    reader_class: type[FileReaderStage] = FileReaderStage
    can_split = False  # whether the reader reads byte ranges (split_files)
    infers_types = False  # whether column types come from the data (so a schema can fix them)

    def __init__(
        self,
        file_paths: str | os.PathLike | list[str],
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        fields: list[str] | None = None,
        file_extensions: list[str] | None = None,
        limit: int | None = None,
        split_files: bool = False,
        schema: SchemaLike | None = None,
        *,
        batch_rows: int | None = None,
        batch_bytes: int | str | None = DEFAULT_BATCH_BYTES,
        file_path_field: str | None = FILE_PATH,
    ) -> None:
        if split_files and not self.can_split:
            raise ValueError(
                f"{type(self).__name__}(split_files=True): these files cannot be read by byte range; "
                "use blocksize alone, or write smaller files"
            )
        if schema is not None and not self.infers_types:
            raise ValueError(
                f"{type(self).__name__}(schema=...): these files carry their own types; cast columns in a stage "
                "if they differ between files"
            )
        wanted = file_extensions or self.read_extensions or self.default_extensions
        self.partitioner = FilePartitioningStage(
            file_paths,
            files_per_partition=files_per_partition,
            blocksize=blocksize,
            file_extensions=file_extensions or list(self.default_extensions),
            limit=limit,
            split_files=split_files,
            patterns=fs.name_patterns(wanted, self.decompresses) if wanted else None,
            wanted=fs.describe_names(wanted, self.decompresses) if wanted else "",
        )
        self.reader = self.reader_class(fields, schema)
        self.reader.file_path_field = check_file_path_field(file_path_field)
        set_bound(self.reader, batch_rows, batch_bytes)

    def decompose(self) -> list[ProcessingStage]:
        return [self.partitioner, self.reader]

    def input_files(self) -> list[str]:
        """The files this reader reads, as it lists them (sorted; their order numbers the documents)."""
        return list_inputs(self.partitioner.file_paths, self.partitioner.patterns).files

    def input_root(self) -> str:
        """The directory its files' ids, positions and ``file_path`` are relative to."""
        return input_root(self.partitioner.file_paths)

    def with_fields(self, fields: list[str]) -> FileReader:
        """A copy of this reader that reads only ``fields`` (e.g. a dedup hash phase needs only the text)."""
        copied = copy.copy(self)
        copied.reader = copy.copy(self.reader)
        copied.reader.fields = list(fields)
        return copied


class JsonlReader(FileReader):
    """Read JSONL files (plain or compressed) into document batches, one batch per file group, or
    per piece of a file with ``split_files=True`` and ``blocksize``.

    Takes ``.jsonl``, ``.json`` and ``.ndjson`` in any case, plain or compressed (gz, bz2, xz, zst/zstd, lz4,
    br); other files under the path are skipped and listed in one log line (``file_extensions`` takes endings
    or globs instead). The arguments not below are :class:`FileReader`'s.

    Args:
        max_line_bytes: the longest line read (256 MiB by default); a longer one fails its task naming the file
            and line.
    """

    name = "jsonl_reader"
    default_extensions = (".jsonl", ".json", ".jsonl.gz", ".jsonl.zst", ".json.gz")
    read_extensions = (*default_extensions, ".ndjson")
    decompresses = True
    reader_class = JsonlReaderStage
    can_split = True
    infers_types = True

    def __init__(
        self,
        file_paths: str | os.PathLike | list[str],
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        fields: list[str] | None = None,
        file_extensions: list[str] | None = None,
        limit: int | None = None,
        split_files: bool = False,
        schema: SchemaLike | None = None,
        max_line_bytes: int | str = MAX_LINE_BYTES,
        *,
        batch_rows: int | None = None,
        batch_bytes: int | str | None = DEFAULT_BATCH_BYTES,
        file_path_field: str | None = FILE_PATH,
    ) -> None:
        super().__init__(
            file_paths,
            files_per_partition,
            blocksize,
            fields,
            file_extensions,
            limit,
            split_files,
            schema,
            batch_rows=batch_rows,
            batch_bytes=batch_bytes,
            file_path_field=file_path_field,
        )
        try:
            limit_bytes = parse_size(max_line_bytes)
        except ValueError:
            raise ValueError(f"max_line_bytes={max_line_bytes!r} is not a size; write e.g. '512MiB'") from None
        if limit_bytes != MAX_LINE_BYTES:
            if limit_bytes >= 1 << 31:
                raise ValueError(f"max_line_bytes={max_line_bytes!r}: pyarrow reads blocks below 2 GiB; use less")
            self.reader.max_line_bytes = limit_bytes  # type: ignore[attr-defined]


class ParquetReader(FileReader):
    """Read Parquet files into document batches, one batch per file group, or per piece of a file with
    ``split_files=True`` and ``blocksize``: a piece reads the row groups that start in it. Its arguments are
    :class:`FileReader`'s."""

    name = "parquet_reader"
    default_extensions = (".parquet",)
    reader_class = ParquetReaderStage
    can_split = True
