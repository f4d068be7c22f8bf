"""WARC records out of a file or a piece of one, read the same whether the file is split or not; damage noted
and skipped to the next record, never raised. Design: docs/design.md, section WARC reading and proven boundaries."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from curator_slurm import fs
from curator_slurm.stages.io.warc_feeds import GZIP_MAGIC, ZSTD_MAGICS, Damaged, Feed, GzipFeed, PlainFeed, StreamFeed
from curator_slurm.stages.io.warc_http import Http, decode_html, media_type, parse_http

#: Endings of the files a WARC reader lists by default.
WARC_ENDINGS = (".warc", ".warc.gz", ".warc.zst")
#: The WARC record types (WARC 1.1), the names ``record_types`` takes.
RECORD_TYPES = ("warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion", "continuation")
#: A candidate gzip member is a record boundary once the members from it hold whole records over this many
#: bytes: a look-alike (a stored ``.warc.gz`` inside a record) lies in one deflate stored block, at most 65,535.
PROOF_SPAN = 1 << 16
#: Why a record of a wanted type is not read (counted).
OVER_SIZE_RECORD = "record over max_record_bytes skipped"
#: A piece that had to read on past the pieces after it (counted once, by that piece, and logged).
NO_BOUNDARY = "byte ranges read as one: no provable record boundary"
_SCAN = 1 << 20

__all__ = ["Http", "decode_html", "media_type", "parse_http"]


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
    """One WARC record as read: where it starts, its type, its WARC headers (names lower-cased), its block."""

    offset: int
    record_type: str
    headers: dict[str, str]
    block: bytes


@dataclass
class Damage:
    """Bytes of a file that could not be read as records: from ``offset`` (where the damaged record or gzip
    member starts) to the next record that could be found."""

    file: str
    offset: int
    error: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "error": self.error}


@dataclass
class Scan:
    """What reading one file or piece met beside the records: damage, and counts of records not read."""

    damaged: list[Damage] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, cause: str, n: int = 1) -> None:
        self.counts[cause] = self.counts.get(cause, 0) + n


def record_types(names: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The record type names, checked (``"response"``, ``"resource"``, ``"conversion"``, ...)."""
    for name in names:
        if name not in RECORD_TYPES:
            raise ValueError(
                f"record_types: unknown WARC record type {name!r}; use response, resource, conversion, "
                "request, metadata, revisit or warcinfo"
            )
    return frozenset(names)


def framing(path: str) -> str:
    """``"gzip"``, ``"zstd"`` or ``"plain"``, from the file's first bytes (not its name)."""
    head = read_at(path, 0, 4)
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    return "zstd" if head.startswith(ZSTD_MAGICS) else "plain"


def member_end(f: IO[bytes], at: int) -> int | None:
    """Where the gzip member at ``at`` ends when it inflates, passes its checksum and holds whole WARC records
    and nothing else; None otherwise."""
    f.seek(at)
    feed = GzipFeed(f, at, one_member=True)
    try:
        while (offset := feed.offset()) is not None:
            header = feed.header()
            feed.block(header.length, False, offset)
            feed.end_record()
            if feed.ended_cleanly():
                return feed.member_end
    except Damaged:
        return None
    return None


def proven(path: str, at: int, size: int) -> bool:
    """Whether a record boundary of the file's own sequence of members is at ``at``: the members from there
    hold whole records for at least :data:`PROOF_SPAN` bytes, or to the end of the file."""
    with open_input(path) as f:
        end = at
        while end - at < PROOF_SPAN and end < size:
            after = member_end(f, end)
            if after is None or after <= end:
                return False
            end = after
    return end - at >= PROOF_SPAN or end == size


def gzip_boundary(path: str, start: int, size: int) -> int:
    """The first proven record boundary (:func:`proven`) at or after ``start``; ``size`` when none."""
    at = start
    while at < size:
        data = read_at(path, at, _SCAN + 2)
        i = data.find(GZIP_MAGIC)
        while 0 <= i < _SCAN and at + i < size:
            if proven(path, at + i, size):
                return at + i
            i = data.find(GZIP_MAGIC, i + 1)
        at += _SCAN
    return size


def plain_resync(path: str, start: int, size: int) -> int:
    """Where reading a plain file goes on after damage: the first ``WARC/1.`` line at or after ``start`` whose
    record parses and is followed by another record or the end of the file; ``size`` when none."""
    at = start
    while at < size:
        data = read_at(path, at, _SCAN + 8)
        i = data.find(b"WARC/1.")
        while 0 <= i < _SCAN and at + i < size:
            if (at + i == 0 or data[i - 1 : i] == b"\n" or read_at(path, at + i - 1, 1) == b"\n") and _plain_record_at(
                path, at + i, size
            ):
                return at + i
            i = data.find(b"WARC/1.", i + 1)
        at += _SCAN
    return size


