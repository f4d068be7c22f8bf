"""Reading JSONL: whole files (any compression the layer decodes) or the lines that start in a byte range, in small
blocks read again with a larger one for a long line, up to ``max_line_bytes``; errors name the file and line."""

from __future__ import annotations

import lzma
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.stages.io.jsonl_errors import line_number, locate_jsonl_error

pj = LazyModule("pyarrow.json")

#: pyarrow's JSON reader infers types per block; big blocks make that both faster and steadier.
JSON_BLOCK_SIZE = 16 << 20
#: The longest line read by default (bytes): the reader's ``max_line_bytes`` changes it.
MAX_LINE_BYTES = 256 << 20


def lines_in_range(path: str, start: int, end: int) -> tuple[bytes, int]:
    """The bytes of the lines of ``path`` that start in ``[start, end)``, and the offset of the first.

    Each line belongs to the range holding its first byte, so ranges that tile a file read every line
    exactly once, however the cuts fall: a line cut by ``start`` was read by the range before, and
    the last line starting before ``end`` is read to its end."""
    with fs.open_input(path) as f:
        readline = f.readline if fs.is_local(path) else lambda: _readline(f)  # pyarrow's files have none
        if start > 0:
            # Skip to the first line that starts at or after ``start``: reading from the byte before
            # it to the next newline consumes only that newline if a line starts right at ``start``.
            f.seek(start - 1)
            readline()
        begin = f.tell()
        if begin >= end:
            return b"", begin
        data = f.read(end - begin)
        if data and not data.endswith(b"\n"):
            data += readline()
    return data, begin


def _readline(f: Any, chunk: int = 1 << 16) -> bytes:
    """The rest of the line at ``f``'s position, newline included, leaving ``f`` just after it: for seekable
    files without ``readline`` (a ranged read of ``chunk`` bytes at a time on an object store)."""
    at, parts = f.tell(), []
    while True:
        piece = f.read(chunk)
        cut = piece.find(b"\n")
        if cut >= 0:
            parts.append(piece[: cut + 1])
            break
        parts.append(piece)
        if len(piece) < chunk:
            break
    line = b"".join(parts)
    f.seek(at + len(line))
    return line


