"""Words and sentences as datatrove counts them for English (spaCy's blank English tokenizer and sentencizer; no
model download), for a whole column in one spaCy call, as integer ids into a vocabulary. Design: docs/design.md,
section Filters."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm.extras import load
from curator_slurm.stages.text.compute import (
    RE2_SPACE,
    _compute,
    call,
    is_in,
    match_substring,
    replace_regex,
    split_pattern_regex,
    to_numpy,
)
from curator_slurm.stages.text.pieces import combine, occurrences
from curator_slurm.stages.text.split import SPACE_RUN, explode

_nlp: Any = None
_is_punct: Any = None
#: Every whitespace-free chunk's tokens, across batches: text repeats, and a new chunk costs spaCy tens of
#: microseconds (its suffix and infix regular expressions). Cleared when it reaches :data:`_CACHE_LIMIT`.
_cache: dict[str, tuple[str, ...]] = {}
_CACHE_LIMIT = 1_000_000


def english() -> Any:
    """The process's ``spacy.blank("en")`` with a sentencizer (built on first use; no download).

    Its vocabulary computes no lexical attributes (spaCy's tokenizer does not read them, and computing
    them was most of the cost of a new word); ``is_punct`` keeps spaCy's own function for the sentencizer.
    """
    global _nlp, _is_punct
    if _nlp is None:
        spacy = load("spacy", "datatrove's filters (spaCy's English tokenizer)", "fineweb")
        from spacy.attrs import IS_PUNCT

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        _is_punct = nlp.vocab.lex_attr_getters[IS_PUNCT]
        nlp.vocab.lex_attr_getters = {}
        _nlp = nlp
    return _nlp


def is_punct(token: str) -> bool:
    """spaCy's English ``Token.is_punct``."""
    english()
    return bool(_is_punct(token))


def _tokens_of_chunks(chunks: list[str], for_sentences: bool = False) -> list[tuple[str, ...]]:
    """The tokens of each whitespace-free chunk as spaCy gives them for the chunk alone; ``for_sentences``:
    a chunk without punctuation is one token (see :func:`_plain_chunks`), not spaCy's."""
    if for_sentences:
        plain = _plain_chunks(chunks)
        if plain.any():
            exact = iter(_tokens_of_chunks([c for c, p in zip(chunks, plain.tolist(), strict=True) if not p]))
            return [(c,) if p else next(exact) for c, p in zip(chunks, plain.tolist(), strict=True)]
    missing = [c for c in dict.fromkeys(chunks) if c not in _cache]
    if missing:
        if len(_cache) + len(missing) > _CACHE_LIMIT:
            _cache.clear()
        for chunk, toks in zip(missing, _tokens_of_strings(missing), strict=True):
            _cache[chunk] = tuple(toks)
    return [_cache[c] for c in chunks]


def _plain_chunks(chunks: list[str]) -> np.ndarray:
    """Which chunks hold no punctuation (Unicode's P categories, as spaCy's ``is_punct`` reads them) and none of
    the sentencizer's punctuation characters. Every token spaCy cuts from such a chunk is a piece of it, so
    none is punctuation nor ends a sentence: for the sentencizer the chunk's tokens are one "other" token,
    whatever they are, and spaCy need not cut it (a third of a column's distinct chunks on real text)."""
    global _sentence_marks
    if _sentence_marks is None:
        ends = english().get_pipe("sentencizer").punct_chars
        _sentence_marks = "[\\p{P}" + "".join(f"\\x{{{ord(c):x}}}" for c in sorted(ends)) + "]"
    marked = to_numpy(match_substring(pa.array(chunks, pa.large_string()), _sentence_marks, regex=True))
    plain = ~marked
    for i in np.flatnonzero(plain).tolist():  # RE2's Unicode tables may be older than Python's: ask Python
        chunk = chunks[i]
        if not chunk.isascii() and any(unicodedata.category(c)[0] == "P" for c in chunk):
            plain[i] = False
    return plain


_sentence_marks: str | None = None


def _tokens_of_strings(texts: list[str]) -> list[list[str]]:
    """spaCy's tokens of each string (holding no whitespace but single spaces), in one call: joined by
    newlines, which spaCy makes tokens of their own, so that no special case spans two strings. Inside a
    memory zone, so that spaCy forgets the words afterwards (its vocabulary would grow without bound)."""
    nlp = english()
    from spacy.attrs import IDX, LENGTH

    joined = "\n".join(texts)
    with nlp.memory_zone():
        table = nlp.tokenizer(joined).to_array([IDX, LENGTH]).astype(np.int64)
    starts = np.cumsum([0] + [len(c) + 1 for c in texts[:-1]])
    idx, length = table[:, 0], table[:, 1]
    where = (np.searchsorted(starts, idx, side="right") - 1).tolist()
    found: list[list[str]] = [[] for _ in texts]
    for at, i, n in zip(where, idx.tolist(), length.tolist(), strict=True):
        text = joined[i : i + n]
        if text != "\n":
            found[at].append(text)
    return found


