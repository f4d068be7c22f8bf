"""NeMo Curator's heuristic string filters, with its names, parameters, defaults and decisions.

Each class mirrors the class of the same name in NeMo Curator's
``nemo_curator/stages/text/filters/heuristic/string.py``: the same constructor parameters and
defaults, the same score for the same text, and the same keep/drop decision (including parameters
whose names read the other way round; the docstrings say what is kept). ``score_document`` computes
the definition on one Python string, the way NeMo does; ``score_array`` computes the same numbers
for a whole column at once (see :mod:`._text`).

Where NeMo cannot score a document (it divides by zero, or takes the ``max`` of no words, on an empty
or whitespace-only one, and the pipeline fails) these filters give the score that drops it, as NeMo's
own filters do for empty text elsewhere ("Remove the document if it is empty"); each docstring names
the value. Words are split on whitespace, as NeMo does for every language but Chinese (``lang="zh"``,
jieba) and Japanese (``lang="ja"``, MeCab), which these filters refuse.
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Literal

import numpy as np
import pyarrow as pa

from .._kernels import call, cast, match_substring, replace_regex, starts_or_ends_with, to_numpy
from . import _text
from .base import DocumentFilter, between

# --------------------------------------------------------------------------------------------------
# NeMo Curator's constants (nemo_curator/stages/text/utils/constants.py), as facts
# --------------------------------------------------------------------------------------------------

#: A sentence (line) that ends with one of these, after stripping, has an end mark.
END_MARKS = (".", "?", "!", '"', "'")
#: Ellipsis marks: a word equal to one is a symbol word; a line ending with one ends in an ellipsis.
ELLIPSIS_MARKS = ("...", "[...]", "…", "(...)", "[…]", "-»", "read more..", "read more")
#: A paragraph containing one of these (lower-cased) is boilerplate.
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "privacy overview",
    "use of cookies",
    "use cookies",
    "privacy & cookies policy",
    "privacy and cookies policy",
    "this website uses cookies to improve your experience while you navigate through the website. out of "
    "these cookies, the cookies that are categorized as necessary are stored on your browser as they are "
    "essential for the working of basic functionalities of the website. we also use third-party cookies "
    "that help us analyze and understand how you use this website. these cookies will be stored in your "
    "browser only with your consent. you also have the option to opt-out of these cookies. but opting out "
    "of some of these cookies may have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this category only "
    "includes cookies that ensures basic functionalities and security features of the website. these "
    "cookies do not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is used "
    "specifically to collect user personal data via analytics, ads, other embedded contents are termed as "
    "non-necessary cookies. it is mandatory to procure user consent prior to running these cookies on your "
    "website.",
    "this site uses cookies, including for analytics, personalization, and advertising purposes. for more "
    "information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to this use. acceptread more",
)
#: White space as NeMo's WhiteSpaceFilter counts it ("\b" is the backspace character).
WHITE_SPACE = ("\t", "\n", "\r", "\b", " ")
COMMON_ENGLISH_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
_COMMON_KEYS = np.array([_text.pack(w) for w in COMMON_ENGLISH_WORDS], np.int64)
BULLETS = ("•", "‣", "⁃", "⁌", "⁍", "∙", "○", "●", "◘", "◦", "⦾", "⦿")  # noqa: RUF001
#: NeMo's alphanumeric characters (its NonAlphaNumericFilter counts newlines and ?!,. as such).
ALPHANUMERIC = string.ascii_letters + string.digits + "\n?!,."
PARENTHESES = "{}⟨⟩[]()"
#: NeMo's default URL pattern. It is valid RE2 with the same matches as Python's ``re``, so the column
#: path runs it as an Arrow kernel.
URL_PATTERN = r"https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+"
URL_REGEX = re.compile(URL_PATTERN)
_HASH_RUNS = re.compile("#+")

#: Python's whitespace (str.isspace) as an RE2 character class body.
_RE2_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"


def re2_literal(text: str) -> str:
    """``text`` as an RE2 pattern matching itself (metacharacters escaped; RE2 refuses some of the
    escapes Python's ``re.escape`` adds)."""
    return "".join("\\" + c if c in "\\.^$|?*+()[]{}" else c for c in text)


def check_lang(owner: str, lang: str) -> str:
    """``lang`` if whitespace word splitting is NeMo's for it; a clear error for Chinese and Japanese."""
    if not isinstance(lang, str):
        raise TypeError(f"{owner}(lang={lang!r}): lang is an ISO 639-1 code such as 'en'")
    if lang.lower() in ("zh", "ja"):
        raise ValueError(
            f"{owner}(lang={lang!r}): NeMo Curator splits {'Chinese' if lang.lower() == 'zh' else 'Japanese'} "
            "words with a segmenter (jieba, MeCab); this package splits words on whitespace only, which would "
            "count a whole sentence as one word. Leave lang='en' only for space-separated languages."
        )
    return lang


def _ratio(numerator: np.ndarray, denominator: np.ndarray, empty: float) -> np.ndarray:
    """numerator / denominator, and ``empty`` where the denominator is 0."""
    out = np.full(len(denominator), empty, dtype=np.float64)
    ok = denominator > 0
    out[ok] = numerator[ok] / denominator[ok]
    return out


def _python_scores(f: DocumentFilter, chunk: pa.Array, rows: np.ndarray, into: np.ndarray) -> None:
    """Score the documents at ``rows`` with ``score_document`` (for the few texts a kernel cannot
    treat exactly like Python does)."""
    if len(rows):
        texts = chunk.take(pa.array(rows)).to_pylist()
        into[rows] = [f.score_document(t) for t in texts]


class _MaxRatio(DocumentFilter):
    """A score that must stay at or below a cutoff."""

    _cutoff_name: str

    def keep_document(self, score: float) -> bool:
        return score <= getattr(self, self._cutoff_name)

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, None, getattr(self, self._cutoff_name))


