"""WARC and WET readers: web archives in, one document per record out, on the public reader base.

:class:`WarcReader` reads ``response`` records (``resource``/``conversion`` on request) of ``.warc``,
``.warc.gz`` (one gzip member per record, as Common Crawl writes them, or one for the file) and ``.warc.zst``
into the fields ``html`` (the payload decoded), ``url``, ``warc_record_id``, ``warc_date``, ``content_type``,
``http_status`` and ``warc_offset`` (the byte offset of the record in its file). Records whose payload is not
HTML are skipped and counted (or kept, payload as bytes in ``content``); a record whose HTTP header does not
parse is skipped and counted. A truncated or corrupt archive keeps every record before the damage; the file
and byte offset of the damage are noted (``stages.notes``), the task does not fail.

A document's position is (file relative to the reader's root, record number), the record number counting the
documents this reader makes of the file, in file order. Large files can be read as record-aligned byte ranges
(``split_files=True``, also for multi-member ``.warc.gz``): a piece holds the records that start in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa

from curator_slurm import extras
from curator_slurm.errors import InputError
from curator_slurm.stages.io import warc_records as wr
from curator_slurm.stages.io.batching import DEFAULT_BATCH_BYTES, BatchBound, Piece, set_bound
from curator_slurm.stages.io.readers import FileReader, FileReaderStage

#: Payload media types read as HTML.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

#: The fields of a WARC reader's documents, in order (``content`` only with ``keep_non_html``).
WARC_SCHEMA = pa.schema(
    [
        ("html", pa.string()),
        ("url", pa.string()),
        ("warc_record_id", pa.string()),
        ("warc_date", pa.string()),
        ("content_type", pa.string()),
        ("http_status", pa.int32()),
        ("warc_offset", pa.int64()),
    ]
)
WET_SCHEMA = pa.schema([("text", pa.string()), *(f for f in WARC_SCHEMA if f.name != "html")])

NON_HTML = "non-HTML payload skipped"
BROKEN_HTTP = "broken HTTP header skipped"
OTHER_TYPE = "records of other types skipped"


class WarcReaderStage(FileReaderStage):
    """Reads the records of one WARC file (or a record-aligned piece of one) into one batch."""

    name = "warc_reader"
    schema_of: ClassVar[pa.Schema] = WARC_SCHEMA
    text_field: ClassVar[str] = "html"

    def __init__(
        self,
        fields: list[str] | None = None,
        schema: Any = None,
        record_types: tuple[str, ...] = ("response",),
        keep_non_html: bool = False,
    ) -> None:
        super().__init__(fields, schema)
        extras.require("fastwarc", type(self).__name__)
        self.record_types = tuple(record_types)
        wr.record_types(self.record_types)  # an unknown type fails here, when the pipeline is built
        self.keep_non_html = keep_non_html

    # --- what a record becomes ------------------------------------------------------------------------
    def _document(self, record: wr.Record, counts: dict[str, int], decode: bool = True) -> dict[str, Any] | None:
        """The row of ``record``, or None (counted in ``counts``) when it is skipped; without ``decode`` the
        payload is not decoded (enough to know whether the record makes a document)."""
        h = record.headers
        identified = h.get("WARC-Identified-Payload-Type")
        status = None
        body, header_type = record.block, h.get("Content-Type")
        if record.record_type == "response":
            http = wr.parse_http(record.block)
            if http is None:
                counts[BROKEN_HTTP] = counts.get(BROKEN_HTTP, 0) + 1
                return None
            status, body, header_type = http.status, http.body, http.headers.get("content-type")
        kind = wr.media_type(identified) or wr.media_type(header_type)
        row: dict[str, Any] = {
            "url": h.get("WARC-Target-URI"),
            "warc_record_id": h.get("WARC-Record-ID"),
            "warc_date": h.get("WARC-Date"),
            "content_type": kind or None,
            "http_status": status,
            "warc_offset": record.offset,
        }
        return self._payload(row, body, kind, header_type, counts, decode)

    def _payload(
        self,
        row: dict[str, Any],
        body: bytes,
        kind: str,
        header_type: str | None,
        counts: dict[str, int],
        decode: bool = True,
    ) -> dict[str, Any] | None:
        if kind not in HTML_TYPES:
            if not self.keep_non_html:
                counts[NON_HTML] = counts.get(NON_HTML, 0) + 1
                return None
            return {**row, "html": None, "content": body}
        row["html"] = wr.decode_html(body, header_type) if decode else ""
        if self.keep_non_html:
            row["content"] = None
        return row

    # --- reading --------------------------------------------------------------------------------------
    def _scan(self, path: str, start: int = 0, end: int | None = None, bound: Any = None) -> Iterator[Piece]:
        """The documents of the records of ``path`` that start in ``[start, end)``, a batch (:attr:`bound`) at
        a time, each with the counts of the records skipped while reading it and, the last, the damage that
        ended the reading; at least one (maybe empty) piece, so the notes of a piece without documents count."""
        counts: dict[str, int] = {}
        scan = wr.Scan()
        rows: list[dict[str, Any]] = []
        size = read = 0
        bound = bound or BatchBound(None, None)
        for record in wr.records(path, wr.record_types(self.record_types), start, end, scan):
            row = self._document(record, counts)
            if row is None:
                continue
            rows.append(row)
            size += len(row.get(self.text_field) or "") + len(row.get("content") or b"")
            if not bound.fits(len(rows) + 1, size):
                yield self._piece(path, rows, counts, None)
                read += len(rows)
                rows, counts, size = [], {}, 0
        if scan.damage:
            from loguru import logger

            logger.warning(
                f"{path}: damaged at byte {scan.damage.offset} ({scan.damage.error}); kept the "
                f"{read + len(rows)} documents before it, the rest of the file is not read"
            )
        if rows or counts or scan.damage or not read:
            yield self._piece(path, rows, counts, scan.damage.as_dict() if scan.damage else None)

    def _piece(self, path: str, rows: list[dict[str, Any]], counts: dict[str, int], damage: Any) -> Piece:
        schema = self.schema_of
        if self.keep_non_html:
            schema = schema.append(pa.field("content", pa.binary()))
        # Column by column: a page's HTML is copied into Arrow once, without a row dict lookup per field.
        table = pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in schema}, schema=schema)
        if self.fields is not None:
            missing = [f for f in self.fields if f not in table.column_names]
            if missing:
                raise InputError(f"{path}: {type(self).__name__} has no field(s) {missing}; it has {schema.names}")
            table = table.select(self.fields)
        return Piece(0, table, 0, [{"counts": dict(counts), "damaged": [damage] if damage else []}])

    def tables(self, path: str, byte_range: tuple[int, int] | None, bound: BatchBound) -> Iterator[Any]:
        """The documents of the records read a batch at a time, as pieces that carry the reader's notes."""
        start, end = byte_range if byte_range is not None else (0, None)
        yield from self._scan(path, start, end, bound)

    def read_file(self, path: str) -> pa.Table:
        return pa.concat_tables([p.table for p in self._scan(path)])

    def read_range(self, path: str, start: int, end: int) -> pa.Table | None:
        return pa.concat_tables([p.table for p in self._scan(path, start, end)])

    def row_counter(self) -> Any:
        return self  # documents are numbered with this reader's own settings

    def rows_before(self, path: str, offset: int) -> int:  # type: ignore[override]
        """How many documents this reader makes of the records that start before ``offset`` (the record
        number of a piece's first document): the records before it are read again, without decoding."""
        if offset <= 0:
            return 0
        counts: dict[str, int] = {}
        types = wr.record_types(self.record_types)
        return sum(self._document(r, counts, decode=False) is not None for r in wr.records(path, types, 0, offset))