_patterns: frozenset[tuple[str, ...]] | None = None


def _special_patterns() -> frozenset[tuple[str, ...]]:
    """The token sequences spaCy's special-case matcher looks for (each special case as the tokenizer
    splits it without special cases) that are longer than one token: such a sequence can match across two
    chunks separated by one space, and change the tokens there, so a document where one does is tokenized
    whole."""
    global _patterns
    if _patterns is None:
        from spacy.tokenizer import Tokenizer

        tok = english().tokenizer
        plain = Tokenizer(
            english().vocab,
            rules={},
            prefix_search=tok.prefix_search,
            suffix_search=tok.suffix_search,
            infix_finditer=tok.infix_finditer,
            token_match=tok.token_match,
            url_match=tok.url_match,
        )
        found = (tuple(t.text for t in plain(special)) for special in tok.rules)
        _patterns = frozenset(p for p in found if len(p) > 1)
    return _patterns


@dataclass(frozen=True)
class Words:
    """The words of each text of a column: text ``r``'s are ``vocab[ids[offsets[r]:offsets[r + 1]]]``."""

    offsets: np.ndarray
    ids: np.ndarray
    vocab: list[str]

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def rows(self) -> np.ndarray:
        """The row of every word."""
        return np.repeat(np.arange(len(self.offsets) - 1), self.counts)

    def of_vocab(self, fn: Any, dtype: Any = bool) -> np.ndarray:
        """``fn(word)`` for every vocabulary entry."""
        return np.fromiter((fn(w) for w in self.vocab), dtype=dtype, count=len(self.vocab))

    @cached_property
    def is_punct(self) -> np.ndarray:
        """spaCy's ``is_punct`` for every vocabulary entry."""
        return self.of_vocab(is_punct)

    @cached_property
    def lengths(self) -> np.ndarray:
        """``len(word)`` for every vocabulary entry."""
        return self.of_vocab(len, np.int64)

    def subset(self, rows: np.ndarray) -> Words:
        """The words of the texts ``rows`` (ascending), in that order, with the same vocabulary."""
        counts = self.counts[rows]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        begin = np.repeat(self.offsets[rows] - offsets[:-1], counts)
        return Words(offsets, self.ids[begin + np.arange(int(offsets[-1]))], self.vocab)

    def texts(self, row: int) -> list[str]:
        return [self.vocab[i] for i in self.ids[self.offsets[row] : self.offsets[row + 1]]]


def words(texts: pa.Array, for_sentences: bool = False) -> Words:
    """The words datatrove's ``split_into_words(text, "eng")`` gives, for every text of ``texts``; with
    ``for_sentences``, words only as good as the sentencizer needs (a chunk without punctuation is one word)."""
    rows = len(texts)
    pieces = split_pattern_regex(texts, SPACE_RUN)
    chunks, parents = explode(pieces)
    keep = to_numpy(call("greater", call("binary_length", chunks), 0))
    # The whitespace after each chunk (aligned with the chunks once each text's leading run is dropped).
    gaps, gap_parents = explode(split_pattern_regex(texts, _CHUNK))
    first_gap = np.ones(len(gaps), dtype=bool)
    first_gap[1:] = gap_parents[1:] != gap_parents[:-1]
    single = to_numpy(call("equal", gaps, " "))[~first_gap]
    chunks, parents = chunks.filter(pa.array(keep)), parents[keep]
    encoded = call("dictionary_encode", chunks)
    distinct = encoded.dictionary.to_pylist()
    occurrence = to_numpy(encoded.indices).astype(np.int64)
    per_chunk = _tokens_of_chunks(distinct, for_sentences)
    n_of = np.fromiter((len(t) for t in per_chunk), dtype=np.int64, count=len(per_chunk))
    flat = pa.array([t for toks in per_chunk for t in toks], pa.large_string())
    tokens = call("dictionary_encode", flat)
    vocab: list[str] = tokens.dictionary.to_pylist()
    token_ids = to_numpy(tokens.indices).astype(np.int64)
    first_of_chunk = np.cumsum(n_of) - n_of
    n = n_of[occurrence]
    total = int(n.sum())
    begin = np.repeat(first_of_chunk[occurrence] - (np.cumsum(n) - n), n)
    ids = token_ids[begin + np.arange(total)]
    joins = _across_chunks(encoded.dictionary, distinct, occurrence, parents, single)
    if joins:
        ids, vocab = _retokenize(joins, chunks.to_pylist(), n, parents, single, ids, vocab)
    per_row = np.bincount(parents, weights=n, minlength=rows).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64)
    return Words(offsets, ids, vocab)


_CHUNK = f"[^{RE2_SPACE}]+"


