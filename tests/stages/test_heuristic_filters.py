"""NeMo Curator's heuristic filters: the same constructor, score and decision as NeMo on English web-like
text, through both APIs (a column at a time, as ScoreFilter uses them, and one document at a time).

Every expected score below was worked out by hand from NeMo Curator's definition of the filter (its
``nemo_curator/stages/text/filters/heuristic`` code and constants); each case says which rule it pins.
Where NeMo cannot score a text (it divides by zero or takes the max of no words) the value is the one
curator-slurm documents: the score that drops the document (or 0 for LongWordFilter).
"""

from __future__ import annotations

import inspect
import random
import sys
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm import DocumentBatch
from curator_slurm import stages as stages_module
from curator_slurm.errors import FilterError
from curator_slurm.stages import (
    BoilerPlateStringFilter,
    BulletsFilter,
    CommonEnglishWordsFilter,
    DocumentFilter,
    EllipsisFilter,
    Filter,
    LongWordFilter,
    MeanWordLengthFilter,
    NonAlphaNumericFilter,
    NumbersFilter,
    ParenthesesFilter,
    PornographicUrlsFilter,
    PunctuationFilter,
    RepeatedLinesByCharFilter,
    RepeatedLinesFilter,
    RepeatedParagraphsByCharFilter,
    RepeatedParagraphsFilter,
    RepeatingDuplicateNGramsFilter,
    RepeatingTopNGramsFilter,
    Score,
    ScoreFilter,
    SubstringFilter,
    SymbolRatioFilter,
    SymbolsToWordsFilter,
    UrlsFilter,
    WhiteSpaceFilter,
    WordCountFilter,
    WordsWithoutAlphabetsFilter,
)
from curator_slurm.stages.filters import NEMO_HEURISTIC_FILTERS


@dataclass(frozen=True)
class Case:
    """One text, the filter's score and decision on it, and the rule of NeMo's definition it pins."""

    f: DocumentFilter
    text: str
    score: float
    keep: bool
    rule: str


