"""The filesystem layer's paths: local paths exactly as before (ids and output names unchanged), URIs kept as
URIs (``os.path.abspath("s3://b/k")`` made ``<cwd>/s3:/b/k``), and a whole pipeline through ``pyarrow.fs``
(its in-memory ``mock://`` filesystem stands for an object store: no rename, no POSIX calls)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, ShardSpec, fs
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.positions import document_positions
from curator_slurm.tasks import DocumentBatch, FileGroupTask, content_id


@pytest.mark.parametrize("path", ["a/b.jsonl", "./x/../y.jsonl", "/abs/p.parquet", "s3:", "dir//f"])
def test_local_paths_are_what_abspath_gave(path: str) -> None:
    assert fs.absolute(path) == os.path.abspath(path)
    assert fs.absolute("file://" + os.path.abspath(path)) == os.path.abspath(path)


def test_local_file_group_ids_are_unchanged(tmp_path: Path) -> None:
    """The id of a local file group hashes the paths relative to the root, exactly as before the layer, so
    existing run directories and output names stay valid."""
    (tmp_path / "sub").mkdir()
    for name in ("a.jsonl", "sub/b.jsonl"):
        (tmp_path / name).write_text('{"text": "x"}\n')
    task = FileGroupTask.from_paths([str(tmp_path / "sub/b.jsonl"), str(tmp_path / "a.jsonl")], root=str(tmp_path))
    assert task.task_id == content_id("a.jsonl", "sub/b.jsonl")
    assert task.data == [str(tmp_path / "a.jsonl"), str(tmp_path / "sub/b.jsonl")]
    piece = FileGroupTask.from_range(str(tmp_path / "a.jsonl"), 0, 7, root=str(tmp_path))
    assert piece.task_id == content_id("a.jsonl", "bytes=0-7")


def test_uris_stay_uris_in_file_groups() -> None:
    task = FileGroupTask.from_paths(
        ["s3://bucket/in/b.jsonl", "s3://bucket/in//a.jsonl"], root="s3://bucket/in/", bytes=2
    )
    assert task.data == ["s3://bucket/in/a.jsonl", "s3://bucket/in/b.jsonl"]
    assert task.metadata["root"] == "s3://bucket/in"
    assert task.task_id == content_id("a.jsonl", "b.jsonl")
    piece = FileGroupTask.from_range("S3://bucket/in/a.jsonl", 10, 20, root="s3://bucket/in")
    assert piece.data == ["s3://bucket/in/a.jsonl"] and piece.task_id == content_id("a.jsonl", "bytes=10-20")


def test_uri_path_arithmetic() -> None:
    assert fs.join("s3://b/out", "x.parquet") == "s3://b/out/x.parquet"
    assert fs.split("s3://b/out/x.parquet") == ("s3://b/out", "x.parquet")
    assert fs.relative("s3://b/in/sub/x.jsonl", "s3://b/in") == "sub/x.jsonl"
    assert fs.common_root(["s3://b/in/x", "s3://b/in/y/z"]) == "s3://b/in"
    with pytest.raises(ValueError, match="different filesystems"):
        fs.common_root(["s3://b/in", "/local/in"])


class _Positions(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Adds each document's position (relative path, row): what ids and dedup build on."""

    def process(self, task: DocumentBatch) -> DocumentBatch:
        where = document_positions(task)
        table = task.data.append_column("path", where.paths).append_column("row", pa.array(where.rows))
        return task.derive(table)


def _put(uri: str, data: bytes) -> None:
    fs.atomic_write(uri, lambda f: f.write(data))


def test_a_pipeline_reads_and_writes_through_pyarrow_fs(tmp_path: Path) -> None:
    """JSONL in (whole files and split pieces) and Parquet out on a filesystem that only ``pyarrow.fs`` serves;
    then Parquet back in: every document once, positions relative to the URI root, nothing hidden left."""
    root = "mock://bucket/in"
    fs.makedirs(root)
    rows = {name: [{"text": f"{name} {i}"} for i in range(30)] for name in ("a.jsonl", "sub/b.jsonl.gz")}
    _put(f"{root}/a.jsonl", "".join(json.dumps(r) + "\n" for r in rows["a.jsonl"]).encode())

    _put(
        f"{root}/sub/b.jsonl.gz", gzip.compress("".join(json.dumps(r) + "\n" for r in rows["sub/b.jsonl.gz"]).encode())
    )
    _put(f"{root}/.a.jsonl.tmp-1-00000000", b"half")  # hidden: never read
    out = "mock://bucket/out"
    reader = JsonlReader(root, blocksize=300, split_files=True)
    pipeline = Pipeline("p").add_stage(reader).add_stage(_Positions()).add_stage(ParquetWriter(out))
    result = pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single(), run_dir=tmp_path / "run")
    assert result.output_files and all(f.startswith(out + "/") for f in result.output_files)
    tables = [pq.read_table(fs.open_input(f)) for f in fs.finished_files(out, ".parquet")]
    got = sorted((r["path"], r["row"], r["text"]) for t in tables for r in t.to_pylist())
    want = sorted((name, i, r["text"]) for name, rs in rows.items() for i, r in enumerate(rs))
    assert got == want
    again = Pipeline("q").add_stage(ParquetReader(out)).add_stage(JsonlWriter(tmp_path / "back"))
    again.run(LocalExecutor(workers=1), shard=ShardSpec.single(), run_dir=tmp_path / "run2")
    back = [
        json.loads(line) for p in sorted((tmp_path / "back").glob("*.jsonl")) for line in p.read_text().splitlines()
    ]
    assert sorted(r["text"] for r in back) == sorted(t for _, _, t in want)
    assert not [i for i in fs.list_tree([out], None).hidden]
