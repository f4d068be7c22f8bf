"""Fuzzy deduplication as a workflow: recall of planted near-duplicates and unrelated documents removed,
measured through the whole workflow on files; the same kept set for any shard count per phase, locally, after
kill -9, and as real Slurm arrays."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, ShardSpec
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter
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
PHASES = ["signatures", "candidates", "components", "write"]


def write_corpus(texts: list[str], root: Path) -> None:
    """``texts`` in files of PER_FILE documents, in order, each document with its index."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(0, len(texts), PER_FILE):
        with (root / f"part-{f // PER_FILE:03d}.jsonl").open("w") as out:
            for i in range(f, min(f + PER_FILE, len(texts))):
                out.write(json.dumps({"idx": i, "text": texts[i]}) + "\n")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory):
    corpus = near_duplicate_corpus(unrelated=3000, originals=600, words=200, seed=5)
    root = tmp_path_factory.mktemp("fuzzy") / "in"
    write_corpus(corpus.texts, root)
    return corpus, root


def test_recall_and_unrelated_removed_through_the_workflow(planted, tmp_path: Path) -> None:
    corpus, root = planted
    out = tmp_path / "dups"
    wf = FuzzyDuplicates(JsonlReader(root), ParquetWriter(out), identify_only=True, buckets=8)
    result = wf.run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    assert list(result.phases) == PHASES[:3]
    listed = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet")))
    group_of = np.arange(len(corpus.texts))
    key_to_index = lambda keys: (keys >> 32) * PER_FILE + (keys & 0xFFFFFFFF)  # noqa: E731 - files of PER_FILE
    group_of[key_to_index(listed["key"].to_numpy())] = key_to_index(listed["group_key"].to_numpy())
    assert listed["path"].to_pylist()[:1] and listed["path"][0].as_py().startswith("part-")
    jaccard = corpus.pair_jaccard()
    score = score_groups(corpus, group_of, jaccard, threshold=0.8)
    print(f"\nfuzzy dedup through the workflow: {score}")
    assert score.pairs_at_threshold > 200, "the corpus plants enough pairs to measure"
    assert score.recall >= 0.98, str(score)
    assert score.unrelated_removed <= 0.001, str(score)
    # every survivor is the first document of its group in (path, row) order
    assert (listed["group_key"].to_numpy() < listed["key"].to_numpy()).all()


def test_kept_set_is_the_same_for_any_shards_per_phase(planted, tmp_path: Path) -> None:
    _, root = planted
    outputs = {}
    for layout in [(1, 1, 1, 1), (4, 3, 1, 2)]:
        out = tmp_path / "x".join(map(str, layout))
        wf = FuzzyDuplicates(JsonlReader(root), ParquetWriter(out), buckets=6)
        for phase, shards in zip(PHASES, layout, strict=True):
            for i in range(shards):
                wf.run(LocalExecutor(workers=1), shard=ShardSpec.explicit(i, shards), options=RunOptions(phase=phase))
        outputs[layout] = parquet_tables(out)
    one, four = outputs.values()
    assert list(one) == list(four) and all(one[n].equals(four[n]) for n in one)
    kept = sum(t.num_rows for t in one.values())
    assert 3000 < kept < len(planted[0].texts), "unrelated documents stay, copies go"


def test_kill_9_in_the_candidates_phase_then_rerun(planted, tmp_path: Path) -> None:
    _, root = planted
    out, ref = tmp_path / "out", tmp_path / "ref"
    base = [sys.executable, str(DEDUP), "--fuzzy", "--input", str(root), "--buckets", "200", "--workers", "1"]
    kill_mid_phase_then_rerun(base, out, ref, "candidates", "signatures", tasks=200)


@pytest.mark.slurm
def test_fuzzy_dedup_as_real_arrays(slurm_cluster: str, planted, tmp_path: Path) -> None:
    _, root = planted
    ref, out = tmp_path / "ref", tmp_path / "out"
    args = ["--fuzzy", "--input", str(root), "--buckets", "6"]
    arrays_match_local(DEDUP, args, ref, out, ["--shards", "4", "--phase-shards", "candidates=3"], PHASES)


def test_estimated_jaccard_check_drops_weak_candidates(planted, tmp_path: Path) -> None:
    """With jaccard_threshold, candidate edges whose estimated similarity is lower are dropped: planted pairs
    well above the threshold are still found, and fewer documents are grouped than without the check."""
    corpus, root = planted
    counts = {}
    for threshold in (None, 0.9):
        out = tmp_path / f"t{threshold}"
        wf = FuzzyDuplicates(JsonlReader(root), ParquetWriter(out), identify_only=True, buckets=4,
                             jaccard_threshold=threshold)  # fmt: skip
        wf.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
        listed = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet")))
        group_of = np.arange(len(corpus.texts))
        index = (listed["key"].to_numpy() >> 32) * PER_FILE + (listed["key"].to_numpy() & 0xFFFFFFFF)
        group = (listed["group_key"].to_numpy() >> 32) * PER_FILE + (listed["group_key"].to_numpy() & 0xFFFFFFFF)
        group_of[index] = group
        score = score_groups(corpus, group_of, corpus.pair_jaccard(), threshold=0.95)
        print(f"\njaccard_threshold={threshold}: {score}; {listed.num_rows} documents listed")
        assert score.recall >= 0.98, str(score)
        counts[threshold] = listed.num_rows
    assert counts[0.9] < counts[None]
