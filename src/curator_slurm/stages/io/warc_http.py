"""The HTTP response in a WARC record and its payload as text: header, chunking, content encodings (inflated
with a cap on the size, never whole before checking it) and the charset (strict decodings first, U+FFFD only
when no declared or detected charset decodes the bytes)."""

from __future__ import annotations

import codecs
import re
import zlib
from dataclasses import dataclass

#: Why a response is not a document (the reader counts each under its cause).
BROKEN_HTTP = "broken HTTP header skipped"
CORRUPT_ENCODING = "corrupt Content-Encoding skipped"
UNKNOWN_ENCODING = "unknown Content-Encoding skipped"
OVER_SIZE = "payload over max_record_bytes skipped"
#: What the reader counts about documents it keeps.
REPLACED = "decoded with U+FFFD replacements (kept)"
NOT_ENCODED = "Content-Encoding not applied to the body (kept as sent)"

_STATUS = re.compile(rb"HTTP/\d(?:\.\d)?\s+(\d{3})")
_INFLATE_STEP = 1 << 16


@dataclass(frozen=True)
class Http:
    """An HTTP response's status, headers (names lower-cased) and body (de-chunked and decoded)."""

    status: int
    headers: dict[str, str]
    body: bytes
    #: What the reader counts about the body though it keeps it (:data:`NOT_ENCODED`), or None.
    note: str | None = None


