"""NeMo Curator's regex and line modifiers: newlines, URLs, whole lines, Markdown emphasis, quotation
marks around a document, slices. The regex and line-based ones change a whole column at once with
Arrow kernels that give exactly NeMo's result; the others run per document, as NeMo does."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa

from curator_slurm.stages.text.compute import RE2_SPACE, call, is_in, replace_regex, split_pattern, to_numpy

from ..._lazy import LazyModule
from .base import DocumentModifier, regex, string_array

_np = LazyModule("numpy")


class NewlineNormalizer(DocumentModifier):
    """Replace 3 or more consecutive newlines by 2 (a paragraph break), and 3 or more ``\\r\\n`` by 2."""

    name = "newline_normalizer"

    def modify_document(self, text: str) -> str:
        return regex(r"(?:\r\n){3,}").sub("\r\n\r\n", regex(r"\n{3,}").sub("\n\n", text))

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        return replace_regex(replace_regex(texts, r"\n{3,}", "\n\n"), r"(?:\r\n){3,}", "\r\n\r\n")


#: NeMo Curator's URL pattern (``https?://\S+|www\.\S+``, case-insensitive), with Python's ``\S``.
_URL = rf"(?i)https?://[^{RE2_SPACE}]+|www\.[^{RE2_SPACE}]+"


class UrlRemover(DocumentModifier):
    """Remove every URL: ``http://`` or ``https://`` or ``www.`` (any case) up to the next whitespace.
    The whitespace around a URL stays."""

    name = "url_remover"

    def modify_document(self, text: str) -> str:
        return regex(r"https?://\S+|www\.\S+", re.IGNORECASE).sub("", text)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        return replace_regex(texts, _URL, "")


class LineRemover(DocumentModifier):
    """Remove the lines (split on ``\\n``) that are exactly one of ``patterns``; no stripping, so a line
    with a trailing space or ``\\r`` does not match."""

    name = "line_remover"

    def __init__(self, patterns: Sequence[str]) -> None:
        if isinstance(patterns, str):
            raise TypeError(f"LineRemover(patterns={patterns!r}): give a list of whole lines, not one string")
        self.patterns = list(patterns)
        self._set = frozenset(self.patterns)

    def modify_document(self, text: str) -> str:
        remove = self._set
        return "\n".join(line for line in text.split("\n") if line not in remove)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array:
        texts = string_array(texts)
        if not self.patterns or len(texts) == 0:
            return texts
        lines = split_pattern(texts, "\n")
        values = lines.flatten()
        keep = call("invert", is_in(values, pa.array(self.patterns)))
        parents = to_numpy(call("list_parent_indices", lines))
        kept = to_numpy(keep)
        counts = _np.bincount(parents[kept], minlength=len(texts))
        offsets = _np.zeros(len(texts) + 1, dtype=_np.int32)
        _np.cumsum(counts, out=offsets[1:])
        joined = call("binary_join", pa.ListArray.from_arrays(pa.array(offsets), call("filter", values, keep)), "\n")
        if texts.null_count:
            joined = call("if_else", call("is_valid", texts), joined, pa.scalar(None, pa.string()))
        return joined


#: NeMo Curator's Markdown patterns, applied in this order: bold, italic, underline, link (kept: the URL).
_MARKDOWN = (
    (r"\*\*(.*?)\*\*", r"\1"),
    (r"\*(.*?)\*", r"\1"),
    (r"_(.*?)_", r"\1"),
    (r"\[.*?\]\((.*?)\)", r"\1"),
)


class MarkdownRemover(DocumentModifier):
    """Remove Markdown emphasis within each line: ``**bold**``, ``*italic*`` and ``_underline_`` keep
    their text; a link ``[text](url)`` becomes its URL (NeMo Curator's meaning). Nothing spans lines."""

    name = "markdown_remover"

    def modify_document(self, text: str) -> str:
        lines = []
        for line in text.split("\n"):
            for pattern, replacement in _MARKDOWN:
                line = regex(pattern).sub(replacement, line)
            lines.append(line)
        return "\n".join(lines)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        # No pattern can match a newline ("." does not), so each applied to the whole text changes each
        # line as the per-line loop does.
        for pattern, replacement in _MARKDOWN:
            texts = replace_regex(texts, pattern, replacement)
        return texts


class QuotationRemover(DocumentModifier):
    """Remove the quotation marks around a whole document: when it is longer than 2 characters
    (stripped), starts and ends with ``"``, and either has one line or its first line does not itself
    end with ``"`` (which would make the marks belong to separate quotes)."""

    name = "quotation_remover"

    def modify_document(self, text: str) -> str:
        quoted = len(text.strip()) > 2 and text[0] == '"' and text[-1] == '"'
        if quoted and ("\n" not in text.strip() or text.split("\n")[0][-1] != '"'):
            return text[1:-1]
        return text


class Slicer(DocumentModifier):
    """Keep a slice of each document.

    ``left``: an index to start at, or a substring to start at the first occurrence of (the document
    becomes empty if it is absent); ``right``: an index to end before, or a substring to end at the last
    occurrence of (empty if absent), None for the end. ``include_left``/``include_right`` keep the
    substrings themselves; ``strip`` strips whitespace from the result.
    """

    name = "slicer"

    def __init__(
        self,
        left: int | str | None = 0,
        right: int | str | None = None,
        include_left: bool = True,
        include_right: bool = True,
        strip: bool = True,
    ) -> None:
        self.left = left
        self.right = right
        self.include_left = include_left
        self.include_right = include_right
        self.strip = strip

    def modify_document(self, text: str) -> str:
        start = 0
        if isinstance(self.left, int):
            start = self.left
        elif isinstance(self.left, str):
            found = text.find(self.left)
            if found == -1:
                return ""
            start = found if self.include_left else found + len(self.left)
        end = len(text)
        if isinstance(self.right, int):
            end = self.right
        elif isinstance(self.right, str):
            found = text.rfind(self.right)
            if found == -1:
                return ""
            end = found + len(self.right) if self.include_right else found
        result = text[start:end]
        return result.strip() if self.strip else result
