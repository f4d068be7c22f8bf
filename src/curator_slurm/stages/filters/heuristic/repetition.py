"""NeMo Curator's repetition filters, with its names, parameters, defaults and decisions (mind the names: the
``max_repeated_*`` ones are lower bounds on the share of *unique* lines or paragraphs; each class says)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.heuristic._shared import MaxRatio, MinRatio, own_name, sentences
from curator_slurm.stages.text import chars as _chars
from curator_slurm.stages.text import pieces as _pieces
from curator_slurm.stages.text.compute import call
from curator_slurm.stages.text.counts import ngram_codes, ratio, repeated, repeated_per_doc, top_ngrams
from curator_slurm.stages.text.languages import check_language


def _distinct_share(pieces: _pieces.Pieces, by_chars: bool, empty: float) -> np.ndarray:
    """Per document: distinct pieces / pieces, or characters of the distinct pieces / characters of
    all pieces: the pieces (or characters) less the repeated ones that datatrove's Gopher rules count."""
    n = len(pieces.counts)
    again, again_chars = repeated_per_doc(pieces.values, pieces.doc, n, chars=by_chars)
    if again_chars is None:
        return ratio(pieces.counts - again, pieces.counts, empty)
    total = np.bincount(pieces.doc, weights=pieces.lengths(), minlength=n).astype(np.int64)
    return ratio(total - again_chars, total, empty)


