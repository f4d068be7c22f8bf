"""MinHash + LSH (curator_slurm.workflows.dedup.minhash) on small hand-made inputs, against plain-Python references,
and end to end on a generated corpus with planted near-duplicates (curator_slurm.workflows.dedup.synthetic)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from curator_slurm.workflows.dedup import minhash as mh
from curator_slurm.workflows.dedup.components import duplicate_members
from curator_slurm.workflows.dedup.synthetic import near_duplicate_corpus, score_groups

# ------------------------------------------------------------------------------------------------------
# normalisation and shingles
# ------------------------------------------------------------------------------------------------------


def test_normalize_folds_case_punctuation_compatibility_forms_and_whitespace() -> None:
    texts = [
        "  Hello,  WORLD!\tIt's\u00a03.5 %  ",
        "\uff26\uff55\uff4c\uff4c-width \ufb01ne",
        None,
        "",
        "«quoted» — dash\n\nnext",
    ]
    assert mh.normalize(texts).to_pylist() == [
        "hello world it s 3 5",
        "full width fine",
        "",
        "",
        "quoted dash next",
    ]


def test_normalize_accepts_arrow_string_columns() -> None:
    chunked = pa.chunked_array([pa.array(["A b"], pa.string()), pa.array(["C, d"], pa.string())])
    assert mh.normalize(chunked).to_pylist() == ["a b", "c d"]
    with pytest.raises(TypeError, match="string column"):
        mh.normalize(pa.array([1, 2]))


def test_words_are_split_at_the_whitespace_python_splits_at() -> None:
    """Words are what ``str.split()`` gives, for every kind of whitespace at every place: pyarrow 26's
    utf8_split_whitespace alone sometimes keeps a trailing form feed on a last word (measured: 13 in
    2,000 arrays), so a copy would differ from its original by where its buffer happened to end."""
    spaces = [" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\xa0", "\u2000", "\u2028", "\u3000"]
    rng = np.random.default_rng(4)
    for size in range(1, 80):
        texts = [
            "".join(
                rng.choice(["ab", "c", "xyz", ""]) + "".join(rng.choice(spaces, rng.integers(0, 3))) for _ in range(k)
            )
            for k in rng.integers(0, 9, size)
        ]
        texts.append("x" * size + " abc\x0c")
        assert mh.normalize(texts).to_pylist() == [" ".join(t.split()) for t in texts]


def python_shingles(text: str, ngram: int) -> list[tuple[str, ...]]:
    """The reference: normalised words, every window of ``ngram``, or all words when fewer."""
    words = mh.normalize([text]).to_pylist()[0].split()
    if not words:
        return []
    if len(words) < ngram:
        return [tuple(words)]
    return [tuple(words[i : i + ngram]) for i in range(len(words) - ngram + 1)]


TEXTS = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox!",
    "the QUICK brown fox jumps, over the lazy cat",
    "tiny doc",
    "",
    None,
    "one",
    "café au lait, s'il vous plaît: five words here and more",
    "cafe au lait s il vous plait five words here and more",
    "a b c d e",
    "e d c b a",
    "  ",
    "x" * 32 + " " + "y" * 33 + " " + "z" * 500 + " \u00e9" * 20 + " end",  # words on both sides of 32 bytes
    "y" * 33 + " " + "z" * 500 + " \u00e9 \u00e9 \u00e9 " + "x" * 32,
]


@pytest.mark.parametrize("ngram", [1, 3, 5])
def test_shingles_are_the_word_ngrams_one_hash_per_distinct_ngram(ngram: int) -> None:
    offsets, hashes = mh.shingle_hashes(TEXTS, ngram=ngram)
    assert offsets.dtype == np.int64 and hashes.dtype == np.uint32
    assert len(offsets) == len(TEXTS) + 1 and offsets[0] == 0 and offsets[-1] == len(hashes)
    seen: dict[tuple[str, ...], int] = {}
    for i, text in enumerate(TEXTS):
        expected = python_shingles(text or "", ngram)
        got = hashes[offsets[i] : offsets[i + 1]].tolist()
        assert len(got) == len(expected), text
        for gram, h in zip(expected, got, strict=True):
            assert seen.setdefault(gram, h) == h, f"{gram} hashed two ways"
    # distinct n-grams, distinct hashes (no collision among these few)
    assert len(set(seen.values())) == len(seen)


def test_shingle_hashes_do_not_depend_on_the_batch() -> None:
    """A document's shingles are the same whatever batch it is read in: phase 1 runs on shards."""
    offsets, hashes = mh.shingle_hashes(TEXTS)
    for cut in (1, 4, 7):
        o1, h1 = mh.shingle_hashes(TEXTS[:cut])
        o2, h2 = mh.shingle_hashes(TEXTS[cut:])
        assert np.array_equal(np.concatenate([h1, h2]), hashes)
        assert np.array_equal(np.concatenate([o1, o2[1:] + o1[-1]]), offsets)


