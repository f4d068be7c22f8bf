"""Counting over the pieces of many documents at once: shares, per-document sums, repeated pieces, n-grams and
the most frequent one. NeMo Curator's repetition filters and datatrove's Gopher rules count with these."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.chars import char_lengths
from curator_slurm.stages.text.compute import from_numpy
from curator_slurm.stages.text.pieces import combine, encode, occurrences


def ratio(numerator: object, denominator: object, empty: float | None = None) -> np.ndarray:
    """``numerator / denominator`` element by element, as Python divides floats; where the denominator is 0,
    ``empty`` (NeMo's score for a text it cannot score), or with ``empty=None`` IEEE's nan or inf (datatrove
    compares those, where Python would raise)."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    return out if empty is None else np.where(den > 0, out, empty)


def per_row(values: np.ndarray, parents: np.ndarray, rows: int) -> np.ndarray:
    """``values`` summed by the row each came from (rows without any are 0)."""
    return np.bincount(parents, weights=values, minlength=rows) if len(parents) else np.zeros(rows)


def repeated(values: pa.Array | np.ndarray, doc: np.ndarray) -> np.ndarray:
    """For each piece (``doc``: its document, non-decreasing), whether an earlier piece of its document is
    equal to it: what a ``set`` of the document's pieces leaves out, and what datatrove's ``find_duplicates``
    counts. ``values``: the pieces, or integer codes equal for equal pieces of a document (n-grams)."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    codes = values if isinstance(values, np.ndarray) else encode(values, doc)
    return ~occurrences(combine(doc, codes), doc)[1]


def repeated_per_doc(
    values: pa.Array, doc: np.ndarray, rows: int, chars: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per document: how many of its pieces repeat an earlier one, and (``chars``) their characters (code
    points), every occurrence after the first counted (datatrove's ``find_duplicates``; NeMo's distinct pieces
    are the pieces minus these)."""
    again = repeated(values, doc)
    if not again.any():
        return np.zeros(rows, np.int64), np.zeros(rows, np.int64) if chars else None
    count = np.bincount(doc[again], minlength=rows).astype(np.int64)
    if not chars:
        return count, None
    lengths = char_lengths(values)[again]
    return count, np.bincount(doc[again], weights=lengths, minlength=rows).astype(np.int64)


def ngram_codes(codes: np.ndarray, doc: np.ndarray, ends: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions where an ``n``-gram of words starts inside one document, and an integer per n-gram, equal
    for equal n-grams of a document. ``codes``: an integer per word, equal for equal words; ``doc``: each
    word's document (non-decreasing); ``ends``: for each word, the position just past its document's last."""
    positions = np.flatnonzero(np.arange(len(codes)) + n <= ends)
    grams = codes[positions]
    gram_doc = doc[positions]
    for k in range(1, n):
        grams = encode(combine(grams, codes[positions + k]), gram_doc)
    return positions, grams


def top_ngrams(positions: np.ndarray, grams: np.ndarray, doc: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per document that has n-grams, its most frequent one, the first to appear among equally frequent ones
    (``Counter.most_common(1)``): (documents, where that n-gram first starts, how many times it occurs).
    ``positions`` and ``grams`` are :func:`ngram_codes`' and ``doc`` is the words' documents."""
    gram_doc = doc[positions]
    ids, first = occurrences(combine(gram_doc, grams), gram_doc)
    counts = np.bincount(ids)
    first_at = np.flatnonzero(first)  # where each (document, n-gram) first occurs, in id order
    id_doc = gram_doc[first_at]
    # A document's ids are consecutive and in order of first appearance (documents are contiguous): the
    # first id of the document with the highest count is its most frequent n-gram, the earliest on ties.
    group = np.flatnonzero(np.r_[True, id_doc[1:] != id_doc[:-1]])
    best = np.maximum.reduceat(counts, group)
    sizes = np.diff(np.r_[group, len(counts)])
    candidate = np.where(counts == np.repeat(best, sizes), np.arange(len(counts)), len(counts))
    top = np.minimum.reduceat(candidate, group)
    return id_doc[group], positions[first_at[top]], counts[top]


#: The base of the polynomial string hashes of :func:`joined_ngram_codes` (odd, so a power never becomes 0).
_BASE = np.uint64(0x9E3779B97F4A7C15)


def string_hashes(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """For each string, its polynomial hash (code points, base :data:`_BASE`, modulo 2**64) and the base to the
    power of its length: the hash of ``a + b`` is ``hash(a) * power(b) + hash(b)``."""
    lengths = np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words))
    cps = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    longest = int(lengths.max()) if len(lengths) else 0
    powers = np.ones(longest + 1, np.uint64)
    with np.errstate(over="ignore"):
        if longest:
            powers[1:] = np.cumprod(np.full(longest, _BASE, np.uint64), dtype=np.uint64)
        ends = np.cumsum(lengths)
        # Character j of a word ending at e weighs BASE ** (e - 1 - j).
        weight = powers[np.repeat(ends, lengths) - 1 - np.arange(len(cps))] if len(cps) else cps
        terms = cps * weight
    hashes = np.zeros(len(words), np.uint64)
    some = lengths > 0
    if some.any():
        hashes[some] = np.add.reduceat(terms, (ends - lengths)[some])
    return hashes, powers[lengths]


def joined_ngram_codes(
    codes: np.ndarray, doc: np.ndarray, ends: np.ndarray, n: int, vocab: list[str], hashes: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The n-grams of words as datatrove's ``find_all_duplicate`` sees them, words joined without spaces:
    (where each starts, an integer equal for n-grams of a document whose joined strings are equal, whether
    each is the first of its document with its string). ``codes``, ``doc`` and ``ends`` are as in
    :func:`ngram_codes`, indexing ``vocab``; ``hashes`` is :func:`string_hashes` of ``vocab``.

    The strings are compared by hash (the document's number its first character); n-grams whose hash an
    n-gram of other words or of another document has too (a collision, or words that join alike) have their
    strings compared, so the integers are exact."""
    positions = np.flatnonzero(np.arange(len(codes)) + n <= ends)
    if not len(positions):
        return positions, np.zeros(0, np.int64), np.zeros(0, bool)
    gram_doc = doc[positions]
    word_hash, word_power = hashes
    joined = gram_doc.astype(np.uint64) + np.uint64(1)
    with np.errstate(over="ignore"):
        for k in range(n):
            nxt = codes[positions + k]
            joined = joined * word_power[nxt] + word_hash[nxt]
    key, first = occurrences(from_numpy(joined, pa.uint64()), gram_doc)
    # Each n-gram against the first with its hash: the same document and words make the same string.
    like = positions[np.flatnonzero(first)][key]
    differ = gram_doc != doc[like]
    for k in range(n):
        differ |= codes[positions + k] != codes[like + k]
    if differ.any():
        shared = np.zeros(int(key.max()) + 1, bool)
        shared[key[differ]] = True
        at = np.flatnonzero(shared[key])
        strings = ["".join(vocab[i] for i in codes[p : p + n].tolist()) for p in positions[at].tolist()]
        exact = encode(combine(gram_doc[at], encode(pa.array(strings, pa.large_string()))))
        key[at] = int(key.max()) + 1 + exact
        key, first = occurrences(combine(gram_doc, key), gram_doc)
    return positions, key, first


__all__ = [
    "joined_ngram_codes",
    "ngram_codes",
    "per_row",
    "ratio",
    "repeated",
    "repeated_per_doc",
    "string_hashes",
    "top_ngrams",
]
