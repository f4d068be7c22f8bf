"""NeMo Curator's code filters (``nemo_curator.stages.text.filters.heuristic.code``), under its names, parameters
and decisions: comment ratios, line counts, XML headers, letters, HTML boilerplate, per-extension limits."""

from __future__ import annotations

import ast
import csv
import io
import re
import tokenize
import warnings
from functools import cached_property
from typing import Any

from ...extras import load, require
from .base import DocumentFilter

#: NeMo's "alphanumeric" characters of code: ASCII letters and digits, newlines and ``?!,.``.
ALPHANUM = re.compile("[a-zA-Z0-9\n?!,.]")
_DOCSTRING_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef)


def python_docstrings(source: str) -> str | None:
    """The docstrings of a Python module, its classes and functions (module first, then classes, then
    functions, each group in the order NeMo sorts it), joined by newlines; None if it does not parse."""
    try:
        tree = ast.parse(source)
    except Exception:
        warnings.warn("code couldn't be parsed due to compilation failure, no docstring is extracted", stacklevel=3)
        return None
    order = {ast.ClassDef: 0, ast.FunctionDef: 1, ast.Module: 2}  # NeMo sorts by these names: Class, Function, Module
    found = [
        (order[type(node)], getattr(node, "name", None) or "", ast.get_docstring(node))
        for node in ast.walk(tree)
        if isinstance(node, _DOCSTRING_NODES) and type(node) in order
    ]
    return "\n".join(doc for _, _, doc in sorted(found, key=lambda x: (x[0], x[1])) if doc)


