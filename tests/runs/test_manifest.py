"""Plan once (issue #19 item 1): the submit-time manifest that array tasks load instead of listing the input."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.backends.adapter import list_sources
from curator_slurm.errors import RunDirError, ShardConfigError
from curator_slurm.runs.ledger import iter_records, load_status
from curator_slurm.runs.manifest import (
    SIZES_KEY,
    check_sources,
    load_shard,
    read_info,
    sources_table,
    write_manifest,
)
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.shard import ShardSpec
from curator_slurm.stages import FilePartitioningStage
from curator_slurm.tasks import FileGroupTask
from support.helpers import EXAMPLE, clean_env, read_tree, run_example
from support.slurmtools import wait_for_job

CLI = [sys.executable, "-m", "curator_slurm.cli"]


def listed(path: Path, **kwargs: object) -> list[FileGroupTask]:
    """The source tasks of a reader over ``path``, as a pipeline's source stage lists them."""
    stage = FilePartitioningStage(str(path), **kwargs)  # type: ignore[arg-type]
    stage.is_source_stage = True
    return list_sources(stage, ShardSpec.single()).sources  # type: ignore[return-value]


def plan_manifest(inp: Path, where: Path, shards: int, strategy: str = "balanced", **kwargs: object) -> Path:
    """The manifest `submit` would write for examples/curate.py over ``inp``."""
    table = sources_table(listed(inp, **kwargs))
    assert table is not None
    write_manifest(str(where), table, shards, strategy)
    return where


def shard_env(manifest: Path, index: int, count: int) -> dict[str, str]:
    return {"CURATOR_MANIFEST": str(manifest), "CURATOR_NUM_SHARDS": str(count), "CURATOR_SHARD_INDEX": str(index)}


def without_sizes(task: FileGroupTask) -> tuple:
    return (task.task_id, task.dataset_name, task.data, {k: v for k, v in task.metadata.items() if k != SIZES_KEY})


@pytest.mark.parametrize(
    ("kwargs", "strategy"),
    [({}, "balanced"), ({"files_per_partition": 3}, "hash"), ({"blocksize": 20_000, "split_files": True}, "balanced")],
)
def test_round_trip_rebuilds_the_listed_tasks_each_in_one_shard(
    corpus: Path, tmp_path: Path, kwargs: dict, strategy: str
) -> None:
    tasks = listed(corpus, **kwargs)
    table = sources_table(tasks)
    assert table is not None and len(tasks) >= 4
    info = write_manifest(str(tmp_path / "m"), table, 4, strategy)
    assert (info.count, info.shards, info.strategy) == (len(tasks), 4, strategy)
    rebuilt = [t for i in range(4) for t in load_shard(info.path, ShardSpec.explicit(i, 4))[0]]
    assert sorted(map(without_sizes, rebuilt)) == sorted(map(without_sizes, tasks))
    assert len({t.task_id for t in rebuilt}) == len(tasks), "every task in exactly one shard"
    for t in rebuilt:
        assert t.metadata[SIZES_KEY] == [os.path.getsize(p) for p in t.data]
        assert t.has_deterministic_id
    assert [c for c, _ in info.loads] == [len(load_shard(info.path, ShardSpec.explicit(i, 4))[0]) for i in range(4)]


def test_a_task_reads_only_its_shard_file(corpus: Path, tmp_path: Path) -> None:
    manifest = plan_manifest(corpus, tmp_path / "m", 3)
    mine, _ = load_shard(str(manifest), ShardSpec.explicit(1, 3))
    for other in ("shard-00000.parquet", "shard-00002.parquet"):
        (manifest / other).unlink()
    again, _ = load_shard(str(manifest), ShardSpec.explicit(1, 3))
    assert [t.task_id for t in again] == [t.task_id for t in mine] and mine
    proc = run_example(corpus, tmp_path / "out", "--workers", "1", env=shard_env(manifest, 1, 3))
    assert "from manifest" in proc.stderr and "listed by this process" not in proc.stderr
    with pytest.raises(ShardConfigError, match=r"shard-00000\.parquet is missing"):
        load_shard(str(manifest), ShardSpec.explicit(0, 3))


def test_srun_ranks_split_their_array_tasks_shard(corpus: Path, tmp_path: Path) -> None:
    manifest = plan_manifest(corpus, tmp_path / "m", 2)
    whole, _ = load_shard(str(manifest), ShardSpec.explicit(1, 2))
    parts = [load_shard(str(manifest), ShardSpec.explicit(2 + r, 4))[0] for r in range(2)]
    assert sorted(t.task_id for p in parts for t in p) == sorted(t.task_id for t in whole)
    with pytest.raises(ShardConfigError, match="planned for 2 shard"):
        load_shard(str(manifest), ShardSpec.explicit(0, 3))