class _MinRatio(DocumentFilter):
    """A score that must be at or above a cutoff."""

    _cutoff_name: str

    def keep_document(self, score: float) -> bool:
        return score >= getattr(self, self._cutoff_name)

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, getattr(self, self._cutoff_name), None)


# --------------------------------------------------------------------------------------------------
# character ratios
# --------------------------------------------------------------------------------------------------

_ALNUM_TABLE = _text.ascii_table(ALPHANUMERIC)
_DIGIT_TABLE = _text.ascii_table(string.digits)
_WHITE_TABLE = _text.ascii_table(WHITE_SPACE)
_PAREN_TABLE = _text.ascii_table("{}[]()")
_ALNUM_SET = frozenset(ALPHANUMERIC)
_DIGIT_SET = frozenset(string.digits)
_WHITE_SET = frozenset(WHITE_SPACE)
_PAREN_SET = frozenset(PARENTHESES)


class NonAlphaNumericFilter(_MaxRatio):
    """Keep documents in which at most ``max_non_alpha_numeric_to_text_ratio`` of the characters are
    not NeMo's alphanumerics (ASCII letters and digits, newline, ``?!,.``). Empty text scores 1.0."""

    name = "alpha_numeric"
    _cutoff_name = "max_non_alpha_numeric_to_text_ratio"

    def __init__(self, max_non_alpha_numeric_to_text_ratio: float = 0.25) -> None:
        self.max_non_alpha_numeric_to_text_ratio = max_non_alpha_numeric_to_text_ratio

    def score_document(self, text: str) -> float:
        n = len(text)
        return (n - sum(c in _ALNUM_SET for c in text)) / n if n else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            n = _text.char_lengths(chunk)
            return _ratio(n - _text.count_chars(_text.utf8(chunk), _ALNUM_TABLE), n, 1.0)

        return _text.per_chunk(texts, score, pa.float64())


class NumbersFilter(_MaxRatio):
    """Keep documents in which at most ``max_number_to_text_ratio`` of the characters are digits 0-9
    (NeMo's ``[[:digit:]]``, which the ``regex`` module reads as ASCII digits only). Empty text
    scores 1.0."""

    name = "numbers_ratio"
    _cutoff_name = "max_number_to_text_ratio"

    def __init__(self, max_number_to_text_ratio: float = 0.15) -> None:
        self.max_number_to_text_ratio = max_number_to_text_ratio

    def score_document(self, text: str) -> float:
        n = len(text)
        return sum(c in _DIGIT_SET for c in text) / n if n else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            return _ratio(_text.count_chars(_text.utf8(chunk), _DIGIT_TABLE), _text.char_lengths(chunk), 1.0)

        return _text.per_chunk(texts, score, pa.float64())