CASES = [
    # NonAlphaNumericFilter: (len - count of [a-zA-Z0-9\n?!,.]) / len, keep <= 0.25; empty text 1.0.
    Case(NonAlphaNumericFilter(), "", 1.0, False, "empty text scores 1.0"),
    Case(NonAlphaNumericFilter(), "Hello, world!", 1 / 13, True, "only the space is not alphanumeric; , and ! are"),
    Case(NonAlphaNumericFilter(), "a b", 1 / 3, False, "one space in three characters"),
    Case(NonAlphaNumericFilter(), "ünï", 2 / 3, False, "non-ASCII letters are not NeMo's alphanumerics"),
    Case(NonAlphaNumericFilter(), "line\nline", 0.0, True, "newline counts as alphanumeric"),
    # NumbersFilter: count of [0-9] / len, keep <= 0.15.
    Case(NumbersFilter(), "Call 555-1234 now", 7 / 17, False, "seven ASCII digits in 17 characters"),
    Case(NumbersFilter(), "٣ is three", 0.0, True, "[[:digit:]] in the regex module is ASCII 0-9 only"),
    Case(NumbersFilter(), "", 1.0, False, "empty text scores 1.0"),
    # UrlsFilter: characters in matches of NeMo's URL regex / len, keep <= 0.2.
    Case(UrlsFilter(), "See https://example.com/a?b=1 now", 25 / 33, False, "one 25-character URL"),
    Case(UrlsFilter(), "x http://a.b/<y>", 11 / 16, False, "the URL stops at <"),
    Case(UrlsFilter(), "ftp://host is not matched at all", 0.0, True, "only http and https"),
    Case(UrlsFilter(), "", 1.0, False, "empty text scores 1.0"),
    Case(UrlsFilter(url_regex=r"https?://\S+"), "go http://a.b/<y>", 14 / 17, False, "a custom regex (str)"),
    # PornographicUrlsFilter: 1 if a URL match contains "porn" (case-sensitive), keep != 1.
    Case(PornographicUrlsFilter(), "visit https://porn.example.com today", 1, False, "porn inside a URL"),
    Case(PornographicUrlsFilter(), "porn star at http://ok.com", 0, True, "porn outside every URL"),
    Case(PornographicUrlsFilter(), "http://x.com/PORN", 0, True, "case-sensitive"),
    # BulletsFilter: non-blank lines starting (after spaces) with a bullet / non-blank lines, keep <= 0.9.
    Case(BulletsFilter(), "• one\n• two\n\nthree", 2 / 3, True, "blank lines are not lines"),
    Case(BulletsFilter(), "  ● a\n◦ b", 1.0, False, "leading spaces are stripped first"),
    Case(BulletsFilter(), "- a\n* b", 0.0, True, "dash and star are not bullets"),
    Case(BulletsFilter(), " \n ", 1.0, False, "no non-blank line: drop"),
    # WhiteSpaceFilter: count of \t \n \r \b space / len, keep <= 0.25.
    Case(WhiteSpaceFilter(), "a b\tc\n", 3 / 6, False, "space, tab and newline, trailing one included"),
    Case(WhiteSpaceFilter(), "a\u00a0b", 0.0, True, "a no-break space is not in NeMo's list"),
    Case(WhiteSpaceFilter(), "hello world", 1 / 11, True, "one space"),
    Case(WhiteSpaceFilter(), "", 1.0, False, "empty text scores 1.0"),
    # ParenthesesFilter: count of {}[]()⟨⟩ / len, keep <= 0.1.
    Case(ParenthesesFilter(), "f(x) = [y]", 4 / 10, False, "four brackets in ten characters"),
    Case(ParenthesesFilter(), "⟨a⟩ bc", 2 / 6, False, "angle brackets count, as characters not bytes"),
    Case(ParenthesesFilter(), "no brackets", 0.0, True, "none"),
    # LongWordFilter: longest text.split() word in characters, keep <= max_word_length (1000).
    Case(LongWordFilter(), "a " + "x" * 1001, 1001, False, "a 1001-character word"),
    Case(LongWordFilter(max_word_length=5), "émigré", 6, False, "characters, not UTF-8 bytes (8)"),
    Case(LongWordFilter(), "", 0, True, "no words: 0 (NeMo fails on max of nothing)"),
    # WordCountFilter: len(text.split()), keep min_words <= n <= max_words.
    Case(WordCountFilter(), "one two  three\nfour", 4, False, "runs of whitespace separate; 4 < 50"),
    Case(WordCountFilter(min_words=3, max_words=4), "one two  three\nfour", 4, True, "bounds included"),
    Case(WordCountFilter(min_words=1), "\u3000 \u2028", 0, False, "Unicode spaces are whitespace"),
    # BoilerPlateStringFilter: paragraphs containing a policy phrase (lower-cased) / paragraphs, keep <= 0.4.
    Case(
        BoilerPlateStringFilter(),
        "Welcome to our shop.\n\nRead our Privacy Policy.\n\nWe sell shoes.",
        1 / 3,
        True,
        "one policy paragraph of three",
    ),
    Case(BoilerPlateStringFilter(), "Terms of Use\n\nCookie Policy", 1.0, False, "every paragraph"),
    Case(BoilerPlateStringFilter(), "Lorem ipsum dolor sit amet.", 1.0, False, "lorem ipsum anywhere scores 1.0"),
    Case(BoilerPlateStringFilter(), "", 0.0, True, "empty text is one empty paragraph"),
    Case(BoilerPlateStringFilter(), "PRİVACY POLİCY", 0.0, True, "Python lower-cases İ to i + dot: no match"),
    # MeanWordLengthFilter: characters per word, keep 3 <= mean <= 10.
    Case(MeanWordLengthFilter(), "ab abcd", 3.0, True, "(2 + 4) / 2"),
    Case(MeanWordLengthFilter(), "a bb", 1.5, False, "(1 + 2) / 2"),
    Case(MeanWordLengthFilter(), "émigré café", 5.0, True, "characters: (6 + 4) / 2"),
    Case(MeanWordLengthFilter(), "", 0.0, False, "no words: 0.0 (NeMo divides by zero)"),
    # PunctuationFilter: non-blank lines not ending with . ? ! " ' / lines, keep <= 0.85.
    Case(PunctuationFilter(), "Hello.\nWorld\nWhat?", 1 / 3, True, "one line of three lacks an end mark"),
    Case(PunctuationFilter(), "Menu\nHome\nAbout", 1.0, False, "a navigation menu"),
    Case(PunctuationFilter(), 'He said "hi"  \nok', 1 / 2, True, "a quote ends a sentence; trailing spaces stripped"),
    Case(PunctuationFilter(), "", 1.0, False, "no lines: drop"),
    # EllipsisFilter: non-blank lines ending (lower-cased) with an ellipsis mark / lines, keep <= 0.3.
    Case(EllipsisFilter(), "First...\nSecond…\nThird.\nFourth", 2 / 4, False, "... and … both count"),
    Case(EllipsisFilter(), "Click here to READ MORE\nReal text.", 1 / 2, False, "read more, any case"),
    Case(EllipsisFilter(), "A line.\nAnother line [...]", 1 / 2, False, "[...] counts"),
    Case(EllipsisFilter(), "A line.\nAnother line.", 0.0, True, "none"),
    # CommonEnglishWordsFilter: words among the/be/to/of/and/that/have/with, counting stops at the cutoff.
    Case(CommonEnglishWordsFilter(), "the cat and the dog", 2, True, "stops counting at 2"),
    Case(CommonEnglishWordsFilter(stop_at_false=False), "the cat and the dog", 3, True, "counts all three"),
    Case(CommonEnglishWordsFilter(), "THE END", 0, False, "case-sensitive"),
    Case(CommonEnglishWordsFilter(), "of", 1, False, "one is not enough"),
    Case(CommonEnglishWordsFilter(min_num_common_words=0), "cat the", 0, True, "cutoff 0: stops after word one"),
    # WordsWithoutAlphabetsFilter: words containing an alphabetic character / words, keep >= 0.8.
    Case(WordsWithoutAlphabetsFilter(), "123 456 abc", 1 / 3, False, "numbers are words without letters"),
    Case(WordsWithoutAlphabetsFilter(), "Chapter Ⅻ begins", 1.0, True, "Ⅻ is alphabetic to [[:alpha:]]"),
    Case(WordsWithoutAlphabetsFilter(), "hello 42", 1 / 2, False, "half"),
    Case(WordsWithoutAlphabetsFilter(), "", 0.0, False, "no words: 0.0 (NeMo divides by zero)"),
    # SymbolsToWordsFilter: words equal to an ellipsis mark, or with more #-runs than half their length.
    Case(SymbolsToWordsFilter(), "# Title", 1 / 2, False, "# is one run in one character"),
    Case(SymbolsToWordsFilter(), "## Title", 0.0, True, "## is one run in two characters: not > 0.5"),
    Case(SymbolsToWordsFilter(), "wait ... what", 1 / 3, False, "an ellipsis word"),
    Case(SymbolsToWordsFilter(), "#a# b c d e f g h i j", 1 / 10, True, "#a#: two runs in three; 0.1 <= 0.1"),
    Case(SymbolsToWordsFilter(), "", 1.0, False, "no words: 1.0 (NeMo divides by zero)"),
    # SubstringFilter: 1 if substring at position, keep == 1.
    Case(SubstringFilter("Hello", "prefix"), "Hello world", 1, True, "prefix"),
    Case(SubstringFilter("world", "prefix"), "Hello world", 0, False, "not a prefix"),
    Case(SubstringFilter("world", "suffix"), "Hello world", 1, True, "suffix"),
    Case(SubstringFilter("lo w", "any"), "Hello world", 1, True, "anywhere"),
    # RepeatedLinesFilter: distinct non-blank lines / non-blank lines, KEEP >= 0.7 (NeMo's meaning).
    Case(RepeatedLinesFilter(), "a\nb\na\na", 2 / 4, False, "two distinct lines of four"),
    Case(RepeatedLinesFilter(), "a\nb\nc", 1.0, True, "all distinct"),
    Case(RepeatedLinesFilter(), "a\n a", 1.0, True, "lines are compared unstripped"),
    Case(RepeatedLinesFilter(), "x\n\n\nx\ny", 2 / 3, False, "blank lines are not lines"),
    Case(RepeatedLinesFilter(), "", 0.0, False, "no lines: 0.0 (NeMo divides by zero)"),
    # RepeatedParagraphsFilter: distinct paragraphs / paragraphs, keep >= 0.7.
    Case(RepeatedParagraphsFilter(), "p1\n\np2\n\np1", 2 / 3, False, "two distinct paragraphs of three"),
    Case(RepeatedParagraphsFilter(), "", 1.0, True, "empty text is one paragraph"),
    # RepeatedLinesByCharFilter: characters of distinct lines / characters of all lines, keep >= 0.8.
    Case(RepeatedLinesByCharFilter(), "abcd\nab\nabcd", 6 / 10, False, "(4 + 2) / (4 + 2 + 4)"),
    Case(RepeatedLinesByCharFilter(), "abcdefghij\nab\nab", 12 / 14, True, "(10 + 2) / (10 + 2 + 2)"),
    Case(RepeatedLinesByCharFilter(), "", 0.0, False, "no lines: 0.0 (NeMo divides by zero)"),
    # RepeatedParagraphsByCharFilter: the same over paragraphs, keep >= 0.8.
    Case(RepeatedParagraphsByCharFilter(), "aaaa\n\nbb\n\naaaa", 6 / 10, False, "(4 + 2) / (4 + 2 + 4)"),
    Case(RepeatedParagraphsByCharFilter(), "\n\n", 0.0, False, "paragraphs without characters: 0.0"),
    # RepeatingTopNGramsFilter: characters of every occurrence of the top n-gram's text / len, keep <= 0.2.
    Case(RepeatingTopNGramsFilter(), "a b a b a b", 9 / 11, False, "'a b' three times, 3 characters each"),
    Case(
        RepeatingTopNGramsFilter(),
        "one two three four five six seven eight nine ten one two",
        14 / 56,
        False,
        "'one two' twice: 14 of 56 characters",
    ),
    Case(RepeatingTopNGramsFilter(n=1), "ab abab ab", 8 / 10, False, "'ab' also counts inside 'abab'"),
    Case(RepeatingTopNGramsFilter(), "the cat sat", 7 / 11, False, "a tie: the first n-gram, 'the cat'"),
    Case(RepeatingTopNGramsFilter(), "word", 1.0, False, "fewer than n words: 1.0"),
    Case(RepeatingTopNGramsFilter(n=1), "abc\x0c", 3 / 4, False, "a trailing form feed is not part of the word"),
    # RepeatingDuplicateNGramsFilter: characters covered by repeated n-grams (+1 per gap) / len, keep <= 0.2.
    Case(RepeatingDuplicateNGramsFilter(), "a b a b", 3 / 7, False, "the second 'a b': 1 + 1 + one gap"),
    Case(RepeatingDuplicateNGramsFilter(), "a b c a b c", 5 / 11, False, "'a b' and 'b c' overlap: a b c"),
    Case(RepeatingDuplicateNGramsFilter(), "x y", 0.0, True, "nothing repeats"),
    Case(RepeatingDuplicateNGramsFilter(), "x", 1.0, False, "fewer than n words: 1.0"),
    # SymbolRatioFilter (curator-slurm's own): non-alphanumeric / non-space characters, keep <= 0.25.
    Case(SymbolRatioFilter(), "ab!!", 0.5, False, "two symbols of four"),
    Case(SymbolRatioFilter(), "日本!", 1 / 3, False, "letters of any script are alphanumeric"),
]


