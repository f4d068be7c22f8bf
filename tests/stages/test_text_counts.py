"""The repetition kernels NeMo Curator's repetition filters and datatrove's Gopher rules share (stages.text.counts):
each equals its plain-Python definition on any input, and where the two peers define a rule alike their numbers
agree; where they define it otherwise the difference is the peers' own, shown here."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm.stages import RepeatedLinesFilter, RepeatingTopNGramsFilter
from curator_slurm.stages.text.counts import ngram_codes, ratio, repeated_per_doc, top_ngrams

pieces_of_docs = st.lists(st.lists(st.sampled_from(["a", "b", "ab", "", "é", "a b"]), max_size=8), max_size=6)


def find_duplicates(x: list[str]) -> tuple[int, int]:
    """datatrove's definition: every occurrence after the first, and its characters."""
    seen: set[str] = set()
    count = chars = 0
    for element in x:
        if element in seen:
            count, chars = count + 1, chars + len(element)
        seen.add(element)
    return count, chars


@settings(max_examples=200, deadline=None)
@given(docs=pieces_of_docs)
def test_repeated_pieces_are_every_occurrence_after_the_first(docs: list[list[str]]) -> None:
    values = pa.array([p for d in docs for p in d], pa.large_string())
    doc = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    count, chars = repeated_per_doc(values, doc, len(docs))
    assert list(zip(count.tolist(), chars.tolist(), strict=True)) == [find_duplicates(d) for d in docs]


@settings(max_examples=200, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from("abcd"), max_size=12), max_size=6), n=st.integers(1, 3))
def test_the_top_ngram_is_the_most_frequent_the_first_on_ties(docs: list[list[str]], n: int) -> None:
    words = [w for d in docs for w in d]
    codes = np.array(["abcd".index(w) for w in words], np.int64)
    doc = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    ends = np.repeat(np.cumsum([len(d) for d in docs]), [len(d) for d in docs])
    positions, grams = ngram_codes(codes, doc, ends, n)
    found = {}
    if len(positions):
        for d, start, count in zip(*top_ngrams(positions, grams, doc), strict=True):
            found[int(d)] = (tuple(words[start : start + n]), int(count))
    expected = {}
    for d, ws in enumerate(docs):
        grams_py = [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]
        if grams_py:
            expected[d] = Counter(grams_py).most_common(1)[0]  # Counter keeps first insertion on ties
    assert found == expected


def _datatrove_dup_line_frac(text: str) -> float:
    lines = re.split("\n+", text)
    return find_duplicates(lines)[0] / len(lines)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.sampled_from(["alpha beta", "gamma", "alpha beta gamma", "x y"]), min_size=1, max_size=10))
def test_where_both_peers_split_lines_alike_their_line_shares_agree(lines: list[str]) -> None:
    """Lines without blank ones between them: NeMo's share of distinct lines is 1 - datatrove's share of repeated
    lines (distinct lines / lines, computed as NeMo computes it, to the last bit)."""
    text = "\n".join(lines)
    nemo = RepeatedLinesFilter().score_array(pa.chunked_array([[text]])).to_pylist()[0]
    assert nemo == pytest.approx(1 - _datatrove_dup_line_frac(text))
    assert nemo == len(set(lines)) / len(lines) == RepeatedLinesFilter().score_document(text)


def test_where_the_peers_define_the_rules_otherwise_the_difference_is_theirs() -> None:
    # A line of spaces: NeMo's sentences leave blank lines out, datatrove's split keeps them (and repeats them).
    text = "same\n \nsame\n \nother"
    assert RepeatedLinesFilter().score_document(text) == pytest.approx(2 / 3)
    assert _datatrove_dup_line_frac(text) == pytest.approx(2 / 5)
    # The top 2-gram of "ab ab ab" occurs twice as an n-gram; its string occurs once without overlap: datatrove
    # multiplies its length by the n-gram count, NeMo by str.count.
    text = "ab ab ab"
    nemo = RepeatingTopNGramsFilter(n=2).score_array(pa.chunked_array([[text]])).to_pylist()[0]
    assert nemo == pytest.approx(len("ab ab") * 1 / len(text))
    from curator_slurm.stages.filters.quality.gopher import _top_ngram_chars

    pytest.importorskip("spacy")
    from curator_slurm.stages.text.spacy_words import words

    datatrove = ratio(_top_ngram_chars(words(pa.array([text], pa.large_string())), 2), np.array([len(text)]))
    assert datatrove.tolist() == [pytest.approx(len("ab ab") * 2 / len(text))]
