"""One RE2 spelling of Python's whitespace serves the line filters and UrlRemover: it must match exactly
the characters ``str.isspace`` accepts, on every pyarrow the package supports (RE2's own ``\\s`` is ASCII
only, and its Unicode tables come with pyarrow)."""

from __future__ import annotations

import sys

import pyarrow as pa

from curator_slurm.stages import UrlRemover
from curator_slurm.stages.text.compute import RE2_SPACE, match_substring, re2_literal, to_numpy

EVERY_CHARACTER = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


def test_re2_space_is_python_whitespace_on_every_code_point() -> None:
    matched = to_numpy(match_substring(pa.array(EVERY_CHARACTER), f"^[{RE2_SPACE}]$", regex=True))
    differ = [hex(ord(c)) for c, m in zip(EVERY_CHARACTER, matched, strict=True) if bool(m) != c.isspace()]
    assert differ == []


def test_url_remover_stops_at_every_python_whitespace_character() -> None:
    """A URL ends at the first whitespace character Python's ``\\S`` stops at, in the column path too."""
    spaces = [c for c in EVERY_CHARACTER if c.isspace()]
    texts = [f"see http://example.org/a{s}after www.example.org{s}end" for s in spaces]
    column = UrlRemover().modify_array(pa.chunked_array([pa.array(texts)]))
    assert column.to_pylist() == [UrlRemover().modify_document(t) for t in texts]
    assert column.to_pylist() == [f"see {s}after {s}end" for s in spaces]


def test_re2_literal_matches_itself_only() -> None:
    text = r"a.b*c+d?e(f)g[h]i{j}k|l^m$n\o"
    found = match_substring(pa.array([text, "aXb*c+d?e(f)g[h]i{j}k|l^m$n\\o"]), f"^{re2_literal(text)}$", regex=True)
    assert to_numpy(found).tolist() == [True, False]