def column(texts: list[str | None], chunks: int = 2) -> pa.ChunkedArray:
    """A text column in several chunks, as a table read from several files would have."""
    step = max(1, -(-len(texts) // chunks))
    parts = [pa.array(texts[i : i + step], pa.string()) for i in range(0, len(texts), step)]
    return pa.chunked_array(parts or [pa.array([], pa.string())], type=pa.string())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{type(c.f).__name__}: {c.rule}")
def test_score_and_decision_match_nemo_definition(case: Case) -> None:
    """The hand-derived score and keep/drop decision, per document and as part of a column (between
    other texts, so a column computation cannot lean on the text being alone)."""
    f = case.f
    assert f.score_document(case.text) == pytest.approx(case.score, abs=1e-12)
    assert f.keep_document(f.score_document(case.text)) is case.keep
    texts = ["Some prose first.", case.text, "\n\n", case.text + " tail"]
    scores = f.score_array(column(texts, chunks=3))
    assert scores.to_pylist()[1] == pytest.approx(case.score, abs=1e-12)
    assert f.keep_array(scores).to_pylist()[1] is case.keep


def test_every_nemo_heuristic_filter_is_covered_and_exported() -> None:
    """Each of NeMo's 23 string and repetition filters is importable from curator_slurm.stages and has
    hand-derived cases above."""
    assert len(NEMO_HEURISTIC_FILTERS) == 23
    covered = {type(c.f).__name__ for c in CASES}
    for name in NEMO_HEURISTIC_FILTERS:
        assert issubclass(getattr(stages_module, name), DocumentFilter)
        assert name in stages_module.__all__
        assert name in covered, f"no hand-derived case for {name}"


#: NeMo Curator's constructor parameters and defaults (its heuristic string.py and repetition.py).
NEMO_SIGNATURES: dict[str, dict[str, Any]] = {
    "NonAlphaNumericFilter": {"max_non_alpha_numeric_to_text_ratio": 0.25},
    "SymbolsToWordsFilter": {"max_symbol_to_word_ratio": 0.1, "lang": "en"},
    "NumbersFilter": {"max_number_to_text_ratio": 0.15},
    "UrlsFilter": {"max_url_to_text_ratio": 0.2, "url_regex": None},
    "BulletsFilter": {"max_bullet_lines_ratio": 0.9},
    "WhiteSpaceFilter": {"max_white_space_ratio": 0.25},
    "ParenthesesFilter": {"max_parentheses_ratio": 0.1},
    "LongWordFilter": {"max_word_length": 1000, "lang": "en"},
    "WordCountFilter": {"min_words": 50, "max_words": 100000, "lang": "en"},
    "BoilerPlateStringFilter": {"remove_if_at_top_or_bottom": True, "max_boilerplate_string_ratio": 0.4},
    "MeanWordLengthFilter": {"min_mean_word_length": 3, "max_mean_word_length": 10, "lang": "en"},
    "PunctuationFilter": {"max_num_sentences_without_endmark_ratio": 0.85},
    "EllipsisFilter": {"max_num_lines_ending_with_ellipsis_ratio": 0.3},
    "CommonEnglishWordsFilter": {"min_num_common_words": 2, "stop_at_false": True},
    "WordsWithoutAlphabetsFilter": {"min_words_with_alphabets": 0.8, "lang": "en"},
    "PornographicUrlsFilter": {"url_regex": None},
    "SubstringFilter": {"substring": inspect.Parameter.empty, "position": inspect.Parameter.empty},
    "RepeatedLinesFilter": {"max_repeated_line_fraction": 0.7},
    "RepeatedParagraphsFilter": {"max_repeated_paragraphs_ratio": 0.7},
    "RepeatedLinesByCharFilter": {"max_repeated_lines_char_ratio": 0.8},
    "RepeatedParagraphsByCharFilter": {"max_repeated_paragraphs_char_ratio": 0.8},
    "RepeatingTopNGramsFilter": {"n": 2, "max_repeating_ngram_ratio": 0.2, "lang": "en"},
    "RepeatingDuplicateNGramsFilter": {"n": 2, "max_repeating_duplicate_ngram_ratio": 0.2, "lang": "en"},
}


@pytest.mark.parametrize("name", NEMO_HEURISTIC_FILTERS)
def test_constructor_parameters_and_defaults_are_nemos(name: str) -> None:
    """Same parameter names, order and defaults as NeMo, so a NeMo pipeline's constructor calls work
    unchanged (positionally too)."""
    params = inspect.signature(getattr(stages_module, name)).parameters
    assert {p: params[p].default for p in params} == NEMO_SIGNATURES[name]
    assert list(params) == list(NEMO_SIGNATURES[name])


def test_stage_names_are_nemos() -> None:
    """The filter names (which name the ScoreFilter stage and its funnel counts) are NeMo's."""
    assert ScoreFilter(NonAlphaNumericFilter()).name == "score_filter[alpha_numeric]"
    assert RepeatingTopNGramsFilter(n=3).name == "repeating_top_3grams"
    assert RepeatingDuplicateNGramsFilter(n=4).name == "repeating_dup_4gram"
    assert UrlsFilter().name == "urls_ratio"


@pytest.mark.parametrize("name", NEMO_HEURISTIC_FILTERS)
def test_every_filter_takes_a_name_of_its_own(name: str) -> None:
    """``with_(name=...)`` and NeMo's ``self._name`` rename any filter, those whose default name comes from
    their parameters (the n-gram filters) too; the original keeps its name."""
    cls = getattr(stages_module, name)
    original = cls("x", "any") if name == "SubstringFilter" else cls()
    default = original.name
    renamed = original.with_(name="mine")
    assert (renamed.name, ScoreFilter(renamed).name, original.name) == ("mine", "score_filter[mine]", default)
    original._name = "nemo_named"
    assert original.name == "nemo_named"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: WordCountFilter(lang="ja"), r"WordCountFilter\(lang='ja'\).*Japanese.*MeCab"),
        (lambda: RepeatingTopNGramsFilter(lang="ja"), r"lang='ja'.*Japanese"),
        (lambda: SubstringFilter("x", "middle"), r"position='middle'.*'prefix', 'suffix' or 'any'"),
        (lambda: RepeatingDuplicateNGramsFilter(n=0), r"n=0.*integer >= 1"),
    ],
)
def test_unsupported_settings_fail_at_construction_naming_the_parameter(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_other_space_separated_languages_split_on_whitespace() -> None:
    """lang is accepted for every language NeMo splits on whitespace, with the same result as English."""
    text = "Das ist ein kurzer Satz"
    assert WordCountFilter(lang="de").score_document(text) == WordCountFilter().score_document(text) == 5


# --- column API == per-document API, on varied text ------------------------------------------------------------

FRAGMENTS = [
    "the", "of", "and", "with", "The", "cat", "a", "b", "x", "123", "4.5", "½", "Ⅻ", "١٢٣", "日本語", "émigré",
    "http://example.com/a?b=1", "https://porn.example/x", "see https://x.org/%41%zz(y)", "http://",
    "•", "● item", "- dash", "...", "…", "[...]", "(...)", "[…]", "-»", "read more", "READ MORE", "Read more..",
    "#", "##", "###", "#a#", "#tag", "{x}", "(y)", "[z]", "⟨a⟩", "privacy policy", "Terms of Use", "lorem ipsum",
    "PRİVACY POLİCY", "end.", "end?", '"q"', "'q'", "🙂", "e\u0301", "zero\u200bwidth", "\u212a", "?", ",",
    " ", "  ", "\n", "\n\n", "\n\n\n", "\t", "\r\n", "\u00a0", "\u3000", "\x0b", "\x1c", "\u2028", "\x85", "\b",
]  # fmt: skip

ALL_FILTERS: list[DocumentFilter] = [
    NonAlphaNumericFilter(),
    SymbolsToWordsFilter(),
    NumbersFilter(),
    UrlsFilter(),
    UrlsFilter(url_regex=r"https?://\S+"),
    BulletsFilter(),
    WhiteSpaceFilter(),
    ParenthesesFilter(),
    LongWordFilter(max_word_length=6),
    WordCountFilter(min_words=3, max_words=20),
    BoilerPlateStringFilter(),
    MeanWordLengthFilter(),
    PunctuationFilter(),
    EllipsisFilter(),
    CommonEnglishWordsFilter(),
    CommonEnglishWordsFilter(min_num_common_words=0),
    CommonEnglishWordsFilter(min_num_common_words=2.5, stop_at_false=True),
    CommonEnglishWordsFilter(stop_at_false=False),
    WordsWithoutAlphabetsFilter(),
    PornographicUrlsFilter(),
    SubstringFilter("the", "any"),
    SubstringFilter("a", "prefix"),
    SubstringFilter(".", "suffix"),
    RepeatedLinesFilter(),
    RepeatedParagraphsFilter(),
    RepeatedLinesByCharFilter(),
    RepeatedParagraphsByCharFilter(),
    RepeatingTopNGramsFilter(),
    RepeatingTopNGramsFilter(n=1),
    RepeatingTopNGramsFilter(n=3),
    RepeatingDuplicateNGramsFilter(),
    RepeatingDuplicateNGramsFilter(n=1),
    RepeatingDuplicateNGramsFilter(n=3),
    SymbolRatioFilter(),
]

documents = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
any_text = st.one_of(documents, st.text(max_size=60), documents.map(lambda d: d + "\n" + d))
columns = st.lists(st.one_of(any_text, st.none()), min_size=1, max_size=12)


def _agree(f: DocumentFilter, texts: list[str | None], chunks: int) -> None:
    scores = f.score_array(column(texts, chunks))
    expected = [f.score_document(t or "") for t in texts]
    assert [float(s) for s in scores.to_pylist()] == pytest.approx(expected, abs=1e-12), f
    assert f.keep_array(scores).to_pylist() == [f.keep_document(s) for s in expected], f


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=columns, chunks=st.integers(1, 3))
def test_column_api_equals_per_document_api(texts: list[str | None], chunks: int) -> None:
    """On arbitrary columns of web-like fragments and arbitrary Unicode (nulls read as empty text), in
    one or several chunks, every filter's score_array/keep_array equal score_document/keep_document."""
    for f in ALL_FILTERS:
        _agree(f, texts, chunks)


