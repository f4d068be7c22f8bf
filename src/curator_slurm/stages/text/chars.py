"""Whole-column character measurements for the heuristic filters: NeMo Curator's per-string quantities for every
document of an Arrow string chunk at once, on its UTF-8 bytes with numpy (:func:`per_chunk` for a whole column)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.compute import call, cast, from_numpy, to_numpy


def texts_of(texts: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """The column as a chunked string column with nulls read as empty text (NeMo's filters see
    ``str`` only; a null has no text)."""
    if isinstance(texts, pa.Array):
        texts = pa.chunked_array([texts])
    if pa.types.is_null(texts.type):  # a column that was null in every row of a JSON file
        texts = cast(texts, pa.string())
    elif not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = cast(texts, pa.large_string())  # string_view and friends
    if texts.null_count:
        texts = call("coalesce", texts, "")
    return texts


def per_chunk(
    texts: pa.ChunkedArray | pa.Array, score: Callable[[pa.Array], np.ndarray], type: pa.DataType
) -> pa.ChunkedArray:
    """``score`` applied to each chunk of the column, as one chunked column of ``type``."""
    column = texts_of(texts)
    out = [from_numpy(score(chunk), type) for chunk in column.chunks]
    return pa.chunked_array(out, type=type)


# --------------------------------------------------------------------------------------------------
# bytes and characters
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Utf8:
    """A string chunk's UTF-8 bytes and the byte offsets of its documents (``n + 1`` of them, the
    first 0)."""

    data: np.ndarray
    offsets: np.ndarray

    @property
    def size(self) -> int:
        return len(self.offsets) - 1

    @functools.cached_property
    def raw(self) -> bytes:
        """The bytes as ``bytes`` (for ``bytes.translate``, which maps bytes faster than numpy indexing)."""
        return self.data.tobytes()


def utf8(chunk: pa.Array) -> Utf8:
    """A zero-copy view of ``chunk``'s bytes (a slice of a larger array included)."""
    width = 8 if pa.types.is_large_string(chunk.type) else 4
    _, offsets_buf, data_buf = chunk.buffers()
    n = len(chunk)
    offsets = np.frombuffer(
        offsets_buf, dtype=np.int64 if width == 8 else np.int32, count=n + 1, offset=chunk.offset * width
    )
    offsets = offsets.astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    data = (
        np.frombuffer(data_buf, dtype=np.uint8, count=end - start, offset=start)
        if end > start
        else np.zeros(0, np.uint8)
    )
    return Utf8(data, offsets - start)


