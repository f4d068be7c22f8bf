"""Fuzzy dedup with the exact Jaccard check (``jaccard_check="exact"``): a planted LSH false positive that the
estimated check keeps is removed, planted pairs at Jaccard >= 0.8 are still found, and the two extra phases
give the same output for any shard count per phase, after kill -9, and as real Slurm arrays."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, ShardSpec
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup import minhash as mh
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.dedup.synthetic import near_duplicate_corpus, score_groups
from support.helpers import (
    REPO,
    arrays_match_local,
    kill_mid_phase_then_rerun,
    parquet_tables,
)

DEDUP = REPO / "examples" / "dedup.py"
PER_FILE = 250
PHASES = ["signatures", "candidates", "edge-shingles", "verify", "components", "write"]
THRESHOLD = 0.8


def write_corpus(texts: list[str], root: Path) -> None:
    """``texts`` in files of PER_FILE documents, in order."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(0, len(texts), PER_FILE):
        with (root / f"part-{f // PER_FILE:03d}.jsonl").open("w") as out:
            for i in range(f, min(f + PER_FILE, len(texts))):
                out.write(json.dumps({"idx": i, "text": texts[i]}) + "\n")


def false_positive_pair(seed: int = 0) -> tuple[list[str], float, float]:
    """Two texts whose exact Jaccard similarity is below THRESHOLD but whose 8-bit signature estimate (the
    one the ``estimate`` check computes) is at or above it, and which share a band (so LSH pairs them):
    found by editing 5 of 200 words of random texts until the estimate errs upwards."""
    rng = random.Random(seed)
    vocabulary = [f"fp{i}word" for i in range(50_000)]
    for _ in range(10_000):
        a = [rng.choice(vocabulary) for _ in range(200)]
        b = list(a)
        for i in rng.sample(range(200), 5):
            b[i] = rng.choice(vocabulary)
        texts = [" ".join(a), " ".join(b)]
        exact = float(mh.text_jaccard(texts[:1], texts[1:])[0])
        if not THRESHOLD - 0.06 <= exact < THRESHOLD:
            continue
        offsets, hashes = mh.shingle_hashes(texts)
        sig = mh.minhash_signatures(offsets, hashes)
        estimate = float(mh.signature_similarity(sig[:1].astype(np.uint8), sig[1:].astype(np.uint8), bits=8)[0])
        bands = mh.band_hashes(sig)
        if estimate >= THRESHOLD and (bands[0] == bands[1]).any():
            return texts, exact, estimate
    raise AssertionError("no false positive found in 10,000 tries")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory):
    """The planted corpus of test_fuzzy_dedup, with a false-positive pair as its last two documents."""
    corpus = near_duplicate_corpus(unrelated=3000, originals=600, words=200, seed=5)
    pair, exact, estimate = false_positive_pair()
    root = tmp_path_factory.mktemp("fuzzy-exact") / "in"
    write_corpus([*corpus.texts, *pair], root)
    return corpus, root, (exact, estimate)


def groups_listed(out: Path, documents: int) -> np.ndarray:
    """Each document's group (the index of its survivor; itself if not listed) from an identify-only list."""
    listed = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet")))
    index = lambda keys: (keys >> 32) * PER_FILE + (keys & 0xFFFFFFFF)  # noqa: E731 - files of PER_FILE
    group_of = np.arange(documents)
    group_of[index(listed["key"].to_numpy())] = index(listed["group_key"].to_numpy())
    return group_of