@pytest.mark.parametrize("ngram", [1, 3, 5])
def test_ascii_texts_take_a_byte_path_with_the_same_words_as_the_unicode_kernels(ngram: int) -> None:
    """shingle_hashes splits ASCII texts on their bytes (one table lookup each) and others with Arrow's
    Unicode kernels; normalize() always uses the kernels, and already-normalised text is split by them too.
    Both ways give the same shingles for every ASCII character (controls, the ten whitespaces str.split
    knows, every punctuation and symbol), in batches all ASCII, mixed, and sliced."""
    rng = np.random.default_rng(ngram)
    pieces = [chr(c) for c in range(128)] + ["ab", "Cd", "xyz", "  ", "\u00e9t\u00e9", "\uff26", "\u2028"]
    for size in range(1, 60):
        texts: list[str | None] = [
            "".join(rng.choice(pieces[: 128 + 4 if i % 3 else len(pieces)], int(k)))
            for i, k in enumerate(rng.integers(0, 40, size))
        ]
        texts[0] = None if size % 5 == 0 else texts[0]
        arr = pa.array(texts, pa.large_string()).slice(size // 3)
        for batch in (texts, arr, [t for t in texts if t is None or t.isascii()]):
            got = mh.shingle_hashes(batch, ngram)
            want = mh.shingle_hashes(mh.normalize(batch), ngram, normalized=True)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), batch


def test_a_batch_larger_than_a_slice_gives_the_same_shingles() -> None:
    """shingle_hashes cuts a batch into slices of about 8 MiB of text; where it cuts changes nothing."""
    rng = np.random.default_rng(8)
    words = np.array([f"w{i}" for i in range(5000)])
    texts = [" ".join(rng.choice(words, int(k))) for k in rng.integers(0, 600, 6000)]
    assert sum(len(t) for t in texts) > 9 << 20
    offsets, hashes = mh.shingle_hashes(texts)
    parts = [mh.shingle_hashes(texts[i : i + 700]) for i in range(0, len(texts), 700)]
    assert np.array_equal(hashes, np.concatenate([h for _, h in parts]))
    assert np.array_equal(np.diff(offsets), np.concatenate([np.diff(o) for o, _ in parts]))


def test_seed_and_ngram_change_the_hashes() -> None:
    _, base = mh.shingle_hashes(TEXTS[:2], seed=1)
    _, other = mh.shingle_hashes(TEXTS[:2], seed=2)
    assert len(base) == len(other) and not np.array_equal(base, other)
    _, again = mh.shingle_hashes(TEXTS[:2], seed=1)
    assert np.array_equal(base, again)
    with pytest.raises(ValueError, match="ngram"):
        mh.shingle_hashes(TEXTS, ngram=0)


# ------------------------------------------------------------------------------------------------------
# signatures
# ------------------------------------------------------------------------------------------------------


def reference_signature(values: list[int], num_perm: int, seed: int, perms: list[int]) -> list[int]:
    """MinHash in Python integers: for permutation p, min over shingles of ((a x + b) mod 2^64) >> 32."""
    a, b = mh.permutations(num_perm, seed)
    return [min(((int(a[p]) * x + int(b[p])) % 2**64) >> 32 for x in values) for p in perms]


