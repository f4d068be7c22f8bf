"""Whole-column text measurements for the heuristic filters.

NeMo Curator's filters are defined on one Python string at a time (``len``, ``str.split``,
``str.strip``, regular expressions). These helpers compute the same quantities for every document of
an Arrow string column at once: character classes are counted on the column's UTF-8 bytes with numpy
(a byte below 0x80 is one ASCII character; only the few multi-byte characters are decoded), and words,
lines and paragraphs come from Arrow's split kernels, whose whitespace is exactly Python's
``str.isspace``. Every function takes one chunk (a ``StringArray`` or ``LargeStringArray`` without
nulls) and returns one value per document as a numpy array.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .._kernels import call, cast, from_numpy, split_pattern, to_numpy


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


# --------------------------------------------------------------------------------------------------
# words, lines, paragraphs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pieces:
    """The pieces (words, lines, paragraphs) of every document of a chunk, flattened in order:
    ``values[starts[d]:starts[d] + counts[d]]`` are document ``d``'s, ``doc[i]`` is piece ``i``'s
    document."""

    values: pa.Array
    doc: np.ndarray
    counts: np.ndarray
    starts: np.ndarray

    @classmethod
    def from_lists(cls, lists: pa.Array, n: int, keep: Callable[[pa.Array], np.ndarray] | None = None) -> Pieces:
        values = call("list_flatten", lists)
        doc = np.asarray(to_numpy(call("list_parent_indices", lists)), dtype=np.int64)
        if keep is not None:
            mask = keep(values)
            if not mask.all():
                values = call("filter", values, pa.array(mask))
                doc = doc[mask]
        counts = np.bincount(doc, minlength=n).astype(np.int64)
        starts = np.zeros(n, np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        return cls(values, doc, counts, starts)

    def lengths(self) -> np.ndarray:
        """``len`` of each piece."""
        return char_lengths(self.values)

    def per_doc(self, flags: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Per document, how many of its pieces have ``flags`` set (or the sum of their ``weights``)."""
        n = len(self.counts)
        if weights is None:
            return np.bincount(self.doc[flags], minlength=n).astype(np.int64)
        return np.bincount(self.doc[flags], weights=weights[flags], minlength=n)


def words(chunk: pa.Array) -> Pieces:
    """``text.split()`` of every document (English, and every language but Chinese and Japanese, in
    NeMo Curator), as strings. Built from :func:`word_spans`, not Arrow's ``utf8_split_whitespace``:
    that kernel (pyarrow 26) sometimes leaves a trailing form feed (U+000C) on the last word."""
    spans = word_spans(utf8(chunk))
    n = len(chunk)
    doc = np.repeat(np.arange(n, dtype=np.int64), spans.counts)
    return Pieces(spans.values(), doc, spans.counts, spans.first)


def _not_blank(values: pa.Array) -> np.ndarray:
    view = utf8(values)
    return segment_counts(~space_bytes(view), view.offsets) > 0


def lines(chunk: pa.Array) -> Pieces:
    """NeMo Curator's sentences: ``[x for x in text.split("\\n") if x.strip()]`` (lines unstripped)."""
    return Pieces.from_lists(split_pattern(chunk, "\n"), len(chunk), _not_blank)


def paragraphs(chunk: pa.Array) -> Pieces:
    """NeMo Curator's paragraphs: ``text.split("\\n\\n")``, empty pieces included (at least one)."""
    return Pieces.from_lists(split_pattern(chunk, "\n\n"), len(chunk))


def first_occurrences(pieces: Pieces, codes: np.ndarray | None = None) -> np.ndarray:
    """For each piece, whether it is the first piece of its document with its value (or its
    ``codes``): what ``set(pieces)`` keeps."""
    if codes is None:
        codes = dictionary_codes(pieces.values)
    return occurrences(combine(pieces.doc, codes), pieces.doc)[1]


def dictionary_codes(values: pa.Array | np.ndarray) -> np.ndarray:
    """An integer per value, equal for equal values, numbered 0, 1, 2, ... in order of first
    appearance (Arrow's hash-based dictionary encoding: no sort)."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    encoded = call("dictionary_encode", values if isinstance(values, pa.Array) else pa.array(values))
    return np.asarray(to_numpy(encoded.indices), dtype=np.int64)


def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int64 per pair ``(a[i], b[i])`` of non-negative integers, equal for equal pairs."""
    if len(a) == 0:
        return np.zeros(0, np.int64)
    return a.astype(np.int64) * (int(b.max()) + 1) + b


