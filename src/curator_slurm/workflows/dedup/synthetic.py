"""A generated corpus with planted near-duplicates, for fuzzy-dedup tests and benchmarks: the same on any machine
for the same arguments. Design: docs/design.md, section Deduplication."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from curator_slurm.workflows.dedup.minhash import DEFAULT_NGRAM, exact_jaccard, shingle_hashes

__all__ = ["DedupScore", "NearDuplicateCorpus", "near_duplicate_corpus", "score_groups"]

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "su",
    "ta",
    "ri",
    "po",
    "an",
    "el",
    "or",
    "us",
    "ba",
    "de",
    "fi",
    "go",
    "he",
    "ju",
]
_PUNCT = [".", ".", ".", "!", "?", ";"]


@dataclass(frozen=True)
class NearDuplicateCorpus:
    """Texts and the truth about them. ``originals[i]`` and ``copies[i]`` (indices into ``texts``) are a
    planted pair; ``edit_fractions[i]`` is the share of the original's words that copy i edits. Copies
    of one original are near-duplicates of each other too, but only (original, copy) pairs are scored.
    ``unrelated`` lists the documents that are neither an original nor a copy."""

    texts: list[str]
    originals: np.ndarray
    copies: np.ndarray
    edit_fractions: np.ndarray
    unrelated: np.ndarray
    seed: int

    def pair_jaccard(self, ngram: int = DEFAULT_NGRAM) -> np.ndarray:
        """The exact Jaccard similarity of each planted pair's normalised word ``ngram``-shingle sets."""
        offsets, hashes = shingle_hashes(self.texts, ngram=ngram)
        return exact_jaccard(offsets, hashes, self.originals, self.copies)


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _render(rng: random.Random, words: list[str]) -> str:
    """Words as prose: sentences of 4-20 words, capitalised, each ended by a punctuation mark, some
    commas, now and then a word in capitals. Normalisation removes all of it."""
    out: list[str] = []
    i = 0
    while i < len(words):
        n = rng.randint(4, 20)
        sentence = words[i : i + n]
        i += n
        parts = []
        for j, w in enumerate(sentence):
            if j == 0:
                w = w[:1].upper() + w[1:]
            elif rng.random() < 0.02:
                w = w.upper()
            if j < len(sentence) - 1 and rng.random() < 0.06:
                w += ","
            parts.append(w)
        out.append(" ".join(parts) + rng.choice(_PUNCT))
    return " ".join(out)


def _edit(rng: random.Random, words: list[str], fraction: float, draw: Callable[[], str]) -> list[str]:
    """``words`` with ``round(fraction * len(words))`` edits at random places: 60 % substitutions, 20 %
    deletions, 20 % insertions of a word drawn from the vocabulary."""
    out = list(words)
    for _ in range(round(fraction * len(words))):
        kind = rng.random()
        at = rng.randrange(len(out))
        if kind < 0.6:
            out[at] = draw()
        elif kind < 0.8 and len(out) > 1:
            del out[at]
        else:
            out.insert(at, draw())
    return out