def test_signatures_equal_the_python_reference_across_blocks() -> None:
    """300,000 shingles: more than one of minhash_signatures' blocks (2^18 shingles of whole documents),
    with empty documents between, a document larger than a block, and one-shingle documents."""
    rng = np.random.default_rng(5)
    lengths = [3, 0, 9000, 1, 0, 270_000, 2, 0, 20_994]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    hashes = rng.integers(0, 2**32, offsets[-1], dtype=np.uint64).astype(np.uint32)
    sig = mh.minhash_signatures(offsets, hashes, num_perm=160, seed=9)
    assert sig.shape == (len(lengths), 160) and sig.dtype == np.uint32
    for i, n in enumerate(lengths):
        if n == 0:
            assert (sig[i] == mh.EMPTY_SIGNATURE_VALUE).all()
            continue
        perms = list(range(160)) if n < 10_000 else [0, 1, 77, 159]  # Python is slow on the long ones
        values = hashes[offsets[i] : offsets[i + 1]].tolist()
        assert sig[i, perms].tolist() == reference_signature(values, 160, 9, perms), f"document {i}"


def test_signatures_are_those_of_the_set() -> None:
    """Order and repeats of a document's shingles do not matter; the seed does."""
    offsets, hashes = mh.shingle_hashes(["a b c d e f g h i j k l m"])
    shuffled = np.concatenate([hashes[::-1], hashes[:3]])
    sig = mh.minhash_signatures(offsets, hashes)
    same = mh.minhash_signatures(np.array([0, len(shuffled)]), shuffled)
    assert np.array_equal(sig, same)
    assert not np.array_equal(sig, mh.minhash_signatures(offsets, hashes, seed=7))
    with pytest.raises(ValueError, match="offsets"):
        mh.minhash_signatures(np.array([0, 5]), hashes[:3])


def test_band_hashes_match_exactly_when_the_band_rows_match() -> None:
    rng = np.random.default_rng(1)
    sig = rng.integers(0, 2**32, (4, 160), dtype=np.uint64).astype(np.uint32)
    sig[1] = sig[0]
    sig[1, 8:16] += 1  # band 1 differs
    sig[2, :8] = sig[0, :8]  # only band 0 agrees
    bands = mh.band_hashes(sig, bands=20, rows=8)
    assert bands.shape == (4, 20) and bands.dtype == np.uint64
    assert (bands[0] == bands[1]).tolist() == [j != 1 for j in range(20)]
    assert (bands[0] == bands[2]).tolist() == [j == 0 for j in range(20)]
    assert not (bands[0] == bands[3]).any()
    assert len(np.unique(bands[3])) == 20  # equal values in two bands still differ: the band is mixed in
    with pytest.raises(ValueError, match="bands \\* rows = 168"):
        mh.band_hashes(sig, bands=21, rows=8)


def test_candidate_probability_is_the_s_curve() -> None:
    p = mh.candidate_probability(np.array([0.0, 0.5, 0.8, 1.0]))
    assert p[0] == 0.0 and p[-1] == 1.0
    assert abs(p[2] - (1 - (1 - 0.8**8) ** 20)) < 1e-12
    assert p[2] > 0.97 and p[1] < 0.08


# ------------------------------------------------------------------------------------------------------
# candidates
# ------------------------------------------------------------------------------------------------------


def test_candidate_edges_join_each_bucket_as_a_star_to_its_smallest_key() -> None:
    band = np.array([0, 0, 0, 0, 1, 1, 1, 2, 0, 0])
    value = np.array([7, 7, 7, 9, 7, 7, 3, 7, 7, 9], dtype=np.uint64)
    key = np.array([50, 10, 30, 40, 30, 60, 10, 10, 10, 40])  # (0, 7) lists key 10 twice
    u, v = mh.candidate_edges(band, value, key)
    assert list(zip(u.tolist(), v.tolist(), strict=True)) == [(10, 30), (10, 50), (30, 60)]
    with pytest.raises(ValueError, match="lengths differ"):
        mh.candidate_edges(band, value, key[:-1])


