"""The language of a web page as NeMo Curator's HTML extraction names it: CLD2's first guess on the whole decoded
page (markup included), upper-cased (``ENGLISH``), every extractor's ``language`` field."""

from __future__ import annotations

import unicodedata
from typing import Any, ClassVar

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
    """Mixin of an extractor whose library gives the text only: :meth:`with_language` adds the page's language
    (detected only for a page that has text, which is all the output keeps)."""

    extra_fields: ClassVar[dict[str, pa.DataType]] = LANGUAGE_FIELDS

    @staticmethod
    def require_cld2(owner: str) -> None:
        extras.require("pycld2", owner, "web")

    @staticmethod
    def with_language(text: str | None, html: str) -> tuple[str, dict[str, Any]] | None:
        return (text, {"language": detect_language(html)}) if text else None
