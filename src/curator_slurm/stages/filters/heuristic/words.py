"""NeMo Curator's word filters (word count, mean and longest word length, symbol words, words without letters,
common English words), with its names, parameters, defaults and decisions. Design: docs/design.md, Filters."""

from __future__ import annotations

import re
import string
import unicodedata

import numpy as np
import pyarrow as pa

from curator_slurm.extras import load, require
from curator_slurm.stages.filters.base import DocumentFilter, between
from curator_slurm.stages.filters.heuristic._shared import MaxRatio, MinRatio, ratio
from curator_slurm.stages.text import chars as _chars
from curator_slurm.stages.text import pieces as _pieces
from curator_slurm.stages.text.constants import COMMON_ENGLISH_WORDS, ELLIPSIS_MARKS
from curator_slurm.stages.text.languages import check_language

_COMMON_KEYS = np.array([_pieces.pack(w) for w in COMMON_ENGLISH_WORDS], np.int64)
_HASH_RUNS = re.compile("#+")


class WordCountFilter(DocumentFilter):
    """Keep documents with between ``min_words`` and ``max_words`` words (``text.split()``), bounds
    included; ``None`` is no bound (an extension: NeMo needs both)."""

    name = "word_count"

    def __init__(self, min_words: int | None = 50, max_words: int | None = 100000, lang: str = "en") -> None:
        self.min_words = min_words
        self.max_words = max_words
        if isinstance(lang, str) and lang.lower() == "zh":  # NeMo's: Chinese words by jieba (the ``zh`` extra)
            require("jieba", "WordCountFilter(lang='zh')", "zh")
            self.lang = lang
        else:
            self.lang = check_language("WordCountFilter", lang)

    def score_document(self, text: str) -> int:
        if self.lang.lower() == "zh":
            return len(list(load("jieba", "WordCountFilter(lang='zh')", "zh").cut(text.strip())))
        return len(text.split())

    def keep_document(self, score: float) -> bool:
        return (self.min_words is None or score >= self.min_words) and (
            self.max_words is None or score <= self.max_words
        )

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        if self.lang.lower() == "zh":
            return pa.chunked_array([pa.array([self.score_document(t or "") for t in texts.to_pylist()], pa.int64())])
        return _chars.per_chunk(texts, lambda chunk: _pieces.word_counts(_chars.utf8(chunk)), pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, self.min_words, self.max_words)


class MeanWordLengthFilter(DocumentFilter):
    """Keep documents whose mean word length (characters per ``text.split()`` word) is between
    ``min_mean_word_length`` and ``max_mean_word_length``, bounds included; ``None`` is no bound.
    Text without words scores 0.0 (NeMo divides by zero)."""

    name = "mean_word_length"

    def __init__(
        self,
        min_mean_word_length: float | None = 3,
        max_mean_word_length: float | None = 10,
        lang: str = "en",
    ) -> None:
        self.min_mean_word_length = min_mean_word_length
        self.max_mean_word_length = max_mean_word_length
        self.lang = check_language("MeanWordLengthFilter", lang)

    def score_document(self, text: str) -> float:
        words = text.split()
        return sum(map(len, words)) / len(words) if words else 0.0

    def keep_document(self, score: float) -> bool:
        return (self.min_mean_word_length is None or score >= self.min_mean_word_length) and (
            self.max_mean_word_length is None or score <= self.max_mean_word_length
        )

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _chars.utf8(chunk)
            letters = _chars.char_lengths(chunk) - _chars.count_space(view)
            return ratio(letters, _pieces.word_counts(view), 0.0)

        return _chars.per_chunk(texts, score, pa.float64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, self.min_mean_word_length, self.max_mean_word_length)


class LongWordFilter(DocumentFilter):
    """Keep documents whose longest word (``text.split()``) has at most ``max_word_length``
    characters. Text without words scores 0 (NeMo fails on it)."""

    name = "max_word_length"

    def __init__(self, max_word_length: int = 1000, lang: str = "en") -> None:
        self.max_word_length = max_word_length
        self.lang = check_language("LongWordFilter", lang)

    def score_document(self, text: str) -> int:
        return max((len(w) for w in text.split()), default=0)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_word_length

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            words = _pieces.word_spans(_chars.utf8(chunk))
            return words.per_doc_max(words.lengths())

        return _chars.per_chunk(texts, score, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, None, self.max_word_length)


_ELLIPSIS_WORDS = frozenset(ELLIPSIS_MARKS)
#: The ellipsis marks a single word can equal (no space inside), packed for a vectorised comparison.
_ELLIPSIS_IN_WORDS = [m for m in ELLIPSIS_MARKS if not any(c.isspace() for c in m)]
_ELLIPSIS_KEYS = np.array([_pieces.pack(m) for m in _ELLIPSIS_IN_WORDS], np.int64)


