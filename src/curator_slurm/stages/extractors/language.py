"""The language of a web page as NeMo Curator's HTML extraction names it: CLD2's first guess on the whole decoded
page (markup included), upper-cased (``ENGLISH``): jusText's ``language`` field (it needs the language for its stop
list), and Trafilatura's and Resiliparse's with ``add_language=True``, which NeMo's ``CommonCrawlHTMLExtractor``
sets for every algorithm (datatrove's extractors, which this project's follow by default, add none)."""

from __future__ import annotations

import unicodedata
from typing import Any

import pyarrow as pa

from curator_slurm import extras

#: The field every HTML extractor adds beside the text, and its type.
LANGUAGE_FIELDS: dict[str, pa.DataType] = {"language": pa.string()}


def detect_language(html: str) -> str:
    """CLD2's first guess for ``html``, upper-cased (``ENGLISH``, ``NORWEGIAN``, ``Unknown`` -> ``UNKNOWN``);
    CLD2 refuses some control characters: they are dropped and CLD2 asked again, as NeMo does."""
    import pycld2

    try:
        details = pycld2.detect(html)[2]
    except pycld2.error:
        details = pycld2.detect("".join(c for c in html if unicodedata.category(c)[0] != "C"))[2]
    return details[0][0].upper()


class PageLanguage:
    """Mixin of an extractor whose library gives the text only: with ``add_language`` (set by
    :meth:`language_on`), :meth:`with_language` adds the page's language (detected only for a page that has text,
    which is all the output keeps), declared by :meth:`added_fields` so a pipeline knows it when it is built."""

    add_language: bool = False

    def added_fields(self) -> dict[str, pa.DataType]:
        return LANGUAGE_FIELDS if self.add_language else {}

    def language_on(self, add_language: bool) -> None:
        """Add the ``language`` field (CLD2, the ``web`` extra) or not."""
        if add_language:
            extras.require("pycld2", type(self).__name__, "web")
        self.add_language = bool(add_language)

    def with_language(self, text: str | None, html: str) -> str | tuple[str, dict[str, Any]] | None:
        if not text:
            return None
        return (text, {"language": detect_language(html)}) if self.add_language else text
