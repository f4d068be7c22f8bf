"""MinHash signatures and LSH banding for fuzzy deduplication: plain functions over a batch's text column,
vectorised (no Python loop per shingle or document), every hash a fixed function of the bytes and the seed.
Design: docs/design.md, "Deduplication"."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.workflows.dedup.char_shingles import char_shingle_hashes
from curator_slurm.workflows.dedup.shingles import (
    DEFAULT_NGRAM,
    DEFAULT_SEED,
    as_string_array,
    fmix64,
    normalize,
    shingle_hashes,
    splitmix64,
)

__all__ = [
    "DEFAULT_BANDS",
    "DEFAULT_NGRAM",
    "DEFAULT_ROWS",
    "DEFAULT_SEED",
    "EMPTY_SIGNATURE_VALUE",
    "FINEWEB_BANDS",
    "FINEWEB_NGRAM",
    "FINEWEB_ROWS",
    "band_hashes",
    "candidate_edges",
    "candidate_probability",
    "char_shingle_hashes",
    "document_shingles",
    "exact_jaccard",
    "flatten_bands",
    "minhash_signatures",
    "normalize",
    "permutations",
    "shingle_hashes",
    "shingle_sets",
    "signature_similarity",
    "sorted_star_edges",
    "take_sets",
    "text_jaccard",
    "unique_edges",
]

#: LSH bands and rows per band: 20 x 8 = 160 permutations. A pair at Jaccard similarity s becomes a
#: candidate with probability ``1 - (1 - s**8)**20`` (:func:`candidate_probability`): 0.975 at s = 0.8,
#: 0.998 at 0.85, 0.29 at 0.6, 0.075 at 0.5, 0.001 at 0.3. The aim is to *find* pairs at s >= 0.8;
#: NeMo Curator's 20 x 13 centres its S-curve on 0.8 and so misses a third of the pairs at exactly 0.8
#: (p = 0.68), and datatrove's 14 x 8 misses 7.6 % there (p = 0.924). The cost of the lower rise is more
#: candidates between 0.6 and 0.8, which are still near-duplicates and which ``candidate_edges``'s
#: ``threshold`` can drop.
DEFAULT_BANDS = 20
DEFAULT_ROWS = 8
#: FineWeb's configuration (datatrove's ``MinhashConfig`` defaults): 5-word shingles, 14 bands ("buckets")
#: of 8 rows ("hashes per bucket"), 112 permutations; p = 0.924 at s = 0.8, 0.77 at 0.75, 0.05 at 0.5. Pass
#: them as ``FuzzyDuplicates(ngram=FINEWEB_NGRAM, bands=FINEWEB_BANDS, rows=FINEWEB_ROWS)``; the shingles
#: are this package's (its normalisation and hashes), not datatrove's, so the sets differ a little.
FINEWEB_NGRAM = 5
FINEWEB_BANDS = 14
FINEWEB_ROWS = 8
#: The signature of a document with no words after normalisation (every permutation's minimum over an
#: empty set). All such documents share it, so they form one group: their normalised texts are equal.
EMPTY_SIGNATURE_VALUE = np.uint32(0xFFFFFFFF)

_U64 = np.uint64
#: Odd 64-bit multipliers for combining word hashes into shingle hashes and row values into band hashes.
_COMBINE = 0x9E3779B97F4A7C15
_BAND_MULT = _U64(0xBF58476D1CE4E5B9)
#: Shingles per block of ``minhash_signatures``: 2 MiB of uint64 scratch, near a core's cache; 2^16 and
#: 2^20 measured slower (more Python steps; more cache misses).
_BLOCK_SHINGLES = 1 << 18


# ----------------------------------------------------------------------------------------------------
# signatures and bands
# ----------------------------------------------------------------------------------------------------


def permutations(num_perm: int, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The parameters ``(a, b)`` (uint64 each, ``num_perm`` long) of :func:`minhash_signatures`' hash
    functions ``h_p(x) = ((a[p] * x + b[p]) mod 2**64) >> 32``: public so that a check, or another
    implementation, can reproduce signatures exactly."""
    params = splitmix64(seed ^ 0x5EED5EED5EED5EED, 2 * num_perm)
    return params[:num_perm], params[num_perm:]