class WhiteSpaceFilter(_MaxRatio):
    """Keep documents in which at most ``max_white_space_ratio`` of the characters are tab, newline,
    carriage return, backspace or space (leading and trailing ones included; other Unicode spaces are
    not counted). Empty text scores 1.0."""

    name = "white_space"
    _cutoff_name = "max_white_space_ratio"

    def __init__(self, max_white_space_ratio: float = 0.25) -> None:
        self.max_white_space_ratio = max_white_space_ratio

    def score_document(self, text: str) -> float:
        n = len(text)
        return sum(c in _WHITE_SET for c in text) / n if n else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            return _ratio(_text.count_chars(_text.utf8(chunk), _WHITE_TABLE), _text.char_lengths(chunk), 1.0)

        return _text.per_chunk(texts, score, pa.float64())


def _is_angle_bracket(c: str) -> bool:
    return c in "⟨⟩"


class ParenthesesFilter(_MaxRatio):
    """Keep documents in which at most ``max_parentheses_ratio`` of the characters are brackets
    ``{}[]()⟨⟩``. Empty text scores 1.0."""

    name = "parentheses_ratio"
    _cutoff_name = "max_parentheses_ratio"

    def __init__(self, max_parentheses_ratio: float = 0.1) -> None:
        self.max_parentheses_ratio = max_parentheses_ratio

    def score_document(self, text: str) -> float:
        n = len(text)
        return sum(c in _PAREN_SET for c in text) / n if n else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            brackets = _text.count_chars(_text.utf8(chunk), _PAREN_TABLE, _is_angle_bracket)
            return _ratio(brackets, _text.char_lengths(chunk), 1.0)

        return _text.per_chunk(texts, score, pa.float64())


def _is_alnum(c: str) -> bool:
    return c.isalnum()


_ASCII_ALNUM_TABLE = _text.ascii_table(string.ascii_letters + string.digits)


class SymbolRatioFilter(_MaxRatio):
    """Keep documents in which at most ``max_symbol_ratio`` of the non-space characters are neither
    letters nor digits (``str.isalnum``): markup, tables, boilerplate. Not a NeMo Curator filter (its
    SymbolsToWordsFilter counts ``#`` and ellipsis words instead); text without visible characters
    scores 0.0."""

    name = "symbol_ratio"
    _cutoff_name = "max_symbol_ratio"

    def __init__(self, max_symbol_ratio: float = 0.25) -> None:
        self.max_symbol_ratio = max_symbol_ratio

    def score_document(self, text: str) -> float:
        chars = [c for c in text if not c.isspace()]
        return sum(1 for c in chars if not c.isalnum()) / len(chars) if chars else 0.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _text.utf8(chunk)
            visible = _text.char_lengths(chunk) - _text.count_space(view)
            alnum = _text.count_chars(view, _ASCII_ALNUM_TABLE, _is_alnum)
            return _ratio(visible - alnum, visible, 0.0)

        return _text.per_chunk(texts, score, pa.float64())


# --------------------------------------------------------------------------------------------------
# URLs and substrings
# --------------------------------------------------------------------------------------------------


def _url_regex(url_regex: re.Pattern[str] | str | None) -> re.Pattern[str]:
    if url_regex is None:
        return URL_REGEX
    if isinstance(url_regex, str):
        return re.compile(url_regex)
    if isinstance(url_regex, re.Pattern):
        return url_regex
    raise TypeError(f"url_regex={url_regex!r}: give a regular expression (str or re.Pattern) or None")


class UrlsFilter(_MaxRatio):
    """Keep documents in which at most ``max_url_to_text_ratio`` of the characters are inside URLs
    (matches of ``url_regex``, NeMo's pattern by default). Empty text scores 1.0. The default pattern
    runs as an Arrow kernel; a custom one runs with Python's ``re`` per document, so that it means
    exactly what it means in NeMo (RE2's ``\\d``, ``\\w``, ``\\s`` are ASCII-only)."""

    name = "urls_ratio"
    _cutoff_name = "max_url_to_text_ratio"

    def __init__(self, max_url_to_text_ratio: float = 0.2, url_regex: re.Pattern[str] | str | None = None) -> None:
        self.max_url_to_text_ratio = max_url_to_text_ratio
        self.url_regex = url_regex
        self._regex = _url_regex(url_regex)

    def score_document(self, text: str) -> float:
        n = len(text)
        return sum(len(u) for u in self._regex.findall(text)) / n if n else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        if self.url_regex is not None:
            return super().score_array(_text.texts_of(texts))

        def score(chunk: pa.Array) -> np.ndarray:
            n = _text.char_lengths(chunk)
            url_chars = np.zeros(len(chunk), np.int64)
            rows = np.flatnonzero(to_numpy(match_substring(chunk, "://")))
            if len(rows):
                some = chunk.take(pa.array(rows))
                stripped = replace_regex(some, URL_PATTERN, "")
                url_chars[rows] = n[rows] - _text.char_lengths(stripped)
            return _ratio(url_chars, n, 1.0)

        return _text.per_chunk(texts, score, pa.float64())