def parse_http(block: bytes, max_bytes: int | None = None) -> Http | str:
    """The HTTP response in a response record's block, or the cause (a module constant) of its drop: a header
    that does not parse, a content encoding that is corrupt or unknown, or a body that inflates past
    ``max_bytes``. A chunked body is de-chunked; gzip, deflate, br and zstd encodings are undone (in the
    reverse of the order listed), each stopping as soon as the output passes ``max_bytes``."""
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    match = _STATUS.match(head)
    if not sep or match is None:
        return BROKEN_HTTP
    headers: dict[str, str] = {}
    for line in head.split(b"\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    note = None
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
    for coding in reversed([c for c in codings if c and c != "identity"]):
        decoded = decode_content(body, coding, max_bytes)
        if isinstance(decoded, str):
            return decoded
        body, applied = decoded
        note = note or (None if applied else NOT_ENCODED)
    if max_bytes is not None and len(body) > max_bytes:
        return OVER_SIZE
    return Http(int(match.group(1)), headers, body, note)


def decode_content(body: bytes, coding: str, max_bytes: int | None) -> tuple[bytes, bool] | str:
    """``body`` with the content coding ``coding`` undone, and whether it was applied at all (a body that
    does not start as the coding's format is taken as sent, as warcio does); or a drop cause."""
    if coding in ("gzip", "x-gzip", "deflate"):
        gzip_like = body[:2] == b"\x1f\x8b"
        zlib_like = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
        if coding != "deflate" and not gzip_like and not zlib_like:
            return body, False
        wbits = 47 if gzip_like or zlib_like else -15  # gzip or zlib by their header; "deflate" may be raw
        return _inflate(body, wbits, max_bytes)
    if coding in ("br", "zstd"):
        return _arrow_decompress(body, "brotli" if coding == "br" else "zstd", max_bytes)
    return UNKNOWN_ENCODING


def _inflate(body: bytes, wbits: int, max_bytes: int | None) -> tuple[bytes, bool] | str:
    """Inflate in steps, keeping at most ``max_bytes + 1`` bytes: a bomb stops early. A stream cut short (a
    payload the crawler truncated) gives what it holds; one that is corrupt is a drop."""
    limit = max_bytes + 1 if max_bytes is not None else 0
    inflater = zlib.decompressobj(wbits)
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data and not inflater.eof:
            chunk = inflater.decompress(data, _INFLATE_STEP)
            data = inflater.unconsumed_tail
            out.append(chunk)
            size += len(chunk)
            if limit and size >= limit:
                return OVER_SIZE
            if not chunk and not data:
                break
    except zlib.error:
        return CORRUPT_ENCODING
    return b"".join(out), True


def _arrow_decompress(body: bytes, codec: str, max_bytes: int | None) -> tuple[bytes, bool] | str:
    import pyarrow as pa

    limit = max_bytes + 1 if max_bytes is not None else None
    try:
        with pa.CompressedInputStream(pa.BufferReader(body), codec) as stream:
            out = stream.read(limit) if limit is not None else stream.read()
    except (pa.ArrowException, OSError):
        return CORRUPT_ENCODING
    if limit is not None and len(out) >= limit:
        return OVER_SIZE
    return bytes(out), True


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
#: Python codecs that decode bytes to text but are no web page's charset (a page naming one is decoded as if
#: it named none): IDNA and punycode take host names, the escapes take Python literals, ``undefined`` fails.
_NOT_PAGE_CHARSETS = frozenset(
    {"idna", "punycode", "undefined", "unicode_escape", "raw_unicode_escape", "utf_7", "mbcs", "oem"}
)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"))
_BOMS16 = ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def page_charset(name: str | None) -> str | None:
    """The Python codec of a declared charset, or None when it names none, or one that is not a text
    encoding (``hex``, ``base64``, ``rot13``) or no page's (:data:`_NOT_PAGE_CHARSETS`)."""
    if not name:
        return None
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name.replace("-", "_") in _NOT_PAGE_CHARSETS:
        return None
    return info.name


def _bom(body: bytes) -> str | None:
    for bom, name in _BOMS:  # UTF-32 LE's BOM begins with UTF-16 LE's: look for it first
        if body.startswith(bom):
            return name
    return next((name for bom, name in _BOMS16 if body.startswith(bom)), None)


def _strict(body: bytes, encoding: str) -> str | None:
    try:
        return body.decode(encoding)
    except (UnicodeError, LookupError):
        return None
    except Exception:  # a codec that fails otherwise on these bytes decodes nothing
        return None


def _mostly_utf8(body: bytes) -> str | None:
    """``body`` as UTF-8 with U+FFFD for its few invalid bytes, when its valid multi-byte characters outnumber
    them four to one (UTF-8 text with a stray byte); None when it is not UTF-8 text (a legacy charset's bytes
    are almost all invalid as UTF-8, and a single-byte charset detected for them would decode anything)."""
    text = body.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - body.count("\ufffd".encode())
    wide = len(text) - len(text.encode("ascii", errors="ignore")) - bad
    return text if wide >= 4 * bad else None


def decode_html(body: bytes, content_type: str | None) -> tuple[str, bool]:
    """The text of an HTML payload, and whether bytes had to be replaced by U+FFFD.

    Tried in order, each strictly (all bytes valid): the encoding of a byte-order mark; UTF-8 (a declared
    UTF-16 or UTF-32 first); the charset of the HTTP header; that of the page's ``<meta>`` tag (first 4 KiB).
    When none decodes every byte: UTF-8 with U+FFFD if the page is UTF-8 text with a few stray bytes
    (:func:`_mostly_utf8`); else the charset Resiliparse's detector names, strictly; else the first candidate
    with U+FFFD for the invalid bytes. A declared charset that is no text encoding is passed over."""
    from_header = _CHARSET.search(content_type or "")
    header = page_charset(from_header.group(1) if from_header else None)
    from_meta = _META_CHARSET.search(body[:4096])
    meta = page_charset(from_meta.group(1).decode("ascii", "replace") if from_meta else None)
    declared = [c for c in (header, meta) if c]
    wide = [c for c in declared if c.startswith(("utf-16", "utf-32"))]
    candidates = [c for c in (_bom(body), *wide, "utf-8", *declared) if c]
    for encoding in dict.fromkeys(candidates):
        text = _strict(body, encoding)
        if text is not None:
            return text, False
    if not wide:
        mostly = _mostly_utf8(body)
        if mostly is not None:
            return mostly, True
    from resiliparse.parse.encoding import detect_encoding

    try:
        detected = page_charset(detect_encoding(body))
    except Exception:  # a detector that fails names nothing
        detected = None
    if detected is not None:
        text = _strict(body, detected)
        if text is not None:
            return text, False
    fallback = (header or meta or detected or "utf-8") if not wide else wide[0]
    try:
        return body.decode(fallback, errors="replace"), True
    except Exception:  # a codec without "replace": UTF-8 has it
        return body.decode("utf-8", errors="replace"), True
