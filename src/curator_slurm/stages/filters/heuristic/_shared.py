"""What the heuristic filter families share: the cutoff base classes and NeMo's "sentences" (the ratio, with
NeMo's value for texts it cannot score, is :func:`curator_slurm.stages.text.counts.ratio`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.base import DocumentFilter, between
from curator_slurm.stages.text.counts import ratio

__all__ = ["MaxRatio", "MinRatio", "python_scores", "ratio", "sentences"]


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


def own_name(f: DocumentFilter) -> str | None:
    """The name an instance set itself (``with_(name=...)``, or NeMo's ``self._name``), if any: for a filter
    whose default name is computed from its parameters, as :attr:`DocumentFilter.name` does for the rest."""
    own = f.__dict__.get("name") or f.__dict__.get("_name")
    return own if isinstance(own, str) and own else None
