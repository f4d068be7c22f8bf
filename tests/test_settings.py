"""ShardSpec.from_env: every resolution rule and every error, as a table of environments."""

from __future__ import annotations

import pytest

from curator_slurm import SettingError, ShardConfigError, ShardSpec
from curator_slurm.settings import available_cpus


def array(task_id: int, count: int, lo: int, hi: int, step: int = 1, **extra: str) -> dict[str, str]:
    env = {
        "SLURM_JOB_ID": "900",
        "SLURM_ARRAY_JOB_ID": "880",
        "SLURM_ARRAY_TASK_ID": str(task_id),
        "SLURM_ARRAY_TASK_COUNT": str(count),
        "SLURM_ARRAY_TASK_MIN": str(lo),
        "SLURM_ARRAY_TASK_MAX": str(hi),
        "SLURM_ARRAY_TASK_STEP": str(step),
    }
    env.update(extra)
    return env


RESOLVED = [
    pytest.param({}, (0, 1, False), id="plain process: not sharded"),
    pytest.param(array(0, 4, 0, 3), (0, 4, True), id="--array=0-3 first"),
    pytest.param(array(3, 4, 0, 3), (3, 4, True), id="--array=0-3 last"),
    pytest.param(array(1, 10, 1, 10), (0, 10, True), id="--array=1-10 starts at shard 0"),
    pytest.param(array(10, 10, 1, 10), (9, 10, True), id="--array=1-10 ends at shard 9"),
    pytest.param(array(8, 4, 0, 12, 4), (2, 4, True), id="--array=0-15:4 (ids 0,4,8,12)"),
    pytest.param(array(5, 4, 1, 7, 2), (2, 4, True), id="--array=1-7:2 (ids 1,3,5,7)"),
    pytest.param(array(0, 1, 0, 0), (0, 1, True), id="one-task array is sharded (ids must be deterministic)"),
    pytest.param(
        array(3, 11, 0, 10, CURATOR_NUM_SHARDS="25", CURATOR_SHARD_OFFSET="11"),
        (14, 25, True),
        id="split array: offset + task id",
    ),
    pytest.param(array(17, 3, 0, 17, CURATOR_NUM_SHARDS="18"), (17, 18, True), id="irregular list with explicit count"),
    pytest.param({"CURATOR_NUM_SHARDS": "8", "CURATOR_SHARD_INDEX": "5"}, (5, 8, True), id="explicit index, no Slurm"),
    pytest.param(array(2, 4, 0, 3, CURATOR_SHARD_INDEX="1"), (1, 4, True), id="explicit index inside an array"),
    pytest.param(array(2, 4, 0, 3, CURATOR_SHARDING="off"), (0, 1, False), id="CURATOR_SHARDING=off wins"),
    pytest.param(
        {"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "2"}, (2, 4, True), id="srun -n 4 without array: rank shards"
    ),
    pytest.param(
        array(1, 4, 0, 3, SLURM_STEP_NUM_TASKS="2", SLURM_PROCID="1"),
        (3, 8, True),
        id="srun -n 2 inside array task 1 of 4: sub-shard",
    ),
    pytest.param(
        array(1, 4, 0, 3, SLURM_STEP_NUM_TASKS="1", SLURM_PROCID="0"), (1, 4, True), id="one-task srun step: no split"
    ),
    pytest.param(
        {"CURATOR_NUM_SHARDS": "3", "CURATOR_SHARD_INDEX": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0"},
        (4, 6, True),
        id="explicit shard split by srun ranks",
    ),
]


@pytest.mark.parametrize(("env", "expected"), RESOLVED)
def test_resolution(env: dict[str, str], expected: tuple[int, int, bool]) -> None:
    spec = ShardSpec.from_env(env)
    assert (spec.index, spec.count, spec.enabled) == expected
    assert spec.origin  # says which variables decided it


def test_every_array_position_is_a_distinct_shard() -> None:
    """Walking a strided array gives shards 0..N-1 exactly once."""
    ids = range(3, 40, 6)  # --array=3-39:6
    shards = [ShardSpec.from_env(array(i, len(ids), 3, 39, 6)).index for i in ids]
    assert shards == list(range(len(ids)))


ERRORS = [
    pytest.param({"CURATOR_NUM_SHARDS": "four", "CURATOR_SHARD_INDEX": "0"}, "CURATOR_NUM_SHARDS='four'", id="nonint"),
    pytest.param(
        {"CURATOR_NUM_SHARDS": "0", "CURATOR_SHARD_INDEX": "0"}, "CURATOR_NUM_SHARDS='0' must be >= 1", id="0"
    ),
    pytest.param({"CURATOR_NUM_SHARDS": "-3", "CURATOR_SHARD_INDEX": "0"}, "CURATOR_NUM_SHARDS='-3'", id="negative"),
    pytest.param({"CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": "4"}, "not below CURATOR_NUM_SHARDS=4", id="idx"),
    pytest.param({"CURATOR_NUM_SHARDS": "4"}, "no shard index", id="count without index"),
    pytest.param({"CURATOR_SHARD_OFFSET": "10"}, "CURATOR_SHARD_OFFSET=10 is set without CURATOR_NUM_SHARDS", id="off"),
    pytest.param({"CURATOR_SHARD_INDEX": "1"}, "CURATOR_SHARD_INDEX=1 is set without CURATOR_NUM_SHARDS", id="index"),
    pytest.param(
        array(3, 11, 0, 10, CURATOR_NUM_SHARDS="12", CURATOR_SHARD_OFFSET="9"),
        "shard index 12",
        id="offset pushes index past count",
    ),
    pytest.param(array(5, 3, 0, 17), "irregular array", id="--array=0,5,17 without a count"),
    pytest.param(array(5, 3, 0, 17), "CURATOR_NUM_SHARDS", id="irregular names the fix"),
    pytest.param(array(2, 4, 0, 3, SLURM_ARRAY_TASK_ID="x"), "SLURM_ARRAY_TASK_ID='x'", id="bad array id"),
    pytest.param({"SLURM_ARRAY_TASK_ID": "2"}, "SLURM_ARRAY_TASK_COUNT", id="array id without count"),
    pytest.param(array(2, 4, 0, 3, CURATOR_SHARD_STRATEGY="random"), "CURATOR_SHARD_STRATEGY='random'", id="strat"),
    pytest.param(array(2, 4, 0, 3, CURATOR_SHARDING="maybe"), "CURATOR_SHARDING='maybe'", id="sharding flag"),
    pytest.param(array(2, 4, 0, 3, CURATOR_SHARD_INDEX="9"), "CURATOR_SHARD_INDEX=9 is not below", id="index>array"),
    pytest.param({"SLURM_STEP_NUM_TASKS": "2"}, "SLURM_PROCID is unset", id="srun without procid"),
    pytest.param({"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "2"}, "SLURM_PROCID=2 must be below", id="procid"),
    pytest.param(
        {"CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": "1", "CURATOR_SHARD_OFFSET": "1"},
        "both set",
        id="index and offset",
    ),
]


@pytest.mark.parametrize(("env", "message"), ERRORS)
def test_errors_name_the_variable_and_fix(env: dict[str, str], message: str) -> None:
    with pytest.raises(ShardConfigError) as info:
        ShardSpec.from_env(env)
    assert message in str(info.value)


def test_strategy_and_job_ids_are_recorded() -> None:
    env = array(2, 4, 0, 3, CURATOR_SHARD_STRATEGY="Balanced", SLURM_RESTART_COUNT="2")
    spec = ShardSpec.from_env(env)
    assert spec.strategy == "balanced"
    assert (spec.job.array_job_id, spec.job.array_task_id, spec.job.restart_count) == ("880", "2", 2)
    assert spec.job.label == "job 880_2"
    assert spec.label == "shard 2/4"


def test_spec_is_frozen_and_validated() -> None:
    spec = ShardSpec.explicit(1, 3)
    with pytest.raises(AttributeError):
        spec.index = 2  # type: ignore[misc]
    with pytest.raises(ShardConfigError, match=r"outside 0\.\.2"):
        ShardSpec.explicit(3, 3)


def test_available_cpus_prefers_slurm() -> None:
    assert available_cpus({"SLURM_CPUS_PER_TASK": "7"}) == 7
    assert available_cpus({}) >= 1
    with pytest.raises(SettingError, match="SLURM_CPUS_PER_TASK='junk' is not an integer"):
        available_cpus({"SLURM_CPUS_PER_TASK": "junk"})  # an error naming it, not silently the affinity mask


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon"])
def test_grace_seconds_must_be_a_finite_number(value: str) -> None:
    from curator_slurm.settings import RunOptions

    with pytest.raises(SettingError, match="CURATOR_GRACE_SECONDS"):
        RunOptions.from_env({"CURATOR_GRACE_SECONDS": value})


def test_steal_is_on_unless_turned_off_and_stays_in_a_jobs_environment() -> None:
    from curator_slurm.settings import RunOptions, job_environment

    assert RunOptions.from_env({}).steal
    assert RunOptions.from_env({"CURATOR_STEAL": "1"}).steal
    for off in ("0", "no", "off", "false"):
        assert not RunOptions.from_env({"CURATOR_STEAL": off}).steal
    with pytest.raises(SettingError, match="CURATOR_STEAL='maybe' is not a yes/no value"):
        RunOptions.from_env({"CURATOR_STEAL": "maybe"})
    kept = job_environment({"CURATOR_STEAL": "0", "CURATOR_SHARD_INDEX": "3", "PATH": "/bin"})
    assert kept == {"CURATOR_STEAL": "0", "PATH": "/bin"}, "configuration stays, a shard's own variable goes"