@pytest.mark.parametrize("f", ALL_FILTERS, ids=repr)
def test_column_api_on_sliced_large_and_empty_columns(f: DocumentFilter) -> None:
    """A slice of a larger array (non-zero offset), a large_string column, an empty column, a column
    with an empty chunk and an all-null column are scored like their texts."""
    texts = ["• a b a b\n\nthe the", "x http://porn.x/y ...", "", "  ", "日本 ⟨x⟩ 12", "a\na\nb", None, "z"]
    sliced = pa.chunked_array([pa.array(texts, pa.string()).slice(2, 5)])
    assert f.score_array(sliced).to_pylist() == pytest.approx([f.score_document(t or "") for t in texts[2:7]])
    large = pa.chunked_array([pa.array(texts, pa.large_string())])
    assert f.score_array(large).to_pylist() == pytest.approx([f.score_document(t or "") for t in texts])
    assert f.score_array(pa.chunked_array([], pa.string())).to_pylist() == []
    gap = pa.chunked_array([pa.array(texts[:2], pa.string()), pa.array([], pa.string()), pa.array(texts[2:])])
    assert f.score_array(gap).to_pylist() == pytest.approx([f.score_document(t or "") for t in texts])
    nulls = f.score_array(pa.chunked_array([pa.nulls(2)]))
    assert nulls.to_pylist() == pytest.approx([f.score_document("")] * 2)


