"""Counting over the pieces of many documents at once: shares, per-document sums, repeated pieces, n-grams and
the most frequent one. NeMo Curator's repetition filters and datatrove's Gopher rules count with these."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.chars import char_lengths
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


__all__ = ["ngram_codes", "per_row", "ratio", "repeated", "repeated_per_doc", "top_ngrams"]
