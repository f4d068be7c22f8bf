"""The stage adapter's retries: a task that fails and then succeeds ends done with its attempts counted, a
task that keeps failing fails alone (not its batch's neighbours), and a failed batch is retried task by task."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch, EmptyTask
from support.executors import ExecutorFactory
from support.helpers import logged, records


class Flaky(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Fails the first ``failures`` attempts on each task, counted in files (works across processes)."""

    def __init__(self, marker_dir: str, failures: int, only: str | None = None) -> None:
        self.marker_dir, self.failures, self.only = marker_dir, failures, only

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if self.only is not None and task.source_id != self.only:
            return task
        marker = Path(self.marker_dir) / task.source_id
        attempts = int(marker.read_text()) + 1 if marker.exists() else 1
        marker.write_text(str(attempts))
        if attempts <= self.failures:
            raise RuntimeError(f"flaky failure {attempts} of {task.source_id}")
        return task


def _flaky_pipeline(corpus: Path, out: Path, markers: Path, failures: int, only: str | None = None) -> Pipeline:
    markers.mkdir(exist_ok=True)
    return (
        Pipeline("flaky")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(Flaky(str(markers), failures, only).with_(batch_size=4))
        .add_stage(ParquetWriter(out))
    )


def _first_source(corpus: Path) -> str:
    return JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())[0].task_id


def test_retried_task_ends_done_with_attempts(corpus: Path, tmp_path: Path, executor_factory: ExecutorFactory) -> None:
    """A stage that fails twice then succeeds: done, attempts = 3."""
    out = tmp_path / "out"
    result = _flaky_pipeline(corpus, out, tmp_path / "m", failures=2).run(
        executor_factory(retry_backoff=0.001), shard=ShardSpec.single(), options=RunOptions()
    )
    assert result.done == 12 and not result.failed
    done = [r for r in records(out) if r["status"] == "done"]
    assert len(done) == 12 and {r["attempts"] for r in done} == {3}


def test_one_bad_task_in_a_batch_does_not_fail_its_neighbours(
    corpus: Path, tmp_path: Path, executor_factory: ExecutorFactory
) -> None:
    out = tmp_path / "out"
    bad = _first_source(corpus)
    with (
        logged(logging.WARNING) as warnings,
        pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info,
    ):
        _flaky_pipeline(corpus, out, tmp_path / "m", failures=99, only=bad).run(
            executor_factory(retry_backoff=0.001), shard=ShardSpec.single(), options=RunOptions()
        )
    attempts = [w for w in warnings if f"failed on task {bad}" in w]
    assert len(attempts) == 3 and attempts[-1].endswith("flaky failure 3 of " + bad + "')"), warnings
    result = info.value.result
    assert result.done == 11
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert list(failed) == [bad]
    assert failed[bad]["attempts"] == 3 and failed[bad]["stage"] == "flaky"
    assert "flaky failure 3" in failed[bad]["error"]


class SplitInFour(ProcessingStage[DocumentBatch, DocumentBatch]):
    def process(self, task: DocumentBatch) -> list[DocumentBatch]:
        n = task.data.num_rows
        parts = [task.data.slice(k * n // 4, (k + 1) * n // 4 - k * n // 4) for k in range(4)]
        return [task.derive(part, task_id=f"{task.task_id}-{k}") for k, part in enumerate(parts)]


class FailsOnBatches(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Fails whenever it is handed more than one task at once; one at a time it works."""

    def process_batch(self, tasks: list[DocumentBatch]) -> list[DocumentBatch]:
        if len(tasks) > 1:
            raise RuntimeError(f"cannot take {len(tasks)} at once")
        return tasks


def test_a_failed_batch_is_logged_before_its_tasks_are_retried_one_by_one(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pipeline = (
        Pipeline("batches")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(SplitInFour())
        .add_stage(FailsOnBatches().with_(batch_size=4))
        .add_stage(ParquetWriter(out))
    )
    with logged(logging.WARNING) as warnings:
        result = pipeline.run(LocalExecutor(workers=1, retry_backoff=0.001), shard=ShardSpec.single())
    assert result.done == 12 and not result.failed
    assert len(list(out.glob("*.parquet"))) == 12, "one file per source task"
    assert sum(pq.read_table(p).num_rows for p in out.glob("*.parquet")) == 720, "every part written once"
    batch = [w for w in warnings if "failed on a batch of 4 tasks" in w]
    assert len(batch) == 12 and batch[0].endswith(
        "RuntimeError('cannot take 4 at once'); retrying each task on its own"
    )
    assert not [w for w in warnings if "failed on task" in w], "one at a time, each task succeeded"
