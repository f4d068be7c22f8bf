"""Site boilerplate removed by paragraph, as NeMo Curator's ``BoilerPlateStringModifier`` (after C4)
does it."""

from __future__ import annotations

import itertools

from curator_slurm.stages.text.constants import POLICY_SUBSTRINGS

from .base import DocumentModifier


def boilerplate_at_edges_only(indices: list[int], num_paragraphs: int) -> bool:
    """Whether the paragraphs at ``indices`` (ascending) form one run touching the top or the bottom of
    the document, without being all of it: only then can they be cut without cutting the text apart."""
    if not indices or len(indices) == num_paragraphs:
        return False
    contiguous = all(b == a + 1 for a, b in itertools.pairwise(indices))
    return contiguous and (indices[0] == 0 or indices[-1] == num_paragraphs - 1)


class BoilerPlateStringModifier(DocumentModifier):
    """Remove site boilerplate by paragraph (paragraphs are split on ``\\n\\n``), after C4 as NeMo
    Curator adapts it.

    A paragraph containing "lorem ipsum" empties the document. A paragraph containing a policy phrase
    (:data:`POLICY_SUBSTRINGS`: "terms of use", "privacy policy", "uses cookies", ...; case-insensitive)
    empties it too if ``remove_if_at_top_or_bottom`` is False; if True, such paragraphs are removed when
    they form one run at the top or the bottom of the document, and the document is kept unchanged when
    they are elsewhere (or are all of it).
    """

    name = "boilerplate_string"

    def __init__(self, remove_if_at_top_or_bottom: bool = True) -> None:
        self.remove_if_at_top_or_bottom = remove_if_at_top_or_bottom

    def modify_document(self, text: str) -> str:
        paragraphs = text.split("\n\n")
        found: list[int] = []
        for i, paragraph in enumerate(paragraphs):
            lowered = paragraph.strip().lower()
            if "lorem ipsum" in lowered:
                return ""
            if any(p in lowered for p in POLICY_SUBSTRINGS):
                if not self.remove_if_at_top_or_bottom:
                    return ""
                found.append(i)
        if not boilerplate_at_edges_only(found, len(paragraphs)):
            return text
        drop = set(found)
        return "\n\n".join(p for i, p in enumerate(paragraphs) if i not in drop)