def test_candidate_edges_can_drop_pairs_whose_signatures_disagree() -> None:
    rng = np.random.default_rng(2)
    sig = rng.integers(0, 2**32, (3, 160), dtype=np.uint64).astype(np.uint32)
    sig[1, :150] = sig[0, :150]  # 150/160 agree with the root
    sig[2, :100] = sig[0, :100]  # 100/160
    band, value, key = np.zeros(3, np.int32), np.full(3, 5, np.uint64), np.array([1, 2, 3])
    u, v = mh.candidate_edges(band, value, key, signatures=sig, threshold=0.8)
    assert (u.tolist(), v.tolist()) == ([1], [2])
    u, v = mh.candidate_edges(band, value, key, signatures=sig.astype(np.uint8), threshold=0.8, bits=8)
    assert (u.tolist(), v.tolist()) == ([1], [2])
    with pytest.raises(ValueError, match="both"):
        mh.candidate_edges(band, value, key, threshold=0.8)


def test_exact_jaccard_equals_python_sets() -> None:
    offsets, hashes = mh.shingle_hashes(TEXTS, ngram=2)
    left = np.array([0, 0, 6, 8, 3, 2, 0])
    right = np.array([1, 0, 7, 9, 4, 3, 3])
    got = mh.exact_jaccard(offsets, hashes, left, right)
    for (i, j), jac in zip(zip(left, right, strict=True), got, strict=True):
        a, b = set(python_shingles(TEXTS[i] or "", 2)), set(python_shingles(TEXTS[j] or "", 2))
        expected = len(a & b) / len(a | b) if a | b else 1.0
        assert jac == pytest.approx(expected), (i, j)


def test_text_jaccard_checks_pairs_of_texts_exactly() -> None:
    left = ["a b c d e f g", "One two, three four five six.", None, "x y"]
    right = ["a b c d e f h", "one two three four five six", "", "p q"]
    got = mh.text_jaccard(left, right)
    # 3 shingles each, 2 shared; identical after normalisation; two empty texts; disjoint short texts
    assert got.tolist() == [pytest.approx(2 / 4), 1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="as many texts"):
        mh.text_jaccard(left, right[:2])


def test_shingle_sets_and_taken_rows_keep_each_documents_set() -> None:
    """What the exact check ships per edge end: each document's shingle hashes as a sorted set, and rows of
    those sets taken (repeats allowed) for the edges; Jaccard on them equals text_jaccard on the texts."""
    texts = [*TEXTS, "a b a b a b a b", "a b a b"]
    offsets, hashes = mh.shingle_hashes(texts, ngram=2)
    set_offsets, sets = mh.shingle_sets(offsets, hashes)
    for i in range(len(texts)):
        row = sets[set_offsets[i] : set_offsets[i + 1]]
        assert row.tolist() == sorted(set(hashes[offsets[i] : offsets[i + 1]].tolist())), i
    n = len(TEXTS)
    index = np.array([n + 1, 0, 0, n, 3])
    taken_offsets, taken = mh.take_sets(set_offsets, sets, index)
    for r, i in enumerate(index):
        assert (
            taken[taken_offsets[r] : taken_offsets[r + 1]].tolist()
            == sets[set_offsets[i] : set_offsets[i + 1]].tolist()
        )
    pairs = mh.exact_jaccard(taken_offsets, taken, np.array([0, 1, 4]), np.array([3, 2, 2]))
    expected = mh.text_jaccard([texts[n + 1], texts[0], texts[3]], [texts[n], texts[0], texts[0]], ngram=2)
    assert pairs.tolist() == expected.tolist()
    assert pairs[0] == 1.0, "repeats do not count: both are the set {a b, b a}"


# ------------------------------------------------------------------------------------------------------
# end to end on planted near-duplicates
# ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted():
    corpus = near_duplicate_corpus(unrelated=3000, originals=800, copies=(1, 2), edit_range=(0.0, 0.08), seed=11)
    return corpus, corpus.pair_jaccard()


def fuzzy_groups(texts: list[str], **options) -> np.ndarray:
    """The whole chain as the workflow runs it, with doc keys = document indices: each document's survivor."""
    offsets, hashes = mh.shingle_hashes(texts)
    signatures = mh.minhash_signatures(offsets, hashes)
    band_ids, values, keys = mh.flatten_bands(mh.band_hashes(signatures), np.arange(len(texts)))
    if options:
        options = {"signatures": np.repeat(signatures, mh.DEFAULT_BANDS, axis=0), **options}
    u, v = mh.candidate_edges(band_ids, values, keys, **options)
    drop, group = duplicate_members([(u, v)])
    group_of = np.arange(len(texts))
    group_of[drop] = group
    return group_of