# --- the stages ------------------------------------------------------------------------------------------------


def batch(texts: list[str]) -> DocumentBatch:
    table = pa.table({"id": list(range(len(texts))), "text": pa.array(texts, pa.string())})
    return DocumentBatch(task_id="b", data=table, metadata={"files": ["/data/web.jsonl"]})


WEB = [
    "Home | News | Sport\nHome | News | Sport\nHome | News | Sport",
    "The cat sat on the mat. It was a good day for the cat and the dog.",
    "• Buy now\n• Buy now\n• Buy now",
    "Read our privacy policy.\n\nTerms of use apply.",
    "",
]


def test_score_then_filter_equals_score_filter() -> None:
    """NeMo's split: Score adds the score column and keeps every row; Filter then keeps exactly the rows
    ScoreFilter keeps, and invert keeps the others."""
    f = RepeatedLinesFilter()
    scored = Score(f, score_field="unique_lines").process(batch(WEB))
    assert scored.data.num_rows == len(WEB)
    assert scored.data.column("unique_lines").to_pylist() == pytest.approx([1 / 3, 1.0, 1 / 3, 1.0, 0.0])
    kept = Filter(f, filter_field="unique_lines").process(scored).data.column("id").to_pylist()
    assert kept == ScoreFilter(f).process(batch(WEB)).data.column("id").to_pylist() == [1, 3]
    dropped = Filter(f, filter_field="unique_lines", invert=True).process(scored).data.column("id").to_pylist()
    assert dropped == [0, 2, 4]
    assert Score(f, "s").name == "score[repeated_lines]" and Filter(f, "s").name == "filter[repeated_lines]"


