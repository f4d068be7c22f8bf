"""examples/extract.py as a user runs it: WARC files of real HTML in, one output per source task out; four
simulated array tasks write, file for file, what one unsharded run writes (pieces of split files included);
killed with SIGKILL in the middle of the archives and run again, it finishes with the same output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import REPO, clean_env, kill_when_recorded, read_tree
from support.webfixtures import build_warcs

EXTRACT = REPO / "examples" / "extract.py"


def extract(warcs: Path, out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(EXTRACT), "--input", str(warcs), "--output", str(out), *args],
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def warcs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("warcs")
    build_warcs(out, "python3.11-doc", files=3, limit=36, others=6)
    return out


def array_env(task: int, count: int) -> dict[str, str]:
    return {
        "SLURM_JOB_ID": str(7000 + task),
        "SLURM_ARRAY_JOB_ID": "7000",
        "SLURM_ARRAY_TASK_ID": str(task),
        "SLURM_ARRAY_TASK_COUNT": str(count),
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": str(count - 1),
        "SLURM_ARRAY_TASK_STEP": "1",
    }


@pytest.mark.parametrize("extractor", ["resiliparse", "justext"])
def test_four_array_tasks_write_what_one_unsharded_run_writes(warcs: Path, tmp_path: Path, extractor: str) -> None:
    """Four simulated array tasks, each run unchanged, together write the unsharded run's files, byte for byte;
    files are cut into record-aligned pieces (--blocksize), each a source task of its own."""
    args = ("--extractor", extractor, "--workers", "1", "--blocksize", "96KiB")
    extract(warcs, tmp_path / "whole", *args)
    whole = read_tree(tmp_path / "whole")
    assert len(whole) > 3, "the files were cut into pieces"
    for task in range(4):
        proc = extract(warcs, tmp_path / "sharded", *args, env=array_env(task, 4))
        assert f"shard {task}/4" in proc.stderr
    assert read_tree(tmp_path / "sharded") == whole
    rows = sum(len(data.splitlines()) for name, data in whole.items() if name.endswith(".jsonl"))
    assert rows > 30


def test_kill_mid_archive_then_rerun_gives_the_same_output(warcs: Path, tmp_path: Path) -> None:
    """SIGKILL once the first source task is recorded (the others in flight or not started), then the same
    command again: it skips what was recorded and the output equals an uninterrupted run's."""
    args = ["--extractor", "trafilatura", "--workers", "1", "--blocksize", "64KiB"]
    extract(warcs, tmp_path / "reference", *args)
    out = tmp_path / "out"
    command = [sys.executable, str(EXTRACT), "--input", str(warcs), "--output", str(out), *args]
    kill_when_recorded(command, out / DEFAULT_RUN_DIR_NAME / "ledger", timeout=300, window=1)
    done_before = {r["source"] for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"}
    proc = extract(warcs, out, *args)
    assert f"skipping {len(done_before)} source tasks already done" in proc.stderr
    assert read_tree(out) == read_tree(tmp_path / "reference")
