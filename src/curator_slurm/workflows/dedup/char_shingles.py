"""Character n-gram shingles, as NeMo Curator forms them (``char_ngrams``), vectorised over a column.

NeMo Curator's fuzzy dedup (``FuzzyDeduplicationWorkflow(char_ngrams=24)``, its tutorial's setting) hashes
its documents with cuDF's ``str.minhash(width=char_ngrams)``, whose kernel (libcudf ``nvtext::minhash``)
takes, on the **raw text** (no normalisation, case and whitespace kept):

- one substring of ``width`` **characters** (Unicode code points, not bytes) starting at every character,
  none running past the end: a text of L >= width characters has ``L - width + 1`` shingles;
- a text shorter than ``width`` characters (but not empty) as one shingle, the whole text;
- an empty text: no shingle (all empty texts share one signature and group together, as here).

This module forms the same shingle sets (a test checks them against that rule on every kind of text, and
the rule reproduces the minhash values of cuDF's own test suite). The hashes are this package's (each
character's UTF-8 bytes packed into an integer and mixed, windows combined as word shingles are, 32-bit
results: :func:`.shingles.shingles_of_tokens`), not cuDF's MurmurHash3, so signatures differ from NeMo's
while the sets, and thus the Jaccard similarities MinHash estimates, are the same.

How, with no loop per character: a text's characters start at its bytes that are not UTF-8 continuation
bytes (``b & 0xC0 != 0x80``); each character's up to four bytes are packed into one integer (a bijection,
so distinct characters never collide) and mixed with the murmur3 finaliser; the n-gram windows are then
``width`` shifted adds over the flat array, masked at document boundaries, exactly as for words.
"""

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
    """Each document's character ``width``-gram shingles (NeMo Curator's ``char_ngrams``, see the module
    docstring), hashed to uint32, in the CSR layout of :func:`.shingles.shingle_hashes`: document i's
    hashes are ``hashes[offsets[i]:offsets[i + 1]]``, in order, repeats kept. Nulls count as empty."""
    if width < 2:
        raise ValueError(f"char_ngrams: must be at least 2 characters (as in NeMo Curator/cuDF), got {width}")
    return in_slices(
        as_string_array(texts),
        _SLICE_BYTES,
        lambda part: shingles_of_tokens(*_character_hashes(part), len(part), width, seed),
    )