def read_jsonl(
    path: str,
    fields: list[str] | None = None,
    byte_range: tuple[int, int] | None = None,
    schema: pa.Schema | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> pa.Table | None:
    """Read one JSONL file (plain or compressed, :data:`fs.COMPRESSIONS`), with errors that name
    the file and line.

    With ``byte_range``, only the lines that start in that range of an uncompressed file; None when
    no record starts there (a range inside one long line, or only blank lines). ``schema`` fixes the
    types of the fields it names (absent ones read as nulls of that type); others are inferred."""
    data: bytes | None = None
    begin = 0
    if byte_range is not None:
        data, begin = lines_in_range(path, *byte_range)
        if not data.strip():
            return None
        where = f"{path} (bytes {byte_range[0]}-{byte_range[1]})"
    elif fs.info(path).size == 0:  # also refuses a FIFO, a dangling link: named, not "empty"
        raise InputError(f"{path}: file is empty (0 bytes); remove it or regenerate it")
    else:
        where = path
    first_line = line_number(path, begin) if begin else 1
    return parse_jsonl(path, data, where, first_line, fields, schema, max_line_bytes, part=byte_range is not None)


def parse_jsonl(
    path: str,
    data: bytes | None,
    where: str,
    first_line: int,
    fields: list[str] | None,
    schema: pa.Schema | None,
    max_line_bytes: int,
    part: bool,
) -> pa.Table | None:
    """The records of ``data`` (lines of ``path`` from line ``first_line`` on; None: the whole file, read
    here), errors naming ``where`` and the line. A ``part`` of a file with no record gives None; a whole file
    without one is an InputError."""
    declared = set(schema.names) if schema is not None else set()
    try:
        table = _parse_long(path, data, schema, first_line, max_line_bytes)
        # pyarrow turns ISO-8601-looking strings into timestamps; keep the text as it was written. Reading
        # column_names decodes every key, which is where pyarrow 14 (not validate) finds one not in UTF-8.
        types = zip(table.column_names, table.schema.types, strict=True)
        dates = [name for name, type_ in types if pa.types.is_timestamp(type_) and name not in declared]
        if dates:
            strings = pa.schema([*(schema or []), *((name, pa.string()) for name in dates)])
            table = _parse_long(path, data, strings, first_line, max_line_bytes).select(table.column_names)
        table.validate(full=True)  # pyarrow does not check UTF-8 while parsing JSON
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        located = locate_jsonl_error(path, data, first_line, schema)
        if located:
            raise InputError(located) from e
        if "Empty JSON file" in str(e):
            if part:
                return None
            raise InputError(f"{where}: no JSON records (only blank lines); remove it or regenerate it") from e
        raise InputError(f"{where}: cannot read as JSONL ({e})") from e
    except (OSError, EOFError, lzma.LZMAError) as e:
        if _stream_error(path, e) is e:
            raise
        raise _stream_error(path, e) from e
    if table.num_columns == 0:
        if part:
            return None
        raise InputError(f"{path}: no JSON records (only blank lines); remove it or regenerate it")
    if fields is None:
        return table
    missing = [f for f in fields if f not in table.column_names]
    if missing:
        raise InputError(f"{where}: missing field(s) {missing}; the file has {table.column_names}")
    return table.select(fields)


def _stream_error(path: str, e: BaseException) -> BaseException:
    """A read error as it should be raised: a truncated or corrupt compressed stream as an InputError (the
    same bytes fail every time, so it is not retried), anything else as it is."""
    if isinstance(e, FileNotFoundError | PermissionError) or not fs.compression_of(path):
        return e
    return InputError(
        f"{path}: the {fs.compression_of(path)} stream is truncated or corrupt ({e}); the file is incomplete: "
        "copy or regenerate it"
    )


def iter_jsonl(
    path: str,
    fields: list[str] | None = None,
    byte_range: tuple[int, int] | None = None,
    schema: pa.Schema | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    chunk_bytes: int | None = None,
) -> Iterator[pa.Table]:
    """:func:`read_jsonl`'s records a part of about ``chunk_bytes`` bytes of lines at a time (None: at once),
    so a large file is never held whole; a file (or range) of at most one part is read as :func:`read_jsonl`
    reads it. A whole file yields at least one table."""
    if chunk_bytes is None or (byte_range is not None and byte_range[1] - byte_range[0] <= chunk_bytes):
        table = read_jsonl(path, fields, byte_range, schema, max_line_bytes)
        if table is not None:
            yield table
        return
    size = fs.info(path).size if byte_range is None else None  # one look (a HEAD on an object store) per file
    if size == 0:  # also refuses a FIFO, a dangling link: named, not "empty"
        raise InputError(f"{path}: file is empty (0 bytes); remove it or regenerate it")
    if size is not None and size <= chunk_bytes and not fs.compression_of(path):  # one part: read it whole
        yield parse_jsonl(path, None, path, 1, fields, schema, max_line_bytes, part=False)
        return
    where = path if byte_range is None else f"{path} (bytes {byte_range[0]}-{byte_range[1]})"
    parts = _file_parts(path, chunk_bytes) if byte_range is None else _range_parts(path, *byte_range, chunk_bytes)
    found = False
    for data, first_line in parts:
        table = parse_jsonl(path, data, where, first_line, fields, schema, max_line_bytes, part=True)
        if table is not None:
            found = True
            yield table
    if not found and byte_range is None:
        raise InputError(f"{path}: no JSON records (only blank lines); remove it or regenerate it")


def _file_parts(path: str, size: int) -> Iterator[tuple[bytes, int]]:
    """(whole lines of about ``size`` bytes, the number of the first) of a whole file, decompressed."""
    line, carry = 1, b""
    try:
        with fs.open_decompressed(path) as stream:
            while True:
                chunk = stream.read(size)
                data = carry + chunk
                cut = data.rfind(b"\n") + 1 if chunk else len(data)
                if chunk and cut == 0:  # a line longer than a part: read on until it ends
                    carry = data
                    continue
                part, carry = data[:cut], data[cut:]
                if part.strip():
                    yield part, line
                line += part.count(b"\n")
                if not chunk:
                    return
    except (OSError, EOFError, lzma.LZMAError) as e:
        if _stream_error(path, e) is e:
            raise
        raise _stream_error(path, e) from e


def _range_parts(path: str, start: int, end: int, size: int) -> Iterator[tuple[bytes, int]]:
    """(whole lines of about ``size`` bytes, the number of the first) of the lines that start in
    ``[start, end)`` of an uncompressed file (as :func:`lines_in_range` takes them)."""
    with fs.open_input(path) as f:
        readline = f.readline if fs.is_local(path) else lambda: _readline(f)
        if start > 0:
            f.seek(start - 1)
            readline()
        line = line_number(path, f.tell()) if f.tell() else 1
        while (at := f.tell()) < end:
            data = f.read(min(size, end - at))
            if not data:
                return
            if not data.endswith(b"\n"):
                data += readline()
            if data.strip():
                yield data, line
            line += data.count(b"\n")


def _parse_json(
    path: str, data: bytes | None = None, explicit: pa.Schema | None = None, block_size: int = JSON_BLOCK_SIZE
) -> pa.Table:
    """``path`` (or ``data``, the part of it read) parsed; ``explicit`` fixes the types of its fields."""
    parse = pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="infer") if explicit else None
    options = pj.ReadOptions(block_size=block_size)
    if data is not None:
        return pj.read_json(pa.BufferReader(data), read_options=options, parse_options=parse)
    with fs.open_decompressed(path) as stream:
        return pj.read_json(stream, read_options=options, parse_options=parse)