def test_one_and_four_shards_write_the_same_outputs(corpus: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_example(corpus, reference, "--workers", "1")
    for shards in (1, 4):
        manifest = plan_manifest(corpus, tmp_path / f"m{shards}", shards)
        out = tmp_path / f"out{shards}"
        for i in range(shards):
            run_example(corpus, out, "--workers", "1", env=shard_env(manifest, i, shards))
        assert read_tree(out) == read_tree(reference), f"{shards} shard(s) from a manifest"
        assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == len(listed(corpus))


def test_a_file_added_after_the_plan_is_not_processed(corpus: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    shutil.copytree(corpus, inp)
    reference = tmp_path / "reference"
    run_example(inp, reference, "--workers", "1")
    manifest = plan_manifest(inp, tmp_path / "m", 2)
    shutil.copy(next(inp.glob("*.jsonl")), inp / "zz-late.jsonl")
    out = tmp_path / "out"
    for i in range(2):
        run_example(inp, out, "--workers", "1", env=shard_env(manifest, i, 2))
    assert read_tree(out) == read_tree(reference)


def test_a_file_shrunk_after_the_plan_fails_its_task_naming_it(corpus: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    shutil.copytree(corpus, inp)
    manifest = plan_manifest(inp, tmp_path / "m", 1)
    victim = sorted(inp.glob("*.jsonl"))[3]
    lines = victim.read_text().splitlines(keepends=True)
    victim.write_text("".join(lines[: len(lines) // 2]))
    out = tmp_path / "out"
    proc = run_example(inp, out, "--workers", "1", env=shard_env(manifest, 0, 1), check=False)
    assert proc.returncode == 1, proc.stderr
    assert str(victim) in proc.stderr and "when the run was planned" in proc.stderr
    (failure,) = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "failed"]
    assert str(victim) in failure["error"] and failure["attempts"] == 1, "an InputError is not retried"
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == len(listed(inp)) - 1


def test_run_dir_check_compares_the_manifest_digest(corpus: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    shutil.copytree(corpus, inp)
    manifest = plan_manifest(inp, tmp_path / "m", 2, strategy="hash")
    out = tmp_path / "out"
    run_example(inp, out, "--workers", "1", env=shard_env(manifest, 0, 2))
    # A task that lists by itself (no manifest) agrees with the manifest's record of the same inputs.
    run_example(inp, out, "--workers", "1", env={"CURATOR_NUM_SHARDS": "2", "CURATOR_SHARD_INDEX": "1"})
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == len(listed(inp))
    shutil.copy(next(inp.glob("*.jsonl")), inp / "zz-late.jsonl")
    replanned = read_info(str(plan_manifest(inp, tmp_path / "m2", 2, strategy="hash")))
    with pytest.raises(RunDirError, match="inputs changed since this run started"):
        check_sources(str(out / DEFAULT_RUN_DIR_NAME), replanned, accept_new_inputs=False)


def test_manifest_variable_errors_name_the_fix(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(ShardConfigError, match=r"CURATOR_MANIFEST=.*is not a directory"):
        ShardSpec.from_env({"CURATOR_MANIFEST": str(tmp_path / "nope")})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ShardConfigError, match=r"holds no manifest\.json"):
        load_shard(str(tmp_path / "empty"), ShardSpec.single())
    manifest = plan_manifest(corpus, tmp_path / "m", 3)
    proc = run_example(corpus, tmp_path / "out", env={"CURATOR_MANIFEST": str(manifest)}, check=False)
    assert proc.returncode == 2 and "planned for 3 shard(s)" in proc.stderr
    with pytest.raises(FileExistsError):
        plan_manifest(corpus, manifest, 3)


def test_plan_says_which_strategy_submit_uses(corpus: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "plan", str(EXAMPLE), "--shards", "4", "--json", "--", "--input", str(corpus), "--output",
         str(tmp_path / "out")], capture_output=True, text=True, env=clean_env(), check=True,
    )  # fmt: skip
    summary = json.loads(proc.stdout)
    assert summary["manifest"] is True and summary["submit_strategy"] == "balanced"
    assert summary["strategies"]["balanced"]["imbalance"] <= summary["strategies"]["hash"]["imbalance"]


def test_local_array_plans_once(corpus: Path, tmp_path: Path) -> None:
    reference, out = tmp_path / "reference", tmp_path / "out"
    run_example(corpus, reference, "--workers", "1")
    proc = subprocess.run(
        [*CLI, "local", str(EXAMPLE), "--shards", "3", "--logs", str(tmp_path / "logs"), "--", "--input",
         str(corpus), "--output", str(out), "--workers", "1"], capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = out / DEFAULT_RUN_DIR_NAME / "manifest" / "local-0"
    assert read_info(str(manifest)).shards == 3
    logs = [(tmp_path / "logs" / f"shard-{i}.log").read_text() for i in range(3)]
    assert all(f"from manifest {manifest}" in log for log in logs)
    assert read_tree(out) == read_tree(reference)


@pytest.mark.slurm
def test_submitted_tasks_follow_the_manifest_not_the_input_tree(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """An array submitted through `submit` does not list the input tree: a file added to the input directory
    after submit (while the array is held) is neither processed nor a reason to fail."""
    inp, out, reference = tmp_path / "in", tmp_path / "out", tmp_path / "reference"
    shutil.copytree(corpus, inp)
    run_example(inp, reference, "--workers", "1")
    proc = subprocess.run(
        [*CLI, "submit", str(EXAMPLE), "--shards", "3", "--sbatch-arg=--hold", "--", "--input", str(inp),
         "--output", str(out), "--workers", "1"], capture_output=True, text=True, env=clean_env(), cwd=tmp_path,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (job,) = re.findall(r"(\d+) \(shards", proc.stdout)
    assert "planned 12 source tasks into" in proc.stdout
    shutil.copy(next(inp.glob("*.jsonl")), inp / "zz-late.jsonl")
    subprocess.run(["scontrol", "release", job], check=True, capture_output=True)
    states = wait_for_job(job, timeout=600)
    assert set(states.values()) == {"COMPLETED"}, states
    assert read_tree(out) == read_tree(reference)
    run_dir = out / DEFAULT_RUN_DIR_NAME
    logs = [p.read_text() for p in (run_dir / "logs").glob(f"{job}_*.log")]
    assert len(logs) == 3 and all("from manifest" in log and "listed by this process" not in log for log in logs)
    assert len(load_status(str(run_dir)).done) == 12
    (manifest,) = (run_dir / "manifest").iterdir()
    assert read_info(str(manifest)).strategy == "balanced"


@pytest.mark.slurm
def test_each_workflow_phase_loads_its_own_manifest(slurm_cluster: str, tmp_path: Path) -> None:
    """examples/dedup.py submitted as a workflow: every phase's tasks load their shard from a manifest in the
    phase's run directory (the bucket phase's tasks are known at plan time), and the result is the unsharded
    run's."""
    import pyarrow.parquet as pq

    from curator_slurm.samples.corpus import make_corpus

    dedup = EXAMPLE.parent / "dedup.py"
    make_corpus(str(tmp_path / "in"), files=6, docs_per_file=30, seed=3)
    first = sorted((tmp_path / "in").glob("*.jsonl"))
    (tmp_path / "in" / "zz-copy.jsonl").write_bytes(first[0].read_bytes())  # exact duplicates to remove
    args = ["--input", str(tmp_path / "in"), "--buckets", "4"]
    subprocess.run([sys.executable, str(dedup), *args, "--output", str(tmp_path / "ref")], env=clean_env(),
                   check=True, capture_output=True)  # fmt: skip
    submit = [*CLI, "submit", str(dedup), "--shards", "2", "--json", "--", *args, "--output", str(tmp_path / "out")]
    proc = subprocess.run(submit, env=clean_env(), check=True, capture_output=True, text=True)
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(proc.stdout).items()}
    for name, job in jobs.items():
        assert set(wait_for_job(job, timeout=300).values()) == {"COMPLETED"}, name
    run_root = tmp_path / "out" / ".curator-work" / DEFAULT_RUN_DIR_NAME
    for name, job in jobs.items():
        logs = [p.read_text() for p in (run_root / name / "logs").glob(f"{job}_*.log")]
        assert logs and all(f"from manifest {run_root / name}/manifest/submit-0" in log for log in logs), name
    mine, theirs = ({p.name: pq.read_table(p) for p in sorted(d.glob("*.parquet"))}
                    for d in (tmp_path / "out", tmp_path / "ref"))  # fmt: skip
    assert list(mine) == list(theirs) and all(mine[n].equals(theirs[n]) for n in mine)