class SymbolsToWordsFilter(MaxRatio):
    """Keep documents in which at most ``max_symbol_to_word_ratio`` of the words are symbol words: a
    word equal to an ellipsis mark (``...``, ``…``, ``[...]``, ``(...)``, ``[…]``, ``-»``), or one whose
    number of RUNS of ``#`` is more than half its length (NeMo counts ``#+`` matches: ``#`` and
    ``#a#`` are symbol words, ``##`` and ``###`` are not). Text without words scores 1.0 (NeMo
    divides by zero)."""

    name = "symbol_to_word"
    _cutoff_name = "max_symbol_to_word_ratio"

    def __init__(self, max_symbol_to_word_ratio: float = 0.1, lang: str = "en") -> None:
        self.max_symbol_to_word_ratio = max_symbol_to_word_ratio
        self.lang = check_language("SymbolsToWordsFilter", lang)

    def score_document(self, text: str) -> float:
        words = text.split()
        if not words:
            return 1.0
        symbols = sum(1 for w in words if w in _ELLIPSIS_WORDS or len(_HASH_RUNS.findall(w)) / len(w) > 0.5)
        return symbols / len(words)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _chars.utf8(chunk)
            words = _pieces.word_spans(view)
            which, key = words.packed()
            flags = np.zeros(len(words.starts), bool)
            flags[which[np.isin(key, _ELLIPSIS_KEYS)]] = True
            hashes = np.flatnonzero(view.data == ord("#"))  # rare: work on their positions
            if len(hashes):
                word = np.searchsorted(words.starts, hashes, side="right") - 1  # every # is inside a word
                # A run of # starts at a # whose byte before is not a # of the same word.
                run_start = np.ones(len(hashes), bool)
                run_start[1:] = (hashes[1:] - 1 != hashes[:-1]) | (word[1:] != word[:-1])
                runs = np.bincount(word[run_start], minlength=len(words.starts))
                hashed = np.flatnonzero(runs)
                flags[hashed] |= 2 * runs[hashed] > words.lengths()[hashed]
            return ratio(words.per_doc_sum(flags.astype(np.int64)), words.counts, 1.0)

        return _chars.per_chunk(texts, score, pa.float64())


#: Symbols with the Unicode Alphabetic property (circled and squared Latin letters).
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))


def is_alphabetic(c: str) -> bool:
    """NeMo's ``[[:alpha:]]`` (the ``regex`` module's Unicode Alphabetic property), except its combining
    marks: a letter (``str.isalpha``), a letter number (Ⅻ) or a circled or squared Latin letter (ⓐ)."""
    if c.isalpha():
        return True
    cp = ord(c)
    return unicodedata.category(c) == "Nl" or any(lo <= cp <= hi for lo, hi in _ALPHABETIC_SYMBOLS)


_ASCII_ALPHA_TABLE = _chars.ascii_table(string.ascii_letters)


class WordsWithoutAlphabetsFilter(MinRatio):
    """Keep documents in which at least ``min_words_with_alphabets`` of the words (``text.split()``)
    contain an alphabetic character (:func:`is_alphabetic`: letters, letter numbers such as Ⅻ, circled
    letters such as ⓐ). NeMo's ``[[:alpha:]]`` also accepts the combining marks of the Unicode
    Alphabetic property (e.g. Indic vowel signs): a word made only of those, without any letter, counts
    as without alphabets here. Text without words scores 0.0 (NeMo divides by zero)."""

    name = "words_without_alphabets"
    _cutoff_name = "min_words_with_alphabets"

    def __init__(self, min_words_with_alphabets: float = 0.8, lang: str = "en") -> None:
        self.min_words_with_alphabets = min_words_with_alphabets
        self.lang = check_language("WordsWithoutAlphabetsFilter", lang)

    def score_document(self, text: str) -> float:
        words = text.split()
        return sum(1 for w in words if any(map(is_alphabetic, w))) / len(words) if words else 0.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _chars.utf8(chunk)
            words = _pieces.word_spans(view)
            letters = words.per_word(_chars.char_mask(view, _ASCII_ALPHA_TABLE, is_alphabetic))
            return ratio(words.per_doc_sum((letters > 0).astype(np.int64)), words.counts, 0.0)

        return _chars.per_chunk(texts, score, pa.float64())


class CommonEnglishWordsFilter(DocumentFilter):
    """Keep documents with at least ``min_num_common_words`` words (case-sensitive, ``text.split()``)
    among the, be, to, of, and, that, have, with. With ``stop_at_false`` (the default) NeMo stops
    counting once the count reaches the cutoff, so the score is at most ``ceil(cutoff)`` (and, for a
    cutoff of 0 or less, 1 if the first word is common, else 0); the decision is the same either way."""

    name = "common_english_words"

    def __init__(self, min_num_common_words: int = 2, stop_at_false: bool = True) -> None:
        self.min_num_common_words = min_num_common_words
        self.stop_at_false = stop_at_false

    def score_document(self, text: str) -> int:
        count = 0
        for word in text.split():
            count += word in COMMON_ENGLISH_WORDS
            if self.stop_at_false and count >= self.min_num_common_words:
                return count
        return count

    def keep_document(self, score: float) -> bool:
        return score >= self.min_num_common_words

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        cutoff = self.min_num_common_words

        def score(chunk: pa.Array) -> np.ndarray:
            words = _pieces.word_spans(_chars.utf8(chunk))
            which, key = words.packed()
            flags = np.zeros(len(words.starts), np.int64)
            flags[which[np.isin(key, _COMMON_KEYS)]] = 1
            counts = words.per_doc_sum(flags)
            if not self.stop_at_false:
                return counts
            if cutoff > 0:
                return np.minimum(counts, int(np.ceil(cutoff)))
            first = np.zeros(len(chunk), np.int64)  # the count after the first word, where NeMo stops
            some = words.counts > 0
            first[some] = flags[words.first[some]]
            return first

        return _chars.per_chunk(texts, score, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, self.min_num_common_words, None)


__all__ = [
    "CommonEnglishWordsFilter",
    "LongWordFilter",
    "MeanWordLengthFilter",
    "SymbolsToWordsFilter",
    "WordCountFilter",
    "WordsWithoutAlphabetsFilter",
]
