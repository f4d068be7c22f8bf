"""datatrove's ``FineWebQualityFilter`` (``fineweb_quality_filter.py``): the line-level rules FineWeb added
after Gopher and C4."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.decide import DatatroveFilter, Decision, first_reason
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.chars import char_lengths
from curator_slurm.stages.text.compute import count_substring, match_substring, re2_literal, replace_regex, to_numpy
from curator_slurm.stages.text.counts import per_row, ratio, repeated_per_doc
from curator_slurm.stages.text.languages import SPACY_ENGLISH, check_language
from curator_slurm.stages.text.pieces import lines as nonblank_lines
from curator_slurm.stages.text.shared_words import shared_words
from curator_slurm.stages.text.split import TERMINAL_PUNCTUATION
from curator_slurm.tasks import DocumentBatch


class FineWebQualityFilter(DatatroveFilter):
    """datatrove's ``FineWebQualityFilter``: same parameters, defaults and decisions.

    Over the text's non-blank lines (split at ``\\n``, not stripped): drop when fewer than ``line_punct_thr``
    of them end with one of ``stop_chars`` (datatrove's terminal punctuation; a ratio of 0 passes when
    ``line_punct_exclude_zero``), when more than ``short_line_thr`` are at most ``short_line_length``
    characters long, when repeated lines hold more than ``char_duplicates_ratio`` of the characters (newlines
    not counted), or when there are more than ``new_line_ratio`` newlines per word (spaCy's words). Reasons:
    ``empty``, ``line_punct_ratio``, ``short_line_ratio``, ``char_dup_ratio``, ``list_ratio``.

    Args:
        exclusion_writer: a writer for the removed documents, with their reason (None: none).
        line_punct_thr: the least share of lines ending with one of ``stop_chars``.
        line_punct_exclude_zero: let a share of 0 pass.
        stop_chars: the terminal punctuation (default datatrove's).
        short_line_thr: the largest share of short lines.
        short_line_length: the most characters of a short line.
        char_duplicates_ratio: the largest share of the characters in repeated lines.
        new_line_ratio: the most newlines per word.
        language: the language of the words; English only (spaCy's tokenizer).
        text_field: the field judged.
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
        self.language = check_language(type(self).__name__, language, SPACY_ENGLISH)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = len(texts)
        pieces = nonblank_lines(texts)  # NeMo Curator's "sentences" too: the non-blank lines, unstripped
        lines, line_rows, n_lines = pieces.values, pieces.doc, pieces.counts
        if any(c == "" for c in self.stop_chars):
            ends = np.ones(len(lines), dtype=bool)  # every string ends with ""
        else:
            pattern = "(?:" + "|".join(re2_literal(c) for c in self.stop_chars) + ")$"
            ends = to_numpy(match_substring(lines, pattern, regex=True))
        punct = ratio(per_row(ends.astype(np.float64), line_rows, rows), n_lines)
        punct_fails = (punct < self.line_punct_thr) & ~((punct == 0) & self.line_punct_exclude_zero)
        short_lines = (char_lengths(lines) <= self.short_line_length).astype(np.float64)
        short = ratio(per_row(short_lines, line_rows, rows), n_lines)
        _, dup_chars = repeated_per_doc(lines, line_rows, rows)
        dups = ratio(dup_chars, char_lengths(replace_regex(texts, "\n", "")))
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
        newlines = to_numpy(count_substring(texts.take(pa.array(alive)), "\n"))
        per_word = ratio(newlines, shared_words(texts.take(pa.array(alive))).counts)
        over = np.zeros(rows, dtype=bool)
        over[alive] = per_word > self.new_line_ratio
        return first_reason([*rules, ("list_ratio", over)], rows)


__all__ = ["FineWebQualityFilter"]