class WetReaderStage(WarcReaderStage):
    """Reads the ``conversion`` records of a WET file (text Common Crawl already extracted)."""

    name = "wet_reader"
    schema_of = WET_SCHEMA
    text_field = "text"

    def __init__(self, fields: list[str] | None = None, schema: Any = None) -> None:
        super().__init__(fields, schema, record_types=("conversion",))

    def _payload(
        self,
        row: dict[str, Any],
        body: bytes,
        kind: str,
        header_type: str | None,
        counts: dict[str, int],
        decode: bool = True,
    ) -> dict[str, Any] | None:
        row["text"] = body.decode("utf-8", errors="replace") if decode else ""
        return row


class WarcReader(FileReader):
    """Read WARC files (``.warc``, ``.warc.gz``, ``.warc.zst``): one document per HTML record, one source task
    per file (or per group of files, or per record-aligned piece of a large file with ``split_files``)."""

    name = "warc_reader"
    default_extensions = wr.WARC_ENDINGS
    reader_class = WarcReaderStage
    can_split = True
    #: Compressed files that can still be cut at record boundaries: multi-member gzip (Common Crawl's).
    splittable_endings: tuple[str, ...] = (".warc.gz",)

    def __init__(
        self,
        file_paths: Any,
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        fields: list[str] | None = None,
        file_extensions: list[str] | None = None,
        limit: int | None = None,
        split_files: bool = False,
        record_types: tuple[str, ...] | list[str] = ("response",),
        keep_non_html: bool = False,
        *,
        batch_rows: int | None = None,
        batch_bytes: int | str | None = DEFAULT_BATCH_BYTES,
    ) -> None:
        super().__init__(file_paths, files_per_partition, blocksize, None, file_extensions, limit, split_files)
        self.partitioner.splittable_endings = self.splittable_endings
        self.reader = WarcReaderStage(fields, record_types=tuple(record_types), keep_non_html=keep_non_html)
        set_bound(self.reader, batch_rows, batch_bytes)


class WetReader(FileReader):
    """Read Common Crawl's WET files (``.warc.wet.gz``): the text of each ``conversion`` record, same fields
    as :class:`WarcReader` with ``text`` for ``html``; the cheap path when Common Crawl's extraction will do."""

    name = "wet_reader"
    default_extensions = (".wet", ".wet.gz", ".warc.wet", ".warc.wet.gz", ".wet.zst")
    reader_class = WetReaderStage
    can_split = True
    splittable_endings: tuple[str, ...] = (".wet.gz",)

    def __init__(
        self,
        file_paths: Any,
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        fields: list[str] | None = None,
        file_extensions: list[str] | None = None,
        limit: int | None = None,
        split_files: bool = False,
        *,
        batch_rows: int | None = None,
        batch_bytes: int | str | None = DEFAULT_BATCH_BYTES,
    ) -> None:
        super().__init__(file_paths, files_per_partition, blocksize, None, file_extensions, limit, split_files)
        self.partitioner.splittable_endings = self.splittable_endings
        self.reader = WetReaderStage(fields)
        set_bound(self.reader, batch_rows, batch_bytes)
