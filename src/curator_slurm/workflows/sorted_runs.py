"""The sorted-run shuffle: :class:`SortedRunWriter` writes one file per batch with each bucket's rows sorted, in
small compressed blocks behind an index at the head; :func:`read_run` streams one bucket's blocks of one file by
ranged reads. Design: docs/design.md, "Deduplication"; format: docs/reference.md, "Workflows and deduplication"."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.stages.io.writers import output_stem
from curator_slurm.tasks import DocumentBatch, FileGroupTask
from curator_slurm.workflows.shuffle import BUCKET, SortedFileWriter

MAGIC = b"CSRUNS01"
SUFFIX = ".runs"
#: magic, buckets, schema length (bytes of JSON after the header), reserved.
_HEADER = struct.Struct("<8sQQQ")
#: A block's rows and compressed bytes, before its payload.
_BLOCK = struct.Struct("<II")
#: Bytes of rows per block (rows of about 20 bytes for fuzzy dedup's bands, 130 with 8-bit signatures): what a
#: reader decodes at once, so a merge of 90,000 runs holds 1.4 GB of blocks.
DEFAULT_BLOCK_BYTES = 16 << 10
#: The block codec (pyarrow's LZ4 frame): the bands' values are hashes, so a stronger codec gains little.
CODEC = "lz4"
#: The most bytes of schema a header may declare (a damaged header must not make a reader allocate much).
_MAX_SCHEMA = 1 << 16
#: Bytes of schema read with the header (the bands' is about 130): a bucket task reads this much of every file.
_SCHEMA_GUESS = 480


@dataclass(frozen=True)
class Column:
    """One fixed-width column of a run file: a numpy dtype and, for fixed-size binary, its width in bytes."""

    name: str
    dtype: str
    width: int = 0  # 0: a scalar per row; w: w bytes per row (uint8)

    @property
    def itemsize(self) -> int:
        return self.width if self.width else np.dtype(self.dtype).itemsize


def columns_of(schema: pa.Schema) -> list[Column]:
    """The run columns of an Arrow schema (every column but ``bucket``): numbers, or fixed-size binary."""
    out = []
    for field in schema:
        if field.name == BUCKET:
            continue
        if pa.types.is_fixed_size_binary(field.type):
            out.append(Column(field.name, "|u1", field.type.byte_width))
        elif pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
            out.append(Column(field.name, np.dtype(field.type.to_pandas_dtype()).str))
        else:
            raise InputError(f"sorted runs: column {field.name!r} is {field.type}, not a number or fixed-size binary")
    return out


def _numpy(column: pa.ChunkedArray | pa.Array, spec: Column) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not spec.width:
        return array.to_numpy(zero_copy_only=False).astype(spec.dtype, copy=False)
    raw = np.frombuffer(array.buffers()[1], dtype=np.uint8)
    return raw[array.offset * spec.width : (array.offset + len(array)) * spec.width].reshape(len(array), spec.width)


def _encode(parts: list[np.ndarray], rows: int, codec: pa.Codec) -> bytes:
    payload = b"".join(np.ascontiguousarray(p).tobytes() for p in parts)
    packed = codec.compress(payload, asbytes=True)
    return _BLOCK.pack(rows, len(packed)) + packed


def encode_file(
    arrays: list[np.ndarray], columns: list[Column], buckets: np.ndarray, count: int, block_rows: int
) -> list[bytes]:
    """The pieces of a run file: header, schema, index, then each bucket's blocks (rows already sorted by
    bucket, then by the sort columns)."""
    codec = pa.Codec(CODEC)
    schema = json.dumps([[c.name, c.dtype, c.width] for c in columns]).encode()
    starts = np.searchsorted(buckets, np.arange(count + 1))
    sections: list[bytes] = []
    for b in range(count):
        lo, hi = int(starts[b]), int(starts[b + 1])
        blocks = [_encode([a[s : min(s + block_rows, hi)] for a in arrays], min(block_rows, hi - s), codec)
                  for s in range(lo, hi, block_rows)]  # fmt: skip
        sections.append(b"".join(blocks))
    head = _HEADER.size + len(schema) + 8 * (count + 1)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sections])]).astype("<u8") + head
    return [_HEADER.pack(MAGIC, count, len(schema), 0), schema, offsets.tobytes(), *sections]


class SortedRunWriter(SortedFileWriter):
    """The map side of the sorted-run shuffle: a batch with a ``bucket`` column (and numbers or fixed-size binary
    columns otherwise) into ``<path>/<output stem>.runs``, each bucket's rows sorted by ``sort`` (a sorted run) in
    blocks of ``block_rows``, the buckets' byte ranges in an index at the head, so a reader of one bucket reads
    the header, one index entry and its own bytes.

    Args:
        path: the shuffle directory (local, or a URI).
        buckets: the number of buckets (the index has an entry per bucket).
        sort: the columns each bucket's rows are sorted by, most significant first.
        block_rows: rows per compressed block (what a reader decodes at once); None: as many as fill
            :data:`DEFAULT_BLOCK_BYTES`, at least 16.
    """

    name = "sorted_run_writer"

    def __init__(
        self, path: str | os.PathLike, buckets: int, sort: tuple[str, ...], block_rows: int | None = None
    ) -> None:
        super().__init__(path, BUCKET)
        if buckets < 1 or (block_rows is not None and block_rows < 1):
            raise ValueError(f"buckets={buckets} and block_rows={block_rows} must be >= 1")
        self.buckets = buckets
        self.sort = tuple(sort)
        self.block_rows = block_rows

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [BUCKET, *self.sort]

    def existing_outputs(self) -> list[str]:
        return fs.finished_files(self.path, SUFFIX)

    def process(self, task: DocumentBatch) -> FileGroupTask:
        table = task.data
        missing = [c for c in (BUCKET, *self.sort) if c not in table.column_names]
        if missing:
            raise InputError(f"stage {self.name!r}: the batch of task {task.task_id} has no column {missing}")
        meta: dict[str, Any] = {"rows": table.num_rows, "sizes": []}
        out = FileGroupTask(task_id=task.task_id, dataset_name=task.dataset_name, data=[], metadata=meta,
                            source_id=task.source_id)  # fmt: skip
        if not table.num_rows:
            return out
        buckets = table.column(BUCKET).to_numpy().astype(np.int64)
        if buckets.min() < 0 or buckets.max() >= self.buckets:
            raise InputError(f"stage {self.name!r}: a bucket outside 0..{self.buckets - 1} in task {task.task_id}")
        columns = columns_of(table.schema)
        arrays = {c.name: _numpy(table.column(c.name), c) for c in columns}
        order = np.lexsort([arrays[name] for name in reversed(self.sort)] + [buckets])
        block_rows = self.block_rows or max(16, DEFAULT_BLOCK_BYTES // sum(c.itemsize for c in columns))
        pieces = encode_file([arrays[c.name][order] for c in columns], columns, buckets[order], self.buckets,
                             block_rows)  # fmt: skip
        final = fs.join(self.path, f"{output_stem(task)}{SUFFIX}")

        def write(f: BinaryIO) -> None:
            for piece in pieces:
                f.write(piece)

        size = fs.atomic_write(final, write)
        out.data = [final]
        meta["sizes"] = [size]
        return out


Rows = dict[str, np.ndarray]


@dataclass(frozen=True)
class RunHead:
    """What a run file's head says: its columns, and where one bucket's blocks are."""

    columns: list[Column]
    start: int
    end: int


def read_head(path: str, bucket: int) -> RunHead:
    """The columns of ``path`` and the byte range of ``bucket``'s blocks: two small ranged reads."""
    head = fs.read_range(path, 0, _HEADER.size + _SCHEMA_GUESS)
    if len(head) < _HEADER.size:
        raise InputError(f"{fs.printable(path)}: not a sorted-run file (too short)")
    magic, count, schema_len, _ = _HEADER.unpack_from(head)
    if magic != MAGIC or schema_len > _MAX_SCHEMA or not 0 <= bucket < count:
        raise InputError(f"{fs.printable(path)}: not a sorted-run file of bucket {bucket} (header {magic!r}, {count})")
    end_of_schema = _HEADER.size + schema_len
    if len(head) < end_of_schema:
        head = fs.read_range(path, 0, end_of_schema)
    try:
        columns = [Column(str(n), str(d), int(w)) for n, d, w in json.loads(head[_HEADER.size : end_of_schema])]
    except (ValueError, TypeError) as e:
        raise InputError(f"{fs.printable(path)}: a damaged sorted-run schema ({e})") from e
    entry = fs.read_range(path, end_of_schema + 8 * bucket, 16)
    if len(entry) < 16:
        raise InputError(f"{fs.printable(path)}: the sorted-run index is cut short")
    start, end = struct.unpack("<QQ", entry)
    if start > end:
        raise InputError(f"{fs.printable(path)}: a damaged sorted-run index (bucket {bucket}: {start} > {end})")
    return RunHead(columns, start, end)