class PornographicUrlsFilter(DocumentFilter):
    """Drop documents with a URL (a match of ``url_regex``, NeMo's pattern by default) containing
    ``porn`` (case-sensitive). Scores 1 for such a document, else 0; keeps score != 1."""

    name = "PornographicUrlsFilter"

    def __init__(self, url_regex: re.Pattern[str] | str | None = None) -> None:
        self.url_regex = url_regex
        self._regex = _url_regex(url_regex)

    def score_document(self, text: str) -> int:
        return int(any("porn" in url for url in self._regex.findall(text)))

    def keep_document(self, score: int) -> bool:
        return score != 1

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            out = np.zeros(len(chunk), np.int64)
            # Only a document containing "porn" can score 1; those few are checked in Python.
            _python_scores(self, chunk, np.flatnonzero(to_numpy(match_substring(chunk, "porn"))), out)
            return out

        return _text.per_chunk(texts, score, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return call("not_equal", scores, 1)


class SubstringFilter(DocumentFilter):
    """Keep documents that contain ``substring`` at ``position``: ``"prefix"`` (starts with it),
    ``"suffix"`` (ends with it) or ``"any"``. Scores 1 when found, else 0."""

    name = "SubstringFilter"

    def __init__(self, substring: str, position: Literal["prefix", "suffix", "any"]) -> None:
        if position not in ("prefix", "suffix", "any"):
            raise ValueError(f"SubstringFilter(position={position!r}): position must be 'prefix', 'suffix' or 'any'")
        if not isinstance(substring, str):
            raise TypeError(f"SubstringFilter(substring={substring!r}): substring must be a str")
        self.substring = substring
        self.position = position

    def score_document(self, text: str) -> int:
        if self.position == "prefix":
            return int(text.startswith(self.substring))
        if self.position == "suffix":
            return int(text.endswith(self.substring))
        return int(self.substring in text)

    def keep_document(self, score: int) -> bool:
        return score == 1

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        column = _text.texts_of(texts)
        if self.position == "any":
            found = match_substring(column, self.substring)
        else:
            found = starts_or_ends_with(column, self.substring, end=self.position == "suffix")
        return cast(found, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return call("equal", scores, 1)


# --------------------------------------------------------------------------------------------------
# words
# --------------------------------------------------------------------------------------------------


class WordCountFilter(DocumentFilter):
    """Keep documents with between ``min_words`` and ``max_words`` words (``text.split()``), bounds
    included; ``None`` is no bound (an extension: NeMo needs both)."""

    name = "word_count"

    def __init__(self, min_words: int | None = 50, max_words: int | None = 100000, lang: str = "en") -> None:
        self.min_words = min_words
        self.max_words = max_words
        self.lang = check_lang("WordCountFilter", lang)

    def score_document(self, text: str) -> int:
        return len(text.split())

    def keep_document(self, score: float) -> bool:
        return (self.min_words is None or score >= self.min_words) and (
            self.max_words is None or score <= self.max_words
        )

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _text.per_chunk(texts, lambda chunk: _text.word_counts(_text.utf8(chunk)), pa.int64())

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
        self.lang = check_lang("MeanWordLengthFilter", lang)

    def score_document(self, text: str) -> float:
        words = text.split()
        return sum(map(len, words)) / len(words) if words else 0.0

    def keep_document(self, score: float) -> bool:
        return (self.min_mean_word_length is None or score >= self.min_mean_word_length) and (
            self.max_mean_word_length is None or score <= self.max_mean_word_length
        )

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _text.utf8(chunk)
            letters = _text.char_lengths(chunk) - _text.count_space(view)
            return _ratio(letters, _text.word_counts(view), 0.0)

        return _text.per_chunk(texts, score, pa.float64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, self.min_mean_word_length, self.max_mean_word_length)


class LongWordFilter(DocumentFilter):
    """Keep documents whose longest word (``text.split()``) has at most ``max_word_length``
    characters. Text without words scores 0 (NeMo fails on it)."""

    name = "max_word_length"

    def __init__(self, max_word_length: int = 1000, lang: str = "en") -> None:
        self.max_word_length = max_word_length
        self.lang = check_lang("LongWordFilter", lang)

    def score_document(self, text: str) -> int:
        return max((len(w) for w in text.split()), default=0)

    def keep_document(self, score: int) -> bool:
        return score <= self.max_word_length

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            words = _text.word_spans(_text.utf8(chunk))
            return words.per_doc_max(words.lengths())

        return _text.per_chunk(texts, score, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, None, self.max_word_length)


_ELLIPSIS_WORDS = frozenset(ELLIPSIS_MARKS)
#: The ellipsis marks a single word can equal (no space inside), packed for a vectorised comparison.
_ELLIPSIS_IN_WORDS = [m for m in ELLIPSIS_MARKS if not any(c.isspace() for c in m)]
_ELLIPSIS_KEYS = np.array([_text.pack(m) for m in _ELLIPSIS_IN_WORDS], np.int64)


class SymbolsToWordsFilter(_MaxRatio):
    """Keep documents in which at most ``max_symbol_to_word_ratio`` of the words are symbol words: a
    word equal to an ellipsis mark (``...``, ``…``, ``[...]``, ``(...)``, ``[…]``, ``-»``), or one whose
    number of RUNS of ``#`` is more than half its length (NeMo counts ``#+`` matches: ``#`` and
    ``#a#`` are symbol words, ``##`` and ``###`` are not). Text without words scores 1.0 (NeMo
    divides by zero)."""

    name = "symbol_to_word"
    _cutoff_name = "max_symbol_to_word_ratio"

    def __init__(self, max_symbol_to_word_ratio: float = 0.1, lang: str = "en") -> None:
        self.max_symbol_to_word_ratio = max_symbol_to_word_ratio
        self.lang = check_lang("SymbolsToWordsFilter", lang)

    def score_document(self, text: str) -> float:
        words = text.split()
        if not words:
            return 1.0
        symbols = sum(1 for w in words if w in _ELLIPSIS_WORDS or len(_HASH_RUNS.findall(w)) / len(w) > 0.5)
        return symbols / len(words)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _text.utf8(chunk)
            words = _text.word_spans(view)
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
            return _ratio(words.per_doc_sum(flags.astype(np.int64)), words.counts, 1.0)

        return _text.per_chunk(texts, score, pa.float64())


#: Symbols with the Unicode Alphabetic property (circled and squared Latin letters).
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))


