"""WARC records out of a file or a record-aligned byte range of one, with FastWARC; damage reported, not raised.

FastWARC parses WARC headers (Rust; about twice as fast as warcio on Common Crawl style ``.warc.gz``, and it
reads ``.warc``, ``.warc.gz`` and ``.warc.zst``). The HTTP header of a response is parsed here from the record's
block, so that a record cut short by the end of the file (FastWARC hands out the part that is there) is told
from a whole one, and a broken HTTP header costs one record, not the file.

File access goes through :func:`open_input`, :func:`read_at` and :func:`input_size`, over the filesystem layer (``fs``).
"""

from __future__ import annotations

import codecs
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from curator_slurm import fs
from curator_slurm._lazy import LazyModule

fastwarc = LazyModule("fastwarc.warc")

#: Endings of the files a WARC reader lists by default.
WARC_ENDINGS = (".warc", ".warc.gz", ".warc.zst")
_GZIP_MAGIC = b"\x1f\x8b\x08"
_SCAN_CHUNK = 1 << 20


def open_input(path: str) -> IO[bytes]:
    """A seekable binary file for ``path`` (the filesystem layer's: local, or ranged reads of a URI)."""
    return fs.open_input(path)


def input_size(path: str) -> int:
    """The size of ``path`` in bytes."""
    return fs.size(path)


def read_at(path: str, offset: int, size: int) -> bytes:
    """``size`` bytes of ``path`` from ``offset`` (fewer at the end of the file): a ranged read."""
    return fs.read_range(path, offset, size)


@dataclass
class Record:
    """One WARC record as read: where it starts, its WARC headers, its whole block (bytes)."""

    offset: int
    record_type: str
    headers: dict[str, str]
    block: bytes


@dataclass
class Damage:
    """Where reading a file stopped early: the records before ``offset`` were read, none after."""

    file: str
    offset: int
    error: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "error": self.error}


@dataclass
class Scan:
    """The records of one file or piece, and the damage that ended it early (if any)."""

    damage: Damage | None = None
    records: int = 0


def _is_gzip(path: str) -> bool:
    return path.endswith(".gz")


def _gzip_member_at(data: bytes, at: int) -> bool:
    """Whether a gzip member holding a WARC record starts at ``data[at]``: it must inflate to ``WARC/``."""
    try:
        head = zlib.decompressobj(31).decompress(data[at : at + 4096], 16)
    except zlib.error:
        return False
    return head.startswith(b"WARC/")


def _plain_record_at(path: str, at: int) -> bool:
    """Whether an uncompressed WARC record starts at byte ``at``: its header parses, and its block ends
    where the next record (or the end of the file) begins."""
    head = read_at(path, at, 64 << 10)
    end = head.find(b"\r\n\r\n")
    match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head[: end + 2]) if end > 0 else None
    if not head.startswith(b"WARC/") or match is None:
        return False
    after = at + end + 4 + int(match.group(1))
    tail = read_at(path, after, 9)
    return tail == b"" or tail.startswith(b"\r\n\r\nWARC/") or after + 4 >= input_size(path)


def first_record_at_or_after(path: str, start: int, end: int) -> int | None:
    """The offset of the first record (a gzip member, for ``.warc.gz``) that starts in ``[start, end)``."""
    if start == 0:
        return 0
    pattern = _GZIP_MAGIC if _is_gzip(path) else b"WARC/1."
    at = start
    while at < end:
        data = read_at(path, at, min(_SCAN_CHUNK, end - at) + 4096)
        i = data.find(pattern)
        while 0 <= i < end - at:
            if _is_gzip(path):
                head = data[i : i + 4096] if len(data) - i >= 64 else read_at(path, at + i, 4096)
                if _gzip_member_at(head, 0):
                    return at + i
            elif (i == 0 or data[i - 1 : i] == b"\n") and _plain_record_at(path, at + i):
                return at + i
            i = data.find(pattern, i + 1)
        at += _SCAN_CHUNK
    return None


