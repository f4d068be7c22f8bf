"""Ledger partitions: a task reads only the ledger files that can hold its source tasks' records (its own
shard's, every other layout's, old flat files), `status` reads all, and a change of shard count between
runs stays correct (no done work repeated)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.runs.ledger import LedgerWriter, iter_records, ledger_file_name, load_status, shard_layout
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME, RunDir
from curator_slurm.samples.corpus import make_corpus
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec
from curator_slurm.stages import JsonlReader, ParquetWriter
from support.helpers import REPO


def _fixture_module():
    spec = importlib.util.spec_from_file_location("ledger_fixture", REPO / "benchmarks" / "ledger_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


fixture = _fixture_module()


def test_a_task_reads_its_own_partition_and_status_reads_all(tmp_path: Path) -> None:
    """A hash array of 8 shards: each task's state holds exactly the ids that hash into it; load_status
    without a shard holds every id."""
    written = fixture.write_ledger(str(tmp_path / "run"), records=4000, shards=8)
    assert written.files == 8
    all_ids = {fixture.source_id(k) for k in range(4000)}
    run = RunDir(tmp_path / "run")
    seen: set[str] = set()
    for index in range(8):
        done = run.state(ShardSpec.explicit(index, 8)).done
        assert done == {s for s in all_ids if fixture.shard_of(s, 8) == index}
        seen |= done
    assert seen == all_ids
    everything = load_status(str(tmp_path / "run"))
    assert everything.done == all_ids and everything.records == 4000
    assert len(list(iter_records(str(tmp_path / "run")))) == 4000


def test_other_layouts_and_old_flat_files_are_always_read(tmp_path: Path) -> None:
    run = tmp_path / "run"
    fixture.write_ledger(str(run), records=800, shards=4)  # layout h4
    ledger = run / "ledger"
    (ledger / "local-node1-77-0badcafe.jsonl").write_text(  # a run directory of before partitions
        json.dumps({"source": "old", "status": "done", "outputs": []}) + "\n"
    )
    other = ShardSpec.explicit(2, 3)  # a run with another shard count (a retry) wrote this one
    (ledger / ledger_file_name(other, "local-node1-78-0badcafe")).write_text(
        json.dumps({"source": "retried", "status": "done"}) + "\n" + json.dumps({"source": "f", "status": "failed"})
    )
    mine = ShardSpec.explicit(1, 4)
    state = RunDir(run).state(mine)
    own = {s for s in (fixture.source_id(k) for k in range(800)) if fixture.shard_of(s, 4) == 1}
    assert state.done == own | {"old", "retried"}, "own partition, the old flat file and the other count's file"
    # The task of the other layout reads every h4 file (they may hold its tasks) and its own ...
    every = {fixture.source_id(k) for k in range(800)}
    assert RunDir(run).state(other).done == every | {"old", "retried"}
    # ... or, given its task ids, only the h4 partitions they hash into (hash is a function of the id).
    ids = [*[s for s in sorted(every) if fixture.shard_of(s, 4) in (0, 3)][:5], "not-recorded"]
    wanted = {fixture.shard_of(s, 4) for s in ids}
    expected = {s for s in every if fixture.shard_of(s, 4) in wanted}
    assert RunDir(run).state(other, ids).done == expected | {"old", "retried"}
    assert set(ids[:5]) <= expected and len(wanted) < 4


def test_the_writer_names_its_file_by_partition(tmp_path: Path) -> None:
    hashed = LedgerWriter(str(tmp_path), ShardSpec.explicit(3, 16))
    balanced = LedgerWriter(str(tmp_path), ShardSpec.explicit(3, 16, strategy="balanced"))
    planned = LedgerWriter(
        str(tmp_path), ShardSpec(index=0, count=2, enabled=True, manifest=str(tmp_path / "submit-1"))
    )
    single = LedgerWriter(str(tmp_path), ShardSpec.single())
    names = [Path(w.path).name for w in (hashed, balanced, planned, single)]
    assert [n.split(".")[:3] for n in names] == [
        ["p", "h16", "3"],
        ["p", "b16", "3"],
        ["p", "m2-submit-1", "0"],
        ["p", "h1", "0"],
    ]
    assert shard_layout(ShardSpec.explicit(0, 16)) != shard_layout(ShardSpec.explicit(0, 16, strategy="balanced"))
    for w in (hashed, balanced, planned, single):
        w.close()


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    make_corpus(str(root), files=24, docs_per_file=10, seed=9)
    return root


def _run(inp: Path, out: Path, shard: ShardSpec) -> int:
    """Run shard ``shard`` of the pipeline; how many source tasks it did."""
    pipeline = Pipeline("parts").add_stage(JsonlReader(str(inp))).add_stage(ParquetWriter(str(out)))
    return pipeline.run(LocalExecutor(workers=1), shard=shard, options=RunOptions()).done


def test_changing_the_shard_count_between_runs_repeats_no_done_work(small: Path, tmp_path: Path) -> None:
    """Shard 0 of 2 runs; then all 3 shards of a 3-shard array; then shard 1 of 2: every source task is
    done exactly once, because a task reads every file of another layout."""
    out = tmp_path / "out"
    first = _run(small, out, ShardSpec.explicit(0, 2))
    assert 0 < first < 24
    second = sum(_run(small, out, ShardSpec.explicit(i, 3)) for i in range(3))
    assert first + second == 24, "the 3-shard run skipped what shard 0 of 2 did"
    assert _run(small, out, ShardSpec.explicit(1, 2)) == 0, "shard 1 of 2 found its tasks done by the 3 shards"
    records = list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))
    assert len(records) == 24 and len({r["source"] for r in records}) == 24
    layouts = sorted({p.name.split(".")[1] for p in (out / DEFAULT_RUN_DIR_NAME / "ledger").iterdir()})
    assert layouts == ["h2", "h3"]


def test_a_task_does_not_read_the_partitions_of_other_shards_of_its_array(small: Path, tmp_path: Path) -> None:
    """Records of every source task, put where only shard 1 of 2 would write them: shard 0 of 2 does not
    read them (it does all its tasks), a task of 3 shards reads them (it finds everything done)."""
    reference = tmp_path / "reference"
    _run(small, reference, ShardSpec.single())
    ids = [r["source"] for r in iter_records(str(reference / DEFAULT_RUN_DIR_NAME))]
    assert len(ids) == 24
    out = tmp_path / "out"
    ledger = out / DEFAULT_RUN_DIR_NAME / "ledger"
    ledger.mkdir(parents=True)
    lines = "".join(json.dumps({"source": i, "status": "done", "outputs": []}) + "\n" for i in ids)
    (ledger / ledger_file_name(ShardSpec.explicit(1, 2), "local-node1-1-00000000")).write_text(lines)
    assert _run(small, out, ShardSpec.explicit(0, 2)) > 0, "shard 0 of 2 read only its own partition"
    assert _run(small, out, ShardSpec.explicit(0, 3)) == 0, "a task of another layout read every h2 file"