def test_filter_stage_names_a_missing_score_field() -> None:
    with pytest.raises(Exception, match=r"/data/web.jsonl: no field 'score'.*Set filter_field="):
        Filter(WordCountFilter(), filter_field="score").process(batch(WEB))


def test_score_and_filter_take_functions_as_nemo_does_and_refuse_what_is_not_one() -> None:
    """NeMo's Score and Filter take a plain function (``len``, a lambda) on each value; a class, a stage or a
    value that is not callable is refused when the stage is built, naming the fix."""
    scored = Score(len, score_field="n").process(batch(WEB))
    assert scored.data.column("n").to_pylist() == [len(t) for t in WEB]
    kept = Filter(lambda n: n > 40, filter_field="n").process(scored).data.column("id").to_pylist()
    assert kept == [i for i, t in enumerate(WEB) if len(t) > 40]
    with pytest.raises(TypeError, match="Score needs a DocumentFilter instance or a function, got 3"):
        Score(3, score_field="n")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Filter needs a DocumentFilter instance, got the class WordCountFilter; write"):
        Filter(WordCountFilter, filter_field="n")  # type: ignore[arg-type]


def test_functions_get_the_fields_value_and_lists_apply_in_order_as_in_nemo() -> None:
    """As NeMo's pandas ``apply`` on the column: a function gets each value of its field (never the row); a list
    of functions with one field each applies in order (a later one sees only what the earlier kept)."""
    seen: list[object] = []
    kept = Filter(lambda text: seen.append(text) or True, filter_field="text").process(batch(WEB))
    assert seen == WEB and kept.data.num_rows == len(WEB)
    scored = Score([len, lambda t: t.count(" ")], score_field=["chars", "spaces"]).process(batch(WEB))
    assert scored.data.column("chars").to_pylist() == [len(t) for t in WEB]
    assert scored.data.column("spaces").to_pylist() == [t.count(" ") for t in WEB]
    calls: list[int] = []
    chain = Filter([lambda n: n > 40, lambda s: calls.append(s) or s > 5], filter_field=["chars", "spaces"])
    out = chain.process(scored).data.column("id").to_pylist()
    assert out == [i for i, t in enumerate(WEB) if len(t) > 40 and t.count(" ") > 5]
    assert calls == [t.count(" ") for t in WEB if len(t) > 40], "the second sees only what the first kept"


