"""Document positions (relative path, row in file) and source task ids that survive a move of the data."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import DocumentBatch, InputError, LocalExecutor, Pipeline
from curator_slurm.errors import RunDirError
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetReader, ProcessingStage, ScoreFilter, WordCountFilter
from curator_slurm.stages.positions import document_positions, rows_before


def _jsonl_corpus(root: Path, seed: int = 0) -> None:
    """Two files (one in a subdirectory) whose records carry their own file and record number, with blank
    and whitespace-only lines between records (the reader skips those; positions must too)."""
    rng = random.Random(seed)
    for name in ("a.jsonl", "sub/b.jsonl"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            for i in range(200):
                if rng.random() < 0.1:
                    f.write(rng.choice(["\n", "   \n", "\r\n"]))
                f.write(json.dumps({"text": "w " * rng.randint(0, 80), "f": name, "i": i}) + "\n")


class RecordPositions(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Adds the positions as columns, so the test can compare them with what each record says of itself."""

    def process(self, task: DocumentBatch) -> DocumentBatch:
        p = document_positions(task)
        table = task.data.append_column("pos_path", p.paths).append_column("pos_row", pa.array(p.rows))
        return task.derive(table.append_column("pos_key", pa.array(p.keys)))


def _positions_of(reader: ProcessingStage) -> pa.Table:
    result = Pipeline("p").add_stage(reader).add_stage(RecordPositions()).run(LocalExecutor(workers=1), run_dir=None)
    return pa.concat_tables([t.data for t in result.output_tasks])


@pytest.mark.parametrize(
    "options",
    [{}, {"files_per_partition": 2}, {"blocksize": 1500, "split_files": True}],
    ids=["file", "group", "split"],
)
def test_jsonl_positions_are_relative_path_and_record_number(tmp_path: Path, options: dict) -> None:
    _jsonl_corpus(tmp_path / "in")
    table = _positions_of(JsonlReader(tmp_path / "in", **options))
    assert table.num_rows == 400
    assert table.column("pos_path").to_pylist() == table.column("f").to_pylist()
    assert table.column("pos_row").to_pylist() == table.column("i").to_pylist()
    positions = list(zip(table.column("f").to_pylist(), table.column("i").to_pylist(), strict=True))
    by_key = [p for _, p in sorted(zip(table.column("pos_key").to_pylist(), positions, strict=True))]
    assert by_key == sorted(positions), "keys sort as (path, row) do"


def test_parquet_split_positions_count_earlier_row_groups(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    n = 5000
    table = pa.table({"text": [f"doc {i} " * 20 for i in range(n)], "i": list(range(n))})
    pq.write_table(table, tmp_path / "in" / "p.parquet", row_group_size=700)
    got = _positions_of(ParquetReader(tmp_path / "in", blocksize=20_000, split_files=True))
    pairs = zip(got.column("pos_row").to_pylist(), got.column("i").to_pylist(), strict=True)
    assert sorted(pairs) == [(i, i) for i in range(n)]
    assert set(got.column("pos_path").to_pylist()) == {"p.parquet"}


def test_rows_before_a_line_cut_in_its_leading_spaces(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\n\n      {"a":2}\n{"a":3}\n')
    assert rows_before(str(path), 0) == 0
    assert rows_before(str(path), 8) == 1  # the blank line after the first record is not a row
    assert rows_before(str(path), 12) == 2, "the line that starts before the cut and holds a record counts"
    assert rows_before(str(path), path.stat().st_size) == 3


def test_positions_refused_after_a_stage_dropped_rows(corpus: Path) -> None:
    pipeline = (
        Pipeline("p")
        .add_stage(JsonlReader(corpus))
        .add_stage(ScoreFilter(WordCountFilter(min_words=50)))
        .add_stage(RecordPositions())
    )
    with pytest.raises(Exception) as info:
        pipeline.run(LocalExecutor(workers=1), run_dir=None)
    assert "right after the reader" in str(info.value)
    with pytest.raises(InputError, match="does not say which files"):
        document_positions(DocumentBatch(task_id="t", data=pa.table({"text": ["x"]})))


def test_ids_and_resume_survive_moving_the_input(tmp_path: Path) -> None:
    """The same data in another directory has the same source task ids: its outputs have the same names and a
    re-run against the moved data finds its work done."""
    _jsonl_corpus(tmp_path / "first")
    out = tmp_path / "out"
    first = Pipeline("p").add_stage(JsonlReader(tmp_path / "first")).add_stage(JsonlWriter(out))
    done = first.run(LocalExecutor(workers=1))
    assert done.done == 2
    names = sorted(p.name for p in out.glob("*.jsonl"))
    shutil.move(tmp_path / "first", tmp_path / "moved")
    moved = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path / "moved"))
        .add_stage(JsonlWriter(out))
        .run(LocalExecutor(workers=1))
    )
    assert (moved.done, moved.source_tasks_skipped) == (0, 2)
    assert sorted(p.name for p in out.glob("*.jsonl")) == names


def test_run_dir_of_the_absolute_path_id_scheme_is_refused(tmp_path: Path) -> None:
    _jsonl_corpus(tmp_path / "in")
    out = tmp_path / "out"
    pipeline = Pipeline("p").add_stage(JsonlReader(tmp_path / "in")).add_stage(JsonlWriter(out))
    pipeline.run(LocalExecutor(workers=1))
    run_json = out / ".curator-run" / "run.json"
    record = json.loads(run_json.read_text())
    del record["pipeline"]["id_scheme"]  # what an older curator-slurm wrote
    record["fingerprint"] = "0" * 16
    run_json.write_text(json.dumps(record))
    with pytest.raises(RunDirError, match="id scheme 1"):
        pipeline.run(LocalExecutor(workers=1))
