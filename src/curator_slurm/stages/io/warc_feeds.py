"""The bytes of a WARC file as records are read from them: plain, gzip (inflated member by member, each
decompressed byte knowing the member it came from) or zstd; a WARC record header parser; damage raised as
:class:`Damaged` with the offset to report."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import IO

GZIP_MAGIC = b"\x1f\x8b\x08"
ZSTD_MAGICS = (b"\x28\xb5\x2f\xfd", b"\x5d\x2a\x4d\x18")  # a frame; the skippable frame of a dictionary
#: The longest WARC header read: a longer one is damage (Common Crawl's are about 1 KiB).
MAX_HEADER = 1 << 20
_CHUNK = 1 << 16
_OUT_STEP = 1 << 18  # decompressed bytes made per step: memory stays bounded whatever a member inflates to
_SEPARATOR = frozenset(b"\r\n")


class Damaged(Exception):
    """Bytes that are not what a WARC file must hold there; ``offset`` is where the damaged record (or gzip
    member) starts."""

    def __init__(self, offset: int, error: str) -> None:
        super().__init__(f"{error} (byte {offset})")
        self.offset = offset
        self.error = error


@dataclass(frozen=True)
class Header:
    """A WARC record's header: its type (lower case), fields (names lower-cased) and block length."""

    record_type: str
    fields: dict[str, str]
    length: int


def parse_header(raw: bytes, offset: int) -> Header:
    """The header of the record at ``offset`` (its bytes up to the blank line); Damaged when it is none."""
    lines = raw.replace(b"\r\n", b"\n").split(b"\n")
    if not lines[0].startswith(b"WARC/"):
        raise Damaged(offset, f"no WARC record here (starts {raw[:12]!r})")
    fields: dict[str, str] = {}
    name = ""
    for line in lines[1:]:
        if not line:
            continue
        if line[:1] in (b" ", b"\t") and name:  # a folded line continues the field before it
            fields[name] += " " + line.strip().decode("utf-8", "replace")
            continue
        key, colon, value = line.partition(b":")
        if not colon:
            raise Damaged(offset, f"WARC header line without a colon: {line[:40]!r}")
        name = key.strip().lower().decode("latin-1")
        fields[name] = value.strip().decode("utf-8", "replace")
    try:
        length = int(fields["content-length"])
    except (KeyError, ValueError):
        raise Damaged(offset, "WARC header without a valid Content-Length") from None
    if length < 0:
        raise Damaged(offset, f"WARC header with Content-Length {length}")
    return Header(fields.get("warc-type", "").lower(), fields, length)


class Feed:
    """Buffered bytes of a WARC stream. A subclass appends to ``buf`` in :meth:`_step` (False: no more) and
    says where the record starting at a buffer index lies in the file (:meth:`_offset_at`)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0

    def _step(self) -> bool:
        raise NotImplementedError

    def _offset_at(self, index: int) -> int:
        raise NotImplementedError

    def _trim(self) -> None:
        if self.pos > _CHUNK * 4:
            del self.buf[: self.pos]
            self._shifted(self.pos)
            self.pos = 0

    def _shifted(self, by: int) -> None:
        """The buffer lost its first ``by`` bytes."""

    def _fill(self, n: int) -> bool:
        """At least ``n`` unread bytes buffered (False: the stream ended first)."""
        while len(self.buf) - self.pos < n:
            if not self._step():
                return False
        return True

    def offset(self) -> int | None:
        """Where the next record starts (for gzip: the member its first byte comes from); None at the end."""
        self._trim()
        if not self._fill(1):
            return None
        return self._offset_at(self.pos)

    def header(self) -> Header:
        """Reads the next record's header (through its blank line)."""
        offset = self._offset_at(self.pos)
        self._fill(5)
        if not self.buf.startswith(b"WARC/", self.pos):
            raise Damaged(offset, f"no WARC record here (starts {bytes(self.buf[self.pos : self.pos + 12])!r})")
        searched = self.pos
        while True:
            ends = [(self.buf.find(b"\r\n\r\n", max(searched - 3, self.pos)), 4)]
            ends.append((self.buf.find(b"\n\n", max(searched - 1, self.pos)), 2))
            found = [(end, cut) for end, cut in ends if end >= 0]
            if found:  # the first blank line, whichever line ends the header uses
                end, cut = min(found)
                raw = bytes(self.buf[self.pos : end + cut])
                self.pos = end + cut
                return parse_header(raw, offset)
            searched = len(self.buf)
            if searched - self.pos > MAX_HEADER:
                raise Damaged(offset, f"WARC header longer than {MAX_HEADER} bytes")
            if not self._step():
                raise Damaged(offset, "record cut short in its header (truncated file?)")

    def block(self, length: int, keep: bool, offset: int) -> bytes | None:
        """The next ``length`` bytes (None when not ``keep``: read past without keeping them)."""
        parts: list[bytes] = []
        left = length
        while left:
            if self.pos == len(self.buf):
                self.buf.clear()
                self._shifted(self.pos)
                self.pos = 0
                if not self._skip_raw(left) and not self._step():
                    raise Damaged(offset, f"record cut short: {length - left} of {length} bytes (truncated file?)")
                if left and self._skipped:
                    left -= self._skipped
                    self._skipped = 0
                    continue
            take = min(left, len(self.buf) - self.pos)
            if keep:
                parts.append(bytes(self.buf[self.pos : self.pos + take]))
            self.pos += take
            left -= take
        return b"".join(parts) if keep else None

    _skipped = 0

    def _skip_raw(self, n: int) -> bool:
        """Skip up to ``n`` bytes without reading them (a seekable plain file); sets ``_skipped``."""
        return False

    def end_record(self) -> None:
        """Reads past the blank lines after a block, and makes sure the bytes so far were whole (a gzip member
        that ends here passed its checksum)."""
        for _ in range(64):
            if not self._more_here() or self.buf[self.pos] not in _SEPARATOR:
                break
            self.pos += 1
        self._settle()

    def _more_here(self) -> bool:
        """Whether an unread byte follows in the same unit (gzip: member) as the last one read."""
        return self._fill(1)

    def _settle(self) -> None:
        """Nothing for plain bytes; gzip: the member holding the last byte read has ended cleanly or goes on."""


