"""datatrove's simple filters: ``LambdaFilter`` (a function of each document), ``RegexFilter`` (drop on a match),
``C4ParagraphFilter`` (mC4's paragraph rule) and ``UnigramLogProbFilter`` (mean unigram log-probability of the
words, from a word-frequency file the user gives)."""

from __future__ import annotations

import csv
import heapq
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from ...tasks import DocumentBatch
from ..io.writers import BaseWriter
from ..text.languages import SPACY_ENGLISH, check_language
from .decide import DatatroveFilter, Decision


@dataclass
class Document:
    """What datatrove's ``LambdaFilter`` gives its function: ``text``, ``id`` and ``metadata`` (the row's other
    fields, by name)."""

    text: str
    id: str
    metadata: dict[str, Any] = field(default_factory=dict)


class LambdaFilter(DatatroveFilter):
    """Keep the documents for which ``filter_function(doc)`` is true (datatrove's ``LambdaFilter``); ``doc`` is a
    :class:`Document` (``doc.text``, ``doc.id``, ``doc.metadata["url"]``...). The run fingerprint holds the
    function (its module, name, captured values and source).

    Args:
        filter_function: a function of a :class:`Document` returning True to keep it.
        exclusion_writer: a writer for the removed documents (None: none).
    """

    name = "lambda_filter"

    def __init__(self, filter_function: Callable[[Document], bool], exclusion_writer: BaseWriter | None = None) -> None:
        super().__init__(exclusion_writer)
        if not callable(filter_function):
            raise TypeError(f"LambdaFilter(filter_function={filter_function!r}): give a function of a document")
        self.filter_function = filter_function

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = task.data.to_pylist()
        keep = np.zeros(len(rows), dtype=bool)
        for i, (row, text) in enumerate(zip(rows, texts.to_pylist(), strict=True)):
            meta = {k: v for k, v in row.items() if k not in (self.text_field, "id")}
            keep[i] = bool(self.filter_function(Document(text, str(row.get("id", i)), meta)))
        return Decision(keep)


class RegexFilter(DatatroveFilter):
    """Drop the documents in which ``regex_exp`` (Python's ``re``) finds a match (datatrove's ``RegexFilter``).

    Args:
        regex_exp: the regular expression.
        exclusion_writer: a writer for the removed documents (None: none).
    """

    name = "regex_filter"

    def __init__(self, regex_exp: str, exclusion_writer: BaseWriter | None = None) -> None:
        super().__init__(exclusion_writer)
        self.regex_exp = regex_exp
        self._regex = re.compile(regex_exp)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        search = self._regex.search
        return Decision(np.array([not search(t) for t in texts.to_pylist()], dtype=bool))


class C4ParagraphFilter(DatatroveFilter):
    """mC4's paragraph rule (datatrove's ``C4ParagraphFilter``): drop a document of fewer than 3 lines (split at
    ``\\n``) or whose third-longest line is shorter than 200 characters; reason ``< 3 paragraphs``.

    Args:
        exclusion_writer: a writer for the removed documents (None: none).
    """

    name = "c4_paragraph_filter"

    def __init__(self, exclusion_writer: BaseWriter | None = None) -> None:
        super().__init__(exclusion_writer)
        self.min_paragraphs = 3
        self.min_paragraph_len = 200
        self.line_delimiter = "\n"

    def _keeps(self, text: str) -> bool:
        lengths = [len(line) for line in text.split(self.line_delimiter)]
        return len(lengths) >= self.min_paragraphs and min(heapq.nlargest(3, lengths)) >= self.min_paragraph_len

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        keep = np.array([self._keeps(t) for t in texts.to_pylist()], dtype=bool)
        reason = f"< {self.min_paragraphs} paragraphs"
        return Decision(keep, [None if k else reason for k in keep.tolist()])


def read_unigram_frequencies(path: str) -> dict[str, float]:
    """A word-frequency CSV (columns ``word`` and ``count``, as datatrove's ``unigram_freq.csv``) as each word's
    share of all counts."""
    with open(path, encoding="utf-8", newline="") as f:
        pairs = [(row["word"], int(row["count"])) for row in csv.DictReader(f)]
    total = sum(c for _, c in pairs)
    if not pairs or total <= 0:
        raise ValueError(f"{path}: no word counts (a CSV with the columns word and count)")
    return {w: c / total for w, c in pairs}


class UnigramLogProbFilter(DatatroveFilter):
    """Keep documents whose words' mean log unigram probability is above ``logprobs_threshold`` (datatrove's
    ``UnigramLogProbFilter``, after peS2o): words as datatrove splits English (spaCy, the ``fineweb`` extra),
    lowercased, an unknown word counting 1e-9, a text without words 0. datatrove downloads its frequency file
    (Google's 1T unigrams); here ``unigram_freq_file`` is that file (or any CSV of ``word,count``), given, and
    the fingerprint holds a digest of its bytes.

    Args:
        logprobs_threshold: the mean log-probability a document must exceed.
        exclusion_writer: a writer for the removed documents (None: none).
        language: the language of the words; English only.
        unigram_freq_file: the CSV of word counts (required).
    """

    name = "unigram_log_prob_filter"
    fingerprint_exclude = frozenset({"_frequencies"})

    def __init__(
        self,
        logprobs_threshold: float = -10,
        exclusion_writer: BaseWriter | None = None,
        language: str = "eng",
        unigram_freq_file: str | None = None,
    ) -> None:
        super().__init__(exclusion_writer)
        if unigram_freq_file is None:
            raise ValueError(
                "UnigramLogProbFilter needs unigram_freq_file=: a CSV of word,count (datatrove downloads Google's "
                "1T unigram counts, unigram_freq.csv; this package downloads nothing)"
            )
        self.logprobs_threshold = logprobs_threshold
        self.language = check_language("UnigramLogProbFilter", language, SPACY_ENGLISH)
        self.unigram_freq_file = unigram_freq_file
        with open(unigram_freq_file, "rb") as f:
            self.frequencies_digest = xxhash.xxh64_hexdigest(f.read())
        self._frequencies = read_unigram_frequencies(unigram_freq_file)

    def logprobs(self, texts: pa.Array) -> np.ndarray:
        """Each text's mean log-probability (0 for a text without words)."""
        from ..text.spacy_words import words

        found = words(texts)
        freq = self._frequencies
        per_word = np.log(np.array([freq.get(w.lower(), 1e-9) for w in found.vocab], dtype=np.float64))
        counts = found.counts
        sums = np.bincount(found.rows, weights=per_word[found.ids], minlength=len(counts))
        return np.divide(sums, counts, out=np.zeros(len(counts)), where=counts > 0)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        return Decision(self.logprobs(texts) > self.logprobs_threshold)


__all__ = [
    "C4ParagraphFilter",
    "Document",
    "LambdaFilter",
    "RegexFilter",
    "UnigramLogProbFilter",
    "read_unigram_frequencies",
]