def test_a_filter_function_that_returns_a_score_fails_naming_it() -> None:
    """NeMo's Filter uses what the function returns as a mask: a number is not one; here the task fails at once
    naming the function and the value, instead of NeMo's pandas KeyError."""
    with pytest.raises(FilterError, match=r"the function <lambda> returned 0\.5 .*return a bool"):
        Filter(lambda text: 0.5, filter_field="text").process(batch(WEB))


def test_score_filter_refuses_a_function_naming_score_and_filter() -> None:
    """NeMo's ScoreFilter calls score_document and keep_document, so a plain function fails it when it runs;
    here it is refused when built, with the stages that take a function."""
    with pytest.raises(TypeError, match=r"got the function <lambda>: use Filter\(<lambda>, filter_field=\.\.\.\)"):
        ScoreFilter(lambda text: len(text) > 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Score\(len, score_field=\.\.\.\)"):
        ScoreFilter([WordCountFilter(), len], score_field=["a", "b"])  # type: ignore[list-item]


class _ImportRecorder:
    """A sys.meta_path finder that finds nothing and records each module the import system searches for."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        self.names.append(name)


def test_scoring_a_batch_searches_for_no_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once every filter has run, scoring another batch imports nothing: no Python scalar reaches
    pyarrow's type inference (which looks for dateutil along sys.path on every call)."""
    stages = [ScoreFilter(f, score_field="s") for f in ALL_FILTERS]
    for stage in stages:
        stage.process(batch(WEB))
    batches = [batch(WEB) for _ in stages]  # building a batch from Python values infers types
    recorder = _ImportRecorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    for stage, b in zip(stages, batches, strict=True):
        stage.process(b)
    assert recorder.names == []


def test_large_columns_encoded_in_blocks_agree_with_per_document() -> None:
    """Past 65536 words (or lines) a column's n-grams are hashed a block of documents at a time; the
    scores still equal the per-document ones, documents at block edges included."""
    rng = random.Random(7)
    vocab = ["the", "cat", "sat", "on", "mat", "a", "b", "x"]
    texts = [
        "\n".join(" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(1, 6)))
        for _ in range(24000)
    ]
    assert sum(len(t.split()) for t in texts) > 3 * 65536
    assert sum(len([line for line in t.split("\n") if line.strip()]) for t in texts) > 65536
    for f in (
        RepeatingTopNGramsFilter(),
        RepeatingDuplicateNGramsFilter(n=3),
        RepeatedLinesFilter(),
        RepeatedLinesByCharFilter(),
    ):
        _agree(f, texts, chunks=1)