def python_comments(source: str) -> str | None:
    """The ``#`` comments of Python source, as ``tokenize.untokenize`` joins them; None if it does not tokenize."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return tokenize.untokenize([(t.type, t.string) for t in tokens if t.type == tokenize.COMMENT])
    except Exception:
        warnings.warn("tokenization error, no comment is extracted", stacklevel=3)
        return None


class PythonCommentToCodeFilter(DocumentFilter):
    """Keep Python files whose comments and docstrings are between ``min_comment_to_code_ratio`` and
    ``max_comment_to_code_ratio`` of their characters (a file that does not parse scores 0).

    Args:
        min_comment_to_code_ratio: the lowest ratio kept.
        max_comment_to_code_ratio: the highest ratio kept.
    """

    name = "python_comment_ratio"

    def __init__(self, min_comment_to_code_ratio: float = 0.01, max_comment_to_code_ratio: float = 0.85) -> None:
        self.min_comment_to_code_ratio = min_comment_to_code_ratio
        self.max_comment_to_code_ratio = max_comment_to_code_ratio

    def score_document(self, source: str) -> float:
        if not source:  # an empty (or null) document: no code to weigh (NeMo divides by zero)
            return 0
        docstrings, comments = python_docstrings(source), python_comments(source)
        if docstrings is None or comments is None:
            return 0
        return (len(comments) + len(docstrings)) / len(source)

    def keep_document(self, score: float) -> bool:
        return self.min_comment_to_code_ratio <= score <= self.max_comment_to_code_ratio


class GeneralCommentToCodeFilter(DocumentFilter):
    """Keep source files (of the MIME type ``language``, e.g. ``"text/x-c++"``) whose comments' text is between
    the two ratios of their characters, as the ``comment_parser`` package (the ``code`` extra) finds them; a file
    it cannot parse scores 9999 (dropped).

    Args:
        language: the MIME type of the language.
        min_comment_to_code_ratio: the lowest ratio kept.
        max_comment_to_code_ratio: the highest ratio kept.
    """

    name = "comment_ratio"
    fingerprint_exclude = frozenset({"_parser"})

    def __init__(
        self, language: str, min_comment_to_code_ratio: float = 0.01, max_comment_to_code_ratio: float = 0.85
    ) -> None:
        require("comment_parser", "GeneralCommentToCodeFilter", "code")
        self.language = language
        self.min_comment_to_code_ratio = min_comment_to_code_ratio
        self.max_comment_to_code_ratio = max_comment_to_code_ratio

    def score_document(self, source: str) -> float:
        if not source:
            return 0
        try:
            comments = " ".join(c.text() for c in self._parser.extract_comments_from_str(source, mime=self.language))
        except Exception:
            warnings.warn("tokenization error, no comment is extracted", stacklevel=2)
            return 9999
        return len(comments) / len(source)

    def keep_document(self, score: float) -> bool:
        return self.min_comment_to_code_ratio <= score <= self.max_comment_to_code_ratio

    @cached_property
    def _parser(self) -> Any:
        return load("comment_parser.comment_parser", "GeneralCommentToCodeFilter", "code")


class NumberOfLinesOfCodeFilter(DocumentFilter):
    """Keep files of ``min_lines`` to ``max_lines`` lines (newlines plus one).

    Args:
        min_lines: the fewest lines kept.
        max_lines: the most lines kept.
    """

    name = "num_lines"

    def __init__(self, min_lines: int = 10, max_lines: int = 20000) -> None:
        self.min_lines = min_lines
        self.max_lines = max_lines

    def score_document(self, source: str) -> int:
        return source.count("\n") + 1

    def keep_document(self, score: float) -> bool:
        return self.min_lines <= score <= self.max_lines


class TokenizerFertilityFilter(DocumentFilter):
    """Keep files with at least ``min_char_to_token_ratio`` characters per SentencePiece token (the ``code``
    extra); a file with no token scores -1.

    Args:
        path_to_tokenizer: a SentencePiece model file (required).
        min_char_to_token_ratio: the lowest ratio kept.
    """

    name = "tokenizer_fertility"
    fingerprint_exclude = frozenset({"_tokenizer"})

    def __init__(self, path_to_tokenizer: str | None = None, min_char_to_token_ratio: float = 2.5) -> None:
        if path_to_tokenizer is None:
            raise ValueError("Must provide a valid path to a SentencePiece tokenizer")
        require("sentencepiece", "TokenizerFertilityFilter", "code")
        self.path_to_tokenizer = path_to_tokenizer
        self.min_char_to_token_ratio = min_char_to_token_ratio
        self._tokenizer.Load(path_to_tokenizer)  # fails now on a missing or damaged model, not in a task

    @cached_property
    def _tokenizer(self) -> Any:
        return load("sentencepiece", "TokenizerFertilityFilter", "code").SentencePieceProcessor()

    def score_document(self, source: str) -> float:
        tokens = self._tokenizer.encode_as_pieces(source)
        return len(source) / len(tokens) if tokens else -1

    def keep_document(self, score: float) -> bool:
        return score >= self.min_char_to_token_ratio


class XMLHeaderFilter(DocumentFilter):
    """Drop files with ``<?xml version=`` in their first ``char_prefix_search_length`` characters (XML under
    another extension, as StarCoder found).

    Args:
        char_prefix_search_length: how many characters are searched.
    """

    name = "xml_header"

    def __init__(self, char_prefix_search_length: int = 100) -> None:
        self.char_prefix_search_length = char_prefix_search_length

    def score_document(self, source: str) -> int:
        return 1 if "<?xml version=" in source[: self.char_prefix_search_length] else 0

    def keep_document(self, score: float) -> bool:
        return score != 1


class AlphaFilter(DocumentFilter):
    """Keep files of which at least ``min_alpha_ratio`` of the characters are letters (``[[:alpha:]]``; drops
    tensors and tables stored as text, as StarCoder does).

    Args:
        min_alpha_ratio: the lowest share of letters kept.
    """

    name = "alpha_filter"
    fingerprint_exclude = frozenset({"_alpha"})

    def __init__(self, min_alpha_ratio: float = 0.25) -> None:
        require("regex", "AlphaFilter", "code")
        self.min_alpha_ratio = min_alpha_ratio

    def score_document(self, source: str) -> float:
        if not source:
            return 0
        return len(self._alpha.findall(source)) / len(source)

    @cached_property
    def _alpha(self) -> Any:
        return load("regex", "AlphaFilter", "code").compile("[[:alpha:]]")

    def keep_document(self, score: float) -> bool:
        return score >= self.min_alpha_ratio


class HTMLBoilerplateFilter(DocumentFilter):
    """Keep HTML whose visible text (without scripts and styles, by BeautifulSoup: the ``code`` extra) is at
    least ``min_lang_content_ratio`` of its characters; fewer than ``min_lang_content_num_chars`` characters of
    text scores 0.

    Args:
        min_lang_content_ratio: the lowest share of text kept.
        min_lang_content_num_chars: the fewest characters of text that are scored.
    """

    name = "html_boilerplate"
    fingerprint_exclude = frozenset({"_soup"})

    def __init__(self, min_lang_content_ratio: float = 0.2, min_lang_content_num_chars: int = 100) -> None:
        require("bs4", "HTMLBoilerplateFilter", "code")
        self.min_lang_content_ratio = min_lang_content_ratio
        self.min_lang_content_num_chars = min_lang_content_num_chars

    def score_document(self, source: str) -> Any:  # a float, or None for what BeautifulSoup cannot parse
        try:
            soup = self._soup(source, features="html.parser")
        except (TypeError, UnboundLocalError):
            return None
        for element in soup(["script", "style"]):
            element.extract()
        text = soup.get_text()
        if len(text) < self.min_lang_content_num_chars:
            return 0
        return len(text) / len(source)

    def keep_document(self, score: float | None) -> bool:
        return score is not None and score >= self.min_lang_content_ratio

    @cached_property
    def _soup(self) -> Any:
        return load("bs4", "HTMLBoilerplateFilter", "code").BeautifulSoup


def _number(value: str, kind: type) -> Any:
    try:
        return kind(value)
    except ValueError:
        return None


class PerExtensionFilter(DocumentFilter):
    """Limits per (language, extension) read from NeMo's ``code_meta.csv`` (columns ``language``, ``extension``,
    ``Include``, ``Long_line_threshold``, ``Alphanum_threshold``, ``Alpha filter``): a file is kept when its
    extension is included and no line is longer, the mean line no longer than 100, and the shares of
    alphanumeric and alphabetic characters no lower than its row says.

    Args:
        lang: the language (as the data names it: ``C#`` and ``F#`` are read as ``c-sharp``, ``f-sharp``).
        extension: the files' extension.
        metadata_file: the CSV of limits.
    """

    name = "per_extension_filter"

    def __init__(self, lang: str, extension: str, metadata_file: str = "code_meta.csv") -> None:
        self.lang = lang
        self.extension = extension
        self.metadata_file = metadata_file
        self.limits = self._load_filter_csv(metadata_file, lang)

    @staticmethod
    def _load_filter_csv(path: str, language: str | None = None) -> dict[tuple[str, str], tuple[Any, ...]]:
        limits = {}
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if language is None or row["language"] == language:
                    line_max = _number(row["Long_line_threshold"], int)
                    limits[(row["language"], row["extension"])] = (
                        row["Include"] == "1",
                        line_max,
                        100 if line_max else None,
                        _number(row["Alphanum_threshold"], float),
                        _number(row["Alpha filter"], float),
                    )
        if not limits:
            raise ValueError(f"Did not find filtering params corresponding to language: `{language}` in: {path}")
        return limits

    @staticmethod
    def _line_statistics(source: str) -> tuple[int, float]:
        lengths = [len(x) for x in source.split("\n")]
        return max(lengths), (len(source) + 1) / len(lengths) - 1

    def score_document(self, source: str) -> int:
        language = {"C#": "c-sharp", "F#": "f-sharp"}.get(self.lang, self.lang.lower().replace(" ", "-"))
        found = self.limits.get((language, self.extension if self.extension is not None else ""))
        if not source or found is None or not found[0]:  # an extension the CSV does not name (Dockerfiles) is dropped
            return 0
        _, line_max, line_mean, alphanum, alphabetic = found
        longest, mean = self._line_statistics(source)
        if (
            (line_max and longest > line_max)
            or (line_mean and mean > line_mean)
            or (alphanum and len(ALPHANUM.findall(source)) / len(source) < alphanum)
            or (alphabetic and sum(map(str.isalpha, source)) < alphabetic * len(source))
        ):
            return 0
        return 1

    def keep_document(self, score: float | None) -> bool:
        return not (score is None or score == 0)


__all__ = [
    "AlphaFilter",
    "GeneralCommentToCodeFilter",
    "HTMLBoilerplateFilter",
    "NumberOfLinesOfCodeFilter",
    "PerExtensionFilter",
    "PythonCommentToCodeFilter",
    "TokenizerFertilityFilter",
    "XMLHeaderFilter",
]
