"""Exact deduplication as a workflow: the kept documents equal a brute-force global dedup with the survivor
rule "first occurrence in (relative path, row) order", for any shard count per phase, and the phases are
exactly-once, resumable and refuse to start before the phase they read is complete."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, PipelineFailedError, ShardSpec
from curator_slurm.runs.ledger import iter_records
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.workflow import PhaseNotReadyError
from support.dupcorpus import brute_force, make_dup_corpus
from support.helpers import REPO, assert_same_parquet, clean_env, kill_when_recorded, parquet_tables

DEDUP = REPO / "examples" / "dedup.py"


def workflow(input_dir: Path, output: Path, **kwargs: object) -> ExactDuplicates:
    return ExactDuplicates(JsonlReader(input_dir), ParquetWriter(output), id_field="id", buckets=5, **kwargs)


def kept_ids(output: Path) -> list[str]:
    files = sorted(p for p in output.glob("*.parquet"))
    return sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist())


def run_phase(wf: ExactDuplicates, phase: str, shards: int) -> None:
    for i in range(shards):
        wf.run(LocalExecutor(workers=1), shard=ShardSpec.explicit(i, shards), options=RunOptions(phase=phase))


@pytest.fixture(scope="module")
def dup_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dups")
    make_dup_corpus(root)
    return root


@pytest.fixture(scope="module")
def unsharded(dup_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unsharded") / "out"
    result = workflow(dup_corpus, out).run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    assert list(result.phases) == ["hash", "find", "write"]
    return out


def test_kept_documents_equal_a_brute_force_global_dedup(dup_corpus: Path, unsharded: Path) -> None:
    kept, dropped = brute_force(dup_corpus)
    assert dropped, "the corpus has duplicates"
    assert kept_ids(unsharded) == sorted(kept)
    # Every other column comes through unchanged.
    table = pa.concat_tables(parquet_tables(unsharded).values())
    assert set(table.column_names) == {"id", "text", "n", "file_path"}
    assert all(int(i.split("-")[1]) == n for i, n in zip(table["id"].to_pylist(), table["n"].to_pylist(), strict=True))


@pytest.mark.parametrize("layout", [(4, 4, 4), (4, 3, 2), (1, 5, 3)], ids=["4-4-4", "4-3-2", "1-5-3"])
def test_any_shard_count_per_phase_gives_the_unsharded_output(
    dup_corpus: Path, unsharded: Path, tmp_path: Path, layout: tuple[int, int, int]
) -> None:
    out = tmp_path / "out"
    wf = workflow(dup_corpus, out)
    for phase, shards in zip(["hash", "find", "write"], layout, strict=True):
        run_phase(wf, phase, shards)
    assert_same_parquet(out, unsharded)


def test_a_phase_refuses_to_start_before_the_phase_it_reads(dup_corpus: Path, tmp_path: Path) -> None:
    wf = workflow(dup_corpus, tmp_path / "out")
    wf.run(LocalExecutor(workers=1), shard=ShardSpec.explicit(0, 3), options=RunOptions(phase="hash"))
    with pytest.raises(PhaseNotReadyError, match=r"phase 'find' cannot start: \d+ source task\(s\) of phase 'hash'"):
        wf.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions(phase="find"))
    with pytest.raises(Exception, match="no such phase"):
        wf.run(LocalExecutor(workers=1), options=RunOptions(phase="nope"))


def test_identify_only_lists_each_duplicate_with_its_survivor(dup_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "dups"
    result = workflow(dup_corpus, out, identify_only=True).run(LocalExecutor(workers=1), options=RunOptions())
    assert list(result.phases) == ["hash", "find"]
    table = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("*.parquet")))
    _, dropped = brute_force(dup_corpus)
    assert dict(zip(table["id"].to_pylist(), table["survivor_id"].to_pylist(), strict=True)) == dropped


def test_a_failed_hash_task_blocks_the_find_phase_until_fixed(dup_corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "in"
    make_dup_corpus(data)
    bad = data / "a" / "part-01.jsonl"
    good = bad.read_text()
    bad.write_text(good + '{"id": "broken", "text": \n')
    wf = workflow(data, tmp_path / "out")
    with pytest.raises(PipelineFailedError, match=r"part-01\.jsonl"):
        wf.run(LocalExecutor(workers=1), options=RunOptions())
    with pytest.raises(PhaseNotReadyError, match=r"1 failed: .*part-01\.jsonl"):
        wf.run(LocalExecutor(workers=1), options=RunOptions(phase="find"))
    bad.write_text(good)
    result = wf.run(LocalExecutor(workers=1), options=RunOptions())
    assert result.phases["hash"].done == 1 and result.phases["hash"].source_tasks_skipped == 7
    kept, _ = brute_force(data)
    assert kept_ids(tmp_path / "out") == sorted(kept)


def test_kill_9_in_the_find_phase_then_rerun(dup_corpus: Path, unsharded: Path, tmp_path: Path) -> None:
    """A driver killed in the middle of phase 2 is finished by running the same command again: no phase-1 work
    is redone and the output is identical to an uninterrupted run (with other buckets: the kept documents and
    the output names do not depend on them)."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(DEDUP), "--input", str(dup_corpus), "--output", str(out), "--id-field", "id",
           "--buckets", "300", "--workers", "1"]  # fmt: skip
    find_ledger = out / ".curator-work" / ".curator-run" / "find" / "ledger"
    # 300 buckets make the find phase long enough (300 tasks) to be caught in the middle.
    kill_when_recorded(cmd, find_ledger, timeout=60)
    hash_dir = out / ".curator-work" / ".curator-run" / "hash"
    hash_records = len(list(iter_records(str(hash_dir))))
    find_done = sum(r["status"] == "done" for r in iter_records(str(find_ledger.parent)))
    assert 0 < find_done < 300, "killed in the middle of the find phase"
    subprocess.run(cmd, env=clean_env(), check=True, capture_output=True)
    assert len(list(iter_records(str(hash_dir)))) == hash_records, "no phase-1 work redone"
    assert_same_parquet(out, unsharded)


