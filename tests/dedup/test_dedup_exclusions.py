"""Deduplication writes what it removed: with an exclusion writer, every removed document is in the exclusions
exactly once, beside the kept output every input document is in exactly one of the two, and each exclusion
names the document it duplicated (path and row in the input, and its id where the list has ids), for any
shard count of the write phase."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, ShardSpec
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetWriter
from curator_slurm.stages.filters.decide import REASON_FIELD
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from dedup.test_exact_dedup import brute_force, make_dup_corpus


@pytest.fixture(scope="module")
def dup_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dups")
    make_dup_corpus(root)
    return root


def _input(root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every input document by its position: (path relative to the root, row)."""
    docs = {}
    for path in sorted(root.rglob("*.jsonl")):
        for row, line in enumerate(path.read_text().splitlines()):
            docs[(path.relative_to(root).as_posix(), row)] = json.loads(line)
    return docs


def _rows(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(directory.glob("*.jsonl")) for line in p.read_text().splitlines()]


def _kept(output: Path) -> list[str]:
    return [i for p in sorted(output.glob("*.parquet")) for i in pq.read_table(p).column("id").to_pylist()]


def _run(wf: Any, phases: list[str], layout: tuple[int, ...]) -> None:
    for phase, shards in zip(phases, layout, strict=True):
        for i in range(shards):
            wf.run(LocalExecutor(workers=1), shard=ShardSpec.explicit(i, shards), options=RunOptions(phase=phase))


@pytest.mark.parametrize("write_shards", [1, 3])
def test_exact_dedup_writes_each_removed_document_once_with_its_survivor(
    dup_corpus: Path, tmp_path: Path, write_shards: int
) -> None:
    removed = tmp_path / "removed"
    out = tmp_path / "out"
    wf = ExactDuplicates(
        JsonlReader(dup_corpus), ParquetWriter(out), id_field="id", buckets=5, exclusion_writer=JsonlWriter(removed)
    )
    _run(wf, ["hash", "find", "write"], (2, 3, write_shards))
    kept, dropped = brute_force(dup_corpus)
    rows = _rows(removed)
    assert sorted(r["id"] for r in rows) == sorted(dropped), "each removed document exactly once"
    assert sorted(_kept(out) + [r["id"] for r in rows]) == sorted(d["id"] for d in _input(dup_corpus).values())
    docs = _input(dup_corpus)
    for r in rows:
        assert r[REASON_FIELD] == "duplicate"
        assert r["survivor_id"] == dropped[r["id"]]
        survivor = docs[(r["survivor_path"], r["survivor_row"])]  # the position names the survivor in the input
        assert survivor["id"] == dropped[r["id"]] and survivor["id"] in kept
        assert " ".join(survivor["text"].split()) == " ".join(r["text"].split())
    again = tmp_path / "again"
    wf2 = ExactDuplicates(
        JsonlReader(dup_corpus), ParquetWriter(tmp_path / "out2"), id_field="id", buckets=5,
        exclusion_writer=JsonlWriter(again),
    )  # fmt: skip
    wf2.run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    assert {p.name: p.read_bytes() for p in again.glob("*.jsonl")} == {
        p.name: p.read_bytes() for p in removed.glob("*.jsonl")
    }, "the same exclusion files, byte for byte, whatever the shards"


def test_fuzzy_dedup_names_the_survivor_of_each_removed_document(dup_corpus: Path, tmp_path: Path) -> None:
    """Exact copies are near-duplicates too: each removed document's survivor, by path and row, is a kept
    document with the same text (before whitespace normalisation the copies may differ)."""
    removed = tmp_path / "removed"
    out = tmp_path / "out"
    wf = FuzzyDuplicates(JsonlReader(dup_corpus), ParquetWriter(out), buckets=4, exclusion_writer=JsonlWriter(removed))
    _run(wf, ["signatures", "candidates", "components", "write"], (2, 2, 1, 3))
    docs = _input(dup_corpus)
    rows = _rows(removed)
    kept = _kept(out)
    assert rows and sorted(kept + [r["id"] for r in rows]) == sorted(d["id"] for d in docs.values())
    for r in rows:
        survivor = docs[(r["survivor_path"], r["survivor_row"])]
        assert survivor["id"] in kept and r["survivor_key"] < _key_of(docs, r["id"])


def _key_of(docs: dict[tuple[str, int], dict[str, Any]], doc_id: str) -> int:
    """The document key (file index in the sorted listing << 32 | row) of ``doc_id``."""
    files = sorted({path for path, _ in docs})
    path, row = next(k for k, d in docs.items() if d["id"] == doc_id)
    return files.index(path) << 32 | row


def test_exclusion_writer_with_identify_only_is_refused(dup_corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="identify_only=True removes nothing"):
        ExactDuplicates(
            JsonlReader(dup_corpus), ParquetWriter(tmp_path), identify_only=True, exclusion_writer=JsonlWriter(tmp_path)
        )


def test_dedup_of_an_earlier_phases_outputs_names_each_survivor(dup_corpus: Path, tmp_path: Path) -> None:
    """As the FineWeb recipe chains them: dedup reads what a filtering phase wrote, and names each survivor by its
    file among that phase's outputs and its row there (fuzzy dedup's keys number those outputs by the earlier
    phase's tasks). Every document is in the output or the exclusions, once."""
    from curator_slurm import Pipeline
    from curator_slurm.workflows.chain import PhaseOutputsReader
    from curator_slurm.workflows.workflow import Phase, Workflow

    for kind in ("exact", "fuzzy"):
        work = tmp_path / kind / ".curator-work"
        base = Pipeline("base").add_stage(JsonlReader(dup_corpus)).add_stage(JsonlWriter(work / "base"))
        reader = PhaseOutputsReader(base, work / ".curator-run" / "base", work / "base")
        removed, out = tmp_path / kind / "removed", tmp_path / kind / "out"
        options = {"work_dir": work, "buckets": 4, "exclusion_writer": JsonlWriter(removed)}
        dedup = (ExactDuplicates if kind == "exact" else FuzzyDuplicates)(reader, ParquetWriter(out), **options)
        Workflow(kind, work, [Phase("base", base), *dedup.phases]).run(LocalExecutor(workers=1))
        rows, kept = _rows(removed), _kept(out)
        assert rows and sorted(kept + [r["id"] for r in rows]) == sorted(d["id"] for d in _input(dup_corpus).values())
        written = _input(work / "base")
        for r in rows:
            assert r["survivor_row"] == r["survivor_key"] & 0xFFFFFFFF
            survivor = written[(r["survivor_path"], r["survivor_row"])]
            assert survivor["id"] in kept and survivor["id"] != r["id"]
            if kind == "exact":
                assert " ".join(survivor["text"].split()) == " ".join(r["text"].split())
