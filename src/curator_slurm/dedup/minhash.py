"""MinHash signatures and LSH banding for fuzzy deduplication, as whole-array computations.

The fuzzy-dedup phases call these plain functions on a batch's text column; nothing here knows about
files, shards or Slurm. Every step is vectorised over the batch (numpy over the bytes of ASCII texts,
Arrow kernels for the others, numpy for arithmetic): there is no Python loop per shingle or per document
(the one per-item Python step hashes the rare distinct words longer than 32 bytes), which is what makes
the signature phase a large multiple of a per-document loop: text to band hashes, 20,000-25,000 docs/s
of ~300 words per CPU second on bench row 13's corpus (14,500 before ASCII texts were split on their
bytes and words hashed once per distinct word), against ~900 for a datasketch-style loop
(benchmarks/run.py row 12; datatrove's tokenizer alone runs at ~56 docs/s).

The chain, for ``n`` documents::

    normalize(texts)                        -> NFKC, lowercase, punctuation as spaces, single spaces
    shingle_hashes(texts, ngram, seed)      -> (offsets[n+1], hashes[S] uint32): word n-gram shingles, CSR
    minhash_signatures(offsets, hashes, ..) -> (n, num_perm) uint32
    band_hashes(signatures, bands, rows)    -> (n, bands) uint64: one bucket value per band
    candidate_edges(band_ids, values, keys) -> (u, v): documents sharing a (band, value), as stars

Every hash is a fixed function of the bytes and the seed (FNV-1a or xxh64, the murmur3 finaliser,
multiply-add-shift with parameters drawn from splitmix64), never Python's ``hash`` or numpy's random
generators, so every process, host and numpy version computes the same signatures for the same text:
a requirement when phase 1 of a workflow runs as thousands of array tasks.

Documents are identified by an int64 ``doc_key = (file_index << 32) | row`` (see
:mod:`curator_slurm.positions`): sorting keys sorts by (input path, row), so the survivor of a group of
near-duplicates, the smallest key, is its first occurrence, the rule exact dedup uses.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow._compute as _pc
import xxhash

from ..stages._kernels import call

__all__ = [
    "DEFAULT_BANDS",
    "DEFAULT_NGRAM",
    "DEFAULT_ROWS",
    "DEFAULT_SEED",
    "EMPTY_SIGNATURE_VALUE",
    "band_hashes",
    "candidate_edges",
    "candidate_probability",
    "exact_jaccard",
    "flatten_bands",
    "minhash_signatures",
    "normalize",
    "permutations",
    "shingle_hashes",
    "shingle_sets",
    "signature_similarity",
    "take_sets",
    "text_jaccard",
]

#: Words per shingle. Five-word shingles are common practice (datatrove's default): short enough that a
#: copy with a few words changed keeps most of its shingles, long enough that unrelated documents
#: written in the same language share almost none.
DEFAULT_NGRAM = 5
#: LSH bands and rows per band: 20 x 8 = 160 permutations. A pair at Jaccard similarity s becomes a
#: candidate with probability ``1 - (1 - s**8)**20`` (:func:`candidate_probability`): 0.975 at s = 0.8,
#: 0.998 at 0.85, 0.29 at 0.6, 0.075 at 0.5, 0.001 at 0.3. The aim is to *find* pairs at s >= 0.8;
#: NeMo Curator's 20 x 13 centres its S-curve on 0.8 and so misses a third of the pairs at exactly 0.8
#: (p = 0.68), and datatrove's 14 x 8 misses 7.6 % there (p = 0.924). The cost of the lower rise is more
#: candidates between 0.6 and 0.8, which are still near-duplicates and which ``candidate_edges``'s
#: ``threshold`` can drop.
DEFAULT_BANDS = 20
DEFAULT_ROWS = 8
DEFAULT_SEED = 42
#: The signature of a document with no words after normalisation (every permutation's minimum over an
#: empty set). All such documents share it, so they form one group: their normalised texts are equal.
EMPTY_SIGNATURE_VALUE = np.uint32(0xFFFFFFFF)

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_FNV_PRIME = _U64(0x100000001B3)
#: Odd 64-bit multipliers for combining word hashes into shingle hashes and row values into band hashes.
_COMBINE = 0x9E3779B97F4A7C15
_BAND_MULT = _U64(0xBF58476D1CE4E5B9)
#: Punctuation (\p{P}) and symbols (\p{S}: currency, math, emoji, ...), as spaces.
_PUNCTUATION = r"[\p{P}\p{S}]+"
#: Words longer than this many bytes are hashed one by one (see ``_word_hashes``).
_LONG_WORD = 32
#: ``shingle_hashes`` works on slices of about this many bytes of text, so its per-word scratch (about 50
#: bytes a word) stays near 64 MiB whatever the batch size.
_SLICE_BYTES = 8 << 20
#: Shingles per block of ``minhash_signatures``: 2 MiB of uint64 scratch, near a core's cache; 2^16 and
#: 2^20 measured slower (more Python steps; more cache misses).
_BLOCK_SHINGLES = 1 << 18


# ----------------------------------------------------------------------------------------------------
# text
# ----------------------------------------------------------------------------------------------------


def _as_string_array(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pa.Array:
    """One ``large_string`` array (64-bit offsets: a batch's text may exceed 2 GiB), nulls as ""."""
    if isinstance(texts, list):
        texts = pa.array(texts, type=pa.large_string())
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        raise TypeError(f"texts: expected a string column, got {texts.type}; cast it or pick the text field")
    if texts.type != pa.large_string():
        texts = texts.cast(pa.large_string())  # before combining: string chunks over 2 GiB cannot combine
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if texts.null_count:
        texts = call("coalesce", texts, pa.scalar("", pa.large_string()))
    return texts


def _word_lists(texts: pa.Array | pa.ChunkedArray | list[str | None], already_normalized: bool = False) -> pa.Array:
    """Each text's normalised words, as a list array (see :func:`normalize`)."""
    arr = _as_string_array(texts)
    if already_normalized:
        return call("utf8_split_whitespace", call("utf8_trim_whitespace", arr))
    arr = call("utf8_normalize", arr, options=_pc.Utf8NormalizeOptions("NFKC"))
    arr = call("utf8_lower", arr)
    arr = call("replace_substring_regex", arr, options=_pc.ReplaceSubstringOptions(_PUNCTUATION, " "))
    return call("utf8_split_whitespace", call("utf8_trim_whitespace", arr))  # no empty first or last word


def normalize(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pa.Array:
    """The text that shingles are taken from: NFKC, lowercased, punctuation and symbols turned into
    spaces, then its words (split at runs of Unicode whitespace) joined by single spaces. A
    ``large_string`` array; nulls become "".

    Why each step: near-duplicates differ in exactly these ways (a re-encoded page has full-width or
    ligature forms, NFKC folds them; a copy re-cased or re-punctuated is still a copy). Punctuation
    becomes a space rather than nothing so that ``end.Start`` is two words, not a new third one; the
    cost is that ``don't`` is the two words ``don t``, the same in every copy. Digits are kept: numbers
    often are what tells two templated pages apart. All of it runs as Arrow kernels over the column;
    splitting and re-joining collapses whitespace about 3x faster than a Unicode regex, and
    :func:`shingle_hashes` uses the same split words without re-joining them.
    """
    lists = _word_lists(texts)
    return call("binary_join", lists, pa.scalar(" ", pa.large_string()))


def _fmix64(h: np.ndarray) -> np.ndarray:
    """The murmur3 64-bit finaliser (in place on a uint64 array): every input bit flips about half the
    output bits, so FNV's weak low bits and polynomial sums become uniform hashes."""
    h ^= h >> _U64(33)
    h *= _U64(0xFF51AFD7ED558CCD)
    h ^= h >> _U64(33)
    h *= _U64(0xC4CEB9FE1A85EC53)
    h ^= h >> _U64(33)
    return h


def _splitmix64(seed: int, count: int) -> np.ndarray:
    """``count`` uint64 from splitmix64 seeded with ``seed``: parameters that are the same on every
    machine and numpy version (numpy's Generator streams are not promised stable across releases)."""
    out = np.empty(count, dtype=_U64)
    state = seed & _MASK64
    for i in range(count):
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        out[i] = z ^ (z >> 31)
    return out


def _word_hashes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each word's UTF-8 bytes: FNV-1a vectorised across words for words of up to
    :data:`_LONG_WORD` bytes (step j hashes byte j of every word longer than j, so the work is the total
    byte count in at most 32 numpy steps), xxh64 one word at a time for the rare longer ones (a base64
    blob or minified script with no spaces would otherwise cost a numpy step per byte). Which hash a
    word gets depends on its length only, so equal words always hash alike. Then the murmur3 finaliser,
    for uniform bits."""
    h = np.full(len(starts), _FNV_OFFSET, dtype=_U64)
    long = np.flatnonzero(lengths > _LONG_WORD)
    active = np.flatnonzero((lengths > 0) & (lengths <= _LONG_WORD))
    j = 0
    while len(active):
        byte = data[starts[active] + j].astype(_U64)
        h[active] = (h[active] ^ byte) * _FNV_PRIME
        j += 1
        active = active[lengths[active] > j]
    if len(long):
        spans = zip(starts[long].tolist(), lengths[long].tolist(), strict=True)
        h[long] = [xxhash.xxh64_intdigest(data[s : s + n].tobytes()) for s, n in spans]
    return _fmix64(h)


def _string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ``large_string`` array's bytes, and each string's start and length in them (no copy)."""
    _, offsets_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=len(strings) + 1, offset=strings.offset * 8)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


def _ascii_map() -> np.ndarray:
    table = np.arange(256, dtype=np.uint8)
    table[ord("A") : ord("Z") + 1] += 32
    for c in range(128):
        if chr(c).isspace() or unicodedata.category(chr(c))[0] in "PS":
            table[c] = ord(" ")
    return table


#: Each ASCII byte as :func:`normalize` leaves it: A-Z lowercased; the 32 ASCII characters in \p{P} or
#: \p{S}, and the ten ASCII whitespace characters ``str.split`` splits at, made spaces. NFKC changes no
#: ASCII character, so for an ASCII text this table is the whole normalisation.
_ASCII_MAP = _ascii_map()
_ASCII_MAP_ARROW = pa.array(_ASCII_MAP)
_SPACE = np.uint8(ord(" "))


def _ascii_words(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """:func:`_words` of an all-ASCII ``large_string`` array, on its bytes: one table lookup per byte, word
    starts and ends where a word byte follows (or precedes) a space or a document boundary. The same
    words as the Arrow kernels give (a test compares them on every ASCII character); with the flat array
    it builds for :func:`_hash_words`, about 2x less CPU than the four kernels alone (measured)."""
    n = len(texts)
    data, starts, lengths = _string_buffers(texts)
    lo, hi = (int(starts[0]), int(starts[-1] + lengths[-1])) if n else (0, 0)
    mapped = np.asarray(call("take", _ASCII_MAP_ARROW, pa.array(data[lo:hi])))  # 3x numpy's fancy indexing
    is_word = mapped != _SPACE
    size = len(mapped)
    bounds = np.append(starts, hi) - lo
    # a word starts where a word byte follows a space and ends where a space follows a word byte...
    word_starts = np.flatnonzero(is_word[1:] > is_word[:-1]) + 1
    word_ends = np.flatnonzero(is_word[:-1] > is_word[1:]) + 1
    if size and is_word[0]:
        word_starts = np.concatenate(([0], word_starts))
    if size and is_word[-1]:
        word_ends = np.append(word_ends, size)
    # ... and at a boundary between two texts that runs through word bytes (no space between the texts)
    inner = bounds[1:-1]
    inner = inner[(inner > 0) & (inner < size)]
    cuts = np.unique(inner[is_word[inner] & is_word[inner - 1]])
    if len(cuts):
        word_starts = np.insert(word_starts, np.searchsorted(word_starts, cuts), cuts)
        word_ends = np.insert(word_ends, np.searchsorted(word_ends, cuts), cuts)
    word_lengths = word_ends - word_starts
    parents = np.searchsorted(bounds, word_starts, side="right") - 1
    offsets = np.zeros(len(word_starts) + 1, dtype=np.int64)
    np.cumsum(word_lengths, out=offsets[1:])
    words = pa.LargeStringArray.from_buffers(
        len(word_starts), pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(mapped[is_word]))
    )
    return words, parents.astype(np.int64, copy=False)


def _arrow_words(texts: pa.Array, already_normalized: bool) -> tuple[pa.Array, np.ndarray]:
    """:func:`_words` through Arrow's Unicode kernels (:func:`_word_lists`): any text."""
    lists = _word_lists(texts, already_normalized=already_normalized)
    parents = np.asarray(call("list_parent_indices", lists)).astype(np.int64, copy=False)
    flat = call("list_flatten", lists)
    if isinstance(flat, pa.ChunkedArray):
        flat = flat.combine_chunks()
    if flat.type != pa.large_string():
        flat = flat.cast(pa.large_string())
    _, _, lengths = _string_buffers(flat)
    keep = lengths > 0
    if not keep.all():
        flat, parents = call("filter", flat, pa.array(keep)), parents[keep]
    return flat, parents


def _words(texts: pa.Array, already_normalized: bool = False) -> tuple[pa.Array, np.ndarray]:
    """The normalised words of a ``large_string`` array, in order, as one flat ``large_string`` array (no
    empty words), and the document of each word. ASCII texts take :func:`_ascii_words`, the others the
    Arrow kernels; when a slice has both, each part's words are put back in document order."""
    if already_normalized or not len(texts):
        return _arrow_words(texts, already_normalized)
    ascii_ = np.asarray(call("string_is_ascii", texts), dtype=bool)
    if ascii_.all():
        return _ascii_words(texts)
    if not ascii_.any():
        return _arrow_words(texts, False)
    parts = []
    for is_ascii in (True, False):
        docs = np.flatnonzero(ascii_ == is_ascii)
        subset = call("take", texts, pa.array(docs))
        words, parents = _ascii_words(subset) if is_ascii else _arrow_words(subset, False)
        parents = docs[parents]
        # a word's place in the whole: its document's first word, plus its rank within its document
        per_doc = np.bincount(parents, minlength=len(texts))
        parts.append((words, parents, np.arange(len(parents)) - (np.cumsum(per_doc) - per_doc)[parents]))
    counts = sum(np.bincount(p, minlength=len(texts)) for _, p, _ in parts)
    first = np.cumsum(counts) - counts
    order = np.empty(int(counts.sum()), dtype=np.int64)
    base = 0
    for _, parents, rank in parts:
        order[first[parents] + rank] = base + np.arange(len(parents))
        base += len(parents)
    words = call("take", pa.concat_arrays([w for w, _, _ in parts]), pa.array(order))
    return words, np.concatenate([p for _, p, _ in parts])[order]


def _hash_words(words: pa.Array) -> np.ndarray:
    """:func:`_word_hashes` of each word of a flat ``large_string`` array, computed once per distinct word
    (Arrow's hash-table ``dictionary_encode``, then a take): a text repeats its vocabulary many times."""
    encoded = call("dictionary_encode", words)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    dictionary = encoded.dictionary
    if dictionary.type != pa.large_string():
        dictionary = dictionary.cast(pa.large_string())
    distinct = _word_hashes(*_string_buffers(dictionary))
    return distinct[np.asarray(encoded.indices, dtype=np.int64)] if len(words) else np.zeros(0, _U64)


def shingle_hashes(
    texts: pa.Array | pa.ChunkedArray | list[str | None],
    ngram: int = DEFAULT_NGRAM,
    seed: int = DEFAULT_SEED,
    *,
    normalized: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Each document's word ``ngram``-shingles, hashed to uint32, in CSR layout: document i's shingle
    hashes are ``hashes[offsets[i]:offsets[i + 1]]`` (``offsets`` int64, ``len(texts) + 1``).

    ``texts`` are normalised with :func:`normalize` first unless ``normalized``. A document with at
    least ``ngram`` words has ``words - ngram + 1`` shingles (in order, duplicates kept: MinHash takes
    minima, so repeats cost nothing but a little time); one with 1 to ``ngram - 1`` words has a single
    shingle of all its words, so short documents can still match their copies; one with no words has
    none (see :data:`EMPTY_SIGNATURE_VALUE`).

    How, without a loop per shingle: Arrow splits the whole column into words (``utf8_split_whitespace``,
    ``list_flatten``, ``list_parent_indices``); numpy hashes every word at once (:func:`_word_hashes`);
    shingle i is ``sum(word[i + k] * C**k)`` over k < ngram, built with ``ngram`` shifted adds over the
    word array; windows that cross a document boundary are masked out; the murmur3 finaliser mixed with
    the seed gives the 32-bit hash. 32 bits suffice: two of a document's few hundred shingles collide
    with probability ~1e-5, and the band hashes built on top are 64-bit.
    """
    if ngram < 1:
        raise ValueError(f"ngram: must be at least 1 word, got {ngram}")
    arr = _as_string_array(texts)
    _, text_offsets_buf, _ = arr.buffers()
    text_offsets = np.frombuffer(text_offsets_buf, dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    offsets_parts, hash_parts, base = [np.zeros(1, dtype=np.int64)], [], 0
    i0 = 0
    while i0 < len(arr):
        i1 = max(i0 + 1, int(np.searchsorted(text_offsets, text_offsets[i0] + _SLICE_BYTES, side="right")) - 1)
        i1 = min(i1, len(arr))
        part = arr.slice(i0, i1 - i0)
        offsets, hashes = _shingles_of_words(*_words(part, already_normalized=normalized), len(part), ngram, seed)
        offsets_parts.append(offsets[1:] + base)
        hash_parts.append(hashes)
        base += len(hashes)
        i0 = i1
    return np.concatenate(offsets_parts), (np.concatenate(hash_parts) if hash_parts else np.zeros(0, np.uint32))


def _shingles_of_words(
    words_: pa.Array, parents: np.ndarray, n: int, ngram: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shingle_hashes` of one slice of ``n`` documents, from its words (see :func:`_words`)."""
    words = len(words_)
    g = _hash_words(words_)
    counts = np.bincount(parents, minlength=n).astype(np.int64)
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    short = np.flatnonzero((counts > 0) & (counts < ngram))

    acc = np.zeros(words, dtype=_U64)
    short_value = np.zeros(len(short), dtype=_U64)
    mult = 1
    for k in range(ngram):
        if k < words:
            acc[: words - k] += g[k:] * _U64(mult)
        done = counts[short] == k + 1  # short documents whose single shingle is complete at this step
        short_value[done] = acc[first[short[done]]]
        mult = (mult * _COMBINE) & _MASK64

    # A window starting at word i is a shingle when its last word is in the same document.
    valid = np.zeros(words, dtype=bool)
    if words >= ngram:
        valid[: words - ngram + 1] = parents[ngram - 1 :] == parents[: words - ngram + 1]
    if len(short):
        acc[first[short]] = short_value
        valid[first[short]] = True
    per_doc = np.where(counts >= ngram, counts - ngram + 1, 0) + (counts > 0) * (counts < ngram)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_doc, out=offsets[1:])
    values = acc[valid]
    values ^= _splitmix64(seed, 1)[0]
    return offsets, (_fmix64(values) >> _U64(32)).astype(np.uint32)


# ----------------------------------------------------------------------------------------------------
# signatures and bands
# ----------------------------------------------------------------------------------------------------


def permutations(num_perm: int, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The parameters ``(a, b)`` (uint64 each, ``num_perm`` long) of :func:`minhash_signatures`' hash
    functions ``h_p(x) = ((a[p] * x + b[p]) mod 2**64) >> 32``: public so that a check, or another
    implementation, can reproduce signatures exactly."""
    params = _splitmix64(seed ^ 0x5EED5EED5EED5EED, 2 * num_perm)
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
    band_seeds = _splitmix64(seed ^ 0xBA4D5BA4D5, bands)
    for j in range(bands):  # one band at a time: scratch is 8 bytes a document, not 8 x num_perm
        h = np.full(n, band_seeds[j], dtype=_U64)
        for k in range(j * rows, (j + 1) * rows):
            h *= _BAND_MULT
            h += sig[:, k]
            _fmix64(h)
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
    bid, val, k = band_ids[order], band_values[order], keys[order]
    m = len(k)
    new_group = np.ones(m, dtype=bool)
    if m > 1:
        new_group[1:] = (bid[1:] != bid[:-1]) | (val[1:] != val[:-1])
    root_pos = np.maximum.accumulate(np.where(new_group, np.arange(m), 0)) if m else np.zeros(0, np.int64)
    u, v = k[root_pos], k
    keep = ~new_group & (u != v)
    if signatures is not None:
        sig = np.asarray(signatures)[order]
        idx = np.flatnonzero(keep)
        sim = signature_similarity(sig[root_pos[idx]], sig[idx], bits=bits)
        keep[idx[sim < threshold]] = False
    return _unique_edges(u[keep], v[keep])


def _unique_edges(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def text_jaccard(
    left: pa.Array | pa.ChunkedArray | list[str | None],
    right: pa.Array | pa.ChunkedArray | list[str | None],
    ngram: int = DEFAULT_NGRAM,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """The exact Jaccard similarity of the shingle sets of ``left[i]`` and ``right[i]``, float64 per pair:
    the exact check of candidate pairs, for a phase that has joined each edge with the texts of both
    ends (e.g. edges partitioned by one end's file, then by the other's). Memory O(text of the pairs
    given): pass them in slices. Equal to :func:`exact_jaccard` on :func:`shingle_hashes` of both."""
    a, b = _as_string_array(left), _as_string_array(right)
    if len(a) != len(b):
        raise ValueError(f"left, right: expected as many texts on each side, got {len(a)} and {len(b)}")
    offsets, hashes = shingle_hashes(pa.concat_arrays([a, b]), ngram, seed)
    index = np.arange(len(a), dtype=np.int64)
    return exact_jaccard(offsets, hashes, index, index + len(a))
