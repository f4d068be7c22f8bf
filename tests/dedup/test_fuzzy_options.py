"""Fuzzy dedup options of the NeMo and FineWeb recipes (issue 27, item 4), through the whole workflow on files:
character n-gram shingles (NeMo's ``char_ngrams``) find planted near-duplicates made by character edits and
keep unrelated documents, with the same list for any shard count per phase; the user's ``id`` column in the
list of duplicates; FineWeb's 14 bands x 8 rows of 5-word shingles (datatrove's MinhashConfig defaults)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, ShardSpec
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup import minhash
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.dedup.synthetic import NearDuplicateCorpus, near_duplicate_corpus, score_groups
from curator_slurm.workflows.sorted_runs import read_run

PER_FILE = 200
CHAR_PHASES = ["signatures", "candidates", "components", "ids", "join"]
_ALPHABET = "abcdefghijklmnopqrstuvwxyz     .,"


def _edit(rng: random.Random, text: str, edits: int) -> str:
    """``text`` with ``edits`` random one-character substitutions, insertions or deletions (typos, OCR
    noise): what character shingles see through and a re-rendering of the words does not produce."""
    chars = list(text)
    for _ in range(edits):
        at = rng.randrange(len(chars))
        kind = rng.randrange(3)
        if kind == 0:
            chars[at] = rng.choice(_ALPHABET)
        elif kind == 1:
            chars.insert(at, rng.choice(_ALPHABET))
        else:
            del chars[at]
    return "".join(chars)


def _char_corpus(seed: int = 11) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(texts, originals, copies, unrelated): 900 unrelated documents of ~100 words (``near_duplicate_corpus``'s
    Zipf vocabulary), 160 of them with a copy carrying 1 to 8 character edits, all shuffled."""
    base = near_duplicate_corpus(unrelated=900, originals=1, words=100, seed=seed)
    texts = [base.texts[i] for i in base.unrelated]
    rng = random.Random(seed)
    originals = list(range(160))
    copies = [_edit(rng, texts[i], rng.randint(1, 8)) for i in originals]
    everything = texts + copies
    order = list(range(len(everything)))
    rng.shuffle(order)
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order))  # position of document j of `everything` in the shuffled corpus
    shuffled = [everything[j] for j in order]
    orig = where[np.array(originals)]
    copy = where[np.arange(len(texts), len(everything))]
    unrelated = np.setdiff1d(np.arange(len(shuffled)), np.concatenate([orig, copy]))
    return shuffled, orig, copy, unrelated


