"""spaCy's English words of a column, shared by the filters of a pipeline: each document's words are kept from the
last column split, by the document's text, so that a later filter seeing the same documents splits none again."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.chars import utf8
from curator_slurm.stages.text.spacy_words import Words, words

#: The last column's words and, for each of its documents' UTF-8 texts, its row (one column: a batch goes
#: through the filters of a pipeline one after another, each keeping or rewriting some of its documents).
_last: tuple[dict[bytes, int], Words] | None = None


def _keys(texts: pa.Array) -> list[bytes]:
    view = utf8(texts)
    raw, bounds = view.raw, view.offsets.tolist()
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def shared_words(texts: pa.Array) -> Words:
    """:func:`.spacy_words.words` of ``texts``, the words of the documents the last call had (the same text)
    taken from it and only the others split."""
    global _last
    if not isinstance(texts, pa.Array) or texts.null_count:
        return words(texts)
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        return words(texts)
    keys = _keys(texts)
    rows = np.full(len(keys), -1, np.int64)
    if _last is not None:
        index, before = _last
        rows = np.fromiter((index.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
    missing = np.flatnonzero(rows < 0)
    if len(missing) == len(keys) or _last is None:
        found = words(texts)
    else:
        found = before if not len(missing) else _merge(before, words(texts.take(pa.array(missing))))
        rows[missing] = len(before.offsets) - 1 + np.arange(len(missing))
        found = _compact(found.subset(rows))
    _last = ({k: i for i, k in enumerate(keys)}, found)
    return found


def _merge(a: Words, b: Words) -> Words:
    """The documents of ``a`` then those of ``b`` as one :class:`Words`, one id per distinct word."""
    index = {w: i for i, w in enumerate(a.vocab)}
    remap = np.fromiter((index.setdefault(w, len(index)) for w in b.vocab), dtype=np.int64, count=len(b.vocab))
    offsets = np.concatenate([a.offsets, a.offsets[-1] + b.offsets[1:]])
    return Words(offsets, np.concatenate([a.ids, remap[b.ids]]), list(index))


def _compact(w: Words) -> Words:
    """``w`` with the vocabulary entries no word uses left out (the filters look at every entry)."""
    used, ids = np.unique(w.ids, return_inverse=True)
    if len(used) == len(w.vocab):
        return w
    vocab = w.vocab
    return Words(w.offsets, ids.reshape(-1).astype(np.int64), [vocab[i] for i in used.tolist()])


__all__ = ["shared_words"]