class PlainFeed(Feed):
    """An uncompressed WARC file (seekable: a block read past is skipped by seeking), or any byte stream
    (``size`` None: offsets count the bytes read)."""

    def __init__(self, f: IO[bytes], start: int, size: int | None) -> None:
        super().__init__()
        self.f, self.base, self.size = f, start, size

    def _step(self) -> bool:
        data = self.f.read(_CHUNK)
        self.buf += data
        return bool(data)

    def _offset_at(self, index: int) -> int:
        return self.base + index

    def _shifted(self, by: int) -> None:
        self.base += by

    def _skip_raw(self, n: int) -> bool:
        if self.size is None or n <= _CHUNK:
            return False
        where = self.base  # the buffer is empty: the next byte is at base
        jump = min(n, max(self.size - where, 0))
        if jump == 0:
            return False
        self.f.seek(where + jump)
        self.base += jump
        self._skipped = jump
        return True


class GzipFeed(Feed):
    """A gzip file inflated member by member from the member at ``start``. Every decompressed byte knows the
    member it came from (``marks``); a member that does not inflate, fails its checksum or is cut short, and
    bytes between members that start no member, raise :class:`Damaged` at that member's offset. With
    ``one_member`` the stream ends with the first member (``member_end`` then says where it ended)."""

    def __init__(self, f: IO[bytes], start: int, one_member: bool = False) -> None:
        super().__init__()
        self.f, self.one_member = f, one_member
        self.cin, self.cin_at = b"", start  # compressed bytes not yet inflated, and where they start
        self.inflater: zlib._Decompress | None = None
        self.member = start
        self.member_end: int | None = None
        self.marks: list[tuple[int, int]] = []  # (buffer index, member offset) where each member's output begins

    def _read_compressed(self, n: int) -> bool:
        data = self.f.read(max(_CHUNK, n))
        self.cin += data
        return bool(data)

    def _step(self) -> bool:
        if self.inflater is None:
            if self.one_member and self.member_end is not None:
                return False
            if len(self.cin) < 3:
                self._read_compressed(3)
            if not self.cin:
                return False
            if not self.cin.startswith(GZIP_MAGIC):
                raise Damaged(self.cin_at, f"no gzip member here (starts {self.cin[:8]!r})")
            self.inflater = zlib.decompressobj(31)
            self.member = self.cin_at
            self.marks.append((len(self.buf), self.member))
        if not self.cin and not self._read_compressed(_CHUNK):
            raise Damaged(self.member, "gzip member cut short (truncated file?)")
        before = len(self.cin)
        try:
            out = self.inflater.decompress(self.cin, _OUT_STEP)
        except zlib.error as e:
            raise Damaged(self.member, f"gzip member does not inflate: {e}") from None
        if self.inflater.eof:
            self.cin = self.inflater.unused_data
            self.cin_at += before - len(self.cin)
            self.member_end = self.cin_at
            self.inflater = None
        else:
            self.cin = self.inflater.unconsumed_tail
            self.cin_at += before - len(self.cin)
        self.buf += out
        return True

    def _offset_at(self, index: int) -> int:
        member = self.marks[0][1] if self.marks else self.member
        for at, offset in self.marks:
            if at > index:
                break
            member = offset
        return member

    def _shifted(self, by: int) -> None:
        kept = [(at - by, offset) for at, offset in self.marks if at - by >= 0]
        before = [offset for at, offset in self.marks if at - by < 0]
        self.marks = ([(0, before[-1])] if before and (not kept or kept[0][0] > 0) else []) + kept

    def _settle(self) -> None:
        while self.pos == len(self.buf) and self.inflater is not None:
            self._step()

    def _more_here(self) -> bool:
        self._settle()
        return self.pos < len(self.buf)

    def ended_cleanly(self) -> bool:
        """Whether every byte inflated was read and the last member ended (its checksum passed)."""
        return self.pos == len(self.buf) and self.inflater is None


class StreamFeed(PlainFeed):
    """A decompressing stream (zstd) read from its start: offsets are those of the decompressed bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(stream, 0, None)

    def _step(self) -> bool:
        try:
            return super()._step()
        except Exception as e:  # pyarrow's decompression errors
            raise Damaged(self.base + len(self.buf), f"zstd stream does not decompress: {e}") from None
