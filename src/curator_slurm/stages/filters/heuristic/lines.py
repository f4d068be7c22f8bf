"""NeMo Curator's line and paragraph filters (bullet lines, lines without an end mark, lines ending in an ellipsis,
boilerplate paragraphs), with its names, parameters, defaults and decisions. Design: docs/design.md, Filters."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.heuristic._shared import MaxRatio, python_scores, ratio, sentences
from curator_slurm.stages.text import chars as _chars
from curator_slurm.stages.text import pieces as _pieces
from curator_slurm.stages.text.compute import RE2_SPACE, call, match_substring, re2_literal, to_numpy
from curator_slurm.stages.text.constants import BULLETS, ELLIPSIS_MARKS, END_MARKS, POLICY_SUBSTRINGS

_BULLET_START = f"^[{RE2_SPACE}]*[{''.join(BULLETS)}]"


class BulletsFilter(MaxRatio):
    """Keep documents in which at most ``max_bullet_lines_ratio`` of the non-blank lines start (after
    leading space) with a bullet character (• ‣ ⁃ ⁌ ⁍ ∙ ○ ● ◘ ◦ ⦾ ⦿; not ``-`` or ``*``). Text without
    non-blank lines scores 1.0 (NeMo divides by zero)."""  # noqa: RUF002

    name = "bullet_ratio"
    _cutoff_name = "max_bullet_lines_ratio"

    def __init__(self, max_bullet_lines_ratio: float = 0.9) -> None:
        self.max_bullet_lines_ratio = max_bullet_lines_ratio

    def score_document(self, text: str) -> float:
        lines = sentences(text)
        return sum(1 for s in lines if s.strip().startswith(BULLETS)) / len(lines) if lines else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            lines = _pieces.lines(chunk)
            bullets = np.zeros(len(chunk), np.int64)
            # Only lines of documents that contain a bullet character at all need the regex.
            rows = np.flatnonzero(to_numpy(match_substring(chunk, f"[{''.join(BULLETS)}]", regex=True)))
            if len(rows):
                in_rows = np.isin(lines.doc, rows)
                some = call("filter", lines.values, pa.array(in_rows))
                starts = to_numpy(match_substring(some, _BULLET_START, regex=True))
                bullets = np.bincount(lines.doc[in_rows][starts], minlength=len(chunk))
            return ratio(bullets, lines.counts, 1.0)

        return _chars.per_chunk(texts, score, pa.float64())


_ENDS_WITH_MARK = f"[.?!\"'][{RE2_SPACE}]*\\z"


class PunctuationFilter(MaxRatio):
    """Keep documents in which at most ``max_num_sentences_without_endmark_ratio`` of the non-blank
    lines do not end (after trailing space) with ``. ? ! " '``. Text without non-blank lines scores
    1.0 (NeMo divides by zero)."""

    name = "punctuation"
    _cutoff_name = "max_num_sentences_without_endmark_ratio"

    def __init__(self, max_num_sentences_without_endmark_ratio: float = 0.85) -> None:
        self.max_num_sentences_without_endmark_ratio = max_num_sentences_without_endmark_ratio

    def score_document(self, text: str) -> float:
        lines = sentences(text)
        return sum(1 for s in lines if not s.strip().endswith(END_MARKS)) / len(lines) if lines else 1.0

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            lines = _pieces.lines(chunk)
            marked = to_numpy(match_substring(lines.values, _ENDS_WITH_MARK, regex=True))
            return ratio(lines.per_doc(~marked), lines.counts, 1.0)

        return _chars.per_chunk(texts, score, pa.float64())


_ENDS_WITH_ELLIPSIS = (
    "(?:" + "|".join(re2_literal(m).replace("read more", "(?i:read more)") for m in ELLIPSIS_MARKS) + ")"
    f"[{RE2_SPACE}]*\\z"
)


class EllipsisFilter(MaxRatio):
    """Keep documents in which at most ``max_num_lines_ending_with_ellipsis_ratio`` of the non-blank
    lines end (after trailing space, case-insensitively) with ``...``, ``…``, ``[...]``, ``(...)``,
    ``[…]``, ``-»`` or ``read more``. Text without non-blank lines scores 1.0 (NeMo divides by zero)."""

    name = "ellipsis"
    _cutoff_name = "max_num_lines_ending_with_ellipsis_ratio"

    def __init__(self, max_num_lines_ending_with_ellipsis_ratio: float = 0.3) -> None:
        self.max_num_lines_ending_with_ellipsis_ratio = max_num_lines_ending_with_ellipsis_ratio

    def score_document(self, text: str) -> float:
        lines = sentences(text)
        if not lines:
            return 1.0
        return sum(1 for s in lines if s.strip().lower().endswith(ELLIPSIS_MARKS)) / len(lines)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            lines = _pieces.lines(chunk)
            ending = to_numpy(match_substring(lines.values, _ENDS_WITH_ELLIPSIS, regex=True))
            return ratio(lines.per_doc(ending), lines.counts, 1.0)

        return _chars.per_chunk(texts, score, pa.float64())


_POLICY = "|".join(re2_literal(p) for p in POLICY_SUBSTRINGS)
#: Every policy phrase contains one of these words; RE2's case folding matches at least what Python's
#: lower() does (the Kelvin sign as k, too).
_BOILERPLATE_WORDS = "(?i)terms of use|privacy|cookie|lorem ipsum"
assert all(any(w in p for w in ("terms of use", "privacy", "cookie")) for p in POLICY_SUBSTRINGS)


class BoilerPlateStringFilter(MaxRatio):
    """Keep documents in which at most ``max_boilerplate_string_ratio`` of the paragraphs
    (``text.split("\\n\\n")``) contain, lower-cased, a policy phrase ("terms of use", "privacy
    policy", "uses cookies", ...); a document with "lorem ipsum" anywhere scores 1.0. NeMo accepts
    ``remove_if_at_top_or_bottom`` but its score does not use it; neither does this one."""

    name = "boilerplate_string_ratio"
    _cutoff_name = "max_boilerplate_string_ratio"

    def __init__(self, remove_if_at_top_or_bottom: bool = True, max_boilerplate_string_ratio: float = 0.4) -> None:
        self.remove_if_at_top_or_bottom = remove_if_at_top_or_bottom
        self.max_boilerplate_string_ratio = max_boilerplate_string_ratio

    def score_document(self, text: str) -> float:
        paragraphs = [p.strip().lower() for p in text.split("\n\n")]
        if any("lorem ipsum" in p for p in paragraphs):
            return 1.0
        return sum(1 for p in paragraphs if any(s in p for s in POLICY_SUBSTRINGS)) / len(paragraphs)

    def score_array(self, texts: pa.ChunkedArray) -> pa.ChunkedArray:
        def score(chunk: pa.Array) -> np.ndarray:
            out = np.zeros(len(chunk), np.float64)
            # Only a text containing one of these words, in any case, can score above 0.
            rows = np.flatnonzero(to_numpy(match_substring(chunk, _BOILERPLATE_WORDS, regex=True)))
            if len(rows) == 0:
                return out
            some = chunk.take(pa.array(rows))
            lowered = call("utf8_lower", some)
            paragraphs = _pieces.paragraphs(lowered)
            policy = to_numpy(match_substring(paragraphs.values, _POLICY, regex=True))
            scores = paragraphs.per_doc(policy) / paragraphs.counts  # every text has a paragraph
            scores[to_numpy(match_substring(lowered, "lorem ipsum"))] = 1.0
            out[rows] = scores
            # Python lower-cases U+0130 (İ) to "i" + U+0307, Arrow to "i": score those texts in Python.
            python_scores(self, chunk, np.flatnonzero(to_numpy(match_substring(chunk, "\u0130"))), out)
            return out

        return _chars.per_chunk(texts, score, pa.float64())


__all__ = ["BoilerPlateStringFilter", "BulletsFilter", "EllipsisFilter", "PunctuationFilter"]
