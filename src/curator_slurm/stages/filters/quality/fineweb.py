"""datatrove's ``FineWebQualityFilter`` (``fineweb_quality_filter.py``): the line-level rules FineWeb added
after Gopher and C4."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.decide import DatatroveFilter, Decision, first_reason
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.compute import (
    RE2_SPACE,
    _compute,
    call,
    match_substring,
    re2_literal,
    replace_regex,
    split_pattern,
    to_numpy,
)
from curator_slurm.stages.text.spacy_words import check_language, words
from curator_slurm.stages.text.split import TERMINAL_PUNCTUATION, duplicates, explode, lengths, per_row, ratio
from curator_slurm.tasks import DocumentBatch


class FineWebQualityFilter(DatatroveFilter):
    """datatrove's ``FineWebQualityFilter``: same parameters, defaults and decisions.

    Over the text's non-blank lines (split at ``\\n``, not stripped): drop when fewer than ``line_punct_thr``
    of them end with one of ``stop_chars`` (datatrove's terminal punctuation; a ratio of 0 passes when
    ``line_punct_exclude_zero``), when more than ``short_line_thr`` are at most ``short_line_length``
    characters long, when repeated lines hold more than ``char_duplicates_ratio`` of the characters (newlines
    not counted), or when there are more than ``new_line_ratio`` newlines per word (spaCy's words). Reasons:
    ``empty``, ``line_punct_ratio``, ``short_line_ratio``, ``char_dup_ratio``, ``list_ratio``.
    """

    name = "fineweb_quality_filter"

    def __init__(
        self,
        exclusion_writer: BaseWriter | None = None,
        line_punct_thr: float = 0.12,
        line_punct_exclude_zero: bool = False,
        stop_chars: tuple[str, ...] | None = None,
        short_line_thr: float = 0.67,
        short_line_length: int = 30,
        char_duplicates_ratio: float = 0.01,
        new_line_ratio: float = 0.3,
        language: str = "eng",
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        self.line_punct_thr = line_punct_thr
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.stop_chars = tuple(sorted(TERMINAL_PUNCTUATION)) if stop_chars is None else tuple(stop_chars)
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio
        self.language = check_language(language, type(self).__name__)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = len(texts)
        lines, line_rows = explode(split_pattern(texts, "\n"))
        blank = to_numpy(match_substring(lines, f"^[{RE2_SPACE}]*$", regex=True))
        lines, line_rows = lines.filter(pa.array(~blank)), line_rows[~blank]
        n_lines = np.bincount(line_rows, minlength=rows)
        if any(c == "" for c in self.stop_chars):
            ends = np.ones(len(lines), dtype=bool)  # every string ends with ""
        else:
            pattern = "(?:" + "|".join(re2_literal(c) for c in self.stop_chars) + ")$"
            ends = to_numpy(match_substring(lines, pattern, regex=True))
        punct = ratio(per_row(ends.astype(np.float64), line_rows, rows), n_lines)
        punct_fails = (punct < self.line_punct_thr) & ~((punct == 0) & self.line_punct_exclude_zero)
        short = ratio(per_row((lengths(lines) <= self.short_line_length).astype(np.float64), line_rows, rows), n_lines)
        _, dup_chars = duplicates(lines, line_rows, rows)
        dups = ratio(dup_chars, lengths(replace_regex(texts, "\n", "")))
        rules = [
            ("empty", n_lines == 0),
            ("line_punct_ratio", punct_fails),
            ("short_line_ratio", short > self.short_line_thr),
            ("char_dup_ratio", dups > self.char_duplicates_ratio),
        ]
        decision = first_reason(rules, rows)
        alive = np.flatnonzero(decision.keep)
        if not len(alive):
            return decision
        newlines = to_numpy(call("count_substring", texts.take(pa.array(alive)), options=_substring("\n")))
        per_word = ratio(newlines, words(texts.take(pa.array(alive))).counts)
        over = np.zeros(rows, dtype=bool)
        over[alive] = per_word > self.new_line_ratio
        return first_reason([*rules, ("list_ratio", over)], rows)


def _substring(pattern: str) -> object:
    return _compute.MatchSubstringOptions(pattern)


__all__ = ["FineWebQualityFilter"]
