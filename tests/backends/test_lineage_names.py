"""Outputs are named by the source task (one file for all its parts, in order), whatever ids stages give their tasks;
programming errors in a stage fail at the first attempt (issue 14, items 1 and 5)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.errors import RunDirError
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch
from support.helpers import logged


class NemoStyle(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Builds its output as NeMo Curator users write it: a new batch, so a new random task id."""

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return DocumentBatch(data=task.data, metadata=task.metadata)


class SplitInTwo(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Two parts that keep the input's task id (derive without a new id), in one shared metadata dict."""

    def process(self, task: DocumentBatch) -> list[DocumentBatch]:
        half = task.data.num_rows // 2
        shared = dict(task.metadata)
        return [
            DocumentBatch(task_id=task.task_id, data=task.data.slice(0, half), metadata=shared),
            DocumentBatch(task_id=task.task_id, data=task.data.slice(half), metadata=shared),
        ]


def _run(corpus: Path, out: Path, *middle: ProcessingStage, workers: int = 1, clear: bool = False) -> None:
    pipeline = Pipeline("lineage").add_stage(JsonlReader(str(corpus)))
    for stage in middle:
        pipeline.add_stage(stage)
    pipeline.add_stage(ParquetWriter(out)).run(
        LocalExecutor(workers=workers, retry_backoff=0.001), ShardSpec.single(), options=RunOptions(clear_output=clear)
    )


def _rows(out: Path) -> int:
    return sum(pq.read_table(p).num_rows for p in out.glob("*.parquet"))


def test_a_stage_that_makes_new_batches_gets_the_plain_pipelines_names_and_no_duplicate_on_rerun(
    corpus: Path, tmp_path: Path
) -> None:
    plain, nemo = tmp_path / "plain", tmp_path / "nemo"
    _run(corpus, plain)
    _run(corpus, nemo, NemoStyle())
    names = sorted(p.name for p in plain.glob("*.parquet"))
    assert sorted(p.name for p in nemo.glob("*.parquet")) == names
    assert not [n for n in names if n.startswith("rand-")]
    shutil.rmtree(nemo / DEFAULT_RUN_DIR_NAME)  # the run directory is lost: its outputs are no run's now
    with pytest.raises(RunDirError, match="no run's"):
        _run(corpus, nemo, NemoStyle(), workers=2)
    _run(corpus, nemo, NemoStyle(), workers=2, clear=True)  # the new run deletes them, then does everything again
    assert sorted(p.name for p in nemo.glob("*.parquet")) == names
    assert _rows(nemo) == _rows(plain) == 720


def test_parts_of_one_source_task_go_into_its_one_file_in_order(corpus: Path, tmp_path: Path) -> None:
    out, plain = tmp_path / "out", tmp_path / "plain"
    _run(corpus, out, SplitInTwo(), SplitInTwo())
    _run(corpus, plain)
    sources = sorted(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done)
    assert len(sources) == 12
    assert sorted(p.name for p in out.glob("*.parquet")) == sorted(f"{s}.parquet" for s in sources)
    assert _rows(out) == 720, "every row written once, none overwritten by a sibling part"
    for s in sources:  # the parts in their order: the documents as the plain pipeline writes them
        assert pq.read_table(out / f"{s}.parquet").to_pylist() == pq.read_table(plain / f"{s}.parquet").to_pylist()


class WrongArgument(ProcessingStage[DocumentBatch, DocumentBatch]):
    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task.derive(task.data, no_such_argument=1, cls=int)  # a TypeError: int() takes no such keywords


class ReturnsTable(ProcessingStage[DocumentBatch, DocumentBatch]):
    def process(self, task: DocumentBatch) -> pa.Table:  # type: ignore[override]
        return task.data


@pytest.mark.parametrize(("stage", "error"), [(WrongArgument(), "TypeError"), (ReturnsTable(), "task.derive")])
def test_a_programming_error_fails_at_the_first_attempt(
    corpus: Path, tmp_path: Path, stage: ProcessingStage, error: str
) -> None:
    out = tmp_path / "out"
    with logged(logging.WARNING) as warnings, pytest.raises(PipelineFailedError, match="12 of 12 source tasks failed"):
        _run(corpus, out, stage)
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert len(failed) == 12
    assert {r["attempts"] for r in failed.values()} == {1}
    assert all(error in r["error"] for r in failed.values()), failed
    assert not [w for w in warnings if "retrying" in w]
