"""Takeover across hosts on the real 3-node cluster: the owner of a slow shard is killed on its node; the task of
the other shard, on another node, cannot ask its process table, so it waits for the owner's heartbeat to stop, then
takes over the group the owner held. Every source task done once, the outputs those of an unsharded run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from curator_slurm.runs.claims import HEARTBEAT_SECONDS, STALE_BEATS
from curator_slurm.runs.layout import TAKEOVER_DIR
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import shard_of
from curator_slurm.samples.corpus import make_corpus
from support.helpers import clean_env, read_tree
from support.slurmtools import wait_for_job
from support.tallying import TALLY, tally_cmd

pytestmark = [pytest.mark.slurm, pytest.mark.multinode]


def test_a_killed_owner_on_another_node_is_taken_over_after_its_heartbeat_stops(
    multinode_cluster: str, tmp_path: Path
) -> None:
    corpus, out, reference = tmp_path / "corpus", tmp_path / "out", tmp_path / "reference"
    make_corpus(str(corpus), files=16, docs_per_file=20, seed=6)
    subprocess.run(tally_cmd(corpus, reference, tmp_path / "ref-tally", "--skew", "0", "0", "2"),
                   check=True, env=clean_env(), capture_output=True, timeout=300)  # fmt: skip
    started = tmp_path / "started"
    args = ["--input", str(corpus), "--output", str(out), "--tally", str(tmp_path / "tally"), "--skew", "0.5", "5",
            "2", "--started", str(started)]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "submit", str(TALLY), "--shards", "2", "--strategy", "hash",
         "--sbatch-arg=--exclusive", "--json", "--", *args],
        env=clean_env({"SLURM_CONF": multinode_cluster}), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (array,) = json.loads(proc.stdout)["arrays"]
    job = str(array["job_id"])
    deadline = time.monotonic() + 300
    owner = None
    while owner is None:  # the first slow task started is the owner's (takers start after their own)
        assert time.monotonic() < deadline, "shard 0 never started"
        lines = started.read_text().split("\n") if started.exists() else []
        owner = next((int(line.split()[0]) for line in lines if line and shard_of(line.split()[1], 2) == 0), None)
        time.sleep(0.1)
    os.kill(owner, signal.SIGKILL)
    states = wait_for_job(job, timeout=300 + STALE_BEATS * HEARTBEAT_SECONDS)
    assert states["1"] == "COMPLETED" and states["0"] != "COMPLETED", states
    assert read_tree(out) == read_tree(reference)
    done = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert len(done) == 16 and set(Counter(r["source"] for r in done).values()) == {1}
    claims = next((out / DEFAULT_RUN_DIR_NAME / TAKEOVER_DIR).iterdir()) / "0"
    holders = {name: json.loads((claims / name).read_text()) for name in os.listdir(claims)}
    first, second = holders["0-0"], holders["0-1"]  # the group the owner held when it was killed, taken over
    assert first["pid"] == owner and second["shard"] == "1/2" and first["host"] != second["host"]
