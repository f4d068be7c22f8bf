"""Character n-gram shingles (issue 27, item 4): the sets NeMo Curator's ``char_ngrams`` forms (cuDF's
``str.minhash(width=...)`` kernel: windows of ``width`` code points of the raw text at every code point,
a text shorter than ``width`` whole, an empty text none), checked against that rule on every kind of text;
the rule itself reproduces the minhash values of cuDF's own test suite."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from curator_slurm.workflows.dedup import char_shingles, minhash

TEXTS = [
    "The quick brown fox jumpéd over the lazy brown dog.",
    "d",
    "",
    None,
    "exactly24characters_abcd",
    "  Leading and trailing whitespace, kept as it is \n\n",
    "Case Matters: case matters.",
    "日本語のテキストは一文字ずつ数えます。漢字とひらがな",
    "emoji 🙂🙃 and 4-byte " + "".join(map(chr, range(0x1D51E, 0x1D524))) + " letters, combining e\u0301 marks",
    "tab\tseparated\tvalues\r\nand CRLF",
    "The quick brown fox jumpéd over the lazy brown dog!",
]


def reference(text: str | None, width: int) -> list[str]:
    """NeMo Curator's (cuDF's) character shingles of one text, as the module docstring states the rule."""
    text = text or ""
    if len(text) < width:
        return [text] if text else []
    return [text[i : i + width] for i in range(len(text) - width + 1)]


@pytest.mark.parametrize("width", [2, 5, 24])
def test_char_shingles_are_the_code_point_windows_of_the_raw_text(width: int) -> None:
    offsets, hashes = char_shingles.char_shingle_hashes(TEXTS, width)
    assert offsets.dtype == np.int64 and hashes.dtype == np.uint32 and len(offsets) == len(TEXTS) + 1
    hash_of: dict[str, int] = {}
    for i, text in enumerate(TEXTS):
        expected = reference(text, width)
        got = hashes[offsets[i] : offsets[i + 1]].tolist()
        assert len(got) == len(expected), (text, width)
        for shingle, value in zip(expected, got, strict=True):
            assert hash_of.setdefault(shingle, value) == value, (shingle, width)  # equal shingles hash alike
    assert len(set(hash_of.values())) == len(hash_of)  # and different ones differently (no collision here)


def test_char_shingles_do_not_depend_on_the_batch_or_the_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    alphabet = "abcdé日🙂 \n."
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    offsets, hashes = char_shingles.char_shingle_hashes(texts, 6)
    for cut in (1, 77, 299):
        o1, h1 = char_shingles.char_shingle_hashes(texts[:cut], 6)
        o2, h2 = char_shingles.char_shingle_hashes(texts[cut:], 6)
        assert np.array_equal(np.concatenate([h1, h2]), hashes)
        assert np.array_equal(np.concatenate([o1, o2[1:] + o1[-1]]), offsets)
    monkeypatch.setattr(char_shingles, "_SLICE_BYTES", 64)  # many slices, each cut between two texts
    o3, h3 = char_shingles.char_shingle_hashes(pa.chunked_array([texts[:100], texts[100:]]), 6)
    assert np.array_equal(o3, offsets) and np.array_equal(h3, hashes)


def test_char_jaccard_is_the_jaccard_of_the_shingle_sets_and_seed_and_width_matter() -> None:
    left, right = TEXTS[0::2], TEXTS[1::2]
    got = minhash.text_jaccard(left[: len(right)], right, char_ngrams=5)
    for a, b, j in zip(left, right, got, strict=False):
        sa, sb = set(reference(a, 5)), set(reference(b, 5))
        assert j == (len(sa & sb) / len(sa | sb) if sa | sb else 1.0)
    same = minhash.text_jaccard([TEXTS[0]], [TEXTS[-1]], char_ngrams=5)[0]
    assert 0.9 < same < 1.0  # one character differs: the windows that cover it
    _, a = char_shingles.char_shingle_hashes(TEXTS[:1], 5, seed=1)
    _, b = char_shingles.char_shingle_hashes(TEXTS[:1], 5, seed=2)
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError, match="at least 2 characters"):
        char_shingles.char_shingle_hashes(TEXTS, 1)


def _murmur3_32(data: bytes, seed: int) -> int:
    """MurmurHash3_x86_32, the hash cuDF's minhash kernel applies to each shingle (for the check below)."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed
    tail = len(data) - len(data) % 4
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        h ^= (k * c2) & mask
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    k = int.from_bytes(data[tail:], "little")
    if len(data) % 4:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        h ^= (k * c2) & mask
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    return h ^ (h >> 16)


def test_the_rule_reproduces_cudfs_own_minhash_test_vectors() -> None:
    """cuDF's ``cpp/tests/text/minhash_tests.cpp`` (test ``Permuted``: width 4, seed 0, a = b = 10, 11, 12;
    value = min over shingles of ``(murmur3(shingle) * a + b) mod (2**61 - 1)``, low 32 bits) expects these
    values, computed on a GPU; the shingles of :func:`reference` give every one of them, including the
    one-character text (hashed whole)."""
    docs = ["doc 1", "this is doc 2", "doc 3", "d", "The quick brown fox jumpéd over the lazy brown dog.",
            "line six", "line seven", "line eight", "line nine", "line ten"]  # fmt: skip
    expected = [
        [1392101586, 394869177, 811528444], [211415830, 187088503, 130291444], [2098117052, 394869177, 799753544],
        [2264583304, 2920538364, 3576493424], [253327882, 41747273, 302030804], [2109809594, 1017470651, 326988172],
        [1303819864, 850676747, 147107852], [736021564, 720812292, 1405158760], [902780242, 134064807, 1613944636],
        [547084870, 1748895564, 656501844],
    ]  # fmt: skip
    prime = (1 << 61) - 1
    for doc, want in zip(docs, expected, strict=True):
        hashed = [_murmur3_32(s.encode(), 0) for s in reference(doc, 4)]
        assert [min(((h * a + a) % prime) & 0xFFFFFFFF for h in hashed) for a in (10, 11, 12)] == want, doc