def _parse_long(path: str, data: bytes | None, explicit: pa.Schema | None, first_line: int, limit: int) -> pa.Table:
    """:func:`_parse_json`, and once more with a block that holds the longest line if a line was longer than a
    block; a line longer than ``limit`` is an InputError naming it."""
    first_block = min(JSON_BLOCK_SIZE, limit)  # a limit below the usual block is kept by the first read too
    try:
        return _parse_json(path, data, explicit, first_block)
    except pa.ArrowInvalid as e:
        if "straddling" not in str(e):
            raise
    length, line = longest_line(path, data)
    if length > limit:
        raise InputError(
            f"{path}:{first_line + line - 1}: a line of {length} bytes is longer than the reader's limit, "
            f"max_line_bytes={limit}; split the record, or raise max_line_bytes (memory grows with it)"
        )
    block = -(-(length + 1) // (1 << 20)) << 20  # whole MiB that hold the line and its newline
    return _parse_json(path, data, explicit, max(block, 2 * first_block))


def longest_line(path: str, data: bytes | None = None) -> tuple[int, int]:
    """(length in bytes, 1-based number) of the longest line of ``data`` or of ``path`` (decompressed), read in
    chunks (the file is never held whole)."""
    chunks = [data] if data is not None else _chunks(path)
    best = (0, 1)
    current, line = 0, 1
    for chunk in chunks:
        at = 0
        while True:
            cut = chunk.find(b"\n", at)
            if cut < 0:
                current += len(chunk) - at
                break
            current += cut - at
            if current > best[0]:
                best = (current, line)
            current, line, at = 0, line + 1, cut + 1
    return best if best[0] >= current else (current, line)  # the last line may have no newline


def _chunks(path: str, size: int = 16 << 20) -> Iterator[bytes]:
    with fs.open_decompressed(path) as stream:
        while chunk := stream.read(size):
            yield chunk


_BLANK_LINE = re.compile(rb"(?m)^[ \t\r\f\v]*\n")


def jsonl_rows_before(path: str, offset: int) -> int:
    """How many records of a JSONL file start before byte ``offset``: non-blank lines that start before it
    (a piece reads the lines that start inside it, so this is the row of its first document)."""
    if offset <= 0:
        return 0
    rows = 0
    with fs.open_input(path) as f:
        left, carry = offset, b""
        while left > 0:
            chunk = f.read(min(left, 16 << 20))
            if not chunk:
                break
            left -= len(chunk)
            data = carry + chunk
            cut = data.rfind(b"\n") + 1  # count whole lines only; the rest joins the next chunk
            whole, carry = data[:cut], data[cut:]
            rows += whole.count(b"\n") - len(_BLANK_LINE.findall(whole))
        if carry:  # a line that starts before offset and runs past it belongs to the piece before
            while not carry.strip() and not carry.endswith(b"\n"):
                more = f.read(4096)
                if not more:
                    break
                carry += more.split(b"\n", 1)[0] + (b"\n" if b"\n" in more else b"")
            rows += bool(carry.strip())
    return rows
