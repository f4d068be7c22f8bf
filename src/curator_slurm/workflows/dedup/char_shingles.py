"""Character n-gram shingles, the sets NeMo Curator's ``char_ngrams`` forms (cuDF's minhash on the raw text),
vectorised over a column with this package's hashes. Design: docs/design.md, section Deduplication."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.workflows.dedup.shingles import (
    DEFAULT_SEED,
    _string_buffers,
    as_string_array,
    fmix64,
    in_slices,
    shingles_of_tokens,
)

#: NeMo Curator's default ``char_ngrams`` (its tutorials use 24; it warns below 20 that ~5 % of the
#: candidate pairs become false positives).
DEFAULT_CHAR_NGRAMS = 24
#: Text per slice: the scratch is about 40 bytes per character (hashes, sums, owners), ~80 MiB at 2 MiB.
_SLICE_BYTES = 2 << 20
#: Mixed into each packed character before the finaliser, so a character's hash is not its bytes.
_CHAR_SALT = np.uint64(0xA0761D6478BD642F)


def _character_hashes(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit hash of each character of a ``large_string`` array, in order, and the document of each."""
    n = len(texts)
    data, starts, lengths = _string_buffers(texts)
    lo, hi = (int(starts[0]), int(starts[-1] + lengths[-1])) if n else (0, 0)
    raw = data[lo:hi]
    lead = np.flatnonzero((raw & 0xC0) != 0x80)
    width = np.diff(np.append(lead, len(raw)))  # bytes of each character (1 to 4 in valid UTF-8)
    padded = np.concatenate([raw, np.zeros(3, np.uint8)])
    packed = padded[lead].astype(np.uint64)
    for k in range(1, 4):
        packed |= np.where(width > k, padded[lead + k].astype(np.uint64) << np.uint64(8 * k), np.uint64(0))
    parents = np.searchsorted(starts - lo, lead, side="right") - 1  # an empty text owns no character
    return fmix64(packed ^ _CHAR_SALT), parents.astype(np.int64, copy=False)


def char_shingle_hashes(
    texts: pa.Array | pa.ChunkedArray | list[str | None],
    width: int = DEFAULT_CHAR_NGRAMS,
    seed: int = DEFAULT_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """Each document's character ``width``-gram shingles (NeMo Curator's ``char_ngrams``, docs/design.md,
    Deduplication), hashed to uint32, in the CSR layout of :func:`.shingles.shingle_hashes`: document i's
    hashes are ``hashes[offsets[i]:offsets[i + 1]]``, in order, repeats kept. Nulls count as empty."""
    if width < 2:
        raise ValueError(f"char_ngrams: must be at least 2 characters (as in NeMo Curator/cuDF), got {width}")
    return in_slices(
        as_string_array(texts),
        _SLICE_BYTES,
        lambda part: shingles_of_tokens(*_character_hashes(part), len(part), width, seed),
    )
