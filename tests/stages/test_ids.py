"""AddId: ids derive from document positions, so they are the same for any shard count, executor,
re-run, split of the files, and after the input directory moves; and they have the documented form."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from curator_slurm import InputError, LocalExecutor, Pipeline, PipelineBuildError, PipelineFailedError, ShardSpec
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.stages import (
    AddId,
    JsonlReader,
    LanguageFilter,
    Modify,
    ParquetReader,
    ParquetWriter,
    UnicodeReformatter,
    UrlRemover,
)
from curator_slurm.stages.modifiers.ids import position_ids
from support.executors import ExecutorFactory


def run_ids(
    input_dir: Path,
    output_dir: Path,
    shard: ShardSpec | None = None,
    executor: BaseExecutor | None = None,
    **reader: object,
) -> dict[str, tuple[str, str]]:
    """id -> (source file name, the document's own ``id`` field) for every document written."""
    pipeline = (
        Pipeline("ids")
        .add_stage(JsonlReader(str(input_dir), **reader))  # type: ignore[arg-type]
        .add_stage(AddId("doc_id", id_prefix="web"))
        .add_stage(Modify([UnicodeReformatter(), UrlRemover()]))  # keeps every row: ids made before it survive it
        .add_stage(LanguageFilter(languages=None, min_score=0.0))  # adds columns, keeps every document
        .add_stage(ParquetWriter(str(output_dir)))
    )
    pipeline.run(executor or LocalExecutor(workers=1), shard=shard or ShardSpec.single())
    return read_ids(output_dir)


def read_ids(output_dir: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path in sorted(output_dir.glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            assert row["doc_id"] not in out, f"duplicate id {row['doc_id']}"
            out[row["doc_id"]] = (row["id"].rsplit("-", 1)[0], row["id"])
    return out


def expected_id(prefix: str, relative_path: str, row: int) -> str:
    """The documented form, computed independently: <prefix>_<xxh64(relative path), 16 hex>_<row>."""
    return f"{prefix}_{xxhash.xxh64_hexdigest(relative_path.encode(), seed=0)}_{row}"


def test_ids_have_the_documented_form(corpus: Path, tmp_path: Path) -> None:
    ids = run_ids(corpus, tmp_path / "out")
    assert len(ids) == 12 * 60
    # make_corpus names documents <file stem>-<row>, so each id can be checked against its position.
    for doc_id, (stem, own) in ids.items():
        row = int(own.rsplit("-", 1)[1])
        assert doc_id == expected_id("web", f"{stem}.jsonl", row)


def test_one_shard_and_four_shards_give_the_same_ids(corpus: Path, tmp_path: Path) -> None:
    single = run_ids(corpus, tmp_path / "one")
    for i in range(4):  # the four shards write into one directory, as array tasks do
        run_ids(corpus, tmp_path / "four", ShardSpec.explicit(i, 4))
    assert read_ids(tmp_path / "four") == single  # read_ids also checks no id is written twice


def test_every_executor_gives_the_same_ids(corpus: Path, tmp_path: Path, executor_factory: ExecutorFactory) -> None:
    # Workers (forked, spawned or Ray actors) receive the stages by pickle and run their setup().
    reference = run_ids(corpus, tmp_path / "reference")
    assert run_ids(corpus, tmp_path / "executor", executor=executor_factory(workers=2)) == reference


def test_ids_survive_moving_the_input_and_a_rerun(corpus: Path, tmp_path: Path) -> None:
    before = run_ids(corpus, tmp_path / "before")
    moved = tmp_path / "elsewhere" / "deeper" / "corpus"
    shutil.copytree(corpus, moved)
    assert run_ids(moved, tmp_path / "after") == before
    assert run_ids(moved, tmp_path / "again") == before


def test_split_files_give_the_same_ids_as_whole_files(corpus: Path, tmp_path: Path) -> None:
    whole = run_ids(corpus, tmp_path / "whole")
    pieces = run_ids(corpus, tmp_path / "pieces", split_files=True, blocksize=4096)
    assert pieces == whole


def test_parquet_row_groups_read_in_pieces_give_the_same_ids(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for f in range(2):
        rows = [{"id": f"f{f}-{i}", "text": f"document {i} of file {f} " * 20} for i in range(500)]
        pq.write_table(pa.Table.from_pylist(rows), src / f"f{f}.parquet", row_group_size=64)

    def ids(out: str, **reader: object) -> dict[str, str]:
        pipeline = Pipeline("pq").add_stage(ParquetReader(str(src), **reader))  # type: ignore[arg-type]
        pipeline.add_stage(AddId("doc_id")).add_stage(ParquetWriter(str(tmp_path / out)))
        pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single())
        table = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / out).glob("*.parquet"))])
        return dict(zip(table.column("doc_id").to_pylist(), table.column("id").to_pylist(), strict=True))

    whole = ids("whole")
    assert len(whole) == 1000
    assert ids("pieces", split_files=True, blocksize=8192) == whole
    assert len(list((tmp_path / "pieces").glob("*.parquet"))) > 2  # the files were read in several pieces
    for doc_id, own in whole.items():
        stem, row = own.split("-")
        assert doc_id == expected_id("", f"{stem}.parquet", int(row)).lstrip("_")


