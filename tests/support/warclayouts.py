"""WARC files laid out as odd writers and attackers lay them out, from real HTML pages (tests/webfixtures.py):
records grouped into gzip members of any size (a whole file as one member, as ``gzip crawl.warc`` makes it),
plain files, pages that quote WARC records in a ``<pre>``, responses that store a whole ``.warc.gz``; and the
documents a WarcReader makes of a file read whole or cut into pieces, with their positions."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from curator_slurm import EmptyTask
from curator_slurm.samples.web import _record, http_response
from curator_slurm.stages import WarcReader
from curator_slurm.stages.io.partitioning import byte_ranges
from curator_slurm.stages.positions import document_positions


def plain_record(kind: str, url: str, payload: bytes, number: int, extra: dict[str, str] | None = None) -> bytes:
    """One WARC record, uncompressed (FastWARC's writer, as web_sample writes them)."""
    return gzip.decompress(_record(kind, url, payload, number, extra))


def response(url: str, body: bytes, number: int, content_type: str = "text/html") -> bytes:
    """A plain ``response`` record of an HTTP 200 with ``body``."""
    extra = {"Content-Type": "application/http; msgtype=response"}
    return plain_record("response", url, http_response(body, content_type), number, extra)


def crawl(files: list[Path], first: int = 0) -> list[bytes]:
    """The plain records of a Common Crawl style file: warcinfo, then a request and a response per page."""
    info = plain_record("warcinfo", "", b"software: tests\r\n", first, {"Content-Type": "application/warc-fields"})
    records = [info]
    for i, f in enumerate(files):
        url = f"https://docs.example/{first + i}/{f.name}"
        request = f"GET {url} HTTP/1.1\r\nHost: docs.example\r\n\r\n".encode()
        records.append(plain_record("request", url, request, first + i, {"Content-Type": "application/http"}))
        records.append(response(url, f.read_bytes(), first + i))
    return records


def quoting_page(url: str, quoted: list[bytes], number: int) -> bytes:
    """A response whose page shows ``quoted`` (whole WARC records, raw bytes) inside a ``<pre>``."""
    body = b"<html><body><h1>Two WARC records</h1><pre>\n" + b"".join(quoted) + b"</pre><p>That was all.</p></body>"
    return response(url, body, number)


def stored_warc_gz(url: str, inner: bytes, number: int) -> bytes:
    """A response whose payload is a whole ``.warc.gz`` (``application/gzip``): its gzip members are stored raw
    in the outer file's deflate stream, look-alikes of the outer file's own."""
    return response(url, inner, number, "application/gzip")


def gzip_members(records: list[bytes], groups: list[int]) -> bytes:
    """``records`` compressed as consecutive gzip members of ``groups[i]`` records each (cycled); and a list
    of each record's member offset through :func:`member_offsets`."""
    return b"".join(gzip.compress(b"".join(chunk), mtime=0) for chunk in _grouped(records, groups))


def member_offsets(records: list[bytes], groups: list[int]) -> list[int]:
    """The offset, in :func:`gzip_members`'s output, of the gzip member each record starts in."""
    offsets, at = [], 0
    for chunk in _grouped(records, groups):
        offsets.extend([at] * len(chunk))
        at += len(gzip.compress(b"".join(chunk), mtime=0))
    return offsets


def _grouped(records: list[bytes], groups: list[int]) -> list[list[bytes]]:
    chunks, i, k = [], 0, 0
    while i < len(records):
        n = max(1, groups[k % len(groups)])
        chunks.append(records[i : i + n])
        i, k = i + n, k + 1
    return chunks


def cutting_blocksizes(size: int, lo: int, hi: int, most: int = 3) -> list[int]:
    """Block sizes whose pieces of a ``size``-byte file (as the partitioner cuts them) start in ``[lo, hi)``."""
    found: list[int] = []
    for pieces in range(2, 400):
        blocksize = -(-size // pieces)
        if any(lo <= start < hi for start, _ in byte_ranges(size, blocksize)) and blocksize not in found:
            found.append(blocksize)
        if len(found) == most:
            break
    assert found, f"no block size cuts a {size}-byte file in [{lo}, {hi})"
    return found


def plain_offsets(records: list[bytes]) -> list[int]:
    offsets, at = [], 0
    for record in records:
        offsets.append(at)
        at += len(record)
    return offsets


def documents(path: Path, **kwargs: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The documents a WarcReader makes of ``path`` (every source task the partitioner makes of it, in order),
    each with its record number (``row``) from the positions module; and the notes of every task."""
    reader = WarcReader(path, **kwargs)
    rows: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for task in reader.partitioner.process(EmptyTask()):
        batch = reader.reader.process(task)
        if batch is None:
            continue
        notes.append(batch.metadata.get("notes", {}))
        numbers = document_positions(batch).rows.tolist()
        for number, row in zip(numbers, batch.data.to_pylist(), strict=True):
            rows.append({"row": number, **row})
    return rows, notes


def damage(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for n in notes for d in n.get("damaged", [])]


def counted(notes: list[dict[str, Any]], cause: str) -> int:
    return sum(n.get("counts", {}).get(cause, 0) for n in notes)