def minhash_signatures(
    offsets: np.ndarray,
    hashes: np.ndarray,
    num_perm: int = DEFAULT_BANDS * DEFAULT_ROWS,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """The MinHash signature of each document of a CSR shingle set: ``(n, num_perm)`` uint32, entry
    ``[i, p]`` the minimum over document i's shingles x of hash function p.

    The hash functions are multiply-add-shift, ``h(x) = ((a * x + b) mod 2**64) >> 32`` with ``a, b``
    drawn per permutation from splitmix64(seed) (:func:`permutations`): a strongly universal family on
    32-bit keys (Dietzfelbinger 1996), like datasketch's ``(a * x + b) mod p``, but with no modulo (the
    costly step), only a wrapping multiply and add. Because the shift is monotone, the minimum is taken
    on the 64-bit values and shifted once at the end.

    Layout, chosen by measurement: one permutation at a time over a block of whole documents' shingles
    (1-d multiply, add, ``np.minimum.reduceat`` over the documents' starts), blocks of about 2^18
    shingles so the scratch stays near the cache. Reducing a (shingles x permutations) 2-d array along its
    first axis instead was 1.6x slower in slices, and 11x slower in one piece. Scratch: 8 bytes per
    shingle of a block (a document longer than a block is a block of its own). Documents with no
    shingles get :data:`EMPTY_SIGNATURE_VALUE` everywhere (``reduceat`` would copy a neighbour's value).
    """
    if num_perm < 1:
        raise ValueError(f"num_perm: must be at least 1, got {num_perm}")
    offsets = np.asarray(offsets, dtype=np.int64)
    x = np.asarray(hashes).astype(_U64, copy=False)
    n = len(offsets) - 1
    if n < 0 or offsets[0] != 0 or offsets[-1] != len(x):
        raise ValueError("offsets: expected len(documents) + 1 entries from 0 to len(hashes) (shingle_hashes' CSR)")
    a, b = permutations(num_perm, seed)
    a_, b_ = a.tolist(), b.tolist()
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    ne_start, ne_end = offsets[nonempty], offsets[nonempty + 1]
    mins = np.empty((num_perm, len(nonempty)), dtype=_U64)
    scratch = np.empty(min(len(x), _BLOCK_SHINGLES), dtype=_U64)
    d0 = 0
    while d0 < len(nonempty):
        d1 = max(d0 + 1, int(np.searchsorted(ne_end, ne_start[d0] + _BLOCK_SHINGLES, side="right")))
        s0, s1 = int(ne_start[d0]), int(ne_end[d1 - 1])
        if s1 - s0 > len(scratch):
            scratch = np.empty(s1 - s0, dtype=_U64)
        xb, tmp, starts = x[s0:s1], scratch[: s1 - s0], ne_start[d0:d1] - s0
        for p in range(num_perm):
            np.multiply(xb, _U64(a_[p]), out=tmp)
            tmp += _U64(b_[p])
            mins[p, d0:d1] = np.minimum.reduceat(tmp, starts)
        d0 = d1
    out = np.full((n, num_perm), EMPTY_SIGNATURE_VALUE, dtype=np.uint32)
    out[nonempty] = (mins >> _U64(32)).astype(np.uint32).T
    return out


def band_hashes(
    signatures: np.ndarray, bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """One uint64 per (document, band): a hash of the band's ``rows`` signature values, ``(n, bands)``.

    Two documents land in the same bucket of band j exactly when their signatures agree on all of band
    j's rows (up to a 64-bit collision, ~n^2 / 2^65 per band: none expected below billions of
    documents). The band index is mixed in, so equal values in two bands are different buckets even if a
    caller forgets to key buckets by band. Uses the first ``bands * rows`` columns of ``signatures``.
    """
    if bands < 1 or rows < 1:
        raise ValueError(f"bands, rows: must be at least 1, got {bands} x {rows}")
    sig = np.asarray(signatures)
    if sig.ndim != 2 or sig.shape[1] < bands * rows:
        raise ValueError(
            f"signatures: need at least bands * rows = {bands * rows} columns, got shape {sig.shape}; "
            "compute them with minhash_signatures(num_perm=bands * rows)"
        )
    n = sig.shape[0]
    out = np.empty((n, bands), dtype=_U64)
    band_seeds = splitmix64(seed ^ 0xBA4D5BA4D5, bands)
    for j in range(bands):  # one band at a time: scratch is 8 bytes a document, not 8 x num_perm
        h = np.full(n, band_seeds[j], dtype=_U64)
        for k in range(j * rows, (j + 1) * rows):
            h *= _BAND_MULT
            h += sig[:, k]
            fmix64(h)
        out[:, j] = h
    return out


def candidate_probability(s: float | np.ndarray, bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS) -> np.ndarray:
    """The probability that two documents at Jaccard similarity ``s`` share at least one band, and so
    become a candidate pair: ``1 - (1 - s**rows)**bands`` (the LSH S-curve). Its steep part is near
    ``(1 / bands) ** (1 / rows)``; the defaults (20 x 8) give 0.975 at s = 0.8."""
    s = np.asarray(s, dtype=np.float64)
    return 1.0 - (1.0 - s**rows) ** bands


def flatten_bands(bands_of_docs: np.ndarray, doc_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(band_id int32, value uint64, doc_key int64)``, one row per (document, band), the long form that a
    shuffle partitions by (band, value) so every bucket holds all members of its groups."""
    n, bands = bands_of_docs.shape
    keys = np.asarray(doc_keys, dtype=np.int64)
    if len(keys) != n:
        raise ValueError(f"doc_keys: {len(keys)} keys for {n} documents")
    band_ids = np.tile(np.arange(bands, dtype=np.int32), n)
    return band_ids, np.ascontiguousarray(bands_of_docs).reshape(-1), np.repeat(keys, bands)


# ----------------------------------------------------------------------------------------------------
# candidates and verification
# ----------------------------------------------------------------------------------------------------


def signature_similarity(sig_a: np.ndarray, sig_b: np.ndarray, bits: int | None = None) -> np.ndarray:
    """The estimated Jaccard similarity of each row pair: the fraction of permutations whose minima agree
    (an unbiased estimate with standard error ``sqrt(s (1 - s) / num_perm)``, 0.032 at s = 0.8 with 160).

    ``bits``: the signatures keep only their lowest ``bits`` bits (``sig.astype(np.uint8)`` keeps 8):
    unrelated minima then agree by chance with probability 2**-bits, which this corrects for. b-bit
    signatures are how verification stays affordable when each bucket row must carry one (160 bytes
    instead of 640 per row at 8 bits)."""
    a, b = np.asarray(sig_a), np.asarray(sig_b)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"sig_a, sig_b: expected two (pairs, num_perm) arrays of one shape, got {a.shape}, {b.shape}")
    agree = (a == b).mean(axis=1)
    if bits is None:
        return agree
    chance = 2.0**-bits
    return np.clip((agree - chance) / (1.0 - chance), 0.0, 1.0)


def candidate_edges(
    band_ids: np.ndarray,
    band_values: np.ndarray,
    doc_keys: np.ndarray,
    *,
    signatures: np.ndarray | None = None,
    threshold: float | None = None,
    bits: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The candidate edges of one bucket of (band, value, doc_key) rows: every group of rows sharing a
    (band, value) is joined as a star to its smallest key, ``|group| - 1`` edges rather than all
    ``|group|^2 / 2`` pairs (connected components need no more: a star connects the group, and a
    templated page copied 100,000 times gives 99,999 edges, not 5e9). Returns ``(u, v)`` int64 with
    ``u < v`` (u the group's smallest key), sorted and without repeats, for the edges of every band.

    Verification (optional): with ``signatures`` (one row per input row, e.g. b-bit signatures carried
    through the shuffle, see :func:`signature_similarity`) and ``threshold``, an edge is kept only when
    the member's estimated similarity to the group's smallest key is at least ``threshold``. Memory
    stays that of the bucket (no join, no other bucket). The trade-off: each member is checked against
    the group's root only, so a member similar to another member but not to the root loses that edge
    here (it may keep it through another band), and every bucket row carries a signature: bucket volume
    grows from 20 to 20 + num_perm * bits / 8 bytes per row.
    """
    band_ids = np.asarray(band_ids)
    band_values = np.asarray(band_values)
    keys = np.asarray(doc_keys, dtype=np.int64)
    if not (len(band_ids) == len(band_values) == len(keys)):
        raise ValueError(
            f"band_ids, band_values, doc_keys: lengths differ ({len(band_ids)}, {len(band_values)}, {len(keys)})"
        )
    if (signatures is None) != (threshold is None):
        raise ValueError("signatures and threshold: give both to verify candidates, or neither")
    order = np.lexsort((keys, band_values, band_ids))
    sig = None if signatures is None else np.asarray(signatures)[order]
    u, v, _ = sorted_star_edges(band_ids[order], band_values[order], keys[order], sig, threshold, bits)
    return unique_edges(u, v)


def sorted_star_edges(
    band_ids: np.ndarray,
    band_values: np.ndarray,
    keys: np.ndarray,
    signatures: np.ndarray | None = None,
    threshold: float | None = None,
    bits: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`candidate_edges` of rows already sorted by (band, value, key): the star edges ``(u, v)`` in row
    order (repeats kept), and each row's position of its group's first row (its root)."""
    m = len(keys)
    new_group = np.ones(m, dtype=bool)
    if m > 1:
        new_group[1:] = (band_ids[1:] != band_ids[:-1]) | (band_values[1:] != band_values[:-1])
    root_pos = np.maximum.accumulate(np.where(new_group, np.arange(m), 0)) if m else np.zeros(0, np.int64)
    u, v = keys[root_pos], keys
    keep = ~new_group & (u != v)
    if signatures is not None and threshold is not None:
        idx = np.flatnonzero(keep)
        sim = signature_similarity(signatures[root_pos[idx]], signatures[idx], bits=bits)
        keep[idx[sim < threshold]] = False
    return u[keep], v[keep], root_pos


def unique_edges(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges sorted by (u, v), repeats removed."""
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    if len(u) > 1:
        first = np.ones(len(u), dtype=bool)
        first[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1])
        u, v = u[first], v[first]
    return u, v


def shingle_sets(offsets: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's shingles of a CSR layout (:func:`shingle_hashes`) as a set: sorted, without repeats,
    in the same CSR layout. What an exact check ships for a document: the sets are all it compares."""
    offsets = np.asarray(offsets, dtype=np.int64)
    counts = np.diff(offsets)
    doc = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    combined = np.sort((doc << 32) | np.asarray(hashes).astype(np.int64))
    if len(combined) > 1:
        combined = combined[np.concatenate(([True], combined[1:] != combined[:-1]))]
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.bincount(combined >> 32, minlength=len(counts)), out=out[1:])
    return out, (combined & 0xFFFFFFFF).astype(np.uint32)


def take_sets(offsets: np.ndarray, values: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``index`` of a CSR layout (repeats allowed), as a new CSR layout."""
    offsets = np.asarray(offsets, dtype=np.int64)
    index = np.asarray(index, dtype=np.int64)
    lengths = offsets[index + 1] - offsets[index]
    out = np.zeros(len(index) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    within = np.arange(out[-1], dtype=np.int64) - np.repeat(out[:-1], lengths)
    return out, np.asarray(values)[np.repeat(offsets[index], lengths) + within]


def exact_jaccard(offsets: np.ndarray, hashes: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The exact Jaccard similarity of the shingle sets of documents ``left[i]`` and ``right[i]`` (indices
    into the CSR arrays of :func:`shingle_hashes`), float64 per pair; 1.0 for two empty sets.

    Vectorised over all pairs: each side's (pair, shingle) rows are made unique, the two sides are sorted
    together, and an intersection is a row that appears twice. Memory is O(total shingles of the pairs
    given): a caller checking many candidate pairs passes them in slices. This is the check that removes
    LSH false positives exactly, when the shingles of both ends are at hand (e.g. re-shingled from
    the texts of a bucket's documents); it is also the ground truth the tests measure recall against.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    hashes = np.asarray(hashes)
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    if left.shape != right.shape:
        raise ValueError(f"left, right: expected as many of each, got {left.shape} and {right.shape}")
    pairs = len(left)

    def side(docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lengths = offsets[docs + 1] - offsets[docs]
        pair = np.repeat(np.arange(pairs, dtype=np.int64), lengths)
        within = np.arange(len(pair), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        values = hashes[np.repeat(offsets[docs], lengths) + within].astype(np.int64)
        combined = (pair << 32) | values  # (pair, shingle) as one sortable int64
        unique = np.sort(combined)  # sort + mask: numpy 2's hash-based np.unique is slower on spread keys
        if len(unique) > 1:
            unique = unique[np.concatenate(([True], unique[1:] != unique[:-1]))]
        return unique, np.bincount(unique >> 32, minlength=pairs)

    a, size_a = side(left)
    b, size_b = side(right)
    both = np.sort(np.concatenate([a, b]))
    dup = both[1:][both[1:] == both[:-1]]
    inter = np.bincount(dup >> 32, minlength=pairs)
    union = size_a + size_b - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def document_shingles(
    texts: pa.Array | pa.ChunkedArray | list[str | None],
    ngram: int = DEFAULT_NGRAM,
    seed: int = DEFAULT_SEED,
    char_ngrams: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The shingles fuzzy dedup compares: word ``ngram``-grams of the normalised text
    (:func:`shingle_hashes`), or with ``char_ngrams`` NeMo Curator's character n-grams of the raw text
    (:func:`char_shingle_hashes`; ``ngram`` is then unused). Same CSR layout either way."""
    if char_ngrams is not None:
        return char_shingle_hashes(texts, char_ngrams, seed)
    return shingle_hashes(texts, ngram, seed)


def text_jaccard(
    left: pa.Array | pa.ChunkedArray | list[str | None],
    right: pa.Array | pa.ChunkedArray | list[str | None],
    ngram: int = DEFAULT_NGRAM,
    seed: int = DEFAULT_SEED,
    char_ngrams: int | None = None,
) -> np.ndarray:
    """The exact Jaccard similarity of the shingle sets of ``left[i]`` and ``right[i]``, float64 per pair:
    the exact check of candidate pairs, for a phase that has joined each edge with the texts of both
    ends (e.g. edges partitioned by one end's file, then by the other's). Memory O(text of the pairs
    given): pass them in slices. Equal to :func:`exact_jaccard` on :func:`shingle_hashes` of both."""
    a, b = as_string_array(left), as_string_array(right)
    if len(a) != len(b):
        raise ValueError(f"left, right: expected as many texts on each side, got {len(a)} and {len(b)}")
    offsets, hashes = document_shingles(pa.concat_arrays([a, b]), ngram, seed, char_ngrams)
    index = np.arange(len(a), dtype=np.int64)
    return exact_jaccard(offsets, hashes, index, index + len(a))