def is_alphabetic(c: str) -> bool:
    """NeMo's ``[[:alpha:]]`` (the ``regex`` module's Unicode Alphabetic property), except its combining
    marks: a letter (``str.isalpha``), a letter number (Ⅻ) or a circled or squared Latin letter (ⓐ)."""
    if c.isalpha():
        return True
    cp = ord(c)
    return unicodedata.category(c) == "Nl" or any(lo <= cp <= hi for lo, hi in _ALPHABETIC_SYMBOLS)


_ASCII_ALPHA_TABLE = _text.ascii_table(string.ascii_letters)


class WordsWithoutAlphabetsFilter(_MinRatio):
    """Keep documents in which at least ``min_words_with_alphabets`` of the words (``text.split()``)
    contain an alphabetic character (:func:`is_alphabetic`: letters, letter numbers such as Ⅻ, circled
    letters such as ⓐ). NeMo's ``[[:alpha:]]`` also accepts the combining marks of the Unicode
    Alphabetic property (e.g. Indic vowel signs): a word made only of those, without any letter, counts
    as without alphabets here. Text without words scores 0.0 (NeMo divides by zero)."""

    name = "words_without_alphabets"
    _cutoff_name = "min_words_with_alphabets"

    def __init__(self, min_words_with_alphabets: float = 0.8, lang: str = "en") -> None:
        self.min_words_with_alphabets = min_words_with_alphabets
        self.lang = check_lang("WordsWithoutAlphabetsFilter", lang)

    def score_document(self, text: str) -> float:
        words = text.split()
        return sum(1 for w in words if any(map(is_alphabetic, w))) / len(words) if words else 0.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            view = _text.utf8(chunk)
            words = _text.word_spans(view)
            letters = words.per_word(_text.char_mask(view, _ASCII_ALPHA_TABLE, is_alphabetic))
            return _ratio(words.per_doc_sum((letters > 0).astype(np.int64)), words.counts, 0.0)

        return _text.per_chunk(texts, score, pa.float64())


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

    def keep_document(self, score: int) -> bool:
        return score >= self.min_num_common_words

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        cutoff = self.min_num_common_words

        def score(chunk: pa.Array) -> np.ndarray:
            words = _text.word_spans(_text.utf8(chunk))
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

        return _text.per_chunk(texts, score, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, self.min_num_common_words, None)


