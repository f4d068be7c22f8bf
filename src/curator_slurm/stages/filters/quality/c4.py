"""datatrove's C4 filters (``c4_filters.py``): C4's line-level cleaning, which rewrites the text it keeps,
and C4's bad-words filter, with the word lists read from files the user gives (datatrove downloads them).
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm.errors import InputError
from curator_slurm.stages.filters.decide import DatatroveFilter, Decision, batch_seed, first_reason
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.chars import char_lengths
from curator_slurm.stages.text.compute import (
    RE2_SPACE,
    call,
    count_substring,
    match_substring,
    re2_literal,
    replace_regex,
    to_numpy,
)
from curator_slurm.stages.text.counts import per_row
from curator_slurm.stages.text.languages import SPACY_ENGLISH, check_language
from curator_slurm.stages.text.spacy_words import english, sentence_counts
from curator_slurm.stages.text.split import SPACE_RUN, split_regex, splitlines, strings, strip
from curator_slurm.tasks import DocumentBatch

#: datatrove's ``POLICY_SUBSTRINGS``: a line holding one is dropped (``filter_policy``).
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
#: Wikipedia-style citations (``remove_citations``): ``[12]``, ``[edit]``, ``[citation needed]``.
CITATION = r"\[\p{Nd}*\]|\[edit\]|\[citation needed\]"


def lower(values: pa.Array) -> pa.Array:
    """``str.lower()`` for the substring tests here: Arrow lowers U+0130 to a plain ``i``, Python to ``i``
    plus a combining dot, so it is spelled out first."""
    return call("utf8_lower", replace_regex(values, "\u0130", "i\u0307"))


class C4QualityFilter(DatatroveFilter):
    """datatrove's ``C4QualityFilter``: same parameters, defaults, decisions and rewritten text.

    Line by line (``split_paragraph``; else spaCy's sentences), each stripped: a line with a word longer than
    ``max_word_length`` goes; citations are removed (``remove_citations``); a line not ending in ``. ? ! " '``
    or ending in ``...`` goes (``filter_no_terminal_punct``); a line of fewer than ``min_words_per_line``
    words goes; "lorem ipsum" drops the document; a line with "javascript" goes; a ``{`` drops the document;
    a line with a policy phrase goes. The document is dropped when its kept lines hold fewer than
    ``min_num_sentences`` sentences (spaCy's sentencizer; -1: no minimum), else its text becomes the kept
    lines joined by newlines (by spaces without ``split_paragraph``), stripped. Reasons: ``lorem_ipsum``,
    ``curly_bracket``, ``too_few_sentences``.

    Args:
        exclusion_writer: a writer for the removed documents, with their reason (None: none).
        split_paragraph: judge the lines of the text (else spaCy's sentences).
        remove_citations: remove citations such as ``[1]`` from each line.
        filter_no_terminal_punct: drop lines without terminal punctuation, or ending in ``...``.
        min_num_sentences: the fewest sentences in the kept lines (-1: no minimum).
        min_words_per_line: the fewest words in a kept line.
        max_word_length: the longest word in a kept line.
        filter_lorem_ipsum: drop documents with "lorem ipsum".
        filter_javascript: drop lines with "javascript".
        filter_curly_bracket: drop documents with a ``{``.
        filter_policy: drop lines with a policy phrase.
        language: the language of the words; English only (spaCy's tokenizer).
        text_field: the field judged and rewritten.
    """

    name = "c4_quality_filter"

    def __init__(
        self,
        exclusion_writer: BaseWriter | None = None,
        split_paragraph: bool = True,
        remove_citations: bool = True,
        filter_no_terminal_punct: bool = True,
        min_num_sentences: int = 5,
        min_words_per_line: int = 3,
        max_word_length: int = 1000,
        filter_lorem_ipsum: bool = True,
        filter_javascript: bool = True,
        filter_curly_bracket: bool = True,
        filter_policy: bool = True,
        language: str = "eng",
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        self.split_paragraph = split_paragraph
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct
        self.min_num_sentences = min_num_sentences
        self.min_words_per_line = min_words_per_line
        self.max_word_length = max_word_length
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_javascript = filter_javascript
        self.filter_curly_bracket = filter_curly_bracket
        self.filter_policy = filter_policy
        self.language = check_language(type(self).__name__, language, SPACY_ENGLISH)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = len(texts)
        lines, line_rows = splitlines(texts) if self.split_paragraph else _sentences(texts)
        lines = strip(lines)
        counted = count_substring(lines, f"[^{RE2_SPACE}]+", regex=True)
        n_words = to_numpy(counted).astype(np.int64)
        keep = np.ones(len(lines), dtype=bool)
        if self.max_word_length != -1:
            keep &= ~_has_long_word(lines, self.max_word_length)
        if self.remove_citations:
            lines = replace_regex(lines, CITATION, "")
        if self.filter_no_terminal_punct:
            ends = to_numpy(match_substring(lines, "[.?!\"']$", regex=True))
            ellipsis = to_numpy(match_substring(lines, r"\.\.\.$", regex=True))
            keep &= ends & ~ellipsis
        keep &= n_words >= self.min_words_per_line
        lowered = lower(lines)
        doc_drop: list[tuple[str, np.ndarray]] = []  # (reason, lines that drop their document)
        if self.filter_lorem_ipsum:
            lorem = keep & to_numpy(match_substring(lowered, "lorem ipsum"))
            doc_drop.append(("lorem_ipsum", lorem))
            keep &= ~lorem
        if self.filter_javascript:
            keep &= ~to_numpy(match_substring(lowered, "javascript"))
        if self.filter_curly_bracket:
            curly = keep & to_numpy(match_substring(lines, "{"))
            doc_drop.append(("curly_bracket", curly))
            keep &= ~curly
        if self.filter_policy:
            policy = "|".join(re2_literal(p) for p in POLICY_SUBSTRINGS)
            keep &= ~to_numpy(match_substring(lowered, policy, regex=True))
        reasons = _first_line_reason(doc_drop, line_rows, rows)
        kept = lines.filter(pa.array(keep))
        kept_rows = line_rows[keep]
        if self.min_num_sentences != -1:
            counts = sentence_counts(kept) if self.split_paragraph else np.ones(len(kept), np.int64)
            sentences = per_row(counts.astype(np.float64), kept_rows, rows)
        else:
            sentences = np.zeros(rows)
        decision = first_reason([*reasons, ("too_few_sentences", sentences < self.min_num_sentences)], rows)
        offsets = np.concatenate([[0], np.cumsum(np.bincount(kept_rows, minlength=rows))]).astype(np.int32)
        grouped = pa.ListArray.from_arrays(pa.array(offsets), kept)
        joined = call("binary_join", grouped, pa.scalar("\n" if self.split_paragraph else " ", kept.type))
        return Decision(decision.keep, decision.reasons, strip(joined))


def _has_long_word(lines: pa.Array, longest: int) -> np.ndarray:
    """Whether each line has a word (whitespace-separated) of more than ``longest`` characters."""
    out = char_lengths(lines) > longest
    at = np.flatnonzero(out)
    if not len(at):
        return out
    pieces, parents = split_regex(lines.take(pa.array(at)), SPACE_RUN)
    long = char_lengths(pieces) > longest
    out[:] = False
    out[at[np.unique(parents[long])]] = True
    return out


def _first_line_reason(
    doc_drop: list[tuple[str, np.ndarray]], line_rows: np.ndarray, rows: int
) -> list[tuple[str, np.ndarray]]:
    """The document-dropping rules as ``first_reason`` takes them: a document goes for the rule of its
    first line that drops it (datatrove returns at that line)."""
    first = np.full(rows, np.iinfo(np.int64).max)
    which = np.full(rows, -1)
    for k, (_, lines) in enumerate(doc_drop):
        at = np.flatnonzero(lines)
        if not len(at):
            continue
        row_first = np.full(rows, np.iinfo(np.int64).max)
        np.minimum.at(row_first, line_rows[at], at)
        better = row_first < first
        first[better], which[better] = row_first[better], k
    return [(reason, which == k) for k, (reason, _) in enumerate(doc_drop)]


_sentence_nlp: Any = None


def _sentences(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """datatrove's ``split_into_sentences`` of every text (``split_paragraph=False``): spaCy's sentences,
    each from the end of the one before (the first from the start, the last to the end of the text)."""
    global _sentence_nlp
    if _sentence_nlp is None:
        english()  # spaCy is there
        import spacy

        _sentence_nlp = spacy.blank("en")
        _sentence_nlp.add_pipe("sentencizer")
    pieces: list[str] = []
    parents: list[int] = []
    for row, text in enumerate(texts.to_pylist()):
        _sentence_nlp.max_length = len(text) + 10
        with _sentence_nlp.memory_zone():
            ends = [s.end_char for s in _sentence_nlp(text).sents]
        bounds = list(zip([0, *ends[:-1]], [*ends[:-1], len(text)], strict=True))
        pieces.extend(text[a:b] for a, b in bounds)
        parents.extend([row] * len(bounds))
    return pa.array(pieces, pa.large_string()), np.asarray(parents, dtype=np.int64)


# --- C4 bad words ------------------------------------------------------------------------------------

#: Removed from every list, as datatrove removes them: common pieces of words in Japanese and Chinese.
_ALLOWED = frozenset({"sm", "グロ", "女の子", "性"})
#: Languages written without spaces between words: a bad word counts anywhere, not only as a whole word.
_NO_SPACES = ("ja", "th", "zh")


def read_badwords(path: str) -> set[str]:
    """A bad-words file (one word a line, as in the LDNOOBW lists datatrove downloads), as datatrove reads it."""
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f} - _ALLOWED


class C4BadWordsFilter(DatatroveFilter):
    """datatrove's ``C4BadWordsFilter``: drop a document whose lowercased text has a word of its language's
    list (as a whole word, but anywhere in Japanese, Thai and Chinese), keeping ``keep_fraction`` of them at
    random. Reason ``document_removed_with_badwords``.

    The lists are files the user gives: ``badwords_dir/<language>`` (e.g. ``badwords_dir/en``; the LDNOOBW
    files datatrove downloads), never downloaded. A document's language is its ``language_field`` column
    (datatrove's ``metadata["language"]``; a missing column or a null is ``default_language``). A language
    without a file fails the batch, naming the file, unless ``fail_on_missing_language`` is False (then its
    documents are kept, as datatrove keeps a language it has no list for). The draws for ``keep_fraction`` come
    from ``seed`` and the batch's lineage (see :func:`~.base.batch_seed`).

    Args:
        badwords_dir: the directory of the word lists, one file per language code.
        keep_fraction: the share of documents with a bad word kept at random.
        fail_on_missing_language: fail a batch with a language that has no file (else keep its documents).
        seed: the seed of the ``keep_fraction`` draws.
        default_language: the language of a document without one.
        exclusion_writer: a writer for the removed documents, with their reason (None: none).
        language_field: the column of each document's language.
        text_field: the field judged.
    """

    name = "c4_badwords_filter"
    #: Patterns compiled from the lists on first use (``badwords_dir`` is the parameter).
    fingerprint_exclude = frozenset({"_patterns"})

    def __init__(
        self,
        badwords_dir: str | os.PathLike,
        keep_fraction: float = 0.0,
        fail_on_missing_language: bool = True,
        seed: int | None = None,
        default_language: str = "en",
        exclusion_writer: BaseWriter | None = None,
        language_field: str = "language",
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        self.badwords_dir = os.fspath(badwords_dir)
        if not os.path.isdir(self.badwords_dir):
            raise FileNotFoundError(
                f"C4BadWordsFilter(badwords_dir={self.badwords_dir!r}): no such directory; put the word lists "
                "there, one file per language named by its code (en, de, ...)"
            )
        self.keep_fraction = float(keep_fraction)
        self.fail_on_missing_language = fail_on_missing_language
        self.seed = seed
        self.default_language = default_language
        self.language_field = language_field
        self._patterns: dict[str, tuple[re.Pattern[str], str] | None] = {}

    def _pattern(self, language: str) -> tuple[re.Pattern[str], str] | None:
        """(datatrove's regex, a looser RE2 pattern that finds every text the regex can match) for a language."""
        if language not in self._patterns:
            path = os.path.join(self.badwords_dir, language)
            if not os.path.isfile(path):
                if self.fail_on_missing_language:
                    raise InputError(
                        f"C4BadWordsFilter: no bad-words list {path} for language {language!r}; add the file, or "
                        "set fail_on_missing_language=False to keep that language's documents"
                    )
                self._patterns[language] = None
                return None
            words = sorted(read_badwords(path))
            alternation = "|".join(re.escape(w) for w in words)
            loose = "|".join(re2_literal(w) for w in words)
            if language in _NO_SPACES:
                self._patterns[language] = (re.compile(alternation), loose)
            else:
                exact = re.compile(rf"(?:\W|^)({alternation})(?:\W|$)")
                # Python's \W (on str) is never an ASCII letter, digit or underscore: a superset of its matches.
                self._patterns[language] = (exact, f"(?:[^0-9a-z_]|^)(?:{loose})(?:[^0-9a-z_]|$)")
        return self._patterns[language]

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = len(texts)
        if self.language_field in task.data.column_names:
            languages = strings(task.data.column(self.language_field)).to_pylist()
            languages = [code or self.default_language for code in languages]
        else:
            languages = [self.default_language] * rows
        bad = np.zeros(rows, dtype=bool)
        lowered = lower(texts)
        for language in sorted(set(languages)):
            pattern = self._pattern(language)
            if pattern is None:
                continue
            exact, loose = pattern
            at = np.flatnonzero(np.asarray(languages) == language)
            maybe = to_numpy(match_substring(lowered.take(pa.array(at)), loose, regex=True))
            for row in at[maybe].tolist():
                bad[row] = exact.search(texts[row].as_py().lower()) is not None
        if self.keep_fraction > 0.0 and bad.any():
            draws = batch_seed(self.seed, task).uniform(size=int(bad.sum()))
            bad[np.flatnonzero(bad)[draws < self.keep_fraction]] = False
        return first_reason([("document_removed_with_badwords", bad)], rows)


__all__ = ["CITATION", "POLICY_SUBSTRINGS", "C4BadWordsFilter", "C4QualityFilter", "read_badwords"]