#: Keys hashed per call of Arrow's dictionary encoder when the keys are grouped by document: a hash
#: table this small stays in the CPU cache (one for four million distinct keys took 6x as long).
_BLOCK = 1 << 16


def encode(keys: np.ndarray | pa.Array, doc: np.ndarray | None = None) -> np.ndarray:
    """The id of each key: 0, 1, 2, ... in order of first appearance, equal for equal keys.

    With ``doc`` (non-decreasing, and only keys of one document ever compared) the keys are encoded a
    block of whole documents at a time; ids stay distinct across blocks."""
    if doc is None or len(keys) <= _BLOCK:
        return dictionary_codes(keys)
    cuts = np.unique(np.searchsorted(doc, doc[np.arange(0, len(keys), _BLOCK)]))
    ids = np.empty(len(keys), np.int64)
    offset = 0
    for a, b in itertools.pairwise([*cuts.tolist(), len(keys)]):
        if b > a:
            block = dictionary_codes(keys[a:b])
            ids[a:b] = block + offset
            offset += int(block.max()) + 1
    return ids


def occurrences(keys: np.ndarray | pa.Array, doc: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode`'s ids, and whether each position is its key's first appearance (the position
    where a new, larger id shows up)."""
    ids = encode(keys, doc)
    first = np.ones(len(ids), bool)
    if len(ids) > 1:
        first[1:] = ids[1:] > np.maximum.accumulate(ids)[:-1]
    return ids, first


def ngram_codes(words: Pieces, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions (indices into ``words.values``) where an ``n``-gram of words starts inside one
    document, and an integer per n-gram, equal for equal n-grams."""
    total = len(words.values)
    codes = encode(words.values, words.doc)
    ends = (words.starts + words.counts)[words.doc] if total else np.zeros(0, np.int64)
    positions = np.flatnonzero(np.arange(total) + n <= ends)
    grams = codes[positions]
    doc = words.doc[positions]
    for k in range(1, n):
        grams = encode(combine(grams, codes[positions + k]), doc)
    return positions, grams


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


def word_counts(view: Utf8) -> np.ndarray:
    """``len(text.split())`` of each document: how many of its bytes start a word (a non-space byte
    after a space byte or at the start of the document; the inner bytes of a multi-byte character
    follow its own first byte, so they start nothing)."""
    if len(view.data) == 0:
        return np.zeros(view.size, np.int64)
    word = ~space_bytes(view)
    starts = word.copy()
    starts[1:] &= ~word[:-1]
    doc_starts = view.offsets[:-1][view.offsets[:-1] < view.offsets[1:]]
    starts[doc_starts] = word[doc_starts]
    return segment_counts(starts, view.offsets)


@dataclass(frozen=True)
class Spans:
    """The words (``text.split()``) of every document of a chunk as byte ranges of its data:
    word ``i`` is ``data[starts[i]:ends[i]]``; document ``d``'s words are ``first[d]`` to
    ``first[d] + counts[d] - 1``."""

    view: Utf8
    starts: np.ndarray
    ends: np.ndarray
    first: np.ndarray
    counts: np.ndarray

    def values(self) -> pa.Array:
        """The words as a string array (their bytes copied out of the documents)."""
        count = len(self.starts)
        if count == 0:
            return pa.array([], pa.large_string())
        pieces = pa.Array.from_buffers(
            pa.large_string(), 2 * count - 1, [None, pa.py_buffer(self._bounds()), pa.py_buffer(self.view.data)]
        )
        return call("take", pieces, pa.array(np.arange(0, 2 * count - 1, 2)))

    def per_word(self, mask: np.ndarray) -> np.ndarray:
        """How many bytes of each word ``mask`` (a bool per byte of the data) marks."""
        if len(self.starts) == 0:
            return np.zeros(0, np.int64)
        return segment_counts(mask, self._bounds())[0::2]

    def lengths(self) -> np.ndarray:
        """``len(word)`` of each word: its bytes minus the continuation bytes of its characters (few:
        found by position, not counted per word)."""
        lengths = self.ends - self.starts
        data = self.view.data
        inner = np.flatnonzero((data & 0xC0) == 0x80)
        if len(inner) and len(self.starts):
            word = np.searchsorted(self.starts, inner, side="right") - 1
            inside = (word >= 0) & (inner < self.ends[np.maximum(word, 0)])
            lengths = lengths - np.bincount(word[inside], minlength=len(self.starts))
        return lengths

    def _bounds(self) -> np.ndarray:
        """Offsets that make word, gap, word, gap, ..., word segments of the data."""
        bounds = np.empty(2 * len(self.starts), np.int64)
        bounds[0::2] = self.starts
        bounds[1::2] = self.ends
        return bounds

    def per_doc_sum(self, values: np.ndarray) -> np.ndarray:
        """Per document, the sum of ``values`` (one per word) over its words."""
        out = np.zeros(self.view.size, values.dtype)
        some = self.counts > 0
        if some.any():
            out[some] = np.add.reduceat(values, self.first[some])
        return out

    def per_doc_max(self, values: np.ndarray) -> np.ndarray:
        """Per document, the largest of ``values`` (one per word) over its words; 0 without words."""
        out = np.zeros(self.view.size, values.dtype)
        some = self.counts > 0
        if some.any():
            out[some] = np.maximum.reduceat(values, self.first[some])
        return out

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """The words of at most 7 bytes, and their bytes packed into one integer each (see
        :func:`pack`), to compare every word with a few short strings at once."""
        size = self.ends - self.starts
        which = np.flatnonzero(size <= 7)
        data = self.view.data
        padded = np.zeros(len(data) + 8, np.uint8)
        padded[: len(data)] = data
        # Eight bytes read from every byte position (overlapping, unaligned), little-endian.
        every = np.ndarray(shape=(len(data),), dtype="<u8", buffer=padded, strides=(1,))
        short = size[which].astype(np.uint64)
        key = every[self.starts[which]] & (np.left_shift(np.uint64(1), short * np.uint64(8)) - np.uint64(1))
        return which, (key | (short << np.uint64(56))).view(np.int64)


def pack(word: str) -> int:
    """A short string's UTF-8 bytes packed as :meth:`Spans.packed` packs a word."""
    raw = word.encode("utf-8")
    if len(raw) > 7:
        raise ValueError(f"pack: {word!r} is longer than 7 bytes")
    return int.from_bytes(raw, "little") | (len(raw) << 56)


def word_spans(view: Utf8) -> Spans:
    """The words of every document (``text.split()``, Python's whitespace) as byte ranges."""
    data, offsets = view.data, view.offsets
    if len(data) == 0:
        empty = np.zeros(0, np.int64)
        return Spans(view, empty, empty, np.zeros(view.size, np.int64), np.zeros(view.size, np.int64))
    word = ~space_bytes(view)
    doc_starts = offsets[:-1][offsets[:-1] < offsets[1:]]
    doc_ends = offsets[1:][offsets[:-1] < offsets[1:]]
    before = np.empty_like(word)  # is the byte before a word byte (of the same document)?
    before[0] = False
    before[1:] = word[:-1]
    before[doc_starts] = False
    after = np.empty_like(word)
    after[-1] = False
    after[:-1] = word[1:]
    after[doc_ends - 1] = False
    start_mask = word & ~before
    starts = np.flatnonzero(start_mask)
    ends = np.flatnonzero(word & ~after) + 1
    counts = segment_counts(start_mask, offsets)
    first = np.zeros(view.size, np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    return Spans(view, starts, ends, first, counts)


def char_mask(view: Utf8, table: bytes, non_ascii: Callable[[str], bool] | None = None) -> np.ndarray:
    """True at each ASCII byte ``table`` marks and at the first byte of each non-ASCII character that
    satisfies ``non_ascii``."""
    mask = ascii_mask(view, table)
    if non_ascii is not None and len(view.data):
        lead = np.flatnonzero(view.data >= 0xC0)
        if len(lead):
            mask[lead[classify(code_points(view.data, lead), non_ascii)]] = True
    return mask