# --------------------------------------------------------------------------------------------------
# lines (NeMo's "sentences": the non-blank lines) and paragraphs
# --------------------------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


_BULLET_START = f"^[{_RE2_SPACE}]*[{''.join(BULLETS)}]"


class BulletsFilter(_MaxRatio):
    """Keep documents in which at most ``max_bullet_lines_ratio`` of the non-blank lines start (after
    leading space) with a bullet character (• ‣ ⁃ ⁌ ⁍ ∙ ○ ● ◘ ◦ ⦾ ⦿; not ``-`` or ``*``). Text without
    non-blank lines scores 1.0 (NeMo divides by zero)."""  # noqa: RUF002

    name = "bullet_ratio"
    _cutoff_name = "max_bullet_lines_ratio"

    def __init__(self, max_bullet_lines_ratio: float = 0.9) -> None:
        self.max_bullet_lines_ratio = max_bullet_lines_ratio

    def score_document(self, text: str) -> float:
        lines = _sentences(text)
        return sum(1 for s in lines if s.strip().startswith(BULLETS)) / len(lines) if lines else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            lines = _text.lines(chunk)
            bullets = np.zeros(len(chunk), np.int64)
            # Only lines of documents that contain a bullet character at all need the regex.
            rows = np.flatnonzero(to_numpy(match_substring(chunk, f"[{''.join(BULLETS)}]", regex=True)))
            if len(rows):
                in_rows = np.isin(lines.doc, rows)
                some = call("filter", lines.values, pa.array(in_rows))
                starts = to_numpy(match_substring(some, _BULLET_START, regex=True))
                bullets = np.bincount(lines.doc[in_rows][starts], minlength=len(chunk))
            return _ratio(bullets, lines.counts, 1.0)

        return _text.per_chunk(texts, score, pa.float64())


_ENDS_WITH_MARK = f"[.?!\"'][{_RE2_SPACE}]*\\z"


class PunctuationFilter(_MaxRatio):
    """Keep documents in which at most ``max_num_sentences_without_endmark_ratio`` of the non-blank
    lines do not end (after trailing space) with ``. ? ! " '``. Text without non-blank lines scores
    1.0 (NeMo divides by zero)."""

    name = "punctuation"
    _cutoff_name = "max_num_sentences_without_endmark_ratio"

    def __init__(self, max_num_sentences_without_endmark_ratio: float = 0.85) -> None:
        self.max_num_sentences_without_endmark_ratio = max_num_sentences_without_endmark_ratio

    def score_document(self, text: str) -> float:
        lines = _sentences(text)
        return sum(1 for s in lines if not s.strip().endswith(END_MARKS)) / len(lines) if lines else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            lines = _text.lines(chunk)
            marked = to_numpy(match_substring(lines.values, _ENDS_WITH_MARK, regex=True))
            return _ratio(lines.per_doc(~marked), lines.counts, 1.0)

        return _text.per_chunk(texts, score, pa.float64())


_ENDS_WITH_ELLIPSIS = (
    "(?:" + "|".join(re2_literal(m).replace("read more", "(?i:read more)") for m in ELLIPSIS_MARKS) + ")"
    f"[{_RE2_SPACE}]*\\z"
)


