"""Chained phases (curator_slurm.workflows.chain): filter, then deduplicate what the filter kept, then rewrite it,
as one workflow whose later phases read the earlier phases' recorded outputs. The kept documents equal a brute-force
filter-then-dedup with the survivor rule "first occurrence in (input path, row) order", for any shard layout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetWriter, ScoreFilter, WordCountFilter
from curator_slurm.workflows.chain import PhaseOutputsReader
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.workflow import Phase, Workflow
from support.dupcorpus import make_dup_corpus

MIN_WORDS = 31


def chained(corpus: Path, out: Path) -> Workflow:
    work = out / ".curator-work"
    runs = work / ".curator-run"
    base = (
        Pipeline("base")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=MIN_WORDS)))
        .add_stage(JsonlWriter(str(work / "base")))
    )
    dedup = ExactDuplicates(
        reader=PhaseOutputsReader(base, runs / "base", work / "base"),
        writer=JsonlWriter(str(work / "deduped")),
        work_dir=str(work),
        buckets=8,
    )
    final = (
        Pipeline("final")
        .add_stage(PhaseOutputsReader(dedup.phases[-1].pipeline, runs / "write", work / "deduped"))
        .add_stage(ParquetWriter(str(out)))
    )
    return Workflow("chain", work, [Phase("base", base), *dedup.phases, Phase("final", final)])


def brute_force(corpus: Path) -> list[str]:
    """Ids kept by the filter, then the first of each normalised text in (relative path, row) order."""
    seen: set[str] = set()
    kept = []
    for path in sorted(corpus.rglob("*.jsonl"), key=lambda p: p.relative_to(corpus).as_posix()):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            norm = " ".join(record["text"].split())
            if len(record["text"].split()) < MIN_WORDS or norm in seen:
                continue
            seen.add(norm)
            kept.append(record["id"])
    return kept


def kept_ids(out: Path) -> dict[str, list[str]]:
    return {p.name: pq.read_table(p).column("id").to_pylist() for p in sorted(out.glob("*.parquet"))}


def test_filter_then_dedup_then_rewrite_equals_brute_force(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    make_dup_corpus(corpus)
    expected = brute_force(corpus)
    assert 0 < len(expected) < 320, "the corpus must have both filtered documents and duplicates"
    chained(corpus, tmp_path / "out").run(LocalExecutor(workers=2))
    got = kept_ids(tmp_path / "out")
    assert sorted(i for ids in got.values() for i in ids) == sorted(expected)


def test_sharded_phases_equal_the_unsharded_run(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    make_dup_corpus(corpus)
    chained(corpus, tmp_path / "one").run(LocalExecutor(workers=1))
    workflow = chained(corpus, tmp_path / "many")
    for phase, shards in zip([p.name for p in workflow.phases], [4, 3, 2, 3, 4], strict=True):
        for index in range(shards):
            options = RunOptions.from_env(os.environ | {"CURATOR_PHASE": phase})
            chained(corpus, tmp_path / "many").run(
                LocalExecutor(workers=1), shard=ShardSpec(index=index, count=shards), options=options
            )
    assert kept_ids(tmp_path / "many") == kept_ids(tmp_path / "one")
    assert kept_ids(tmp_path / "one"), "the run wrote documents"


def test_fuzzy_dedup_reads_an_earlier_phase(tmp_path: Path) -> None:
    """The same chain with MinHash dedup: every exact copy the filter kept is removed (they are near-duplicates
    too), the first in input order kept."""
    corpus = tmp_path / "in"
    make_dup_corpus(corpus)
    work = tmp_path / "out" / ".curator-work"
    base = (
        Pipeline("base")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=MIN_WORDS)))
        .add_stage(JsonlWriter(str(work / "base")))
    )
    dedup = FuzzyDuplicates(
        reader=PhaseOutputsReader(base, work / ".curator-run" / "base", work / "base"),
        writer=ParquetWriter(str(tmp_path / "out")),
        work_dir=str(work),
        buckets=8,
    )
    Workflow("chain", work, [Phase("base", base), *dedup.phases]).run(LocalExecutor(workers=2))
    got = sorted(i for ids in kept_ids(tmp_path / "out").values() for i in ids)
    expected = brute_force(corpus)
    # Near-duplicates beyond exact copies may go too; every exact copy goes and every survivor is kept.
    assert set(got) <= set(expected) and len(got) >= len(expected) * 0.9


def test_a_phase_whose_upstream_task_wrote_nothing_writes_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "short.jsonl").write_text(json.dumps({"id": "a", "text": "too short"}) + "\n")
    (corpus / "long.jsonl").write_text(json.dumps({"id": "b", "text": "word " * 40}) + "\n")
    chained(corpus, tmp_path / "out").run(LocalExecutor(workers=1))
    got = kept_ids(tmp_path / "out")
    assert [i for ids in got.values() for i in ids] == ["b"]
