"""LocalExecutor specifics: identical outputs for any worker count, and workers that die."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec, Task
from curator_slurm.slurm.env import RunOptions
from curator_slurm.slurm.ledger import DEFAULT_RUN_DIR_NAME, load_status
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage, ScoreFilter, WordCountFilter
from curator_slurm.tasks import DocumentBatch, EmptyTask
from helpers import clean_env, read_tree


class DieOn(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Ends its own worker process (as the OOM killer would) on one source task, ``times`` times."""

    def __init__(self, victim: str, marker_dir: str, times: int) -> None:
        self.victim, self.marker_dir, self.times = victim, marker_dir, times

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if task.source_id == self.victim:
            deaths = len(os.listdir(self.marker_dir))
            if deaths < self.times:
                Path(self.marker_dir, f"death-{deaths}").touch()
                os._exit(9)
        return task


def pipeline(corpus: Path, out: Path, *extra: ProcessingStage) -> Pipeline:
    p = Pipeline("local").add_stage(JsonlReader(str(corpus)))
    for stage in extra:
        p.add_stage(stage)
    return p.add_stage(ScoreFilter(WordCountFilter(min_words=50))).add_stage(ParquetWriter(out))


def first_source(corpus: Path) -> str:
    return JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())[0].task_id


@pytest.fixture(scope="module")
def reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference")
    pipeline(corpus, out).run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    return read_tree(out)


@pytest.mark.parametrize("workers", [2, 3])
def test_any_worker_count_writes_the_same_files(
    corpus: Path, tmp_path: Path, reference: dict[str, bytes], workers: int
) -> None:
    result = pipeline(corpus, tmp_path).run(
        LocalExecutor(workers=workers), shard=ShardSpec.single(), options=RunOptions()
    )
    assert result.done == 12
    assert read_tree(tmp_path) == reference


def test_a_worker_that_dies_once_loses_nothing(corpus: Path, tmp_path: Path, reference: dict[str, bytes]) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    stage = DieOn(first_source(corpus), str(markers), times=1)
    result = pipeline(corpus, out, stage).run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    assert len(os.listdir(markers)) == 1, "the worker really died"
    assert result.done == 12 and not result.failed
    assert read_tree(out) == reference


def test_a_task_that_always_kills_its_worker_is_recorded_failed(corpus: Path, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    victim = first_source(corpus)
    with pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info:
        pipeline(corpus, out, DieOn(victim, str(markers), times=99)).run(
            LocalExecutor(workers=2, max_crashes=3), shard=ShardSpec.single(), options=RunOptions()
        )
    assert info.value.result.done == 11
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert list(failed) == [victim]
    assert failed[victim]["error"].startswith("WorkerDied: the worker process died 3 times")
    assert failed[victim]["attempts"] == 3
    assert len(os.listdir(markers)) == 3


class RandomSource(ProcessingStage[EmptyTask, Task]):
    def process(self, task: EmptyTask) -> list[Task]:
        return [Task(data=i) for i in range(3)]  # no task_id: random ids


class Keep(ProcessingStage[Task, Task]):
    def process(self, task: Task) -> Task:
        return task


def test_random_ids_without_sharding_skip_the_run_dir(tmp_path: Path) -> None:
    """Unsharded runs may use random ids; progress then cannot be recorded, and re-runs still work."""
    for _ in range(2):
        result = Pipeline("r", [RandomSource(), Keep()]).run(
            LocalExecutor(workers=1), shard=ShardSpec.single(), run_dir=tmp_path / "run", options=RunOptions()
        )
        assert len(result.output_tasks) == 3 and result.run_dir is None
    assert not (tmp_path / "run").exists()


def test_a_script_without_main_guard_gets_a_clear_error(corpus: Path, tmp_path: Path) -> None:
    """Spawned workers re-import the script; without `if __name__ == "__main__":` they cannot start."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from curator_slurm import LocalExecutor, Pipeline\n"
        "from curator_slurm.stages import JsonlReader, ParquetWriter\n"
        f"Pipeline('p').add_stage(JsonlReader({str(corpus)!r})).add_stage(ParquetWriter({str(tmp_path / 'o')!r}))"
        ".run(LocalExecutor(workers=2))\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=clean_env())
    assert proc.returncode != 0
    assert "WorkerStartError" in proc.stderr and 'if __name__ == "__main__":' in proc.stderr
    assert "WorkerDied" not in proc.stderr, "no source task is blamed for it"
