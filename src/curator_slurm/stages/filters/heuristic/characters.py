"""NeMo Curator's character-ratio filters, and this project's SymbolRatioFilter: the share of a text's characters
that are of one class. Design: docs/design.md, section Filters."""

from __future__ import annotations

import string
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.heuristic._shared import MaxRatio, ratio
from curator_slurm.stages.text import chars as _chars
from curator_slurm.stages.text.constants import ALPHANUMERIC, PARENTHESES, WHITE_SPACE

_ALNUM_TABLE = _chars.ascii_table(ALPHANUMERIC)
_DIGIT_TABLE = _chars.ascii_table(string.digits)
_WHITE_TABLE = _chars.ascii_table(WHITE_SPACE)
_PAREN_TABLE = _chars.ascii_table("{}[]()")
_ALNUM_SET = frozenset(ALPHANUMERIC)
_DIGIT_SET = frozenset(string.digits)
_WHITE_SET = frozenset(WHITE_SPACE)
_PAREN_SET = frozenset(PARENTHESES)


def _share(text: str, chars: frozenset[str]) -> float:
    """The share of ``text``'s characters that are in ``chars``; 1.0 for empty text."""
    n = len(text)
    return sum(c in chars for c in text) / n if n else 1.0


def _column_share(
    texts: pa.ChunkedArray, table: bytes, non_ascii: Callable[[str], bool] | None = None
) -> pa.ChunkedArray:
    """:func:`_share` of every text of a column: the characters ``table`` marks (ASCII) or
    ``non_ascii`` accepts, over ``len(text)``."""

    def score(chunk: pa.Array) -> np.ndarray:
        return ratio(_chars.count_chars(_chars.utf8(chunk), table, non_ascii), _chars.char_lengths(chunk), 1.0)

    return _chars.per_chunk(texts, score, pa.float64())


class NonAlphaNumericFilter(MaxRatio):
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
            n = _chars.char_lengths(chunk)
            return ratio(n - _chars.count_chars(_chars.utf8(chunk), _ALNUM_TABLE), n, 1.0)

        return _chars.per_chunk(texts, score, pa.float64())


class NumbersFilter(MaxRatio):
    """Keep documents in which at most ``max_number_to_text_ratio`` of the characters are digits 0-9
    (NeMo's ``[[:digit:]]``, which the ``regex`` module reads as ASCII digits only). Empty text
    scores 1.0."""

    name = "numbers_ratio"
    _cutoff_name = "max_number_to_text_ratio"

    def __init__(self, max_number_to_text_ratio: float = 0.15) -> None:
        self.max_number_to_text_ratio = max_number_to_text_ratio

    def score_document(self, text: str) -> float:
        return _share(text, _DIGIT_SET)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _column_share(texts, _DIGIT_TABLE)


class WhiteSpaceFilter(MaxRatio):
    """Keep documents in which at most ``max_white_space_ratio`` of the characters are tab, newline,
    carriage return, backspace or space (leading and trailing ones included; other Unicode spaces are
    not counted). Empty text scores 1.0."""

    name = "white_space"
    _cutoff_name = "max_white_space_ratio"

    def __init__(self, max_white_space_ratio: float = 0.25) -> None:
        self.max_white_space_ratio = max_white_space_ratio

    def score_document(self, text: str) -> float:
        return _share(text, _WHITE_SET)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _column_share(texts, _WHITE_TABLE)


def _is_angle_bracket(c: str) -> bool:
    return c in "⟨⟩"


class ParenthesesFilter(MaxRatio):
    """Keep documents in which at most ``max_parentheses_ratio`` of the characters are brackets
    ``{}[]()⟨⟩``. Empty text scores 1.0."""

    name = "parentheses_ratio"
    _cutoff_name = "max_parentheses_ratio"

    def __init__(self, max_parentheses_ratio: float = 0.1) -> None:
        self.max_parentheses_ratio = max_parentheses_ratio

    def score_document(self, text: str) -> float:
        return _share(text, _PAREN_SET)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        return _column_share(texts, _PAREN_TABLE, _is_angle_bracket)


def _is_alnum(c: str) -> bool:
    return c.isalnum()


_ASCII_ALNUM_TABLE = _chars.ascii_table(string.ascii_letters + string.digits)


class SymbolRatioFilter(MaxRatio):
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
            view = _chars.utf8(chunk)
            visible = _chars.char_lengths(chunk) - _chars.count_space(view)
            alnum = _chars.count_chars(view, _ASCII_ALNUM_TABLE, _is_alnum)
            return ratio(visible - alnum, visible, 0.0)

        return _chars.per_chunk(texts, score, pa.float64())


__all__ = ["NonAlphaNumericFilter", "NumbersFilter", "ParenthesesFilter", "SymbolRatioFilter", "WhiteSpaceFilter"]
