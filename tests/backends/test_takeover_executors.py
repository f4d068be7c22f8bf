"""Every executor does taken-over work through the WorkQueue alone: shard 1 of 2, after its own tasks, does those
of shard 0, whose process started (its claims directory exists) and died before it claimed any; in-process, with a
pool of worker processes, and on Ray. Every task once, the outputs those of an unsharded run."""

from __future__ import annotations

from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.runs.claims import ClaimBoard, Holder
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import shard_of
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec
from curator_slurm.stages import JsonlReader, ParquetWriter
from support.executors import ExecutorFactory, executor_factory_fixture, ray_cluster_fixture  # noqa: F401
from support.helpers import read_tree


def pipeline(corpus: Path, out: Path) -> Pipeline:
    return Pipeline("copy").add_stage(JsonlReader(str(corpus))).add_stage(ParquetWriter(str(out)))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dead_owners_tasks_are_taken_over(
    corpus: Path, tmp_path: Path, executor_factory: ExecutorFactory, workers: int
) -> None:
    whole = tmp_path / "whole"
    pipeline(corpus, whole).run(LocalExecutor(workers=1), options=RunOptions(steal=False))
    out = tmp_path / "out"
    run_dir = out / DEFAULT_RUN_DIR_NAME
    ClaimBoard(str(run_dir), "h2", Holder.of(ShardSpec.explicit(0, 2))).register(0)  # started, then gone
    result = pipeline(corpus, out).run(executor_factory(workers=workers), shard=ShardSpec.explicit(1, 2))
    theirs = [r for r in iter_records(str(run_dir)) if r["status"] == "done" and shard_of(r["source"], 2) == 0]
    assert theirs and all(r["taken_from"] == "0/2" and r["shard"] == "1/2" for r in theirs)
    assert result.taken_over == len(theirs) and result.done == 12
    assert read_tree(out) == read_tree(whole)
    again = pipeline(corpus, out).run(executor_factory(workers=workers), shard=ShardSpec.explicit(0, 2))
    assert again.done == 0 and again.source_tasks_skipped == len(theirs), "the owner finds its tasks done"


def test_without_takeover_nothing_is_taken(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_dir = out / DEFAULT_RUN_DIR_NAME
    ClaimBoard(str(run_dir), "h2", Holder.of(ShardSpec.explicit(0, 2))).register(0)
    result = pipeline(corpus, out).run(
        LocalExecutor(workers=1), shard=ShardSpec.explicit(1, 2), options=RunOptions(steal=False)
    )
    assert result.taken_over == 0 and result.done == result.source_tasks_mine
    assert not [r for r in iter_records(str(run_dir)) if "taken_from" in r]
