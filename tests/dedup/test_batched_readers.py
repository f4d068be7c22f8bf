"""Readers that hand a large source task on in bounded batches keep every document's position: exact and fuzzy
deduplication keep the same documents as with one batch per source task, ids (AddId) are the same, split files
read in batches too, and every document is read once, for JSONL (plain and compressed), Parquet and WARC."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_exact_dedup import brute_force, make_dup_corpus
from test_fuzzy_dedup import write_corpus

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetReader, ParquetWriter
from curator_slurm.stages.modifiers.ids import AddId
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.dedup.synthetic import near_duplicate_corpus


def _kept(output: Path, field: str) -> list:
    return sorted(v for p in output.glob("*.parquet") for v in pq.read_table(p).column(field).to_pylist())


def _run(workflow: ExactDuplicates | FuzzyDuplicates) -> None:
    workflow.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())


def test_exact_dedup_keeps_the_same_documents_when_files_are_read_in_batches(tmp_path: Path) -> None:
    make_dup_corpus(tmp_path / "in", files=6, docs=40)
    expected, _ = brute_force(tmp_path / "in")
    kept = {}
    for name, reader in {
        "whole": JsonlReader(tmp_path / "in"),
        "batches of 7": JsonlReader(tmp_path / "in", batch_rows=7),
        "pieces in batches": JsonlReader(tmp_path / "in", blocksize="3KiB", split_files=True, batch_rows=4),
    }.items():
        out = tmp_path / name.replace(" ", "_")
        _run(ExactDuplicates(reader, ParquetWriter(out), id_field="id", buckets=3))
        kept[name] = _kept(out, "id")
    assert kept["whole"] == kept["batches of 7"] == kept["pieces in batches"] == sorted(expected)
    batched = sorted((tmp_path / "batches_of_7").glob("*.parquet"))
    assert len(batched) == 6, "one file per source task"
    groups = [pq.ParquetFile(p).metadata.num_row_groups for p in batched]
    assert max(groups) >= 2, f"a file of 40 documents read in batches of 7: a row group per batch ({groups})"


def test_fuzzy_dedup_keeps_the_same_documents_when_files_are_read_in_batches(tmp_path: Path) -> None:
    corpus = near_duplicate_corpus(unrelated=400, originals=120, words=120, seed=3)
    write_corpus(corpus.texts, tmp_path / "in")
    kept = {}
    for name, rows in (("whole", None), ("batched", 37)):
        out = tmp_path / name
        _run(FuzzyDuplicates(JsonlReader(tmp_path / "in", batch_rows=rows), ParquetWriter(out), buckets=4))
        kept[name] = _kept(out, "idx")
    assert kept["whole"] == kept["batched"]
    assert 400 <= len(kept["whole"]) < len(corpus.texts), "copies go, unrelated documents stay"


def _ids(source: object, out: Path) -> dict[int, str]:
    Pipeline("ids").add_stage(source).add_stage(AddId("doc_id")).add_stage(ParquetWriter(out)).run(
        LocalExecutor(workers=1), ShardSpec.single()
    )
    table = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet")))
    return dict(zip(table.column("n").to_pylist(), table.column("doc_id").to_pylist(), strict=True))


def _write_jsonl(path: Path, rows: list[dict], compress: bool) -> None:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)


@settings(max_examples=12, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    batch_rows=st.integers(1, 25),
    batch_bytes=st.sampled_from([None, 600, 5000]),
    compress=st.booleans(),
    files_per_partition=st.sampled_from([1, 3]),
)
def test_every_document_read_once_with_its_position_whatever_the_bound(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    batch_rows: int,
    batch_bytes: int | None,
    compress: bool,
    files_per_partition: int,
) -> None:
    """Batches of any bound, of groups of several files, plain or gzip: each document once, with the id (its
    position) an unbatched read gives it."""
    root = tmp_path_factory.mktemp("batched")
    (root / "in").mkdir()
    rng, n = random.Random(len(sizes) * 31 + batch_rows), 0
    for f, size in enumerate(sizes):
        rows = [{"n": n + i, "text": "w " * rng.randint(0, 40)} for i in range(size)]
        n += size
        _write_jsonl(root / "in" / f"f{f}.jsonl{'.gz' if compress else ''}", rows, compress)
    whole = _ids(JsonlReader(root / "in", files_per_partition=files_per_partition), root / "whole")
    reader = JsonlReader(root / "in", files_per_partition=files_per_partition, batch_rows=batch_rows)
    reader.reader.batch_bytes = batch_bytes
    assert _ids(reader, root / "batched") == whole
    assert sorted(whole) == list(range(n))


def test_parquet_row_groups_are_read_a_batch_at_a_time(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    table = pa.table({"n": list(range(1000)), "text": [f"document {i} " * 20 for i in range(1000)]})
    pq.write_table(table, tmp_path / "in" / "big.parquet", row_group_size=128)
    whole = _ids(ParquetReader(tmp_path / "in"), tmp_path / "whole")
    batched = _ids(ParquetReader(tmp_path / "in", batch_bytes="40KiB"), tmp_path / "batched")
    assert batched == whole and sorted(whole) == list(range(1000))
    (only,) = (tmp_path / "batched").glob("*.parquet")
    assert pq.ParquetFile(only).metadata.num_row_groups >= 8, "a batch per row group at least (a row group each)"


def test_a_reader_rejects_a_bound_that_is_not_one() -> None:
    for bad in ({"batch_rows": 0}, {"batch_bytes": "lots"}, {"batch_bytes": 0}):
        with pytest.raises(ValueError, match="batch_"):
            JsonlReader("/nonexistent", **bad)  # type: ignore[arg-type]
