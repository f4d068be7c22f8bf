"""datatrove's Gopher filters (quality and repetition): the rules of the Gopher paper as datatrove applies them,
over spaCy's English words, a document going for the first rule it fails, with datatrove's reason."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.decide import DatatroveFilter, Decision, first_reason
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.chars import char_lengths
from curator_slurm.stages.text.compute import RE2_SPACE, count_substring, match_substring, to_numpy
from curator_slurm.stages.text.counts import (
    joined_ngram_codes,
    ngram_codes,
    per_row,
    ratio,
    repeated_per_doc,
    string_hashes,
    top_ngrams,
)
from curator_slurm.stages.text.languages import SPACY_ENGLISH, check_language
from curator_slurm.stages.text.shared_words import shared_words
from curator_slurm.stages.text.spacy_words import Words
from curator_slurm.stages.text.split import PUNCTUATION_SET, split_regex, splitlines, strip
from curator_slurm.tasks import DocumentBatch

#: datatrove's ``STOP_WORDS``.
STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


def _count(texts: pa.Array, pattern: str) -> np.ndarray:
    return to_numpy(count_substring(texts, pattern)).astype(np.int64)


class GopherQualityFilter(DatatroveFilter):
    """datatrove's ``GopherQualityFilter``: same parameters, defaults and decisions (reasons
    ``gopher_short_doc``, ``gopher_long_doc``, ``gopher_below_avg_threshold``, ``gopher_above_avg_threshold``,
    ``gopher_too_many_hashes``, ``gopher_too_many_ellipsis``, ``gopher_too_many_bullets``,
    ``gopher_too_many_end_ellipsis``, ``gopher_below_alpha_threshold``, ``gopher_enough_stop_words``).

    Words are spaCy's English tokens; a "non-symbol word" has a character outside datatrove's punctuation
    set, and the word-count and mean-length bounds count those. ``max_non_alpha_words_ratio`` is, as in
    datatrove, the *minimum* fraction of words with an alphabetic character. A document with no words at all
    (reachable only with ``min_doc_words`` off), where datatrove divides by zero, goes as ``gopher_short_doc``.
    A rule whose threshold is ``None`` (or, where datatrove writes ``if self.x and ...``, 0) is off.

    Args:
        min_doc_words: the fewest non-symbol words kept.
        max_doc_words: the most non-symbol words kept.
        min_avg_word_length: the least mean length of the non-symbol words.
        max_avg_word_length: the greatest mean length of the non-symbol words.
        max_symbol_word_ratio: the most ``#``, and the most ellipses, per word.
        max_bullet_lines_ratio: the largest share of lines starting with a bullet.
        max_ellipsis_lines_ratio: the largest share of lines ending with an ellipsis.
        max_non_alpha_words_ratio: the *least* share of words with an alphabetic character (datatrove's name).
        min_stop_words: the fewest distinct ``stop_words`` a document must hold.
        stop_words: the stop words (default datatrove's).
        exclusion_writer: a writer for the removed documents, with their reason (None: none).
        language: the language of the words; English only (spaCy's tokenizer).
        text_field: the field judged.
    """

    name = "gopher_quality_filter"

    def __init__(
        self,
        min_doc_words: int | None = 50,
        max_doc_words: int | None = 100000,
        min_avg_word_length: int | None = 3,
        max_avg_word_length: int | None = 10,
        max_symbol_word_ratio: float | None = 0.1,
        max_bullet_lines_ratio: float | None = 0.9,
        max_ellipsis_lines_ratio: float | None = 0.3,
        max_non_alpha_words_ratio: float | None = 0.8,
        min_stop_words: int | None = 2,
        stop_words: list[str] | None = None,
        exclusion_writer: BaseWriter | None = None,
        language: str = "eng",
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = min_avg_word_length
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio
        self.min_stop_words = min_stop_words
        self.stop_words = sorted(set(STOP_WORDS if stop_words is None else stop_words))
        self.language = check_language(type(self).__name__, language, SPACY_ENGLISH)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = len(texts)
        w = shared_words(texts)
        n_words = w.counts
        word_rows = w.rows
        symbol_free = w.of_vocab(lambda t: any(c not in PUNCTUATION_SET for c in t))[w.ids]
        n_free = per_row(symbol_free.astype(np.float64), word_rows, rows)
        mean_length = ratio(per_row(w.lengths[w.ids] * symbol_free, word_rows, rows), n_free)
        rules: list[tuple[str, np.ndarray]] = [("gopher_short_doc", n_words == 0)]
        if self.min_doc_words:
            rules.append(("gopher_short_doc", n_free < self.min_doc_words))
        if self.max_doc_words:
            rules.append(("gopher_long_doc", n_free > self.max_doc_words))
        if self.min_avg_word_length:
            rules.append(("gopher_below_avg_threshold", mean_length < self.min_avg_word_length))
        if self.max_avg_word_length:
            rules.append(("gopher_above_avg_threshold", mean_length > self.max_avg_word_length))
        if self.max_symbol_word_ratio:
            hashes = ratio(_count(texts, "#"), n_words)
            ellipses = ratio(_count(texts, "...") + _count(texts, "\u2026"), n_words)
            rules.append(("gopher_too_many_hashes", hashes > self.max_symbol_word_ratio))
            rules.append(("gopher_too_many_ellipsis", ellipses > self.max_symbol_word_ratio))
        if self.max_bullet_lines_ratio or self.max_ellipsis_lines_ratio:
            lines, line_rows = splitlines(texts)
            n_lines = np.bincount(line_rows, minlength=rows)
            if self.max_bullet_lines_ratio:
                bullet = to_numpy(match_substring(lines, f"^[{RE2_SPACE}]*[\u2022-]", regex=True))
                share = ratio(per_row(bullet.astype(np.float64), line_rows, rows), n_lines)
                rules.append(("gopher_too_many_bullets", share > self.max_bullet_lines_ratio))
            if self.max_ellipsis_lines_ratio:
                ending = to_numpy(match_substring(lines, f"(?:\\.\\.\\.|\u2026)[{RE2_SPACE}]*$", regex=True))
                share = ratio(per_row(ending.astype(np.float64), line_rows, rows), n_lines)
                rules.append(("gopher_too_many_end_ellipsis", share > self.max_ellipsis_lines_ratio))
        if self.max_non_alpha_words_ratio:
            alpha = w.of_vocab(lambda t: any(c.isalpha() for c in t))[w.ids]
            share = ratio(per_row(alpha.astype(np.float64), word_rows, rows), n_words)
            rules.append(("gopher_below_alpha_threshold", share < self.max_non_alpha_words_ratio))
        if self.min_stop_words:
            rules.append(("gopher_enough_stop_words", _distinct_stop_words(w, self.stop_words) < self.min_stop_words))
        return first_reason(rules, rows)


def _distinct_stop_words(w: Words, stop_words: list[str]) -> np.ndarray:
    """How many of ``stop_words`` each text has (each counted once)."""
    rows = len(w.offsets) - 1
    stop = w.of_vocab(set(stop_words).__contains__)
    hit = stop[w.ids]
    if not hit.any():
        return np.zeros(rows, np.int64)
    pairs = np.unique(w.rows[hit] * len(w.vocab) + w.ids[hit])
    return np.bincount(pairs // len(w.vocab), minlength=rows)


#: datatrove's default ``dup_n_grams``: (n, highest fraction of characters in repeated n-grams).
DUP_N_GRAMS = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))


class GopherRepetitionFilter(DatatroveFilter):
    """datatrove's ``GopherRepetitionFilter``: same parameters, defaults and decisions (reasons ``empty``,
    ``dup_para_frac``, ``dup_para_char_frac``, ``dup_line_frac``, ``dup_line_char_frac``, ``top_{n}_gram``,
    ``duplicated_{n}_n_grams``).

    Paragraphs are the stripped text split at two or more newlines, lines the text split at newlines; the
    fractions of characters are of the whole text. The top n-gram is the most frequent n-gram of words
    (the first to appear among equally frequent ones), its characters joined by spaces, times its count;
    duplicated n-grams are counted as datatrove counts them: words joined without spaces, and after a
    repeat the scan jumps past it. Repeated paragraphs and lines, and the top n-gram, are counted by the
    kernels NeMo Curator's repetition filters use (:mod:`..text.counts`); what differs from those filters is
    what a line, a paragraph and a word are, and what each share is of (see ``docs/catalogue.md``). A rule
    whose threshold is ``None`` (or 0) is off.

    Args:
        dup_line_frac: the largest share of lines that repeat an earlier line.
        dup_para_frac: the largest share of paragraphs that repeat an earlier one.
        dup_line_char_frac: the largest share of the characters in repeated lines.
        dup_para_char_frac: the largest share of the characters in repeated paragraphs.
        top_n_grams: (n, largest share of the characters in the most frequent n-gram) pairs.
        dup_n_grams: (n, largest share of the characters in duplicated n-grams) pairs.
        exclusion_writer: a writer for the removed documents, with their reason (None: none).
        language: the language of the words; English only (spaCy's tokenizer).
        text_field: the field judged.
    """

    name = "gopher_repetition_filter"

    def __init__(
        self,
        dup_line_frac: float | None = 0.3,
        dup_para_frac: float | None = 0.3,
        dup_line_char_frac: float | None = 0.2,
        dup_para_char_frac: float | None = 0.2,
        top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16)),
        dup_n_grams: tuple[tuple[int, float], ...] = DUP_N_GRAMS,
        exclusion_writer: BaseWriter | None = None,
        language: str = "eng",
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = tuple((int(n), float(f)) for n, f in top_n_grams)
        self.dup_n_grams = tuple((int(n), float(f)) for n, f in dup_n_grams)
        self.language = check_language(type(self).__name__, language, SPACY_ENGLISH)

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        rows = len(texts)
        size = char_lengths(texts)
        rules: list[tuple[str, np.ndarray]] = [("empty", size == 0)]
        paragraphs, para_rows = split_regex(strip(texts), "\n{2,}")
        n_paragraphs = np.bincount(para_rows, minlength=rows)
        para_dups, para_chars = repeated_per_doc(paragraphs, para_rows, rows)
        if self.dup_para_frac:
            rules.append(("dup_para_frac", ratio(para_dups, n_paragraphs) > self.dup_para_frac))
        if self.dup_para_char_frac:
            rules.append(("dup_para_char_frac", ratio(para_chars, size) > self.dup_para_char_frac))
        lines, line_rows = split_regex(texts, "\n+")
        line_dups, line_chars = repeated_per_doc(lines, line_rows, rows)
        if self.dup_line_frac:
            n_lines = np.bincount(line_rows, minlength=rows)
            rules.append(("dup_line_frac", ratio(line_dups, n_lines) > self.dup_line_frac))
        if self.dup_line_char_frac:
            rules.append(("dup_line_char_frac", ratio(line_chars, size) > self.dup_line_char_frac))
        decision = first_reason(rules, rows)
        alive = np.flatnonzero(decision.keep)
        if not len(alive) or not (self.top_n_grams or self.dup_n_grams):
            return decision
        # The n-gram rules only for the documents still kept (datatrove stops at the first failing rule).
        w = shared_words(texts.take(pa.array(alive)))
        checks = [(f"top_{n}_gram", n, frac, False) for n, frac in self.top_n_grams]
        checks += [(f"duplicated_{n}_n_grams", n, frac, True) for n, frac in self.dup_n_grams]
        hashes = string_hashes(w.vocab) if self.dup_n_grams else (np.zeros(0, np.uint64),) * 2
        left = np.arange(len(alive))  # positions in ``alive`` of the documents no check has dropped yet
        for reason, n, frac, duplicated in checks:
            if not len(left):
                break
            sub = w.subset(left)
            limit = size[alive[left]]
            chars = _dup_ngram_chars(sub, n, frac, limit, hashes) if duplicated else _top_ngram_chars(sub, n)
            over = ratio(chars, limit) > frac
            rules.append((reason, _scatter(over, alive[left], rows)))
            left = left[~over]
        return first_reason(rules, rows)


def _scatter(values: np.ndarray, at: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros(rows, dtype=bool)
    out[at] = values
    return out


def _top_ngram_chars(w: Words, n: int) -> np.ndarray:
    """datatrove's ``find_top_duplicate`` of every text's n-grams (0 where a text has none): the most frequent
    n-gram, the first to appear among equally frequent ones (:func:`.counts.top_ngrams`, NeMo's
    ``RepeatingTopNGramsFilter``'s choice too), its words joined by spaces, times its count. NeMo's filter counts
    that string's occurrences in the text instead, over whitespace words (``RepeatingTopNGramsFilter``)."""
    rows = len(w.offsets) - 1
    out = np.zeros(rows)
    positions, grams = ngram_codes(w.ids, w.rows, w.offsets[w.rows + 1], n)
    if not len(positions):
        return out
    docs, starts, counts = top_ngrams(positions, grams, w.rows)
    cum = np.concatenate([[0], np.cumsum(w.lengths[w.ids])])
    out[docs] = (cum[starts + n] - cum[starts] + (n - 1)) * counts
    return out


def _dup_ngram_chars(
    w: Words, n: int, frac: float, size: np.ndarray, hashes: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """datatrove's ``find_all_duplicate`` of every text: characters of the n-grams (words joined without
    spaces) seen before in the text, the scan jumping ``n`` words past each repeat. Where even every
    n-gram seen before cannot make more than ``frac`` of ``size`` characters, that bound stands in for
    the scan (the decision is the same). ``hashes``: :func:`.counts.string_hashes` of the vocabulary."""
    rows = len(w.offsets) - 1
    out = np.zeros(rows)
    starts, gram, first = joined_ngram_codes(w.ids, w.rows, w.offsets[w.rows + 1], n, w.vocab, hashes)
    if not len(starts):
        return out
    cum = np.concatenate([[0], np.cumsum(w.lengths[w.ids])])
    gram_chars = cum[starts + n] - cum[starts]  # the characters of each n-gram's joined string
    row = w.rows[starts]
    seen_before = ~first
    # Up to a text's first repeat every n-gram is new: the scan starts there, with those in its set.
    repeats = np.flatnonzero(seen_before)
    bound = per_row(gram_chars[repeats].astype(np.float64), row[repeats], rows)
    out[:] = bound
    texts_with_repeats, first_repeat = np.unique(row[repeats], return_index=True)
    for r, at in zip(texts_with_repeats.tolist(), repeats[first_repeat].tolist(), strict=True):
        if not ratio(bound[r], size[r]) > frac:
            continue
        lo, hi = np.searchsorted(row, [r, r + 1])
        out[r] = _greedy_repeats(gram[lo:hi].tolist(), gram_chars[lo:hi].tolist(), n, at - lo)
    return out


def _greedy_repeats(grams: list[int], chars: list[int], n: int, start: int) -> int:
    seen: set[int] = set(grams[:start])
    repeated, i = 0, start
    while i < len(grams):
        g = grams[i]
        if g in seen:
            repeated += chars[i]
            i += n
        else:
            seen.add(g)
            i += 1
    return repeated


__all__ = ["STOP_WORDS", "GopherQualityFilter", "GopherRepetitionFilter"]