def segment_counts(mask: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """How many elements of ``mask`` (bool or 0/1 bytes) are set in each ``mask[offsets[i]:offsets[i + 1]]``."""
    marks = np.multiply(mask.view(np.uint8), 0x3F, dtype=np.uint8)
    np.subtract(0x80, marks, out=marks)  # set -> "A", unset -> a UTF-8 continuation byte
    return _count_marks(pa.py_buffer(marks), offsets)


def _count_marks(marks: pa.Buffer, offsets: np.ndarray) -> np.ndarray:
    """Per segment, the bytes of ``marks`` that are not UTF-8 continuation bytes (0x80-0xBF).

    Arrow's ``utf8_length`` counts exactly those (it does not validate), several times faster than a
    numpy cumulative sum; so a byte mask is written as "A" (counted) or 0x80 (not) and measured as a
    string column over the same offsets."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    column = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1, [None, pa.py_buffer(offsets), marks])
    return np.array(to_numpy(call("utf8_length", column)), dtype=np.int64)


def ascii_table(chars: Iterable[str]) -> bytes:
    """A ``bytes.translate`` table mapping the bytes of the given ASCII characters to "A" and every
    other byte to 0x80 (see :func:`_count_marks`)."""
    table = bytearray(b"\x80" * 256)
    for c in chars:
        if ord(c) >= 0x80:
            raise ValueError(f"ascii_table: {c!r} is not ASCII")
        table[ord(c)] = 0x41
    return bytes(table)


def ascii_mask(view: Utf8, table: bytes) -> np.ndarray:
    """For each byte, whether ``table`` (from :func:`ascii_table`) marks it (bool: numpy finds the
    positions of a bool mask several times faster than of 0/1 bytes)."""
    return np.frombuffer(view.raw.translate(table), dtype=np.uint8) == 0x41


def code_points(data: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """The code points of the multi-byte characters whose first bytes are at positions ``lead``."""
    last = len(data) - 1
    b0 = data[lead].astype(np.int32)
    b1 = data[np.minimum(lead + 1, last)].astype(np.int32) & 0x3F
    b2 = data[np.minimum(lead + 2, last)].astype(np.int32) & 0x3F
    b3 = data[np.minimum(lead + 3, last)].astype(np.int32) & 0x3F
    two = ((b0 & 0x1F) << 6) | b1
    three = ((b0 & 0x0F) << 12) | (b1 << 6) | b2
    four = ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3
    return np.where(b0 < 0xE0, two, np.where(b0 < 0xF0, three, four))


def classify(cps: np.ndarray, predicate: Callable[[str], bool]) -> np.ndarray:
    """``predicate(chr(cp))`` for each code point, calling it once per distinct code point."""
    if len(cps) == 0:
        return np.zeros(0, bool)
    distinct, inverse = np.unique(cps, return_inverse=True)
    flags = np.fromiter((predicate(chr(c)) for c in distinct.tolist()), dtype=bool, count=len(distinct))
    return flags[inverse.reshape(-1)]


def count_chars(view: Utf8, table: bytes | np.ndarray, non_ascii: Callable[[str], bool] | None = None) -> np.ndarray:
    """Per document, the number of characters that are ASCII and marked by ``table`` (a table from
    :func:`ascii_table`, or a bool per byte already computed), or non-ASCII and satisfy ``non_ascii``."""
    if isinstance(table, bytes):
        counts = _count_marks(pa.py_buffer(view.raw.translate(table)), view.offsets)
    else:
        counts = segment_counts(table, view.offsets)
    if non_ascii is not None and len(view.data):
        lead = np.flatnonzero(view.data >= 0xC0)
        if len(lead):
            hit = lead[classify(code_points(view.data, lead), non_ascii)]
            if len(hit):
                docs = np.searchsorted(view.offsets, hit, side="right") - 1
                counts += np.bincount(docs, minlength=view.size)
    return counts


def char_lengths(chunk: pa.Array) -> np.ndarray:
    """``len(text)`` of each document: code points, as Python counts them."""
    return np.asarray(to_numpy(call("utf8_length", chunk)), dtype=np.int64)


def _is_space(c: str) -> bool:
    return c.isspace()


def ascii_space(data: np.ndarray) -> np.ndarray:
    """For each byte, whether it is an ASCII whitespace character (``str.isspace``: 9-13 and 28-32;
    two range checks are faster than any table lookup)."""
    shifted = data - np.uint8(9)
    space = shifted <= 4
    np.subtract(data, np.uint8(28), out=shifted)
    space |= shifted <= 4
    return space


def count_space(view: Utf8) -> np.ndarray:
    """Per document, the characters ``str.isspace`` accepts."""
    return count_chars(view, ascii_space(view.data), _is_space)


def space_bytes(view: Utf8) -> np.ndarray:
    """For each byte, whether it belongs to a whitespace character (``str.isspace``)."""
    space = ascii_space(view.data)
    if len(view.data):
        lead = np.flatnonzero(view.data >= 0xC0)
        if len(lead):
            cps = code_points(view.data, lead)
            hit = classify(cps, _is_space)
            if hit.any():
                at, cp = lead[hit], cps[hit]
                for k in (0, 1, 2):  # every non-ASCII whitespace character is 2 or 3 bytes long
                    inside = (k < 2) | (cp >= 0x800)
                    space[at[inside] + k] = True
    return space


def char_mask(view: Utf8, table: bytes, non_ascii: Callable[[str], bool] | None = None) -> np.ndarray:
    """True at each ASCII byte ``table`` marks and at the first byte of each non-ASCII character that
    satisfies ``non_ascii``."""
    mask = ascii_mask(view, table)
    if non_ascii is not None and len(view.data):
        lead = np.flatnonzero(view.data >= 0xC0)
        if len(lead):
            mask[lead[classify(code_points(view.data, lead), non_ascii)]] = True
    return mask