def _across_chunks(
    dictionary: pa.Array, distinct: list[str], occurrence: np.ndarray, parents: np.ndarray, single: np.ndarray
) -> list[int]:
    """The chunk occurrences (index of the left one) followed by a single space and a chunk with which a
    special-case pattern may match across the space: the left chunk ends with the text of the pattern's
    first tokens and the right one starts with the rest (a superset of where spaCy's matcher can act).
    ``distinct`` is ``dictionary`` (the distinct chunks, none empty) as Python strings; each distinct pair of
    neighbours is looked at once."""
    if len(occurrence) < 2:
        return []
    splits = _pattern_splits()
    ends = pa.array(sorted({left[-1] for left, _ in splits}), dictionary.type)
    starts = pa.array(sorted({right[0] for _, right in splits}), dictionary.type)
    can_left = to_numpy(is_in(call("utf8_slice_codeunits", dictionary, options=_compute.SliceOptions(-1)), ends))
    can_right = to_numpy(is_in(call("utf8_slice_codeunits", dictionary, options=_compute.SliceOptions(0, 1)), starts))
    a, b = occurrence[:-1], occurrence[1:]
    near = np.flatnonzero(single[:-1] & (parents[:-1] == parents[1:]) & can_left[a] & can_right[b])
    if not len(near):
        return []
    by_edge: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for left, right in splits:
        by_edge.setdefault((left[-1], right[0]), []).append((left, right))
    pair, first = occurrences(combine(a[near], b[near]))
    hit = np.zeros(int(pair.max()) + 1, bool)
    for p, i in zip(pair[first].tolist(), near[first].tolist(), strict=True):
        left, right = distinct[a[i]], distinct[b[i]]
        hit[p] = any(left.endswith(x) and right.startswith(y) for x, y in by_edge.get((left[-1], right[0]), ()))
    return near[hit[pair]].tolist()


_splits: frozenset[tuple[str, str]] | None = None


def _pattern_splits() -> frozenset[tuple[str, str]]:
    """Every multi-token special-case pattern cut in two between tokens: (text before, text after)."""
    global _splits
    if _splits is None:
        _splits = frozenset(("".join(p[:j]), "".join(p[j:])) for p in _special_patterns() for j in range(1, len(p)))
    return _splits


def _retokenize(
    joins: list[int],
    chunks: list[str],
    n: np.ndarray,
    parents: np.ndarray,
    single: np.ndarray,
    ids: np.ndarray,
    vocab: list[str],
) -> tuple[np.ndarray, list[str]]:
    """The words with every run of single-space-separated chunks that holds one of ``joins`` tokenized as
    one string, as spaCy does inside the document (a run ends at any other whitespace, which spaCy makes a
    token, and no special case holds a whitespace token). Updates ``n`` (tokens per chunk occurrence; a run's
    tokens all count for its first chunk); returns the word ids and the vocabulary."""
    linked = single[:-1] & (parents[:-1] == parents[1:])  # occurrences i and i + 1 are in one run
    runs: list[tuple[int, int]] = []
    for i in joins:
        if runs and i < runs[-1][1]:
            continue
        start, end = i, i + 1
        while start > 0 and linked[start - 1]:
            start -= 1
        while end - 1 < len(linked) and linked[end - 1]:
            end += 1
        runs.append((start, end))
    found = _tokens_of_strings([" ".join(chunks[start:end]) for start, end in runs])
    index = {w: i for i, w in enumerate(vocab)}
    cum = np.concatenate([[0], np.cumsum(n)])
    parts, done = [], 0
    for (start, end), toks in zip(runs, found, strict=True):
        parts.append(ids[cum[done] : cum[start]])
        parts.append(np.fromiter((index.setdefault(t, len(index)) for t in toks), dtype=np.int64, count=len(toks)))
        n[start:end] = 0
        n[start] = len(toks)
        done = end
    parts.append(ids[cum[done] :])
    return np.concatenate(parts), list(index)


#: A whitespace run that spaCy makes a token of (every run but a single space): the sentencizer sees it.
_SPACE_TOKEN = f"[{RE2_SPACE}]{{2,}}|[{RE2_SPACE.replace(' ', '')}]"
#: What such a run becomes before counting: a chunk that is a token neither punctuation nor a sentence end.
_SPACE_MARK = " \ue000 "


def sentence_counts(texts: pa.Array) -> np.ndarray:
    """How many sentences spaCy's sentencizer finds in each text (``len(split_into_sentences(text))`` in
    datatrove; the empty text counts one, as there). A sentence ends after a token that is one of the
    sentencizer's punctuation characters, at the next token that is neither punctuation nor such a character."""
    marked = replace_regex(texts, _SPACE_TOKEN, _SPACE_MARK)
    w = words(marked, for_sentences=True)
    ends = set(english().get_pipe("sentencizer").punct_chars)
    period = w.of_vocab(lambda t: t in ends)[w.ids]
    other = ~(w.is_punct[w.ids] | period)
    seen = np.where(period | other, np.arange(len(w.ids)), -1)
    last = np.maximum.accumulate(seen) if len(seen) else seen
    previous = np.concatenate([[-1], last])[:-1].astype(np.int64)  # the token before each (none: no tokens)
    in_row = previous >= w.offsets[w.rows]
    boundary = other & in_row & period[np.maximum(previous, 0)]
    return 1 + np.bincount(w.rows[boundary], minlength=len(texts))
