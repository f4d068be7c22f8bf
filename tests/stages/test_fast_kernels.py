"""The hashed n-gram kernel of datatrove's Gopher repetition rule (stages.text.counts.joined_ngram_codes) and the
words shared between filters give exactly what the plain definitions give, on any text: datatrove's
``find_all_duplicate`` over the words, and the words computed afresh."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("spacy")

from curator_slurm.stages.filters.quality.gopher import _dup_ngram_chars
from curator_slurm.stages.text.counts import joined_ngram_codes, string_hashes
from curator_slurm.stages.text.spacy_words import Words, words


def find_all_duplicate(words: list[str], n: int) -> int:
    """datatrove's definition: n-grams joined without spaces; after a repeat the scan jumps n words."""
    unique: set[str] = set()
    repeated = idx = 0
    while idx < len(words) - n + 1:
        gram = "".join(words[idx : idx + n])
        if gram in unique:
            repeated += len(gram)
            idx += n
        else:
            unique.add(gram)
            idx += 1
    return repeated


def words_of(docs: list[list[str]]) -> Words:
    vocab = sorted({w for d in docs for w in d})
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.array([index[w] for d in docs for w in d], np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    return Words(offsets, ids, vocab)


# Words that join alike ("ab" + "c" == "a" + "bc"), non-ASCII ones, and few of them: many repeats.
joinable = st.sampled_from(["a", "b", "c", "ab", "bc", "abc", "é", "é\u0301", "\U0001f600", "\x00", "aé"])
docs_of_words = st.lists(st.lists(joinable, max_size=40), max_size=6)


def reference_keys(docs: list[list[str]], n: int) -> tuple[list[tuple[int, str]], list[bool]]:
    grams, first, seen = [], [], set()
    for d, ws in enumerate(docs):
        for i in range(len(ws) - n + 1):
            key = (d, "".join(ws[i : i + n]))
            grams.append(key)
            first.append(key not in seen)
            seen.add(key)
    return grams, first


def check_codes(docs: list[list[str]], n: int, hashes: tuple[np.ndarray, np.ndarray]) -> None:
    w = words_of(docs)
    _, key, first = joined_ngram_codes(w.ids, w.rows, w.offsets[w.rows + 1], n, w.vocab, hashes)
    grams, expected_first = reference_keys(docs, n)
    assert first.tolist() == expected_first
    assert len(key) == len(grams)
    pairs = list(zip(key.tolist(), grams, strict=True))
    for i, (a, ga) in enumerate(pairs):  # equal codes exactly where the joined strings (and documents) are equal
        for b, gb in pairs[i + 1 :]:
            assert (a == b) == (ga == gb)


@settings(max_examples=200, deadline=None)
@given(docs=docs_of_words, n=st.integers(1, 6))
def test_joined_ngram_codes_are_equal_exactly_where_the_strings_are(docs: list[list[str]], n: int) -> None:
    w = words_of(docs)
    check_codes(docs, n, string_hashes(w.vocab))


@settings(max_examples=100, deadline=None)
@given(docs=docs_of_words, n=st.integers(1, 6))
def test_every_hash_colliding_still_gives_exact_codes(docs: list[list[str]], n: int) -> None:
    """A hash that says nothing (every word hashes to 0): the strings decide, so the codes stay exact."""
    size = len({x for d in docs for x in d})
    check_codes(docs, n, (np.zeros(size, np.uint64), np.ones(size, np.uint64)))


def test_string_hashes_compose_over_concatenation() -> None:
    vocab = ["", "a", "bc", "é\u0301", "\U0001f600x", "abc"]
    h, p = string_hashes(vocab)
    with np.errstate(over="ignore"):
        assert h[1] * p[2] + h[2] == h[5]  # "a" + "bc" == "abc"
    assert h[0] == 0 and p[0] == 1


@settings(max_examples=200, deadline=None)
@given(docs=docs_of_words, n=st.integers(1, 10))
def test_duplicated_ngram_chars_are_datatroves(docs: list[list[str]], n: int) -> None:
    w = words_of(docs)
    # A threshold no document stays under (-1): every document with a repeat is scanned as datatrove scans it.
    got = _dup_ngram_chars(w, n, -1.0, np.ones(len(docs)), string_hashes(w.vocab))
    assert got.tolist() == [find_all_duplicate(d, n) for d in docs]


# Arbitrary Unicode with Python's whitespace variants, blank lines, and long runs of one phrase.
spaces = st.sampled_from([" ", "  ", "\n", "\n\n", "\t", "\u00a0", "\u3000", "\r\n", "\x0b", "\u2028", "\x1c"])
phrase = st.sampled_from(["the cat sat on the mat", "a.m. p.m.", "don't stop", "U.S.A.", "🙂 ok"])
pieces = st.one_of(st.text(max_size=12), spaces, phrase, phrase.map(lambda p: " ".join([p] * 12)))
texts = st.lists(st.lists(pieces, max_size=12).map("".join), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(docs=texts, n=st.integers(2, 10))
def test_duplicated_ngram_chars_of_any_text_are_datatroves(docs: list[str], n: int) -> None:
    w = words(pa.array(docs, pa.large_string()))
    got = _dup_ngram_chars(w, n, -1.0, np.ones(len(docs)), string_hashes(w.vocab))
    assert got.tolist() == [find_all_duplicate(w.texts(r), n) for r in range(len(docs))]


def test_words_shared_between_filters_are_the_words_of_each_text() -> None:
    """A column split after one that shares, rewrites or drops some of its documents: its words are the words
    of its own texts (those split before taken over, the rest split now), whatever came before."""
    from curator_slurm.stages.text.shared_words import shared_words

    first = ["the cat sat. the cat sat.", "U.S.A. is a.m. big", "", "don't  stop\n\nnow", "x"]
    then = ["x", "the cat sat. the cat sat.", "new text, a.m. here", "don't  stop\n\nnow", "", "x"]
    shared_words(pa.array(first, pa.large_string()))
    got = shared_words(pa.array(then, pa.large_string()))
    fresh = words(pa.array(then, pa.large_string()))
    assert [got.texts(r) for r in range(len(then))] == [fresh.texts(r) for r in range(len(then))]
    assert sorted(got.vocab) == sorted(set(got.vocab)) == sorted({t for r in range(len(then)) for t in got.texts(r)})


@settings(max_examples=40, deadline=None)
@given(before=texts, after=texts, data=st.data())
def test_shared_words_of_any_columns_are_their_words(before: list[str], after: list[str], data: st.DataObject) -> None:
    from curator_slurm.stages.text.shared_words import shared_words

    mixed = data.draw(st.lists(st.sampled_from(before + after), max_size=8))
    shared_words(pa.array(before, pa.large_string()))
    got = shared_words(pa.array(mixed, pa.large_string()))
    fresh = words(pa.array(mixed, pa.large_string()))
    assert [got.texts(r) for r in range(len(mixed))] == [fresh.texts(r) for r in range(len(mixed))]
    assert len(set(got.vocab)) == len(got.vocab)
