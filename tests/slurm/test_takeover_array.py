"""Takeover on the real cluster: `curator-slurm submit` of a 4-task array whose shard 0 is ten times slower; the
tasks that finish first take over its unstarted work. Outputs equal the unsharded run's, one done record per source
task, and `status` says who did what."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import shard_of
from curator_slurm.samples.corpus import make_corpus
from support.helpers import clean_env, read_tree
from support.slurmtools import wait_for_job
from support.tallying import TALLY, tally_cmd

pytestmark = pytest.mark.slurm


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), timeout=300
    )


def test_an_array_with_one_slow_task(slurm_cluster: str, tmp_path: Path) -> None:
    corpus, out, reference = tmp_path / "corpus", tmp_path / "out", tmp_path / "reference"
    make_corpus(str(corpus), files=16, docs_per_file=30, seed=5)
    cmd = tally_cmd(corpus, reference, tmp_path / "ref-tally", "--skew", "0", "0", "4")
    subprocess.run(cmd, check=True, env=clean_env(), capture_output=True, timeout=300)
    args = [
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--tally",
        str(tmp_path / "tally"),
        "--skew",
        "0.05",
        "2",
        "4",
    ]
    submitted = cli("submit", str(TALLY), "--shards", "4", "--strategy", "hash", "--json", "--", *args)
    assert submitted.returncode == 0, submitted.stderr
    (array,) = json.loads(submitted.stdout)["arrays"]
    job = str(array["job_id"])
    assert wait_for_job(job, timeout=900) == {str(i): "COMPLETED" for i in range(4)}
    assert read_tree(out) == read_tree(reference)
    done = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert len(done) == 16 and set(Counter(r["source"] for r in done).values()) == {1}
    assert {r["array_job_id"] for r in done} == {job}
    taken = [r for r in done if "taken_from" in r]
    assert taken, "no task of the slow shard was taken over"
    slow = [r for r in done if shard_of(r["source"], 4) == 0]
    assert [r for r in slow if "taken_from" in r], "the slow shard was not helped"
    assert all(r["shard"] != r["taken_from"] for r in taken)
    status = cli("status", str(out / DEFAULT_RUN_DIR_NAME), "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    takeover = json.loads(status.stdout)["takeover"]
    assert takeover["tasks"] == len(taken) and takeover["from"] == dict(Counter(r["taken_from"] for r in taken))
