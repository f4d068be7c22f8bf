"""examples/curate.py run as N separate processes with array variables set: the union of their
outputs is, file for file, one unsharded run's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.executors import requires_ray
from support.helpers import read_tree, run_example


@pytest.fixture(scope="module")
def unsharded(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("unsharded")
    run_example(corpus, out, "--workers", "1")
    tree = read_tree(out)
    assert len(tree) == 12
    return tree


def array_env(task_id: int, lo: int, hi: int, step: int) -> dict[str, str]:
    count = len(range(lo, hi + 1, step))
    return {
        "SLURM_JOB_ID": str(5000 + task_id),
        "SLURM_ARRAY_JOB_ID": "5000",
        "SLURM_ARRAY_TASK_ID": str(task_id),
        "SLURM_ARRAY_TASK_COUNT": str(count),
        "SLURM_ARRAY_TASK_MIN": str(lo),
        "SLURM_ARRAY_TASK_MAX": str(hi),
        "SLURM_ARRAY_TASK_STEP": str(step),
    }


@pytest.mark.parametrize(
    ("lo", "hi", "step", "executor"),
    [
        pytest.param(0, 3, 1, "local", id="0-3"),
        pytest.param(1, 7, 2, "local", id="1-7:2"),
        pytest.param(0, 4, 1, "local", id="0-4"),
        # Ray costs its actors' start-up in every array task: one layout is enough.
        pytest.param(0, 3, 1, "ray", id="0-3-ray", marks=requires_ray),
    ],
)
def test_array_union_equals_unsharded(
    corpus: Path,
    tmp_path: Path,
    unsharded: dict[str, bytes],
    lo: int,
    hi: int,
    step: int,
    executor: str,
    request: pytest.FixtureRequest,
) -> None:
    out = tmp_path / "out"
    per_task: dict[int, set[str]] = {}
    args: tuple[str, ...] = ("--workers", "1")
    extra: dict[str, str] = {}
    if executor == "ray":  # every array task joins one running cluster, as on a Slurm allocation with Ray
        args, extra = ("--executor", "ray"), {"RAY_ADDRESS": request.getfixturevalue("ray_cluster")}
    for task_id in range(lo, hi + 1, step):
        proc = run_example(corpus, out, *args, env={**array_env(task_id, lo, hi, step), **extra})
        shard = (task_id - lo) // step
        count = len(range(lo, hi + 1, step))
        assert f"shard {shard}/{count}: kept " in proc.stderr
        assert f"job 5000_{task_id}" in proc.stderr, "every log line of a shard carries its job id"
        per_task[task_id] = set(read_tree(out)) - set().union(*per_task.values())
    assert read_tree(out) == unsharded
    assert sum(len(v) for v in per_task.values()) == len(unsharded)


def test_split_arrays_with_offsets(corpus: Path, tmp_path: Path, unsharded: dict[str, bytes]) -> None:
    """Two arrays of 3 and 2 tasks covering 5 logical shards (as `submit` does under MaxArraySize)."""
    out = tmp_path / "out"
    for offset, size in ((0, 3), (3, 2)):
        for task_id in range(size):
            env = {**array_env(task_id, 0, size - 1, 1), "CURATOR_NUM_SHARDS": "5", "CURATOR_SHARD_OFFSET": str(offset)}
            proc = run_example(corpus, out, "--workers", "1", env=env)
            assert f"shard {offset + task_id}/5: kept " in proc.stderr
    assert read_tree(out) == unsharded


def test_balanced_strategy_union(corpus: Path, tmp_path: Path, unsharded: dict[str, bytes]) -> None:
    out = tmp_path / "out"
    for i in range(4):
        env = {"CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": str(i), "CURATOR_SHARD_STRATEGY": "balanced"}
        run_example(corpus, out, "--workers", "1", env=env)
    assert read_tree(out) == unsharded


def test_srun_ranks_inside_an_array_task_split_the_shard(
    corpus: Path, tmp_path: Path, unsharded: dict[str, bytes]
) -> None:
    out = tmp_path / "out"
    kept = 0
    for task_id in range(2):
        for rank in range(2):
            env = {**array_env(task_id, 0, 1, 1), "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": str(rank)}
            proc = run_example(corpus, out, "--workers", "1", env=env)
            line = next(x for x in proc.stderr.splitlines() if f"shard {task_id * 2 + rank}/4: kept " in x)
            kept += int(line.split("kept ")[1].split()[0])
    assert kept == 12, "each source task processed by exactly one rank"
    assert read_tree(out) == unsharded


def test_bad_shard_variable_fails_before_any_work(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_example(corpus, out, env={"CURATOR_NUM_SHARDS": "0", "CURATOR_SHARD_INDEX": "0"}, check=False)
    assert proc.returncode != 0
    assert "CURATOR_NUM_SHARDS='0' must be >= 1" in proc.stderr
    assert not out.exists()
