"""Text to word n-gram shingle hashes, vectorised: the first step of MinHash (:mod:`.minhash`). Normalisation, words
and ``ngram``-word shingles hashed to uint32 with fixed functions, as a CSR pair ``(offsets[n+1], hashes)``."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow._compute as _pc
import xxhash

from curator_slurm.stages.text.compute import call

#: Words per shingle. Five-word shingles are common practice (datatrove's default): short enough that a
#: copy with a few words changed keeps most of its shingles, long enough that unrelated documents
#: written in the same language share almost none.
DEFAULT_NGRAM = 5
DEFAULT_SEED = 42

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_FNV_PRIME = _U64(0x100000001B3)
#: Odd 64-bit multiplier for combining word hashes into shingle hashes.
_COMBINE = 0x9E3779B97F4A7C15
#: Punctuation (\p{P}) and symbols (\p{S}: currency, math, emoji, ...), as spaces.
_PUNCTUATION = r"[\p{P}\p{S}]+"
#: Words longer than this many bytes are hashed one by one (see ``_word_hashes``).
_LONG_WORD = 32
#: ``shingle_hashes`` works on slices of about this many bytes of text, so its per-word scratch (about 50
#: bytes a word) stays near 64 MiB whatever the batch size.
_SLICE_BYTES = 8 << 20


def as_string_array(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pa.Array:
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
    arr = as_string_array(texts)
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


def fmix64(h: np.ndarray) -> np.ndarray:
    """The murmur3 64-bit finaliser (in place on a uint64 array): every input bit flips about half the
    output bits, so FNV's weak low bits and polynomial sums become uniform hashes."""
    h ^= h >> _U64(33)
    h *= _U64(0xFF51AFD7ED558CCD)
    h ^= h >> _U64(33)
    h *= _U64(0xC4CEB9FE1A85EC53)
    h ^= h >> _U64(33)
    return h


def splitmix64(seed: int, count: int) -> np.ndarray:
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
    return fmix64(h)


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
    counts = sum((np.bincount(p, minlength=len(texts)) for _, p, _ in parts), np.zeros(len(texts), np.intp))
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
    return in_slices(
        as_string_array(texts),
        _SLICE_BYTES,
        lambda part: _shingles_of_words(*_words(part, already_normalized=normalized), len(part), ngram, seed),
    )


def in_slices(
    arr: pa.Array, slice_bytes: int, shingle: Callable[[pa.Array], tuple[np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """``shingle`` (a slice of documents -> its CSR offsets and hashes) over slices of ``arr`` of about
    ``slice_bytes`` of text each (at least one document), joined into one CSR layout: bounded memory
    for the temporary arrays whatever the batch size."""
    _, text_offsets_buf, _ = arr.buffers()
    text_offsets = np.frombuffer(text_offsets_buf, dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    offsets_parts, hash_parts, base = [np.zeros(1, dtype=np.int64)], [], 0
    i0 = 0
    while i0 < len(arr):
        i1 = max(i0 + 1, int(np.searchsorted(text_offsets, text_offsets[i0] + slice_bytes, side="right")) - 1)
        i1 = min(i1, len(arr))
        offsets, hashes = shingle(arr.slice(i0, i1 - i0))
        offsets_parts.append(offsets[1:] + base)
        hash_parts.append(hashes)
        base += len(hashes)
        i0 = i1
    return np.concatenate(offsets_parts), (np.concatenate(hash_parts) if hash_parts else np.zeros(0, np.uint32))


def _shingles_of_words(
    words_: pa.Array, parents: np.ndarray, n: int, ngram: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shingle_hashes` of one slice of ``n`` documents, from its words (see :func:`_words`)."""
    return shingles_of_tokens(_hash_words(words_), parents, n, ngram, seed)


def shingles_of_tokens(
    g: np.ndarray, parents: np.ndarray, n: int, ngram: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The CSR shingle hashes of ``n`` documents from the 64-bit hashes ``g`` of their tokens (words, or
    characters for :mod:`.char_shingles`) in order and the document of each token (``parents``, sorted):
    every window of ``ngram`` tokens within a document, or one shingle of all its tokens when it has fewer."""
    words = len(g)
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
    values ^= splitmix64(seed, 1)[0]
    return offsets, (fmix64(values) >> _U64(32)).astype(np.uint32)
