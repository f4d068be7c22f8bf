"""BaseStageAdapter on its own, without an executor: the shard hook, retries with their back-off, what a
task that gave up becomes, lineage. The end-to-end versions run whole pipelines (test_adapter_retries.py)."""

from __future__ import annotations

import errno

import pyarrow as pa
import pytest

from curator_slurm.backends.adapter import BaseStageAdapter, list_sources, run_chain
from curator_slurm.backends.retry import MAX_RETRY_DELAY, failed_task, retry_delay
from curator_slurm.errors import InputError, OutputSpaceError, PipelineBuildError
from curator_slurm.shard import ShardSpec
from curator_slurm.stages import ProcessingStage
from curator_slurm.stages.io.writers import LINEAGE_KEY
from curator_slurm.tasks import DocumentBatch, EmptyTask, FailedTask, FileGroupTask, NoneTask, Task

NAMES = [f"part-{i:03d}.jsonl" for i in range(40)]


class ListNames(ProcessingStage[EmptyTask, FileGroupTask]):
    """A source stage: one file group per name, its id derived from the name (deterministic)."""

    is_source_stage = True

    def __init__(self, names: list[str], random_ids: bool = False) -> None:
        self.names, self.random_ids = names, random_ids

    def process(self, task: EmptyTask) -> list[FileGroupTask]:
        return [FileGroupTask(task_id="" if self.random_ids else f"id-{n}", data=[n]) for n in self.names]


def batch(task_id: str, rows: int = 3, source: str | None = None) -> DocumentBatch:
    return DocumentBatch(
        task_id=task_id,
        data=pa.table({"text": [f"doc {i}" for i in range(rows)]}),
        metadata={"files": [f"{task_id}.jsonl"]},
        source_id=source or task_id,
    )