def test_normalisation_is_pythons_split_and_join() -> None:
    """Every whitespace character Python's str.split() knows, in runs and alone, at the ends and inside."""
    from curator_slurm.workflows.dedup.exact import normalize_for_exact

    spaces = [chr(c) for c in range(0x3001) if chr(c).isspace()]
    rng = random.Random(3)
    texts = ["".join(rng.choice([*spaces, "a", "b", "é"]) for _ in range(rng.randint(0, 25))) for _ in range(5000)]
    assert normalize_for_exact(pa.array(texts)).to_pylist() == [" ".join(t.split()) for t in texts]


def test_shuffle_file_counts_and_what_a_bucket_task_reads(dup_corpus: Path, unsharded: Path) -> None:
    """The scale limits the reference states, at small size: the hash phase writes one file per source task
    (not one per task and bucket), the find phase at most one per bucket (none for a bucket without
    duplicates), each recorded in the phase's ledger, and a bucket task's batch holds only its own bucket's
    rows."""
    from curator_slurm.workflows.shuffle import read_bucket, shuffle_files
    from curator_slurm.workflows.workflow import phase_upstream

    work = unsharded / ".curator-work"
    sources = len(list(dup_corpus.rglob("*.jsonl")))
    files = shuffle_files(phase_upstream(work, "hash"))
    assert len(files) == sources
    lists = shuffle_files(phase_upstream(work, "find"))
    assert 0 < len(lists) <= 5
    assert sorted(str(p) for p in (work / "duplicates").glob("*.parquet")) == lists
    assert all(pq.read_metadata(f).num_rows for f in lists), "a bucket without duplicates writes no file"
    total = 0
    for bucket in range(5):
        table = read_bucket(files, bucket)
        assert table is not None and set(table.column("bucket").to_pylist()) == {bucket}
        total += table.num_rows
    assert total == sum(pq.read_metadata(f).num_rows for f in files), "every row is in exactly one bucket"


def test_a_later_phase_checks_the_planned_tasks_not_a_new_listing(tmp_path: Path) -> None:
    """With the plan that `submit` writes into a phase's run directory, the next phase checks completeness
    against it: a file added to the input after the plan (which the phase's own tasks, following the plan,
    never saw) does not block the next phase; without a plan, the listing sees it and the phase waits."""
    data = tmp_path / "in"
    make_dup_corpus(data, files=4, docs=10)
    wf = workflow(data, tmp_path / "out")
    wf.run(LocalExecutor(workers=1), options=RunOptions(phase="hash"))
    hash_plan = Path(wf.run_dir("hash")) / "plan.json"
    hash_plan.write_text(json.dumps(wf.plan()["phases"][0]))
    (data / "a" / "zz-added-later.jsonl").write_text(json.dumps({"id": "late", "text": "late"}) + "\n")
    result = wf.run(LocalExecutor(workers=1), options=RunOptions(phase="find"))
    assert result.phases["find"].done == 5
    hash_plan.unlink()
    with pytest.raises(PhaseNotReadyError, match="1 source task"):
        wf.run(LocalExecutor(workers=1), options=RunOptions(phase="find"))