def records(
    path: str, types: Any, start: int = 0, end: int | None = None, scan: Scan | None = None
) -> Iterator[Record]:
    """The records of the types ``types`` (a FastWARC bitmask) that start in ``[start, end)`` of ``path``.

    Reading stops at damage (a record cut short, a stream that does not inflate or parse): the records before
    it are yielded, and ``scan.damage`` says the file, the byte offset of the damaged record and the error.
    Every record is read (those of other types too), so damage is found wherever it is."""
    scan = scan if scan is not None else Scan()
    begin = first_record_at_or_after(path, start, end if end is not None else input_size(path) + 1)
    if begin is None:
        return
    wanted = int(types)
    next_start, shift = begin, None  # where the record after the last good one starts
    with open_input(path) as f:
        f.seek(begin)
        it = iter(fastwarc.ArchiveIterator(f, record_types=fastwarc.WarcRecordType.any_type, parse_http=False))
        while True:
            try:
                record = next(it)
            except StopIteration:
                return
            except Exception as e:  # FastWARC raises OSError; anything else is damage too
                scan.damage = Damage(path, _boundary_after(path, next_start), f"{type(e).__name__}: {e}")
                return
            if shift is None:  # FastWARC counts from the file's start (it asks the file where it is)
                shift = begin if record.stream_pos < begin else 0
            offset = shift + record.stream_pos
            if end is not None and offset >= end:
                return
            block = record.reader.read()
            if len(block) < record.content_length:
                cut = f"record cut short: {len(block)} of {record.content_length} bytes (truncated file?)"
                scan.damage = Damage(path, offset, cut)
                return
            next_start = offset + 1
            if int(record.record_type) & wanted:
                scan.records += 1
                yield Record(offset, str(record.record_type), dict(record.headers), block)


def _boundary_after(path: str, after: int) -> int:
    """Where the record that could not be read starts: the first gzip member (for ``.warc.gz``) or ``WARC/``
    line (plain) at or after ``after``; ``after`` itself when there is none."""
    data = read_at(path, after, _SCAN_CHUNK)
    i = data.find(_GZIP_MAGIC) if _is_gzip(path) else data.find(b"\nWARC/1.")
    return after + i + (0 if _is_gzip(path) else 1) if i >= 0 else after


@dataclass(frozen=True)
class Http:
    """An HTTP response's status, headers (names lower-cased) and body."""

    status: int
    headers: dict[str, str]
    body: bytes


def parse_http(block: bytes) -> Http | None:
    """The HTTP response in a response record's block, or None when its header is broken. A chunked body is
    de-chunked; a gzip or deflate content encoding is undone."""
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    match = re.match(rb"HTTP/\d(?:\.\d)?\s+(\d{3})", head)
    if not sep or match is None:
        return None
    headers = {}
    for line in head.split(b"\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    encoding = headers.get("content-encoding", "").lower().strip()
    if encoding in ("gzip", "x-gzip", "deflate"):
        try:
            body = zlib.decompress(body, 47 if encoding != "deflate" else 15)
        except zlib.error:
            return None
    return Http(int(match.group(1)), headers, body)


def _dechunk(body: bytes) -> bytes:
    out, at = [], 0
    while at < len(body):
        line_end = body.find(b"\r\n", at)
        if line_end < 0:
            break
        try:
            size = int(body[at:line_end].split(b";")[0], 16)
        except ValueError:
            return body  # not chunked after all: keep the body as sent
        if size == 0:
            break
        out.append(body[line_end + 2 : line_end + 2 + size])
        at = line_end + 4 + size
    return b"".join(out)


def media_type(content_type: str | None) -> str:
    """``text/html; charset=utf-8`` -> ``text/html``."""
    return (content_type or "").split(";")[0].strip().lower()


_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)


def _known(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_html(body: bytes, content_type: str | None) -> str:
    """The text of an HTML payload: the charset of the HTTP header, else of the page's meta tag, else the one
    detected (Resiliparse's detector); bytes invalid in it become U+FFFD."""
    from_header = _CHARSET.search(content_type or "")
    encoding = _known(from_header.group(1) if from_header else None)
    if encoding is None:
        from_meta = _META_CHARSET.search(body[:4096])
        encoding = _known(from_meta.group(1).decode("ascii", "replace") if from_meta else None)
    if encoding is None:
        from resiliparse.parse.encoding import detect_encoding

        encoding = _known(detect_encoding(body)) or "utf-8"
    return body.decode(encoding, errors="replace")


def record_types(names: tuple[str, ...] | list[str]) -> Any:
    """The FastWARC bitmask of record type names (``"response"``, ``"resource"``, ``"conversion"``, ...)."""
    mask = None
    for name in names:
        try:
            kind = getattr(fastwarc.WarcRecordType, name)
            mask = kind if mask is None else mask | kind
        except AttributeError:
            raise ValueError(
                f"record_types: unknown WARC record type {name!r}; use response, resource, conversion, "
                "request, metadata, revisit or warcinfo"
            ) from None
    return mask