def _write(texts: list[str], root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for f in range(0, len(texts), PER_FILE):
        with (root / f"part-{f // PER_FILE:03d}.jsonl").open("w") as out:
            for i in range(f, min(f + PER_FILE, len(texts))):
                out.write(json.dumps({"id": f"doc-{i}", "text": texts[i]}) + "\n")


def _index(keys: np.ndarray) -> np.ndarray:
    return (keys >> 32) * PER_FILE + (keys & 0xFFFFFFFF)


def _listed(out: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet"))).sort_by("key")


@pytest.fixture(scope="module")
def char_corpus(tmp_path_factory: pytest.TempPathFactory):
    texts, orig, copy, unrelated = _char_corpus()
    root = tmp_path_factory.mktemp("char") / "in"
    _write(texts, root)
    return texts, orig, copy, unrelated, root


def test_char_ngrams_find_planted_copies_keep_unrelated_and_list_ids(char_corpus, tmp_path: Path) -> None:
    texts, orig, copy, unrelated, root = char_corpus
    out = tmp_path / "dups"
    wf = FuzzyDuplicates(
        JsonlReader(root), ParquetWriter(out), char_ngrams=24, identify_only=True, id_field="id", buckets=6
    )
    result = wf.run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    assert list(result.phases) == CHAR_PHASES
    listed = _listed(out)
    assert listed.column_names == ["key", "group_key", "path", "row", "group_path", "group_row", "id", "group_id"]
    group_of = np.arange(len(texts))
    group_of[_index(listed["key"].to_numpy())] = _index(listed["group_key"].to_numpy())
    # the truth: exact Jaccard of NeMo's character 24-gram sets of each planted pair
    jaccard = minhash.text_jaccard([texts[i] for i in orig], [texts[i] for i in copy], char_ngrams=24)
    corpus = NearDuplicateCorpus(texts, orig, copy, np.zeros(len(orig)), unrelated, seed=11)
    score = score_groups(corpus, group_of, jaccard, threshold=0.8)
    print(f"\nchar 24-gram fuzzy dedup: {score}; pair Jaccard {jaccard.min():.2f}..{jaccard.max():.2f}")
    assert score.pairs_at_threshold > 60 and (jaccard < 0.8).sum() > 20, "edits spread the pairs around 0.8"
    assert score.recall >= 0.95, str(score)
    assert score.unrelated_removed == 0, str(score)
    # the ids are the input's own, of the listed document and of its group's survivor
    assert listed["id"].to_pylist() == [f"doc-{i}" for i in _index(listed["key"].to_numpy())]
    assert listed["group_id"].to_pylist() == [f"doc-{i}" for i in _index(listed["group_key"].to_numpy())]
    assert (listed["group_key"].to_numpy() < listed["key"].to_numpy()).all()
    # the same configuration on word shingles misses the typo copies that char n-grams find
    words = minhash.text_jaccard([texts[i] for i in orig], [texts[i] for i in copy], ngram=5)
    assert (words < jaccard).mean() > 0.9


def test_char_ngram_list_is_the_same_for_any_shards_per_phase(char_corpus, tmp_path: Path) -> None:
    *_, root = char_corpus
    lists = {}
    for layout in [(1, 1, 1, 1, 1), (3, 4, 1, 2, 1)]:
        out = tmp_path / "x".join(map(str, layout))
        wf = FuzzyDuplicates(
            JsonlReader(root), ParquetWriter(out), char_ngrams=24, identify_only=True, id_field="id", buckets=4
        )
        for phase, shards in zip(CHAR_PHASES, layout, strict=True):
            for i in range(shards):
                wf.run(LocalExecutor(workers=1), shard=ShardSpec.explicit(i, shards), options=RunOptions(phase=phase))
        lists[layout] = _listed(out)
    first, second = lists.values()
    assert first.num_rows > 100 and first.equals(second)


def test_removal_with_char_ngrams_keeps_one_of_each_group(char_corpus, tmp_path: Path) -> None:
    texts, orig, copy, *_, root = char_corpus
    out = tmp_path / "kept"
    wf = FuzzyDuplicates(JsonlReader(root), ParquetWriter(out), char_ngrams=24, buckets=4)
    wf.run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    kept = set(pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet")))["id"].to_pylist())
    both = [f"doc-{o}" in kept and f"doc-{c}" in kept for o, c in zip(orig, copy, strict=True)]
    jaccard = minhash.text_jaccard([texts[i] for i in orig], [texts[i] for i in copy], char_ngrams=24)
    assert not any(b for b, j in zip(both, jaccard, strict=True) if j >= 0.9)
    assert len(kept) > len(texts) - len(copy) - 5


def test_options_are_checked_before_any_work(tmp_path: Path) -> None:
    reader, writer = JsonlReader(tmp_path), ParquetWriter(tmp_path / "out")
    with pytest.raises(ValueError, match=r"char_ngrams=1 must be >= 2"):
        FuzzyDuplicates(reader, writer, char_ngrams=1)
    with pytest.raises(ValueError, match="only identify_only=True writes"):
        FuzzyDuplicates(reader, writer, id_field="id")
    # the shingling is part of the signatures phase's fingerprint: words and characters never share a run
    words = FuzzyDuplicates(reader, writer, identify_only=True).phases[0].pipeline.stages[1].params()
    chars = FuzzyDuplicates(reader, writer, identify_only=True, char_ngrams=24).phases[0].pipeline.stages[1].params()
    assert (words["char_ngrams"], chars["char_ngrams"]) == (None, 24)


def test_fineweb_configuration_14_bands_of_8_rows() -> None:
    """datatrove's MinhashConfig defaults, FineWeb's dedup: 5-word shingles, 14 buckets of 8 hashes (112
    permutations). The S-curve: a pair at Jaccard 0.8 becomes a candidate with probability 0.924, at 0.75
    with 0.77, at 0.5 with 0.05 (1 - (1 - s**8)**14)."""
    assert (minhash.FINEWEB_NGRAM, minhash.FINEWEB_BANDS, minhash.FINEWEB_ROWS) == (5, 14, 8)
    p = minhash.candidate_probability(np.array([0.5, 0.75, 0.8, 0.9]), minhash.FINEWEB_BANDS, minhash.FINEWEB_ROWS)
    assert np.allclose(p, [1 - (1 - s**8) ** 14 for s in (0.5, 0.75, 0.8, 0.9)])
    assert np.round(p, 3).tolist() == [0.053, 0.772, 0.924, 1.0]


def test_fineweb_configuration_through_the_workflow(tmp_path: Path) -> None:
    corpus = near_duplicate_corpus(unrelated=1200, originals=300, words=200, seed=8)
    root = tmp_path / "in"
    root.mkdir()
    for f in range(0, len(corpus.texts), PER_FILE):
        with (root / f"part-{f // PER_FILE:03d}.jsonl").open("w") as out:
            for i in range(f, min(f + PER_FILE, len(corpus.texts))):
                out.write(json.dumps({"id": f"d{i}", "text": corpus.texts[i]}) + "\n")
    out = tmp_path / "dups"
    wf = FuzzyDuplicates(
        JsonlReader(root),
        ParquetWriter(out),
        ngram=minhash.FINEWEB_NGRAM,
        bands=minhash.FINEWEB_BANDS,
        rows=minhash.FINEWEB_ROWS,
        identify_only=True,
        buckets=4,
    )
    wf.run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    runs = sorted((tmp_path / "dups" / ".curator-work" / "shuffle" / "bands").rglob("*.runs"))
    band = np.concatenate([block["band"] for p in runs for b in range(4) for block, _ in read_run(str(p), b)])
    assert len(band) == 14 * len(corpus.texts)  # one row per (document, band)
    assert sorted(set(band.tolist())) == list(range(14))
    listed = _listed(out)
    group_of = np.arange(len(corpus.texts))
    group_of[_index(listed["key"].to_numpy())] = _index(listed["group_key"].to_numpy())
    jaccard = corpus.pair_jaccard()
    high = score_groups(corpus, group_of, jaccard, threshold=0.85)
    print(f"\nFineWeb's 14 x 8 through the workflow, pairs at Jaccard >= 0.85: {high}")
    assert high.pairs_at_threshold > 100 and high.recall >= 0.97, str(high)
    assert high.unrelated_removed <= 0.001, str(high)


def test_dedup_example_takes_char_ngrams_and_lists_ids(char_corpus, tmp_path: Path) -> None:
    """``examples/dedup.py --fuzzy --char-ngrams 24 --identify-only --id-field id``: the list the library
    writes, through the command line."""
    import subprocess
    import sys

    from support.helpers import REPO, clean_env

    *_, root = char_corpus
    out = tmp_path / "cli"
    cmd = [sys.executable, str(REPO / "examples" / "dedup.py"), "--fuzzy", "--char-ngrams", "24",
           "--identify-only", "--id-field", "id", "--buckets", "4", "--workers", "1",
           "--input", str(root), "--output", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, env=clean_env(), timeout=600)
    library = tmp_path / "lib"
    wf = FuzzyDuplicates(
        JsonlReader(root), ParquetWriter(library), char_ngrams=24, identify_only=True, id_field="id", buckets=4
    )
    wf.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    listed = _listed(out)
    assert listed.num_rows > 100 and listed.equals(_listed(library))


@pytest.mark.slurm
def test_char_ngram_list_with_ids_as_real_arrays(slurm_cluster: str, char_corpus, tmp_path: Path) -> None:
    """The five phases of char n-grams with ids, each a real array waiting for the one before: the same
    list as the local run."""
    from support.helpers import REPO, arrays_match_local

    *_, root = char_corpus
    args = ["--fuzzy", "--char-ngrams", "24", "--identify-only", "--id-field", "id", "--input", str(root),
            "--buckets", "4"]  # fmt: skip
    dedup = REPO / "examples" / "dedup.py"
    arrays_match_local(dedup, args, tmp_path / "ref", tmp_path / "out", ["--shards", "3", "--phase-shards",
                       "candidates=2"], CHAR_PHASES)  # fmt: skip
