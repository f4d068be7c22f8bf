"""Document filters and the stages that apply them.

A :class:`DocumentFilter` scores a column of texts and decides which to keep. The built-in filters
score whole columns with pyarrow compute kernels, so filtering costs about what a hand-written pyarrow
loop would; a custom filter may implement just ``score_document``/``keep_document`` on plain strings.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from ..errors import InputError
from ..tasks import DocumentBatch
from ._kernels import call, cast, filter_table, replace_regex
from .base import PASSTHROUGH, ProcessingStage


class DocumentFilter:
    """Scores documents and decides, from the score, whether to keep them."""

    name: str = "document_filter"

    def score_document(self, text: str) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement score_document or score_array")

    def keep_document(self, score: float) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement keep_document or keep_array")

    def score_array(self, texts: pa.ChunkedArray) -> pa.Array:
        """Scores of a column of texts (nulls count as empty text)."""
        return pa.array([self.score_document(t or "") for t in texts.to_pylist()], type=pa.float64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return pa.array([self.keep_document(s) for s in scores.to_pylist()], type=pa.bool_())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({args})"


def _between(scores: pa.Array, low: float | None, high: float | None) -> pa.Array:
    mask = call("is_valid", scores)
    if low is not None:
        mask = call("and", mask, call("greater_equal", scores, low))
    if high is not None:
        mask = call("and", mask, call("less_equal", scores, high))
    return mask


#: Whitespace as Python's str.split() sees it; pyarrow's regex \s alone is ASCII-only and misses \v.
_SPACE = r"\s\x0b\x1c-\x1f\x85\p{Z}"


def _texts(texts: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_null(texts.type):  # a column that was null in every row of a JSON file
        texts = cast(texts, pa.string())
    return call("coalesce", texts, "")


def _word_counts(texts: pa.ChunkedArray) -> pa.Array:
    """Words as str.split() counts them (no empty pieces from leading or trailing space)."""
    trimmed = call("utf8_trim_whitespace", _texts(texts))
    counts = call("list_value_length", call("utf8_split_whitespace", trimmed))
    return call("if_else", call("equal", call("utf8_length", trimmed), 0), 0, counts)


class WordCountFilter(DocumentFilter):
    """Keep documents with between ``min_words`` and ``max_words`` whitespace-separated words."""

    name = "word_count"

    def __init__(self, min_words: int | None = 50, max_words: int | None = 100_000) -> None:
        self.min_words = min_words
        self.max_words = max_words

    def score_document(self, text: str) -> float:
        return float(len(text.split()))

    def keep_document(self, score: float) -> bool:
        return (self.min_words is None or score >= self.min_words) and (
            self.max_words is None or score <= self.max_words
        )

    def score_array(self, texts: pa.ChunkedArray) -> pa.Array:
        return _word_counts(texts)

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return _between(scores, self.min_words, self.max_words)


class MeanWordLengthFilter(DocumentFilter):
    """Keep documents whose mean word length (non-space characters per word) is in a range; catches
    tables of numbers, base64 blobs and similar non-prose."""

    name = "mean_word_length"

    def __init__(self, min_mean_word_length: float | None = 3.0, max_mean_word_length: float | None = 10.0) -> None:
        self.min_mean_word_length = min_mean_word_length
        self.max_mean_word_length = max_mean_word_length

    def score_document(self, text: str) -> float:
        words = text.split()
        return sum(map(len, words)) / len(words) if words else 0.0

    def keep_document(self, score: float) -> bool:
        return self.keep_array(pa.array([score], pa.float64()))[0].as_py()

    def score_array(self, texts: pa.ChunkedArray) -> pa.Array:
        texts = _texts(texts)
        letters = call("utf8_length", replace_regex(texts, f"[{_SPACE}]+", ""))
        words = _word_counts(texts)
        mean = call("divide", cast(letters, pa.float64()), cast(call("max_element_wise", words, 1), pa.float64()))
        return call("if_else", call("equal", words, 0), 0.0, mean)

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return _between(scores, self.min_mean_word_length, self.max_mean_word_length)


class SymbolRatioFilter(DocumentFilter):
    """Keep documents in which at most ``max_symbol_ratio`` of the non-space characters are neither
    letters nor digits (markup, tables, boilerplate)."""

    name = "symbol_ratio"

    def __init__(self, max_symbol_ratio: float = 0.25) -> None:
        self.max_symbol_ratio = max_symbol_ratio

    def score_document(self, text: str) -> float:
        chars = [c for c in text if not c.isspace()]
        return sum(1 for c in chars if not c.isalnum()) / len(chars) if chars else 0.0

    def keep_document(self, score: float) -> bool:
        return score <= self.max_symbol_ratio

    def score_array(self, texts: pa.ChunkedArray) -> pa.Array:
        texts = _texts(texts)
        visible = call("utf8_length", replace_regex(texts, f"[{_SPACE}]+", ""))
        symbols = call("utf8_length", replace_regex(texts, f"[\\p{{L}}\\p{{N}}{_SPACE}]+", ""))
        ratio = call("divide", cast(symbols, pa.float64()), cast(call("max_element_wise", visible, 1), pa.float64()))
        return ratio

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return _between(scores, None, self.max_symbol_ratio)


class RepeatedLinesFilter(DocumentFilter):
    """Keep documents in which at most ``max_repeated_line_fraction`` of the non-empty lines are
    repeats of an earlier line (navigation menus, cookie banners, spam)."""

    name = "repeated_lines"

    def __init__(self, max_repeated_line_fraction: float = 0.3) -> None:
        self.max_repeated_line_fraction = max_repeated_line_fraction

    def score_document(self, text: str) -> float:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return 0.0
        counts = Counter(lines)
        return sum(c - 1 for c in counts.values()) / len(lines)

    def keep_document(self, score: float) -> bool:
        return score <= self.max_repeated_line_fraction


class ScoreFilter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Score ``text_field`` with a :class:`DocumentFilter` and keep the documents it accepts.

    ``score_field`` keeps the score as a column; ``invert`` keeps the rejected documents instead.
    """

    def __init__(
        self,
        filter_obj: DocumentFilter,
        text_field: str = "text",
        score_field: str | None = None,
        invert: bool = False,
    ) -> None:
        if not isinstance(filter_obj, DocumentFilter):
            raise TypeError(f"ScoreFilter needs a DocumentFilter instance, got {filter_obj!r}")
        self.filter_obj = filter_obj
        self.text_field = text_field
        self.score_field = score_field
        self.invert = invert
        self.name = f"score_filter[{filter_obj.name}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *([self.score_field] if self.score_field else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            where = ", ".join(task.metadata.get("files", [])) or task.task_id
            raise InputError(
                f"{where}: no field {self.text_field!r} to filter on; the data has {table.column_names}. "
                f"Set text_field= to one of them."
            )
        scores = self.filter_obj.score_array(table.column(self.text_field))
        keep = self.filter_obj.keep_array(scores)
        if self.invert:
            keep = call("invert", keep)
        if self.score_field:
            table = (
                table.append_column(self.score_field, scores)
                if self.score_field not in table.column_names
                else (table.set_column(table.column_names.index(self.score_field), self.score_field, scores))
            )
        return task.derive(filter_table(table, keep))
