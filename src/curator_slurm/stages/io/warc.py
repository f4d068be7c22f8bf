"""WARC and WET readers: web archives in, one document per record out (``html``, ``url``, ``warc_record_id``,
``warc_date``, ``content_type``, ``http_status``, ``warc_offset``, ``file_path``), whole or split into
record-aligned byte ranges. Design: docs/design.md, section WARC reading and proven boundaries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa

from curator_slurm import extras
from curator_slurm.errors import InputError
from curator_slurm.stages.io import warc_http as wh
from curator_slurm.stages.io import warc_records as wr
from curator_slurm.stages.io.batching import DEFAULT_BATCH_BYTES, BatchBound, Piece, set_bound
from curator_slurm.stages.io.partitioning import parse_size
from curator_slurm.stages.io.readers import FILE_PATH, FileReader, FileReaderStage, check_file_path_field

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
BROKEN_HTTP = wh.BROKEN_HTTP
OTHER_TYPE = "records of other types skipped"
#: The count of damaged stretches of input (each also listed in the notes' ``damaged`` with file, offset and
#: error): records were lost there. Every other count is of records read whole and dropped for a reason.
DAMAGED = "damaged bytes skipped (records in them lost)"
#: The default of ``max_record_bytes``.
MAX_RECORD_BYTES = 64 << 20


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
        max_record_bytes: int | str = MAX_RECORD_BYTES,
    ) -> None:
        super().__init__(fields, schema)
        extras.require("resiliparse", type(self).__name__)
        self.record_types = tuple(record_types)
        wr.record_types(self.record_types)  # an unknown type fails here, when the pipeline is built
        self.keep_non_html = keep_non_html
        try:
            limit = parse_size(max_record_bytes)
        except ValueError:
            raise ValueError(f"max_record_bytes={max_record_bytes!r} is not a size; write e.g. '64MiB'") from None
        if limit < 1:
            raise ValueError(f"max_record_bytes={max_record_bytes!r}: give a size of at least 1 byte")
        if limit != MAX_RECORD_BYTES:  # set only when changed: runs that keep the default keep their fingerprint
            self.max_record_bytes = limit

    max_record_bytes: int = MAX_RECORD_BYTES

    def outputs(self) -> tuple[list[str], list[str] | None]:
        """The fields asked for, else every field of a record: known when the pipeline is built, so a later
        stage that needs a field nothing makes (``language`` with no extractor) is refused then."""
        if self.fields is not None:
            return ["data"], list(self.fields)
        source = [self.file_path_field] if self.file_path_field else []
        return ["data"], [*self.schema_of.names, *(["content"] if self.keep_non_html else []), *source]

    # --- what a record becomes ------------------------------------------------------------------------
    def _document(self, record: wr.Record, counts: dict[str, int], decode: bool = True) -> dict[str, Any] | None:
        """The row of ``record``, or None (counted in ``counts``) when it is skipped; without ``decode`` the
        payload is not decoded (enough to know whether the record makes a document)."""
        h = record.headers
        identified = h.get("warc-identified-payload-type")
        status = None
        body, header_type = record.block, h.get("content-type")
        if record.record_type == "response":
            http = wh.parse_http(record.block, self.max_record_bytes)
            if isinstance(http, str):
                counts[http] = counts.get(http, 0) + 1
                return None
            if http.note is not None:
                counts[http.note] = counts.get(http.note, 0) + 1
            status, body, header_type = http.status, http.body, http.headers.get("content-type")
        kind = wh.media_type(identified) or wh.media_type(header_type)
        row: dict[str, Any] = {
            "url": h.get("warc-target-uri"),
            "warc_record_id": h.get("warc-record-id"),
            "warc_date": h.get("warc-date"),
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
        row["html"] = ""
        if decode:
            row["html"], replaced = wh.decode_html(body, header_type)
            if replaced:
                counts[wh.REPLACED] = counts.get(wh.REPLACED, 0) + 1
        if self.keep_non_html:
            row["content"] = None
        return row

    # --- reading --------------------------------------------------------------------------------------
    def _records(self, path: str, start: int, end: int | None, scan: wr.Scan) -> Any:
        types = wr.record_types(self.record_types)
        return wr.records(path, types, start, end, scan, self.max_record_bytes)

    def _scan(self, path: str, start: int = 0, end: int | None = None, bound: Any = None) -> Iterator[Piece]:
        """The documents of the records of ``path`` that start in ``[start, end)``, a batch (``bound``) at a time,
        each with the counts of the records skipped and the damaged stretches met while reading it; at least one
        (maybe empty) piece, so the notes of a piece without documents count."""
        scan = wr.Scan()
        rows: list[dict[str, Any]] = []
        size = read = 0
        counted: dict[str, int] = {}
        noted = 0  # damaged stretches already in a piece
        bound = bound or BatchBound(None, None)
        for record in self._records(path, start, end, scan):
            row = self._guarded(record, scan.counts, path)
            if row is None:
                continue
            rows.append(row)
            size += len(row.get(self.text_field) or "") + len(row.get("content") or b"")
            if not bound.fits(len(rows) + 1, size):
                yield self._piece(path, rows, _since(scan.counts, counted), scan.damaged[noted:])
                noted = len(scan.damaged)
                read += len(rows)
                rows, size = [], 0
        _log_scan(path, start, end, scan, read + len(rows))
        counts = _since(scan.counts, counted)
        if rows or counts or scan.damaged[noted:] or not read:
            yield self._piece(path, rows, counts, scan.damaged[noted:])

    def _piece(self, path: str, rows: list[dict[str, Any]], counts: dict[str, int], damaged: list[Any]) -> Piece:
        schema = self.schema_of
        if self.keep_non_html:
            schema = schema.append(pa.field("content", pa.binary()))
        # Column by column: a page's HTML is copied into Arrow once, without a row dict lookup per field.
        table = pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in schema}, schema=schema)
        fields = self.file_fields()  # the source-file column is added by the base (FileReaderStage.with_source)
        if fields is not None:
            missing = [f for f in fields if f not in table.column_names]
            if missing:
                raise InputError(f"{path}: {type(self).__name__} has no field(s) {missing}; it has {schema.names}")
            table = table.select(fields)
        if damaged:
            counts[DAMAGED] = counts.get(DAMAGED, 0) + len(damaged)
        return Piece(0, table, 0, [{"counts": counts, "damaged": [d.as_dict() for d in damaged]}])

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
        """How many documents this reader makes of the records before the piece that starts at ``offset`` (the
        record number of that piece's first document): the piece ``[0, offset)`` is read again, without
        decoding."""
        if offset <= 0:
            return 0
        counts: dict[str, int] = {}
        scan = wr.Scan()
        records = self._records(path, 0, offset, scan)
        return sum(self._guarded(r, counts, path, decode=False) is not None for r in records)

    def _guarded(self, record: wr.Record, counts: dict[str, int], path: str, decode: bool = True) -> Any:
        """:meth:`_document`, except that a record it fails on is skipped and counted (the first one logged with
        its file, offset and URL), never the file: decoding never fails, so a record fails with or without
        ``decode`` alike and the record numbers of split and unsplit reads stay the same."""
        try:
            return self._document(record, counts, decode)
        except Exception as e:
            cause = f"record that could not be read skipped ({type(e).__name__})"
            if cause not in counts and decode:
                from loguru import logger

                url = record.headers.get("warc-target-uri")
                logger.warning(f"{path}: record at byte {record.offset} ({url}) skipped: {e!r}")
            counts[cause] = counts.get(cause, 0) + 1
            return None


def _since(counts: dict[str, int], counted: dict[str, int]) -> dict[str, int]:
    """What ``counts`` holds beyond ``counted`` (what earlier pieces took), taken into ``counted``."""
    out = {k: v - counted.get(k, 0) for k, v in counts.items() if v > counted.get(k, 0)}
    counted.update(counts)
    return out


def _log_scan(path: str, start: int, end: int | None, scan: wr.Scan, documents: int) -> None:
    """One WARNING per damaged stretch of ``path`` and for a piece that read on past its byte range."""
    if not scan.damaged and wr.NO_BOUNDARY not in scan.counts:
        return
    from loguru import logger

    for damage in scan.damaged:
        logger.warning(f"{path}: damaged at byte {damage.offset} ({damage.error}); skipped to the next record")
    if wr.NO_BOUNDARY in scan.counts:
        logger.warning(
            f"{path}: no record boundary can be proven after byte {end} (a gzip member holding many records, or "
            f"a zstd stream): the piece from byte {start} reads on to the end of the file or the next boundary; "
            "the pieces in between read nothing"
        )


class WetReaderStage(WarcReaderStage):
    """Reads the ``conversion`` records of a WET file (text Common Crawl already extracted)."""

    name = "wet_reader"
    schema_of = WET_SCHEMA
    text_field = "text"

    def __init__(
        self, fields: list[str] | None = None, schema: Any = None, max_record_bytes: int | str = MAX_RECORD_BYTES
    ) -> None:
        super().__init__(fields, schema, record_types=("conversion",), max_record_bytes=max_record_bytes)

    def _payload(
        self,
        row: dict[str, Any],
        body: bytes,
        kind: str,
        header_type: str | None,
        counts: dict[str, int],
        decode: bool = True,
    ) -> dict[str, Any] | None:
        row["text"] = ""
        if decode:
            try:
                row["text"] = body.decode("utf-8")
            except UnicodeDecodeError:
                row["text"] = body.decode("utf-8", errors="replace")
                counts[wh.REPLACED] = counts.get(wh.REPLACED, 0) + 1
        return row


class WarcReader(FileReader):
    """Read WARC files (``.warc``, ``.warc.gz``, ``.warc.zst``): one document per HTML record, one source task
    per file (or per group of files, or per record-aligned piece of a large file with ``split_files``). The
    arguments not below are :class:`~.readers.FileReader`'s (it takes no ``schema``).

    Args:
        record_types: the WARC record types that make documents (``"response"``, ``"resource"``,
            ``"conversion"``).
        keep_non_html: also make documents of non-HTML payloads (their bytes in ``content``).
        max_record_bytes: the largest record read, e.g. ``"64MiB"``; a larger one is skipped and noted.
    """

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
        max_record_bytes: int | str = MAX_RECORD_BYTES,
        *,
        batch_rows: int | None = None,
        batch_bytes: int | str | None = DEFAULT_BATCH_BYTES,
        file_path_field: str | None = FILE_PATH,
    ) -> None:
        super().__init__(file_paths, files_per_partition, blocksize, None, file_extensions, limit, split_files)
        self.partitioner.splittable_endings = self.splittable_endings
        self.reader = WarcReaderStage(
            fields, record_types=tuple(record_types), keep_non_html=keep_non_html, max_record_bytes=max_record_bytes
        )
        self.reader.file_path_field = check_file_path_field(file_path_field)
        set_bound(self.reader, batch_rows, batch_bytes)


class WetReader(FileReader):
    """Read Common Crawl's WET files (``.warc.wet.gz``): the text of each ``conversion`` record, same fields
    as :class:`WarcReader` with ``text`` for ``html``; the cheap path when Common Crawl's extraction will do.
    Its arguments are :class:`WarcReader`'s but ``record_types`` and ``keep_non_html``."""

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
        max_record_bytes: int | str = MAX_RECORD_BYTES,
        *,
        batch_rows: int | None = None,
        batch_bytes: int | str | None = DEFAULT_BATCH_BYTES,
        file_path_field: str | None = FILE_PATH,
    ) -> None:
        super().__init__(file_paths, files_per_partition, blocksize, None, file_extensions, limit, split_files)
        self.partitioner.splittable_endings = self.splittable_endings
        self.reader = WetReaderStage(fields, max_record_bytes=max_record_bytes)
        self.reader.file_path_field = check_file_path_field(file_path_field)
        set_bound(self.reader, batch_rows, batch_bytes)
