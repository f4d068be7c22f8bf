"""What the heuristic filter families share: the cutoff base classes, the ratio with NeMo's value for
texts it cannot score, NeMo's "sentences" and the language check."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.base import DocumentFilter, between


def check_lang(owner: str, lang: str) -> str:
    """``lang`` if whitespace word splitting is NeMo's for it; a clear error for Chinese and Japanese."""
    if not isinstance(lang, str):
        raise TypeError(f"{owner}(lang={lang!r}): lang is an ISO 639-1 code such as 'en'")
    if lang.lower() in ("zh", "ja"):
        raise ValueError(
            f"{owner}(lang={lang!r}): NeMo Curator splits {'Chinese' if lang.lower() == 'zh' else 'Japanese'} "
            "words with a segmenter (jieba, MeCab); this package splits words on whitespace only, which would "
            "count a whole sentence as one word. Leave lang='en' only for space-separated languages."
        )
    return lang


def ratio(numerator: np.ndarray, denominator: np.ndarray, empty: float) -> np.ndarray:
    """numerator / denominator, and ``empty`` where the denominator is 0."""
    out = np.full(len(denominator), empty, dtype=np.float64)
    ok = denominator > 0
    out[ok] = numerator[ok] / denominator[ok]
    return out


def python_scores(f: DocumentFilter, chunk: pa.Array, rows: np.ndarray, into: np.ndarray) -> None:
    """Score the documents at ``rows`` with ``score_document`` (for the few texts a kernel cannot
    treat exactly like Python does)."""
    if len(rows):
        texts = chunk.take(pa.array(rows)).to_pylist()
        into[rows] = [f.score_document(t) for t in texts]


class MaxRatio(DocumentFilter):
    """A score that must stay at or below a cutoff."""

    _cutoff_name: str

    def keep_document(self, score: float) -> bool:
        return score <= getattr(self, self._cutoff_name)

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, None, getattr(self, self._cutoff_name))


class MinRatio(DocumentFilter):
    """A score that must be at or above a cutoff."""

    _cutoff_name: str

    def keep_document(self, score: float) -> bool:
        return score >= getattr(self, self._cutoff_name)

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return between(scores, getattr(self, self._cutoff_name), None)


def sentences(text: str) -> list[str]:
    """NeMo's sentences of one text: its lines (``split("\\n")``) that are not blank, unstripped."""
    return [line for line in text.split("\n") if line.strip()]