def test_exact_check_removes_a_false_positive_the_estimate_keeps(planted, tmp_path: Path) -> None:
    corpus, root, (exact, estimate) = planted
    n = len(corpus.texts)
    assert exact < THRESHOLD <= estimate
    groups = {}
    for check in ("estimate", "exact"):
        out = tmp_path / check
        wf = FuzzyDuplicates(JsonlReader(root), ParquetWriter(out), identify_only=True, buckets=8,
                             jaccard_threshold=THRESHOLD, jaccard_check=check)  # fmt: skip
        result = wf.run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
        assert list(result.phases) == (PHASES[:5] if check == "exact" else ["signatures", "candidates", "components"])
        groups[check] = groups_listed(out, n + 2)
    assert groups["estimate"][n + 1] == n, "the estimate passes the pair below the threshold"
    assert groups["exact"][n + 1] == n + 1 and groups["exact"][n] == n, "the exact check removes it"
    score = score_groups(corpus, groups["exact"][:n], corpus.pair_jaccard(), threshold=THRESHOLD)
    print(f"\nexact check at {THRESHOLD}: {score}; the false positive: exact {exact:.3f}, estimated {estimate:.3f}")
    assert score.pairs_at_threshold > 200, "the corpus plants enough pairs to measure"
    assert score.recall >= 0.98, str(score)
    assert score.unrelated_removed <= 0.001, str(score)
    # every document the exact check grouped with its survivor is at least THRESHOLD similar to some member
    # of its group (the star edges are checked exactly; a group is connected through them)
    listed = np.flatnonzero(groups["exact"] != np.arange(n + 2))
    texts = [*corpus.texts, *([""] * 2)]
    members = {g: np.flatnonzero(groups["exact"] == g) for g in set(groups["exact"][listed].tolist())}
    for i in listed.tolist():
        others = [j for j in members[groups["exact"][i]] if j != i]
        assert mh.text_jaccard([texts[i]] * len(others), [texts[j] for j in others]).max() >= THRESHOLD


def test_exact_check_output_is_the_same_for_any_shards_per_phase(planted, tmp_path: Path) -> None:
    corpus, root, _ = planted
    outputs = {}
    for layout in [(1, 1, 1, 1, 1, 1), (4, 3, 2, 5, 1, 2)]:
        out = tmp_path / "x".join(map(str, layout))
        wf = FuzzyDuplicates(JsonlReader(root), ParquetWriter(out), buckets=6, jaccard_threshold=THRESHOLD,
                             jaccard_check="exact")  # fmt: skip
        for phase, shards in zip(PHASES, layout, strict=True):
            for i in range(shards):
                wf.run(LocalExecutor(workers=1), shard=ShardSpec.explicit(i, shards), options=RunOptions(phase=phase))
        outputs[layout] = parquet_tables(out)
    one, many = outputs.values()
    assert list(one) == list(many) and all(one[n].equals(many[n]) for n in one)
    kept = sum(t.num_rows for t in one.values())
    assert 3000 < kept < len(corpus.texts), "unrelated documents stay, copies go"


def test_kill_9_in_the_verify_phase_then_rerun(planted, tmp_path: Path) -> None:
    _, root, _ = planted
    out, ref = tmp_path / "out", tmp_path / "ref"
    base = [sys.executable, str(DEDUP), "--fuzzy", "--input", str(root), "--buckets", "400", "--workers", "1",
            "--jaccard-threshold", str(THRESHOLD), "--jaccard-check", "exact"]  # fmt: skip
    kill_mid_phase_then_rerun(base, out, ref, "verify", "edge-shingles", tasks=400)


def test_exact_check_needs_a_threshold_and_a_known_name(tmp_path: Path) -> None:
    reader, writer = JsonlReader(tmp_path), ParquetWriter(tmp_path / "out")
    with pytest.raises(ValueError, match="jaccard_check='exact' needs a jaccard_threshold"):
        FuzzyDuplicates(reader, writer, jaccard_check="exact")
    with pytest.raises(ValueError, match="jaccard_check='exactly' must be one of"):
        FuzzyDuplicates(reader, writer, jaccard_threshold=0.8, jaccard_check="exactly")


@pytest.mark.slurm
def test_exact_check_as_real_arrays(slurm_cluster: str, planted, tmp_path: Path) -> None:
    _, root, _ = planted
    ref, out = tmp_path / "ref", tmp_path / "out"
    args = ["--fuzzy", "--input", str(root), "--buckets", "6", "--jaccard-threshold", str(THRESHOLD),
            "--jaccard-check", "exact"]  # fmt: skip
    arrays_match_local(DEDUP, args, ref, out, ["--shards", "3", "--phase-shards", "verify=4"], PHASES)