def near_duplicate_corpus(
    unrelated: int = 2000,
    originals: int = 500,
    copies: tuple[int, int] = (1, 2),
    words: int = 250,
    edit_range: tuple[float, float] = (0.0, 0.08),
    vocabulary: int = 20_000,
    seed: int = 0,
) -> NearDuplicateCorpus:
    """A shuffled corpus of ``unrelated`` independent documents plus ``originals`` documents that each
    have ``copies[0]``..``copies[1]`` edited copies; each document has ``words // 2``..``3 * words // 2``
    words (mean ``words``). Each copy's edit fraction is uniform over ``edit_range``.

    How edits relate to Jaccard with 5-word shingles: one edited word breaks up to 5 shingles, so an
    edit fraction e leaves about (1 - e)^5 of them and J ~ (1 - e)^5 / (2 - (1 - e)^5): J ~ 0.9 at 1 %,
    0.8 at 2.3 %, 0.6 at 5 %, 0.4 at 10 %. The default range gives pairs on both sides of 0.8.
    """
    if unrelated < 0 or originals < 0 or not 1 <= copies[0] <= copies[1]:
        raise ValueError(
            f"unrelated={unrelated}, originals={originals}, copies={copies}: need counts >= 0, 1 <= min <= max"
        )
    if not 0.0 <= edit_range[0] <= edit_range[1] < 1.0:
        raise ValueError(f"edit_range={edit_range}: need 0 <= low <= high < 1")
    rng = random.Random(seed)
    vocab = _vocabulary(rng, vocabulary)
    cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))  # Zipf, exponent 1

    def draw() -> str:
        return rng.choices(vocab, cum_weights=cum, k=1)[0]

    def document() -> list[str]:
        return rng.choices(vocab, cum_weights=cum, k=rng.randint(max(1, words // 2), max(1, 3 * words // 2)))

    # (kind, words, original slot, edit fraction) before shuffling; kind 0 unrelated, 1 original, 2 copy
    docs: list[tuple[int, list[str], int, float]] = [(0, document(), -1, 0.0) for _ in range(unrelated)]
    for slot in range(originals):
        base = document()
        docs.append((1, base, slot, 0.0))
        for _ in range(rng.randint(*copies)):
            fraction = rng.uniform(*edit_range)
            docs.append((2, _edit(rng, base, fraction, draw), slot, fraction))
    rng.shuffle(docs)

    texts = [_render(rng, w) for _, w, _, _ in docs]
    original_at = {slot: i for i, (kind, _, slot, _) in enumerate(docs) if kind == 1}
    pairs = [(original_at[slot], i, f) for i, (kind, _, slot, f) in enumerate(docs) if kind == 2]
    return NearDuplicateCorpus(
        texts=texts,
        originals=np.array([p[0] for p in pairs], dtype=np.int64),
        copies=np.array([p[1] for p in pairs], dtype=np.int64),
        edit_fractions=np.array([p[2] for p in pairs], dtype=np.float64),
        unrelated=np.array([i for i, d in enumerate(docs) if d[0] == 0], dtype=np.int64),
        seed=seed,
    )


@dataclass(frozen=True)
class DedupScore:
    """How a grouping of the corpus did: ``recall`` of the planted pairs at Jaccard >= ``threshold``
    (both ends in one group), over ``pairs_at_threshold`` such pairs; ``unrelated_removed``, the share of
    unrelated documents that are not their group's survivor (``removed_unrelated`` of ``unrelated``)."""

    threshold: float
    pairs_at_threshold: int
    found: int
    unrelated: int
    removed_unrelated: int

    @property
    def recall(self) -> float:
        return self.found / self.pairs_at_threshold if self.pairs_at_threshold else 1.0

    @property
    def unrelated_removed(self) -> float:
        return self.removed_unrelated / self.unrelated if self.unrelated else 0.0

    def __str__(self) -> str:
        return (
            f"recall {self.recall:.4f} ({self.found}/{self.pairs_at_threshold} planted pairs at Jaccard >= "
            f"{self.threshold}), unrelated removed {100 * self.unrelated_removed:.3f} % "
            f"({self.removed_unrelated}/{self.unrelated})"
        )


def score_groups(
    corpus: NearDuplicateCorpus, group_of: np.ndarray, jaccard: np.ndarray, threshold: float = 0.8
) -> DedupScore:
    """Score a dedup result given as ``group_of[i]``, the survivor (any group label whose survivor is the
    document itself) of document i, for every document index: i is removed when ``group_of[i] != i``.
    ``jaccard`` is :meth:`NearDuplicateCorpus.pair_jaccard` (computed once by the caller: it is the
    slow part)."""
    group_of = np.asarray(group_of)
    if len(group_of) != len(corpus.texts):
        raise ValueError(f"group_of: {len(group_of)} entries for {len(corpus.texts)} documents")
    at = np.asarray(jaccard) >= threshold
    same = group_of[corpus.originals[at]] == group_of[corpus.copies[at]]
    removed = group_of[corpus.unrelated] != corpus.unrelated
    return DedupScore(threshold, int(at.sum()), int(same.sum()), len(corpus.unrelated), int(removed.sum()))
