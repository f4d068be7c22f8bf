"""NeMo Curator's URL and substring filters: the share of a text inside URLs, URLs containing "porn", a given
substring at the start, the end or anywhere. Design: docs/design.md, section Filters."""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.base import DocumentFilter
from curator_slurm.stages.filters.heuristic._shared import MaxRatio, python_scores, ratio
from curator_slurm.stages.text import chars as _chars
from curator_slurm.stages.text.compute import call, cast, match_substring, replace_regex, starts_or_ends_with, to_numpy
from curator_slurm.stages.text.constants import URL_PATTERN

URL_REGEX = re.compile(URL_PATTERN)


def _url_regex(url_regex: re.Pattern[str] | str | None) -> re.Pattern[str]:
    if url_regex is None:
        return URL_REGEX
    if isinstance(url_regex, str):
        return re.compile(url_regex)
    if isinstance(url_regex, re.Pattern):
        return url_regex
    raise TypeError(f"url_regex={url_regex!r}: give a regular expression (str or re.Pattern) or None")


class UrlsFilter(MaxRatio):
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
            return super().score_array(_chars.texts_of(texts))

        def score(chunk: pa.Array) -> np.ndarray:
            n = _chars.char_lengths(chunk)
            url_chars = np.zeros(len(chunk), np.int64)
            rows = np.flatnonzero(to_numpy(match_substring(chunk, "://")))
            if len(rows):
                some = chunk.take(pa.array(rows))
                stripped = replace_regex(some, URL_PATTERN, "")
                url_chars[rows] = n[rows] - _chars.char_lengths(stripped)
            return ratio(url_chars, n, 1.0)

        return _chars.per_chunk(texts, score, pa.float64())


class PornographicUrlsFilter(DocumentFilter):
    """Drop documents with a URL (a match of ``url_regex``, NeMo's pattern by default) containing
    ``porn`` (case-sensitive). Scores 1 for such a document, else 0; keeps score != 1."""

    name = "PornographicUrlsFilter"

    def __init__(self, url_regex: re.Pattern[str] | str | None = None) -> None:
        self.url_regex = url_regex
        self._regex = _url_regex(url_regex)

    def score_document(self, text: str) -> int:
        return int(any("porn" in url for url in self._regex.findall(text)))

    def keep_document(self, score: float) -> bool:
        return score != 1

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            out = np.zeros(len(chunk), np.int64)
            # Only a document containing "porn" can score 1; those few are checked in Python.
            python_scores(self, chunk, np.flatnonzero(to_numpy(match_substring(chunk, "porn"))), out)
            return out

        return _chars.per_chunk(texts, score, pa.int64())

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

    def keep_document(self, score: float) -> bool:
        return score == 1

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        column = _chars.texts_of(texts)
        if self.position == "any":
            found = match_substring(column, self.substring)
        else:
            found = starts_or_ends_with(column, self.substring, end=self.position == "suffix")
        return cast(found, pa.int64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return call("equal", scores, 1)


__all__ = ["PornographicUrlsFilter", "SubstringFilter", "UrlsFilter"]
