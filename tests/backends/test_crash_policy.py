"""One crash policy for both executors (backends/retry.py, CrashPolicy), and both executors remove what a
killed writer left half-written.

A worker's death counts against every task the worker was running; a task that shared the death with
others runs again alone, so that only the task that kills its worker is ever failed for it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.backends.retry import MAX_RETRY_DELAY, CrashPolicy
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch, EmptyTask
from support.executors import ray_cluster_fixture, requires_ray, ship_test_module  # noqa: F401 - a fixture


def test_the_policy_blames_a_task_only_for_deaths_it_died_alone() -> None:
    policy = CrashPolicy(max_attempts=3, backoff=0.5)
    assert policy.after_death(1, alone=False).action == "alone"
    assert policy.after_death(5, alone=False).action == "alone", "never failed for a shared death"
    first, second = policy.after_death(1, alone=True), policy.after_death(2, alone=True)
    assert (first.action, first.delay) == ("retry", 0.5)
    assert (second.action, second.delay) == ("retry", 1.0), "the back-off doubles, as for a raised exception"
    assert policy.after_death(3, alone=True).action == "fail"
    assert CrashPolicy(max_attempts=99, backoff=10).after_death(40, alone=True).delay == MAX_RETRY_DELAY
    with pytest.raises(ValueError, match="max_attempts=0"):
        CrashPolicy(max_attempts=0)


def sources(corpus: Path) -> list[str]:
    return [t.task_id for t in JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())]


class KillerAmongSlowOnes(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Kills its process on ``victim`` every time; every other task takes a moment, so that the pool
    still runs several when the victim's worker dies."""

    def __init__(self, victim: str, marker_dir: str) -> None:
        self.victim, self.marker_dir = victim, marker_dir

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if task.source_id == self.victim:
            Path(self.marker_dir, f"death-{len(os.listdir(self.marker_dir))}").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.3)
        return task


def test_local_a_death_shared_with_other_tasks_fails_none_of_them(corpus: Path, tmp_path: Path) -> None:
    """``max_crashes=1``: the killer is failed once it died alone; the tasks that were in flight with it when
    it first died ran again and are done (before, each of them was failed with it)."""
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    victim = sources(corpus)[0]
    pipeline = Pipeline("p").add_stage(JsonlReader(str(corpus))).add_stage(KillerAmongSlowOnes(victim, str(markers)))
    with pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info:
        pipeline.add_stage(ParquetWriter(out)).run(
            LocalExecutor(workers=2, max_crashes=1, retry_backoff=0.01), shard=ShardSpec.single(), options=RunOptions()
        )
    assert info.value.result.done == 11
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert list(failed) == [victim]
    assert failed[victim]["error"].startswith("WorkerDied: the worker process died 2 times")
    assert len(os.listdir(markers)) == 2, "once among others, once alone"


class KilledOnceMidWrite(ParquetWriter):
    """Kills its own process half-way through the victim's file, once: the hidden temporary file stays."""

    def __init__(self, path: str, victim: str, marker_dir: str) -> None:
        super().__init__(path)
        self.victim, self.marker_dir = victim, marker_dir

    def process(self, task: DocumentBatch):  # type: ignore[no-untyped-def]
        written = super().process(task)  # into the source task's open output: a hidden temporary file
        if (task.source_id or "") == self.victim and not os.listdir(self.marker_dir):
            Path(self.marker_dir, "killed").write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return written


@requires_ray
def test_ray_a_writer_killed_mid_write_leaves_no_temporary_file(corpus: Path, tmp_path: Path, ray_cluster: str) -> None:
    from curator_slurm.backends.ray import RayExecutor

    ship_test_module(sys.modules[__name__])
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    victim = sources(corpus)[3]
    executor = RayExecutor(retry_backoff=0.001, max_actors_per_stage=1)
    result = (
        Pipeline("p")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(KilledOnceMidWrite(str(out), victim, str(markers)))
        .run(executor, shard=ShardSpec.single(), options=RunOptions())
    )
    assert (markers / "killed").exists(), "the writer really died mid-write"
    assert executor.deaths == 1
    assert result.done == 12 and not result.failed
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".") and ".tmp-" in p.name) == []
    assert len(list(out.glob("*.parquet"))) == 12
