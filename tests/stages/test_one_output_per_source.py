"""A writer makes one output per source task (numbered parts past max_file_size), published when the source task
ends: the same names and bytes however the run is cut (whole, sharded, resumed after a kill, retried), never
a published partial file of a failed or killed source task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm import DocumentBatch, LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.backends.run import hint_fan_out
from curator_slurm.fs import TMP_MARK
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.upstream import recorded
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetWriter, ProcessingStage
from curator_slurm.stages.io.outputs import FAN_OUT_ABOVE, Naming, fan_out_dir
from support.helpers import clean_env, read_tree


def _corpus(root: Path, files: int = 3, rows: int = 40) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = [json.dumps({"id": f * 1000 + i, "text": f"doc {f}/{i} " + "word " * (i % 7)}) for i in range(rows)]
        (root / f"f{f}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _pipeline(src: Path, out: Path, *middle: ProcessingStage, writer: Any = None, **reader: Any) -> Pipeline:
    pipeline = Pipeline("one-output").add_stage(JsonlReader(str(src), files_per_partition=1, **reader))
    for stage in middle:
        pipeline.add_stage(stage)
    return pipeline.add_stage(writer or JsonlWriter(out))


def _run(pipeline: Pipeline, shard: ShardSpec | None = None) -> Any:
    return pipeline.run(LocalExecutor(workers=1, retry_backoff=0), shard=shard or ShardSpec.single())


def _outputs(out: Path) -> dict[str, bytes]:
    return {k: v for k, v in read_tree(out).items() if not k.startswith(DEFAULT_RUN_DIR_NAME)}


def test_a_206_mb_jsonl_file_makes_one_output_file(tmp_path: Path) -> None:
    """The size of a real WARC's extracted text: four 64 MiB batches in, one file out, recorded with its size,
    byte for byte the input (compact JSON in the writer's key order)."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    text = "lorem ipsum dolor sit amet " * 3800  # about 100 KB a document
    with open(src / "big.jsonl", "w") as f:
        for i in range(2060):
            f.write(json.dumps({"id": i, "text": text}, separators=(",", ":")) + "\n")
    assert (src / "big.jsonl").stat().st_size >= 206_000_000
    result = _run(_pipeline(src, out, **{"file_path_field": None}))
    assert [s.tasks_out for s in result.stages if s.name == "jsonl_reader"] == [4], "four 64 MiB batches"
    (only,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert result.output_files == [str(only)]
    (record,) = recorded(str(out / DEFAULT_RUN_DIR_NAME)).values()
    assert [(os.path.basename(p), size) for p, size in record.files] == [(only.name, only.stat().st_size)]
    assert only.stat().st_size == (src / "big.jsonl").stat().st_size
    with open(only, "rb") as a, open(src / "big.jsonl", "rb") as b:  # compared in pieces: no 400 MB in memory
        while chunk := a.read(1 << 24):
            assert chunk == b.read(1 << 24)


def test_parts_roll_over_at_max_file_size_with_the_same_names_and_bytes_however_the_run_is_cut(tmp_path: Path) -> None:
    """Small batches and a small size limit: each source task writes numbered parts; whole and in three shards
    (each shard its own run directory) the files are the same, and together hold every document once."""
    src = _corpus(tmp_path / "in")
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    _run(_pipeline(src, whole, writer=JsonlWriter(whole, max_file_size=600), batch_rows=7))
    for i in range(3):
        _run(_pipeline(src, sharded, writer=JsonlWriter(sharded, max_file_size=600), batch_rows=7), ShardSpec(i, 3))
    files = _outputs(whole)
    assert files == _outputs(sharded)
    assert all(k.rsplit("-p", 1)[1].split(".")[0].isdigit() for k in files), sorted(files)
    assert len(files) > 3 and {k.split("-p")[0] for k in files} == {k.split("-p")[0] for k in files if "-p0." in k}
    lines = [line for v in files.values() for line in v.decode().splitlines()]
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(f * 1000 + i for f in range(3) for i in range(40))
    assert all(len(v) < 600 + 7 * 200 for v in files.values())


class FailOn(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Fails on the batch that holds document ``doc`` (no retry), while ``marker`` exists."""

    max_retries = 0

    def __init__(self, doc: int, marker: str) -> None:
        self.doc, self.marker = doc, marker

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if os.path.exists(self.marker) and self.doc in task.data.column("id").to_pylist():
            raise RuntimeError("boom")
        return task


@pytest.mark.parametrize("writer", [JsonlWriter, ParquetWriter])
def test_a_source_task_failing_mid_way_publishes_nothing_and_its_redo_writes_the_clean_files(
    tmp_path: Path, writer: type
) -> None:
    src = _corpus(tmp_path / "in")
    clean, out = tmp_path / "clean", tmp_path / "out"
    marker = tmp_path / "fail"
    _run(_pipeline(src, clean, FailOn(1020, str(marker)), writer=writer(clean), batch_rows=8))
    marker.touch()
    with pytest.raises(PipelineFailedError, match="1 of 3 source tasks failed"):
        _run(_pipeline(src, out, FailOn(1020, str(marker)), writer=writer(out), batch_rows=8))
    published = _outputs(out)
    assert len(published) == 2 and not [k for k in published if TMP_MARK in k]
    assert all(clean_bytes == published[k] for k, clean_bytes in _outputs(clean).items() if k in published)
    marker.unlink()
    _run(_pipeline(src, out, FailOn(1020, str(marker)), writer=writer(out), batch_rows=8))
    assert _outputs(out) == _outputs(clean)


KILLER = """
import os, signal, sys
from curator_slurm import DocumentBatch, LocalExecutor, Pipeline, ShardSpec
from curator_slurm.stages import JsonlReader, JsonlWriter, ProcessingStage

class KillOn(ProcessingStage[DocumentBatch, DocumentBatch]):
    def __init__(self, marker):
        self.marker = marker
    def process(self, task):
        if os.path.exists(self.marker) and 2025 in task.data.column("id").to_pylist():
            os.kill(os.getpid(), signal.SIGKILL)
        return task

src, out, marker = sys.argv[1:4]
(Pipeline("one-output").add_stage(JsonlReader(src, files_per_partition=1, batch_rows=8)).add_stage(KillOn(marker))
    .add_stage(JsonlWriter(out)).run(LocalExecutor(workers=1), shard=ShardSpec.single()))
"""


def test_a_process_killed_mid_write_leaves_no_published_partial_file_and_the_rerun_writes_the_same_files(
    tmp_path: Path,
) -> None:
    src = _corpus(tmp_path / "in")
    script, marker = tmp_path / "killer.py", tmp_path / "kill"
    script.write_text(KILLER)

    def run(out: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(script), str(src), str(out), str(marker)]
        return subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=300)

    assert run(tmp_path / "clean").returncode == 0
    marker.touch()
    killed = run(tmp_path / "out")
    assert killed.returncode == -9, killed.stderr
    names = [p.name for p in (tmp_path / "out").iterdir() if p.name != DEFAULT_RUN_DIR_NAME]
    finished = [n for n in names if not n.startswith(".")]
    assert len(finished) < 3 and "f2" not in "".join(finished)  # the killed task's file is not published
    assert [n for n in names if TMP_MARK in n], "it was killed with its output open"
    marker.unlink()
    assert run(tmp_path / "out").returncode == 0
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "clean")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=8),
    limit=st.integers(1, 2000),
    empty_first=st.booleans(),
)
def test_parquet_parts_hold_every_batch_once_in_order(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], limit: int, empty_first: bool
) -> None:
    """For any batch sizes and size limit: the parts, read in their order, are the batches in order; a first
    empty batch (whose columns may be typeless) takes no part of its own once documents come."""
    out = tmp_path_factory.mktemp("parts")
    writer = ParquetWriter(out, max_file_size=limit)
    batches = [pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.null())})] if empty_first else []
    start = 0
    for n in sizes:
        batches.append(pa.table({"id": list(range(start, start + n)), "text": [f"t{i}" for i in range(n)]}))
        start += n
    for b in batches:
        writer.process(DocumentBatch(task_id="b", data=b, source_id="s"))
    (done,) = writer.end_source(DocumentBatch(task_id="s", data=batches[0], source_id="s"), failed=False)
    naming = Naming(str(out), False)
    expected = [naming.final("s", k, len(done.data), ".parquet") for k in range(len(done.data))]
    assert done.data == expected and done.metadata["sizes"] == [os.path.getsize(p) for p in done.data]
    ids = [i for p in done.data for i in pq.read_table(p).column("id").to_pylist()]
    assert ids == list(range(start))
    assert sorted(os.listdir(out)) == sorted(os.path.basename(p) for p in done.data)


def test_fanned_out_outputs_go_into_hashed_subdirectories_that_the_ledger_records(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "in")
    out = tmp_path / "out"
    result = _run(_pipeline(src, out, writer=JsonlWriter(out, fan_out=True)))
    assert len(result.output_files) == 3
    for path in result.output_files:
        stem = os.path.basename(path)[: -len(".jsonl")]
        assert os.path.relpath(path, out) == f"{fan_out_dir(stem)}/{stem}.jsonl"
    written = {os.path.realpath(p) for r in recorded(str(out / DEFAULT_RUN_DIR_NAME)).values() for p, _ in r.files}
    assert written == {os.path.realpath(p) for p in result.output_files}
    assert sorted(JsonlWriter(out, fan_out=True).existing_outputs()) == sorted(result.output_files)


def test_a_run_of_more_than_ten_thousand_source_tasks_is_told_to_fan_out() -> None:
    warned: list[str] = []

    class Log:
        def warning(self, line: str) -> None:
            warned.append(line)

    flat, spread = JsonlWriter("/tmp/out-flat"), JsonlWriter("/tmp/out-spread", fan_out=True)
    hint_fan_out([flat, spread], FAN_OUT_ABOVE, Log())
    assert warned == []
    hint_fan_out([flat, spread], FAN_OUT_ABOVE + 1, Log())
    assert len(warned) == 1 and "/tmp/out-flat" in warned[0] and "fan_out=True" in warned[0]