def _decode(
    payload: memoryview, rows: int, columns: list[Column], codec: pa.Codec, where: str
) -> dict[str, np.ndarray]:
    size = rows * sum(c.itemsize for c in columns)
    try:
        raw = codec.decompress(payload, decompressed_size=size, asbytes=True)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise InputError(f"{where}: a damaged sorted-run block ({e})") from e
    if len(raw) != size:
        raise InputError(f"{where}: a sorted-run block of {len(raw)} bytes where {size} were expected")
    out: Rows = {}
    at = 0
    for c in columns:
        n = rows * c.itemsize
        values = np.frombuffer(raw, dtype=np.uint8 if c.width else c.dtype, count=rows * (c.width or 1), offset=at)
        out[c.name] = values.reshape(rows, c.width) if c.width else values
        at += n
    return out


class _RangeReader:
    """Bytes ``[start, end)`` of a file, read ``read_size`` at a time, handed out without copying the buffer."""

    def __init__(self, path: str, start: int, end: int, read_size: int) -> None:
        self.path, self.at, self.end, self.read_size = path, start, end, read_size
        self.buffer, self.pos = b"", 0

    def take(self, n: int) -> memoryview | None:
        """The next ``n`` bytes (fewer at the end of the range; None when nothing is left)."""
        if len(self.buffer) - self.pos < n and self.at < self.end:
            parts = [self.buffer[self.pos :]]
            have = len(parts[0])
            while have < n and self.at < self.end:
                more = fs.read_range(self.path, self.at, min(max(self.read_size, n - have), self.end - self.at))
                if not more:
                    break
                parts.append(more)
                have += len(more)
                self.at += len(more)
            self.buffer, self.pos = b"".join(parts), 0
        if self.pos >= len(self.buffer):
            return None
        view = memoryview(self.buffer)[self.pos : self.pos + n]
        self.pos += len(view)
        return view

    @property
    def done(self) -> bool:
        return self.pos >= len(self.buffer) and self.at >= self.end


def read_run(path: str, bucket: int, read_size: int = 1 << 16) -> Iterator[tuple[dict[str, np.ndarray], bool]]:
    """``bucket``'s rows in ``path``, block by block: a dict of column arrays each, and whether it is the last
    block. Read ``read_size`` bytes at a time (more when a block is larger): memory is one read and one block."""
    head = read_head(path, bucket)
    codec = pa.Codec(CODEC)
    where = f"{fs.printable(path)} (bucket {bucket})"
    reader = _RangeReader(path, head.start, head.end, read_size)
    while True:
        header = reader.take(_BLOCK.size)
        if header is None:
            return
        if len(header) < _BLOCK.size:
            raise InputError(f"{where}: a sorted-run block header is cut short")
        rows, packed = _BLOCK.unpack(header)
        payload = reader.take(packed) if packed else memoryview(b"")
        if payload is None or len(payload) < packed:
            raise InputError(f"{where}: a sorted-run block is cut short")
        yield _decode(payload, rows, head.columns, codec, where), reader.done
