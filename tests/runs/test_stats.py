"""The stats files' log2 buckets: a value's bucket is its bit length, so histograms of parts add up to the
histogram of the whole, and merging stats files is exact and additive in any grouping and order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from curator_slurm.runs.stats import STATS_DIR, bucket_range, histogram, merge_stats, read_stats
from curator_slurm.stages.io.megatron import log2_counts

values = st.lists(st.integers(0, 2**40), max_size=50)


@given(values)
def test_a_value_goes_to_the_bucket_of_its_bit_length(xs: list[int]) -> None:
    counts = histogram(np.array(xs, np.int64))
    want = np.zeros(len(counts), np.int64)
    for x in xs:
        want[x.bit_length()] += 1
        low, high = bucket_range(x.bit_length())
        assert low <= x < high
    assert counts.tolist() == want.tolist()
    trimmed = log2_counts(np.array(xs, np.int64))  # the token writer's copy of the rule
    assert trimmed == want.tolist()[: len(trimmed)] and sum(trimmed) == len(xs)


def _stats_file(parts: list[list[int]], stage: str = "s") -> dict[str, Any]:
    hist = histogram(np.array([x for p in parts for x in p], np.int64)).tolist()
    while hist and not hist[-1]:
        hist.pop()
    n = sum(len(p) for p in parts)
    return {"version": 1, "tasks": len(parts), "seconds": 0.5 * len(parts),
            "stages": [{"stage": stage, "tasks": len(parts), "docs_in": n, "docs_out": n, "seconds": 0.5,
                        "length_log2": hist, "token_log2": []}]}  # fmt: skip


@given(st.lists(st.lists(values, max_size=4), min_size=1, max_size=5), st.randoms())
def test_merging_is_exact_in_any_grouping_and_order(groups: list[list[list[int]]], rnd: Any) -> None:
    files = [_stats_file(g) for g in groups]
    whole = merge_stats([_stats_file([x for g in groups for x in g])])
    merged = merge_stats(files)
    shuffled = list(files)
    rnd.shuffle(shuffled)
    halves = merge_stats([merge_stats(shuffled[: len(shuffled) // 2]), merge_stats(shuffled[len(shuffled) // 2 :])])
    for got in (merged, halves):
        (stage,) = got["stages"]
        (want,) = whole["stages"]
        assert stage["length_log2"] == want["length_log2"] and stage["docs_out"] == want["docs_out"]
        assert got["tasks"] == sum(len(g) for g in groups) and got["files"] == len(groups)


def test_read_stats_merges_a_run_directory_and_skips_what_is_not_a_stats_file(tmp_path: Path) -> None:
    directory = tmp_path / STATS_DIR
    directory.mkdir()
    (directory / "a-1.json").write_text(json.dumps(_stats_file([[1, 2, 3]])))
    (directory / "b-2.json").write_text(json.dumps(_stats_file([[1000]])))
    (directory / "c-3.json").write_text("{not json")
    (directory / "d-4.json").mkdir()
    (directory / "e-5.json").write_text(json.dumps({**_stats_file([[7]]), "version": 99}))
    got = read_stats(str(tmp_path))
    assert got is not None and got["files"] == 2 and got["tasks"] == 2
    assert got["stages"][0]["length_log2"] == histogram(np.array([1, 2, 3, 1000])).tolist()[:11]
    assert read_stats(str(tmp_path / "nothing")) is None


def test_the_stats_files_of_a_pool_of_workers_add_up_to_the_ledger(tmp_path: Path) -> None:
    """Two worker processes (forked or spawned, each with its own stats file, written as it ends): the merged
    stats count every document of the run once per stage, with every length in a bucket, as the ledger does."""
    import subprocess
    import sys

    from support.helpers import REPO, clean_env

    corpus, out = tmp_path / "in", tmp_path / "out"
    corpus.mkdir()
    texts = {name: [f"{name} {i} " * (1 + i % 40) for i in range(150)] for name in ("a", "b", "c")}
    for name, rows in texts.items():
        (corpus / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in rows))
    cmd = [sys.executable, str(REPO / "tests" / "pipelines" / "slow.py"), "--input", str(corpus), "--output",
           str(out), "--batch-rows", "40", "--workers", "2"]  # fmt: skip
    proc = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run_dir = out / ".curator-run"
    stats = read_stats(str(run_dir))
    assert stats is not None and stats["files"] >= 2 and stats["tasks"] == 3
    by_stage = {s["stage"]: s for s in stats["stages"]}
    slow = by_stage["slow_stage"]
    assert slow["docs_in"] == slow["docs_out"] == 450 == sum(slow["length_log2"])
    want = histogram(np.array([len(t.encode()) for rows in texts.values() for t in rows], np.int64)).tolist()
    assert slow["length_log2"] == want[: len(slow["length_log2"])] and not any(want[len(slow["length_log2"]) :])
    look = [sys.executable, "-m", "curator_slurm.cli", "status", str(out), "--json"]
    status = json.loads(subprocess.run(look, env=clean_env(), capture_output=True, text=True, timeout=120).stdout)
    assert status["stats"] == stats and status["rows_out"] == slow["docs_out"]