def test_planted_near_duplicates_are_found_and_unrelated_documents_kept(planted) -> None:
    corpus, jaccard = planted
    group_of = fuzzy_groups(corpus.texts)
    score = score_groups(corpus, group_of, jaccard, threshold=0.8)
    print(f"\nfuzzy dedup (20 x 8 bands, 5-word shingles) on {len(corpus.texts)} documents: {score}")
    for t in (0.5, 0.6, 0.7, 0.9):
        print(f"  at Jaccard >= {t}: {score_groups(corpus, group_of, jaccard, threshold=t)}")
    assert score.pairs_at_threshold >= 200, f"the corpus must plant enough pairs at 0.8 to measure: {score}"
    assert score.recall >= 0.98, str(score)
    assert score.unrelated_removed <= 0.001, str(score)


def test_verification_keeps_recall_above_the_threshold_and_drops_pairs_below(planted) -> None:
    corpus, jaccard = planted
    plain = fuzzy_groups(corpus.texts)
    checked = fuzzy_groups(corpus.texts, threshold=0.7)
    high, low = score_groups(corpus, checked, jaccard, 0.8), score_groups(corpus, checked, jaccard, 0.0)
    below = jaccard < 0.5
    merged_below = lambda g: int((g[corpus.originals[below]] == g[corpus.copies[below]]).sum())  # noqa: E731
    print(f"\nwith the signature check at 0.7: {high}; pairs below 0.5 merged: {merged_below(checked)} "
          f"(without the check: {merged_below(plain)}) of {int(below.sum())}")  # fmt: skip
    assert high.recall >= 0.98, str(high)
    assert low.unrelated_removed <= 0.001, str(low)
    assert merged_below(checked) <= merged_below(plain)


def test_signature_agreement_estimates_jaccard(planted) -> None:
    """The MinHash estimate is unbiased: over the planted pairs its mean error is near 0 and its
    typical error that of 160 permutations (sqrt(J (1 - J) / 160) <= 0.04)."""
    corpus, jaccard = planted
    offsets, hashes = mh.shingle_hashes(corpus.texts)
    sig = mh.minhash_signatures(offsets, hashes)
    estimate = mh.signature_similarity(sig[corpus.originals], sig[corpus.copies])
    error = estimate - jaccard
    mean, typical = error.mean(), np.abs(error).mean()
    print(f"\nestimate - Jaccard over {len(error)} pairs: mean {mean:+.4f}, mean |error| {typical:.4f}")
    assert abs(mean) < 0.01, mean
    assert typical < 0.04, typical


def test_candidates_follow_the_s_curve(planted) -> None:
    """The share of planted pairs sharing a band matches sum(candidate_probability(J)) within 4 standard
    deviations: the hash functions behave like the random permutations the S-curve assumes."""
    corpus, jaccard = planted
    offsets, hashes = mh.shingle_hashes(corpus.texts)
    bands = mh.band_hashes(mh.minhash_signatures(offsets, hashes))
    shared = (bands[corpus.originals] == bands[corpus.copies]).any(axis=1)
    p = mh.candidate_probability(jaccard)
    expected, sd = p.sum(), np.sqrt((p * (1 - p)).sum())
    print(f"\npairs sharing a band: {int(shared.sum())}, S-curve expects {expected:.1f} +- {sd:.1f}")
    assert abs(shared.sum() - expected) <= 4 * sd + 1


def test_the_corpus_and_its_signatures_are_deterministic() -> None:
    a = near_duplicate_corpus(unrelated=50, originals=10, seed=3)
    b = near_duplicate_corpus(unrelated=50, originals=10, seed=3)
    assert a.texts == b.texts and np.array_equal(a.copies, b.copies)
    assert a.texts != near_duplicate_corpus(unrelated=50, originals=10, seed=4).texts
    sig_a = mh.minhash_signatures(*mh.shingle_hashes(a.texts))
    sig_b = mh.minhash_signatures(*mh.shingle_hashes(pa.array(b.texts, pa.string())))
    assert np.array_equal(sig_a, sig_b)