class FailsFirst(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Raises ``error`` on the first ``failures`` calls for each task, then passes it on."""

    def __init__(self, failures: int, error: type[Exception] = ValueError, max_retries: int = 2) -> None:
        self.failures, self.error, self.max_retries = failures, error, max_retries
        self.calls: dict[str, int] = {}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        self.calls[task.task_id] = self.calls.get(task.task_id, 0) + 1
        if self.calls[task.task_id] <= self.failures:
            raise self.error(f"flaky {task.task_id}")
        return task


def adapter(stage: ProcessingStage, shard: ShardSpec | None = None) -> tuple[BaseStageAdapter, list[float]]:
    """An adapter whose back-off sleeps are recorded, not slept."""
    slept: list[float] = []
    return BaseStageAdapter(stage, shard=shard, retry_backoff=0.5, sleep=slept.append), slept


# --- the shard hook -----------------------------------------------------------------------------------


def test_shards_of_the_source_stage_split_its_tasks_exactly_once() -> None:
    kept: list[str] = []
    for index in range(4):
        source = list_sources(ListNames(NAMES), ShardSpec.explicit(index, 4))
        assert [t.task_id for t in source.sources] == [f"id-{n}" for n in NAMES]  # every shard lists all
        assert source.selection is not None and source.selection.kept == len(source.kept)
        assert all(t.source_id == t.task_id for t in source.kept)
        kept += [t.task_id for t in source.kept]
    assert sorted(kept) == sorted(f"id-{n}" for n in NAMES)
    assert len(set(kept)) == len(NAMES)


def test_a_shard_keeps_the_same_tasks_whatever_the_listing_order() -> None:
    forward = list_sources(ListNames(NAMES), ShardSpec.explicit(1, 3))
    backward = list_sources(ListNames(NAMES[::-1]), ShardSpec.explicit(1, 3))
    assert sorted(t.task_id for t in forward.kept) == sorted(t.task_id for t in backward.kept)


def test_only_the_source_stage_is_sharded() -> None:
    step, _ = adapter(FailsFirst(0), ShardSpec.explicit(0, 4))
    tasks = [batch(f"b{i}") for i in range(12)]
    assert [t.task_id for t in step.process(tasks)] == [t.task_id for t in tasks]


def test_random_source_ids_are_refused_when_sharding() -> None:
    with pytest.raises(PipelineBuildError):
        list_sources(ListNames(NAMES, random_ids=True), ShardSpec.explicit(0, 2))
    # Unsharded, the same stage is fine: every task is this process's.
    assert len(list_sources(ListNames(NAMES, random_ids=True), ShardSpec.single()).kept) == len(NAMES)


# --- retries --------------------------------------------------------------------------------------------


def test_a_flaky_task_is_retried_with_a_doubling_back_off_and_records_its_attempts() -> None:
    step, slept = adapter(FailsFirst(2, max_retries=2))
    [out] = step.process([batch("b0")])
    assert not isinstance(out, FailedTask)
    assert out.metadata["attempts"] == 3
    assert slept == [0.5, 1.0]
    assert step.stats.failures == 0 and step.stats.tasks_out == 1 and step.stats.rows_out == 3


def test_a_task_that_keeps_failing_becomes_a_failed_task_naming_stage_error_and_files() -> None:
    step, slept = adapter(FailsFirst(10, max_retries=2))
    [out] = step.process([batch("b0", source="src-1")])
    assert isinstance(out, FailedTask)
    assert out.stage == "fails_first"
    assert out.error == "ValueError: flaky b0"
    assert out.attempts == 3
    assert "ValueError: flaky b0" in out.traceback
    assert out.source_id == "src-1"
    assert out.metadata == {"task_id": "b0", "files": ["b0.jsonl"]}
    assert slept == [0.5, 1.0]
    assert step.stats.failures == 1 and step.stats.tasks_out == 0


@pytest.mark.parametrize("error", [InputError, TypeError, AttributeError])
def test_errors_retrying_cannot_help_fail_at_the_first_attempt(error: type[Exception]) -> None:
    stage = FailsFirst(10, error=error, max_retries=5)
    step, slept = adapter(stage)
    [out] = step.process([batch("b0")])
    assert isinstance(out, FailedTask) and out.attempts == 1
    assert stage.calls == {"b0": 1}
    assert slept == []


def test_one_bad_task_in_a_batch_fails_alone() -> None:
    class FailsOnOne(ProcessingStage[DocumentBatch, DocumentBatch]):
        batch_size = 4
        max_retries = 1

        def process(self, task: DocumentBatch) -> DocumentBatch:
            if task.task_id == "b2":
                raise ValueError("bad b2")
            return task

    step, _ = adapter(FailsOnOne())
    out = step.process([batch(f"b{i}") for i in range(4)])
    assert [t.task_id for t in out if not isinstance(t, FailedTask)] == ["b0", "b1", "b3"]
    [failed] = [t for t in out if isinstance(t, FailedTask)]
    assert failed.metadata["task_id"] == "b2" and failed.attempts == 2


def test_a_full_disk_fails_the_run_at_once_without_retries() -> None:
    class DiskFull(ProcessingStage[DocumentBatch, DocumentBatch]):
        def process(self, task: DocumentBatch) -> DocumentBatch:
            raise OSError(errno.ENOSPC, "No space left on device", "/out/part.parquet")

    step, slept = adapter(DiskFull())
    with pytest.raises(OutputSpaceError, match="/out"):
        step.process([batch("b0")])
    assert slept == []


def test_a_stage_returning_a_table_fails_its_task_with_the_fix() -> None:
    class ReturnsTable(ProcessingStage[DocumentBatch, DocumentBatch]):
        def process(self, task: DocumentBatch) -> pa.Table:  # type: ignore[override]
            return task.data

    step, slept = adapter(ReturnsTable())
    [out] = step.process([batch("b0")])
    assert isinstance(out, FailedTask) and out.attempts == 1
    assert out.error.startswith("TypeError: stage 'returns_table' returned Table")
    assert "task.derive(table)" in out.error
    assert slept == []


def test_retry_delay_doubles_up_to_its_cap() -> None:
    assert [retry_delay(1.0, a) for a in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert retry_delay(1.0, 30) == MAX_RETRY_DELAY


def test_failed_task_describes_file_groups_and_batches_alike() -> None:
    group = FileGroupTask(task_id="g", data=["a.jsonl", "b.jsonl"], source_id="g")
    assert failed_task(group, "s", "WorkerDied: gone", attempts=0).metadata == {
        "task_id": "g",
        "files": ["a.jsonl", "b.jsonl"],
    }
    plain = Task(task_id="t", data={"not": "files"}, source_id="t")
    made = failed_task(plain, "s", KeyError("k"), "tb", attempts=2)
    assert made.metadata == {"task_id": "t", "files": []}
    assert (made.error, made.traceback, made.attempts, made.stage) == ("KeyError: 'k'", "tb", 2, "s")
    assert failed_task(group, "s", "x", attempts=0).attempts == 1  # at least the one that failed


# --- lineage and sentinels -----------------------------------------------------------------------------


def test_outputs_carry_their_source_and_position_whatever_ids_the_stage_gives() -> None:
    class SplitInThree(ProcessingStage[DocumentBatch, DocumentBatch]):
        def process(self, task: DocumentBatch) -> list[DocumentBatch]:
            return [DocumentBatch(data=task.data.slice(i, 1)) for i in range(3)]  # random ids

    first, _ = adapter(SplitInThree())
    second, _ = adapter(SplitInThree())
    finals = run_chain([first, second], [batch("b0", source="src-1")])
    assert sorted(t.metadata[LINEAGE_KEY] for t in finals) == [f"{i}-{j}" for i in range(3) for j in range(3)]
    assert {t.source_id for t in finals} == {"src-1"}


def test_sentinels_are_dropped_and_failures_passed_on_untouched() -> None:
    earlier = failed_task(batch("b9"), "earlier", "ValueError: x")
    stage = FailsFirst(0)
    step, _ = adapter(stage)
    out = step.process([NoneTask(task_id="n"), earlier, batch("b0")])
    assert len(out) == 2 and out[0].task_id == "b0" and out[1] is earlier
    assert stage.calls == {"b0": 1}
    assert step.stats.tasks_in == 1