def _word_ngrams(words: _pieces.Pieces, n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.counts.ngram_codes` of a chunk's whitespace words."""
    ends = (words.starts + words.counts)[words.doc] if len(words.values) else np.zeros(0, np.int64)
    return ngram_codes(_pieces.encode(words.values, words.doc), words.doc, ends, n)


class RepeatedLinesFilter(MinRatio):
    """Keep documents in which at least ``max_repeated_line_fraction`` of the non-blank lines are
    distinct: the score is ``len(set(lines)) / len(lines)`` and a document is kept when the score is
    >= the value (NeMo's meaning, whatever the name says). Text without non-blank lines scores 0.0
    (NeMo divides by zero)."""

    name = "repeated_lines"
    _cutoff_name = "max_repeated_line_fraction"

    def __init__(self, max_repeated_line_fraction: float = 0.7) -> None:
        self.max_repeated_line_fraction = max_repeated_line_fraction

    def score_document(self, text: str) -> float:
        lines = sentences(text)
        return len(set(lines)) / len(lines) if lines else 0.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _chars.per_chunk(texts, lambda c: _distinct_share(_pieces.lines(c), False, 0.0), pa.float64())


class RepeatedParagraphsFilter(MinRatio):
    """Keep documents in which at least ``max_repeated_paragraphs_ratio`` of the paragraphs are
    distinct: ``len(set(paragraphs)) / len(paragraphs)`` >= the value. Empty text is one (empty)
    paragraph and scores 1.0."""

    name = "repeated_paragraphs"
    _cutoff_name = "max_repeated_paragraphs_ratio"

    def __init__(self, max_repeated_paragraphs_ratio: float = 0.7) -> None:
        self.max_repeated_paragraphs_ratio = max_repeated_paragraphs_ratio

    def score_document(self, text: str) -> float:
        paragraphs = text.split("\n\n")
        return len(set(paragraphs)) / len(paragraphs)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _chars.per_chunk(texts, lambda c: _distinct_share(_pieces.paragraphs(c), False, 0.0), pa.float64())


class RepeatedLinesByCharFilter(MinRatio):
    """Keep documents in which the distinct non-blank lines hold at least
    ``max_repeated_lines_char_ratio`` of the characters of all non-blank lines:
    ``len("".join(set(lines))) / len("".join(lines))`` >= the value. Text without non-blank lines
    scores 0.0 (NeMo divides by zero)."""

    name = "repeated_lines_char"
    _cutoff_name = "max_repeated_lines_char_ratio"

    def __init__(self, max_repeated_lines_char_ratio: float = 0.8) -> None:
        self.max_repeated_lines_char_ratio = max_repeated_lines_char_ratio

    def score_document(self, text: str) -> float:
        lines = sentences(text)
        total = sum(map(len, lines))
        return sum(map(len, set(lines))) / total if total else 0.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _chars.per_chunk(texts, lambda c: _distinct_share(_pieces.lines(c), True, 0.0), pa.float64())


class RepeatedParagraphsByCharFilter(MinRatio):
    """Keep documents in which the distinct paragraphs hold at least
    ``max_repeated_paragraphs_char_ratio`` of the characters of all paragraphs (``\\n\\n``
    separators not counted). Text whose paragraphs are all empty (``""``, ``"\\n\\n"``) scores 0.0
    (NeMo divides by zero)."""

    name = "repeated_paragraphs_char"
    _cutoff_name = "max_repeated_paragraphs_char_ratio"

    def __init__(self, max_repeated_paragraphs_char_ratio: float = 0.8) -> None:
        self.max_repeated_paragraphs_char_ratio = max_repeated_paragraphs_char_ratio

    def score_document(self, text: str) -> float:
        paragraphs = text.split("\n\n")
        total = sum(map(len, paragraphs))
        return sum(map(len, set(paragraphs))) / total if total else 0.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _chars.per_chunk(texts, lambda c: _distinct_share(_pieces.paragraphs(c), True, 0.0), pa.float64())


def _check_n(owner: str, n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{owner}(n={n!r}): n is the number of words in an n-gram, an integer >= 1")
    return n


class RepeatingTopNGramsFilter(MaxRatio):
    """Keep documents in which the most frequent word ``n``-gram covers at most
    ``max_repeating_ngram_ratio`` of the characters: the score is ``len(text) - len(text.replace(g,
    ""))`` over ``len(text)``, ``g`` being that n-gram's words joined by single spaces (so every
    non-overlapping occurrence of that string counts, inside other words too). Text with fewer than
    ``n`` words scores 1.0.

    Among equally frequent n-grams NeMo takes whichever its ``set`` yields first, which depends on
    ``PYTHONHASHSEED`` (so NeMo's score can change from run to run); this filter takes the one that
    occurs first in the text. Without ties (the common case for a document it drops) the scores are
    equal."""

    _cutoff_name = "max_repeating_ngram_ratio"

    def __init__(self, n: int = 2, max_repeating_ngram_ratio: float = 0.2, lang: str = "en") -> None:
        self.n = _check_n("RepeatingTopNGramsFilter", n)
        self.max_repeating_ngram_ratio = max_repeating_ngram_ratio
        self.lang = check_language("RepeatingTopNGramsFilter", lang)

    @property
    def name(self) -> str:
        return own_name(self) or f"repeating_top_{self.n}grams"

    @name.setter
    def name(self, value: str) -> None:
        self.__dict__["name"] = value

    def score_document(self, text: str) -> float:
        words = text.split()
        if len(words) < self.n:
            return 1.0
        grams = list(zip(*(words[i:] for i in range(self.n)), strict=False))
        counts: dict[tuple[str, ...], int] = {}
        for g in grams:
            counts[g] = counts.get(g, 0) + 1
        most = max(counts, key=counts.__getitem__)  # the first of the most frequent, in text order
        top = " ".join(most)
        return text.count(top) * len(top) / len(text)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        n = self.n

        def score(chunk: pa.Array) -> np.ndarray:
            words = _pieces.words(chunk)
            out = np.ones(len(chunk), np.float64)
            positions, grams = _word_ngrams(words, n)
            if len(positions) == 0:
                return out
            # The most frequent n-gram as datatrove's Gopher rule finds it; NeMo then counts its string in the text.
            top_docs, top_start, _ = top_ngrams(positions, grams, words.doc)
            parts = [call("take", words.values, pa.array(top_start + k)) for k in range(n)]
            space = pa.scalar(" ", words.values.type)
            joined = call("binary_join_element_wise", *parts, space) if n > 1 else parts[0]
            texts_py = chunk.take(pa.array(top_docs)).to_pylist()
            grams_py = joined.to_pylist()
            hits = np.fromiter(
                (len(g) * t.count(g) for t, g in zip(texts_py, grams_py, strict=True)),
                dtype=np.float64,
                count=len(grams_py),
            )
            out[top_docs] = hits / _chars.char_lengths(chunk)[top_docs]
            return out

        return _chars.per_chunk(texts, score, pa.float64())


class RepeatingDuplicateNGramsFilter(MaxRatio):
    """Keep documents in which the word ``n``-grams that repeat an earlier n-gram cover at most
    ``max_repeating_duplicate_ngram_ratio`` of the characters. The covered characters are NeMo's
    count: the lengths of the words inside any repeated n-gram, plus one per gap between two covered
    words of overlapping repeated n-grams; over ``len(text)``. Text with fewer than ``n`` words
    scores 1.0."""

    _cutoff_name = "max_repeating_duplicate_ngram_ratio"

    def __init__(self, n: int = 2, max_repeating_duplicate_ngram_ratio: float = 0.2, lang: str = "en") -> None:
        self.n = _check_n("RepeatingDuplicateNGramsFilter", n)
        self.max_repeating_duplicate_ngram_ratio = max_repeating_duplicate_ngram_ratio
        self.lang = check_language("RepeatingDuplicateNGramsFilter", lang)

    @property
    def name(self) -> str:
        return own_name(self) or f"repeating_dup_{self.n}gram"

    @name.setter
    def name(self, value: str) -> None:
        self.__dict__["name"] = value

    def score_document(self, text: str) -> float:
        n = self.n
        words = text.split()
        if len(words) < n:
            return 1.0
        seen: set[tuple[str, ...]] = set()
        overlap = 0  # how many leading words of the current n-gram an earlier repeat already counted
        chars = 0
        for gram in zip(*(words[i:] for i in range(n)), strict=False):
            if gram in seen:
                chars += sum(map(len, gram[overlap:])) + min(n - overlap, n - 1)
                overlap = n
            seen.add(gram)
            overlap = max(overlap - 1, 0)
        return chars / len(text)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        n = self.n

        def score(chunk: pa.Array) -> np.ndarray:
            words = _pieces.words(chunk)
            out = np.ones(len(chunk), np.float64)
            enough = words.counts >= n
            if not enough.any():
                return out
            positions, grams = _word_ngrams(words, n)
            doc = words.doc[positions]
            starts = positions[repeated(grams, doc)]
            total = len(words.values)
            # Words covered by a repeated n-gram: +1 where one starts, -1 just after it ends.
            cover = np.cumsum(
                np.bincount(starts, minlength=total + n + 1) - np.bincount(starts + n, minlength=total + n + 1)
            )[:total]
            covered = cover > 0
            lengths = words.lengths()
            # A repeated n-gram that starts where no earlier one still covers starts a new run of covered
            # words; NeMo counts one space between consecutive covered words of a run.
            runs = np.bincount(words.doc[starts[cover[starts] == 1]], minlength=len(chunk))
            chars = words.per_doc(covered, lengths.astype(np.float64)) + words.per_doc(covered) - runs
            lengths_of_texts = _chars.char_lengths(chunk)
            out[enough] = chars[enough] / lengths_of_texts[enough]
            return out

        return _chars.per_chunk(texts, score, pa.float64())


__all__ = [
    "RepeatedLinesByCharFilter",
    "RepeatedLinesFilter",
    "RepeatedParagraphsByCharFilter",
    "RepeatedParagraphsFilter",
    "RepeatingDuplicateNGramsFilter",
    "RepeatingTopNGramsFilter",
]
