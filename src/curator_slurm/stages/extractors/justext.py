"""jusText, as NeMo Curator runs it: CLD2 names the page's language, jusText classifies its paragraphs with that
language's stop list (jusText's own steps in NeMo's order), and the paragraphs it does not call boilerplate are
the text. NeMo's choices kept: docs/reference.md (``JusTextExtractor``); design: docs/design.md, HTML extraction."""

from __future__ import annotations

from typing import Any, ClassVar

import pyarrow as pa

from curator_slurm import extras
from curator_slurm.stages.extractors.base import HtmlExtractor, Rejected
from curator_slurm.stages.extractors.language import LANGUAGE_FIELDS, detect_language

#: CLD2's names of the languages that jusText calls otherwise (CLD2 name -> jusText's stop-list name).
CLD2_TO_JUSTEXT = {
    "HAITIAN_CREOLE": "Haitian",
    "NORWEGIAN": "Norwegian_Bokmal",
    "NORWEGIAN_N": "Norwegian_Nynorsk",
    "WARAY_PHILIPPINES": "Waray_Waray",
}
#: Languages written without spaces between words: every paragraph is kept (NeMo's is_boilerplate=False).
NON_SPACED_LANGUAGES = frozenset({"THAI", "CHINESE", "JAPANESE", "KOREAN"})
#: Languages jusText has no stop list for, which NeMo adds.
ADDED_LANGUAGES = ("THAI", "CHINESE", "JAPANESE")


def stop_list_names() -> dict[str, str | None]:
    """CLD2 language name -> jusText's stop-list name (None: an empty list), for NeMo Curator's default lists:
    jusText's without Latin, and the non-spaced languages jusText lacks (their stop words never change the
    output)."""
    import justext

    back = {v: k for k, v in CLD2_TO_JUSTEXT.items()}
    names: dict[str, str | None] = {back.get(name, name.upper()): name for name in justext.get_stoplists()}
    names.pop("LATIN", None)
    names.update({name: None for name in ADDED_LANGUAGES})
    return names


def stop_lists() -> dict[str, frozenset[str]]:
    """NeMo Curator's default stop lists keyed by CLD2 language name (:func:`stop_list_names`), all loaded."""
    import justext

    return {k: justext.get_stoplist(v) if v else frozenset() for k, v in stop_list_names().items()}


def classify(justext: Any, html: str, stop_list: frozenset[str], options: Any) -> list[Any]:
    """jusText's paragraphs of ``html``, classified as NeMo Curator does it: jusText's own steps (DOM,
    preprocessor, paragraphs, context-free classes, context-sensitive revision), with the context-free classes
    copied to the final ones *before* the revision. ``justext.justext`` copies them inside the revision's first
    loop, so a heading looks ahead at paragraphs not yet copied and never becomes near-good there: NeMo's
    order keeps such headings and the short paragraphs next to them."""
    import lxml.sax

    core = justext.core
    dom = core.preprocessor(core.html_to_dom(html))
    handler = core.ParagraphMaker()
    lxml.sax.saxify(dom, handler)
    paragraphs = handler.paragraphs
    core.classify_paragraphs(
        paragraphs,
        stop_list,
        options.length_low,
        options.length_high,
        options.stopwords_low,
        options.stopwords_high,
        options.max_link_density,
        options.no_headings,
    )
    for paragraph in paragraphs:
        paragraph.class_type = paragraph.cf_class
    core.revise_paragraph_classification(paragraphs, options.max_heading_distance)
    return paragraphs


class JusTextExtractor(HtmlExtractor):
    """jusText with NeMo Curator's defaults and per-language stop lists (docs/reference.md,
    ``JusTextExtractor``). Adds the field ``language`` (CLD2's name).

    Args:
        length_low: jusText's ``length_low`` (characters of a short paragraph).
        length_high: jusText's ``length_high`` (characters of a long paragraph).
        stopwords_low: jusText's ``stopwords_low`` (share of stop words).
        stopwords_high: jusText's ``stopwords_high``.
        max_link_density: jusText's ``max_link_density``.
        max_heading_distance: jusText's ``max_heading_distance`` (characters).
        no_headings: jusText's ``no_headings``.
        is_boilerplate: None keeps NeMo's rule (drop boilerplate except in languages written without spaces);
            True drops boilerplate in every language, False keeps every paragraph.
        stop_lists: replaces the default lists (CLD2 name -> words).
        **kwargs: :class:`~.base.HtmlExtractor`'s.
    """

    library = "justext"
    extra_fields: ClassVar[dict[str, pa.DataType]] = LANGUAGE_FIELDS

    def __init__(
        self,
        length_low: int = 70,
        length_high: int = 200,
        stopwords_low: float = 0.30,
        stopwords_high: float = 0.32,
        max_link_density: float = 0.2,
        max_heading_distance: int = 200,
        no_headings: bool = False,
        is_boilerplate: bool | None = None,
        stop_lists: dict[str, frozenset[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        extras.require("pycld2", type(self).__name__, "web")
        self.length_low = length_low
        self.length_high = length_high
        self.stopwords_low = stopwords_low
        self.stopwords_high = stopwords_high
        self.max_link_density = max_link_density
        self.max_heading_distance = max_heading_distance
        self.no_headings = no_headings
        self.is_boilerplate = is_boilerplate
        self.stop_lists = {k: frozenset(v) for k, v in stop_lists.items()} if stop_lists is not None else None
        self._lists: dict[str, frozenset[str]] = {}  # the default lists, each loaded when first needed
        self._names: dict[str, str | None] | None = None

    def extract(self, html: str) -> tuple[str, dict[str, Any]] | Rejected | None:
        language = detect_language(html)
        words = self._stop_list(language)
        if words is None:
            return Rejected(f"no stop list for language {language}")
        paragraphs = classify(self._module, html, words, self)
        drop = self.is_boilerplate if self.is_boilerplate is not None else language not in NON_SPACED_LANGUAGES
        text = "\n\n".join(p.text for p in paragraphs if not (drop and p.is_boilerplate))
        return (text, {"language": language}) if text else None

    def _stop_list(self, language: str) -> frozenset[str] | None:
        """The stop list for ``language`` (CLD2's name), None when there is none. The defaults are read when
        a page first needs them: loading jusText's 100 lists at once costs a worker about half a second."""
        if self.stop_lists is not None:
            return self.stop_lists.get(language)
        if language not in self._lists:
            if self._names is None:
                self._names = stop_list_names()
            if language not in self._names:
                return None
            name = self._names[language]
            self._lists[language] = self._module.get_stoplist(name) if name else frozenset()
        return self._lists[language]