class EllipsisFilter(_MaxRatio):
    """Keep documents in which at most ``max_num_lines_ending_with_ellipsis_ratio`` of the non-blank
    lines end (after trailing space, case-insensitively) with ``...``, ``…``, ``[...]``, ``(...)``,
    ``[…]``, ``-»`` or ``read more``. Text without non-blank lines scores 1.0 (NeMo divides by zero)."""

    name = "ellipsis"
    _cutoff_name = "max_num_lines_ending_with_ellipsis_ratio"

    def __init__(self, max_num_lines_ending_with_ellipsis_ratio: float = 0.3) -> None:
        self.max_num_lines_ending_with_ellipsis_ratio = max_num_lines_ending_with_ellipsis_ratio

    def score_document(self, text: str) -> float:
        lines = _sentences(text)
        if not lines:
            return 1.0
        return sum(1 for s in lines if s.strip().lower().endswith(ELLIPSIS_MARKS)) / len(lines)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            lines = _text.lines(chunk)
            ending = to_numpy(match_substring(lines.values, _ENDS_WITH_ELLIPSIS, regex=True))
            return _ratio(lines.per_doc(ending), lines.counts, 1.0)

        return _text.per_chunk(texts, score, pa.float64())


_POLICY = "|".join(re2_literal(p) for p in POLICY_SUBSTRINGS)
#: Every policy phrase contains one of these words; RE2's case folding matches at least what Python's
#: lower() does (the Kelvin sign as k, too).
_BOILERPLATE_WORDS = "(?i)terms of use|privacy|cookie|lorem ipsum"
assert all(any(w in p for w in ("terms of use", "privacy", "cookie")) for p in POLICY_SUBSTRINGS)


class BoilerPlateStringFilter(_MaxRatio):
    """Keep documents in which at most ``max_boilerplate_string_ratio`` of the paragraphs
    (``text.split("\\n\\n")``) contain, lower-cased, a policy phrase ("terms of use", "privacy
    policy", "uses cookies", ...); a document with "lorem ipsum" anywhere scores 1.0. NeMo accepts
    ``remove_if_at_top_or_bottom`` but its score does not use it; neither does this one."""

    name = "boilerplate_string_ratio"
    _cutoff_name = "max_boilerplate_string_ratio"

    def __init__(self, remove_if_at_top_or_bottom: bool = True, max_boilerplate_string_ratio: float = 0.4) -> None:
        self.remove_if_at_top_or_bottom = remove_if_at_top_or_bottom
        self.max_boilerplate_string_ratio = max_boilerplate_string_ratio

    def score_document(self, text: str) -> float:
        paragraphs = [p.strip().lower() for p in text.split("\n\n")]
        if any("lorem ipsum" in p for p in paragraphs):
            return 1.0
        return sum(1 for p in paragraphs if any(s in p for s in POLICY_SUBSTRINGS)) / len(paragraphs)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            out = np.zeros(len(chunk), np.float64)
            # Only a text containing one of these words, in any case, can score above 0.
            rows = np.flatnonzero(to_numpy(match_substring(chunk, _BOILERPLATE_WORDS, regex=True)))
            if len(rows) == 0:
                return out
            some = chunk.take(pa.array(rows))
            lowered = call("utf8_lower", some)
            paragraphs = _text.paragraphs(lowered)
            policy = to_numpy(match_substring(paragraphs.values, _POLICY, regex=True))
            scores = paragraphs.per_doc(policy) / paragraphs.counts  # every text has a paragraph
            scores[to_numpy(match_substring(lowered, "lorem ipsum"))] = 1.0
            out[rows] = scores
            # Python lower-cases U+0130 (İ) to "i" + U+0307, Arrow to "i": score those texts in Python.
            _python_scores(self, chunk, np.flatnonzero(to_numpy(match_substring(chunk, "\u0130"))), out)
            return out

        return _text.per_chunk(texts, score, pa.float64())


__all__ = [
    "BoilerPlateStringFilter",
    "BulletsFilter",
    "CommonEnglishWordsFilter",
    "EllipsisFilter",
    "LongWordFilter",
    "MeanWordLengthFilter",
    "NonAlphaNumericFilter",
    "NumbersFilter",
    "ParenthesesFilter",
    "PornographicUrlsFilter",
    "PunctuationFilter",
    "SubstringFilter",
    "SymbolRatioFilter",
    "SymbolsToWordsFilter",
    "UrlsFilter",
    "WhiteSpaceFilter",
    "WordCountFilter",
    "WordsWithoutAlphabetsFilter",
]
