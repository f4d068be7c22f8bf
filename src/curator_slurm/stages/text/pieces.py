"""Words, lines and paragraphs of every document of a column at once, and ids for equal pieces (Arrow's dictionary
encoding), for the heuristic filters; what is counted over them is in :mod:`.counts`."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.chars import Utf8, char_lengths, segment_counts, space_bytes, utf8
from curator_slurm.stages.text.compute import call, from_numpy, split_pattern, to_numpy


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


def dictionary_codes(values: pa.Array | np.ndarray) -> np.ndarray:
    """An integer per value, equal for equal values, numbered 0, 1, 2, ... in order of first
    appearance (Arrow's hash-based dictionary encoding: no sort)."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    if not isinstance(values, pa.Array):
        values = (
            from_numpy(values, pa.from_numpy_dtype(values.dtype)) if values.dtype.kind in "iub" else pa.array(values)
        )
    encoded = call("dictionary_encode", values)
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
        return self._per_doc(np.add, values)

    def per_doc_max(self, values: np.ndarray) -> np.ndarray:
        """Per document, the largest of ``values`` (one per word) over its words; 0 without words."""
        return self._per_doc(np.maximum, values)

    def _per_doc(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        """Per document, ``ufunc`` reduced over the ``values`` of its words; 0 without words."""
        out = np.zeros(self.view.size, values.dtype)
        some = self.counts > 0
        if some.any():
            out[some] = ufunc.reduceat(values, self.first[some])
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