def _plain_record_at(path: str, at: int, size: int) -> bool:
    with open_input(path) as f:
        f.seek(at)
        feed = PlainFeed(f, at, size)
        try:
            header = feed.header()
            feed.block(header.length, False, at)
            feed.end_record()
            after = feed.offset()
            return after is None or feed.buf.startswith(b"WARC/", feed.pos)
        except Damaged:
            return False


def _feed(f: IO[bytes], kind: str, at: int, size: int) -> Feed:
    f.seek(at)
    if kind == "gzip":
        return GzipFeed(f, at)
    if kind == "zstd":
        import pyarrow as pa

        return StreamFeed(pa.CompressedInputStream(pa.PythonFile(f, mode="r"), "zstd"))
    return PlainFeed(f, at, size)


def _resync(path: str, kind: str, after: int, size: int) -> int:
    if kind == "gzip":
        return gzip_boundary(path, after, size)
    return plain_resync(path, after, size) if kind == "plain" else size


def records(
    path: str,
    types: frozenset[str],
    start: int = 0,
    end: int | None = None,
    scan: Scan | None = None,
    max_bytes: int | None = None,
) -> Iterator[Record]:
    """The records of the types ``types`` that the piece ``[start, end)`` of ``path`` holds (the whole file
    without ``end``): a gzip file's from the first proven boundary at or after ``start`` to the first at or
    after ``end``; a plain file's that start in ``[start, end)``; a zstd file's all, for the piece at 0.

    Damage is noted in ``scan`` (file, offset of the damaged record or member, error) and reading goes on at
    the next record found; a record of a wanted type over ``max_bytes`` is read past and counted."""
    scan = scan if scan is not None else Scan()
    size = input_size(path)
    kind = framing(path) if size else "plain"
    whole = end is None or end >= size
    if kind == "plain":
        yield from _read(path, kind, types, (0, start, size if whole or end is None else end), size, scan, max_bytes)
        return
    if kind == "zstd" and start > 0:
        return
    begin = 0 if start == 0 else gzip_boundary(path, start, size)
    # A zstd file's offsets count its decompressed bytes: it is read to its end.
    last = 1 << 62 if kind == "zstd" else size
    stop = last if whole or end is None or kind == "zstd" else gzip_boundary(path, end, size)
    if not whole and end is not None and begin < stop and min(stop, size) - end > end - start:
        scan.count(NO_BOUNDARY)  # the stage says it once, naming the file
    yield from _read(path, kind, types, (begin, begin, stop), size, scan, max_bytes)


def _read(
    path: str,
    kind: str,
    types: frozenset[str],
    span: tuple[int, int, int],
    size: int,
    scan: Scan,
    max_bytes: int | None,
) -> Iterator[Record]:
    """Reads from ``span[0]``, yielding the records that start in ``[span[1], span[2])``; at damage, notes it
    (when it lies in that range) and goes on where :func:`_resync` says."""
    at, emit_from, stop = span
    while at < stop and (at < size or kind == "zstd"):
        with open_input(path) as f:
            feed = _feed(f, kind, at, size)
            try:
                yield from _parse(path, feed, types, (emit_from, stop), scan, max_bytes, exact_stop=kind == "gzip")
                return
            except Damaged as d:
                if emit_from <= d.offset < stop:
                    scan.damaged.append(Damage(path, d.offset, d.error))
                if kind == "zstd":
                    return
                at = max(_resync(path, kind, d.offset + 1, size), d.offset + 1)


def _parse(
    path: str,
    feed: Feed,
    types: frozenset[str],
    span: tuple[int, int],
    scan: Scan,
    max_bytes: int | None,
    exact_stop: bool,
) -> Iterator[Record]:
    emit_from, stop = span
    while (offset := feed.offset()) is not None:
        if offset >= stop:
            if exact_stop and offset != stop:  # only a forged member could make it: said, never silent
                error = f"the record boundary proven at byte {stop} lies inside the gzip member read from {offset}"
                scan.damaged.append(Damage(path, stop, error))
            return
        header = feed.header()
        wanted = header.record_type in types and offset >= emit_from
        over = max_bytes is not None and header.length > max_bytes
        block = feed.block(header.length, wanted and not over, offset)
        feed.end_record()
        if wanted and over:
            scan.count(OVER_SIZE_RECORD)
        elif wanted:
            assert block is not None
            yield Record(offset, header.record_type, header.fields, block)