def test_ids_in_subdirectories_use_the_relative_path(tmp_path: Path) -> None:
    src = tmp_path / "in"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    for sub in ("a", "b"):  # the same file name in two folders: different ids
        rows = [json.dumps({"id": f"{sub}-{i}", "text": "x"}) + "\n" for i in range(3)]
        (src / sub / "x.jsonl").write_text("".join(rows))
    ids = run_ids(src, tmp_path / "out")
    assert sorted(ids) == sorted(expected_id("web", f"{sub}/x.jsonl", i) for sub in "ab" for i in range(3))


def test_position_ids_without_prefix() -> None:
    paths = pa.array(["p.jsonl", "p.jsonl", "q/r.jsonl"])
    got = position_ids(paths, pa.array([0, 7, 0], pa.int64())).to_pylist()
    h = {p: xxhash.xxh64_hexdigest(p.encode(), seed=0) for p in ("p.jsonl", "q/r.jsonl")}
    assert got == [f"{h['p.jsonl']}_0", f"{h['p.jsonl']}_7", f"{h['q/r.jsonl']}_0"]


def test_add_id_refuses_an_existing_field_unless_told(corpus: Path, tmp_path: Path) -> None:
    pipeline = Pipeline("clash").add_stage(JsonlReader(str(corpus))).add_stage(AddId("id"))
    pipeline.add_stage(ParquetWriter(str(tmp_path / "out")))
    with pytest.raises(PipelineFailedError) as failure:
        pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single())
    assert "already has a field 'id'" in failure.value.result.failed[0].error
    assert "overwrite=True" in failure.value.result.failed[0].error

    pipeline = Pipeline("over").add_stage(JsonlReader(str(corpus))).add_stage(AddId("id", overwrite=True))
    pipeline.add_stage(ParquetWriter(str(tmp_path / "over")))
    pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single())
    first = pq.read_table(sorted((tmp_path / "over").glob("*.parquet"))[0]).column("id").to_pylist()
    assert all(len(i.split("_")) == 2 for i in first)


def test_add_id_after_a_stage_that_dropped_rows_says_where_to_put_it(tmp_path: Path) -> None:
    from curator_slurm import DocumentBatch

    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    batch = JsonlReader(str(src)).decompose()[1].process(_source_task(src / "a.jsonl", src))
    assert isinstance(batch, DocumentBatch)
    assert AddId("doc_id").process(batch).data.num_rows == 2
    dropped = batch.derive(batch.data.slice(0, 1))
    with pytest.raises(InputError, match="AddId"):
        AddId("doc_id").process(dropped)


def _source_task(path: Path, root: Path):  # type: ignore[no-untyped-def]
    from curator_slurm import FileGroupTask

    return FileGroupTask.from_paths([str(path)], root=str(root))


def test_add_id_arguments() -> None:
    with pytest.raises(ValueError, match="id_field"):
        AddId("")
    assert AddId("doc_id").outputs() == (["data"], ["*", "doc_id"])
    # Pipeline.build sees the id field AddId adds, next to the fields the reader reads.
    reader = JsonlReader("/nonexistent-dir", fields=["text"])
    ok = Pipeline("ok").add_stage(reader).add_stage(AddId("doc_id")).add_stage(Modify(str.lower, "doc_id"))
    ok.add_stage(ParquetWriter("/tmp/unused")).build()
    bad = Pipeline("bad").add_stage(reader).add_stage(AddId("doc_id")).add_stage(Modify(str.lower, "nope"))
    with pytest.raises(PipelineBuildError, match="nope"):
        bad.add_stage(ParquetWriter("/tmp/unused")).build()
