"""Shard assignment: golden vectors, exactly-once partitioning, balance, and the source-stage hook."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm import LocalExecutor, Pipeline, ShardSpec, Task
from curator_slurm.runs.sharding import balanced_assignment, hash_assignment, select, shard_of
from curator_slurm.stages import ProcessingStage
from curator_slurm.tasks import EmptyTask, content_id
from support.executors import ExecutorFactory
from support.helpers import logged

# Pinned forever: changing these moves every source task to another shard and renames outputs.
GOLDEN = [
    ("", 17241709254077376921, [0, 1, 6, 9, 921]),  # xxh64("", seed 0) = 0xEF46DB3751D8E999
    ("a", 15154266338359012955, [0, 1, 6, 11, 955]),
    ("476cfe1b726df1f4", 10033802065194317107, [0, 1, 5, 3, 107]),
    ("part-00001", 11507918814880680249, [0, 1, 1, 9, 249]),
    ("ünïcode/路径", 4583268711152838830, [0, 0, 4, 14, 830]),
]


@pytest.mark.parametrize(("task_id", "digest", "shards"), GOLDEN)
def test_golden_vectors(task_id: str, digest: int, shards: list[int]) -> None:
    assert shard_of(task_id, 2**64) == digest
    assert [shard_of(task_id, n) for n in (1, 2, 7, 16, 1000)] == shards
    assert hash_assignment([task_id], 16) == [shards[3]]


def test_content_id_is_pinned() -> None:
    assert content_id("/data/a.jsonl", "/data/b.jsonl") == "7c5e074dc7fd4e5e"


def _tasks(ids: list[str], weights: list[int] | None = None) -> list[Task]:
    return [Task(task_id=t, metadata={"bytes": w} if weights else {}) for t, w in zip(ids, weights or ids, strict=True)]


@settings(max_examples=60, deadline=None)
@given(
    ids=st.sets(st.text(min_size=1, max_size=12), min_size=0, max_size=300),
    count=st.integers(min_value=1, max_value=64),
    strategy=st.sampled_from(["hash", "balanced"]),
    seed=st.integers(0, 2**16),
)
def test_shards_partition_every_task_set(ids: set[str], count: int, strategy: str, seed: int) -> None:
    """Exactly once: the shards are disjoint and together hold every task, whatever the listing order."""
    rng = random.Random(seed)
    listing = sorted(ids)
    weights = [rng.randint(1, 10_000) for _ in listing]
    owners: dict[str, int] = {}
    for index in range(count):
        shuffled = list(zip(listing, weights, strict=True))
        rng.shuffle(shuffled)  # every shard may list the inputs in its own order
        tasks = _tasks([i for i, _ in shuffled], [w for _, w in shuffled])
        kept = select(tasks, ShardSpec.explicit(index, count, strategy))
        for t in kept:
            assert t.task_id not in owners, f"{t.task_id!r} kept by shards {owners[t.task_id]} and {index}"
            owners[t.task_id] = index
    assert set(owners) == ids


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13, 16, 31, 32, 50, 64])
def test_balanced_heaviest_shard_within_5_percent_of_mean(count: int) -> None:
    rng = random.Random(count)
    n = count * rng.randint(20, 40)
    weights = [int(rng.lognormvariate(15, 1.0)) + 1 for _ in range(n)]
    ids = [f"group-{i}" for i in range(n)]
    loads = [0] * count
    for w, s in zip(weights, balanced_assignment(ids, weights, count), strict=True):
        loads[s] += w
    assert max(loads) <= 1.05 * statistics.mean(loads)


def test_balanced_assignment_ignores_listing_order() -> None:
    rng = random.Random(7)
    pairs = [(f"t{i}", rng.randint(1, 100)) for i in range(500)]
    first = dict(zip([p[0] for p in pairs], balanced_assignment(*zip(*pairs, strict=True), 16), strict=True))
    rng.shuffle(pairs)
    second = dict(zip([p[0] for p in pairs], balanced_assignment(*zip(*pairs, strict=True), 16), strict=True))
    assert first == second


class CountingSource(ProcessingStage[EmptyTask, Task]):
    """A user-defined source stage: n tasks with ids derived from their content."""

    def __init__(self, n: int, deterministic: bool = True) -> None:
        self.n = n
        self.deterministic = deterministic

    def process(self, task: EmptyTask) -> list[Task]:
        return [Task(task_id=f"item-{i}" if self.deterministic else "", data=i) for i in range(self.n)]


class Square(ProcessingStage[Task, Task]):
    def process(self, task: Task) -> Task:
        return task.derive(task.data * task.data)


def _run(source: ProcessingStage, shard: ShardSpec, executor_factory: ExecutorFactory | None = None) -> list[Task]:
    executor = executor_factory() if executor_factory else LocalExecutor(workers=1)
    result = Pipeline("squares").add_stage(source).add_stage(Square()).run(executor, shard=shard)
    return result.output_tasks


def test_user_source_stage_is_sharded_exactly_once(executor_factory: ExecutorFactory) -> None:
    whole = sorted(t.data for t in _run(CountingSource(40), ShardSpec.single(), executor_factory))
    parts = [
        sorted(t.data for t in _run(CountingSource(40), ShardSpec.explicit(i, 3), executor_factory)) for i in range(3)
    ]
    assert sorted(x for p in parts for x in p) == whole == [i * i for i in range(40)]
    assert all(parts), "with 40 tasks over 3 shards every shard has work"


def test_random_ids_are_refused_only_while_sharding() -> None:
    assert len(_run(CountingSource(5, deterministic=False), ShardSpec.single())) == 5
    with pytest.raises(ValueError, match="deterministic task_id"):
        _run(CountingSource(5, deterministic=False), ShardSpec.explicit(0, 2))


def test_duplicate_source_ids_are_refused_while_sharding() -> None:
    class Duplicates(CountingSource):
        def process(self, task: EmptyTask) -> list[Task]:
            return [Task(task_id="same", data=1), Task(task_id="same", data=2)]

    with pytest.raises(ValueError, match="twice"):
        _run(Duplicates(2), ShardSpec.explicit(0, 2))


def test_shard_line_is_logged(corpus: Path, tmp_path: Path) -> None:
    """The adapter logs one line per shard with kept/total tasks and bytes."""
    from curator_slurm.stages import JsonlReader, ParquetWriter

    with logged() as lines:
        Pipeline("p").add_stage(JsonlReader(str(corpus))).add_stage(ParquetWriter(tmp_path / "out")).run(
            LocalExecutor(workers=1), shard=ShardSpec.explicit(1, 3)
        )
    shard_lines = [line for line in lines if line.startswith("shard 1/3: kept ")]
    assert len(shard_lines) == 1
    assert " of 12 source tasks (" in shard_lines[0] and "KiB of " in shard_lines[0]


def test_the_filter_agrees_with_shard_of() -> None:
    """select() inlines the hash for speed; it must keep exactly the ids shard_of assigns to the shard."""
    tasks = _tasks([content_id(f"/data/part-{i}") for i in range(2000)])
    for index in (0, 5, 12):
        kept = {t.task_id for t in select(tasks, ShardSpec.explicit(index, 13))}
        assert kept == {t.task_id for t in tasks if shard_of(t.task_id, 13) == index}
