"""On the real cluster: a NeMo-style filter holding a set, as 4 array tasks under 4 different PYTHONHASHSEED
values, gives the unsharded run's output (issue 24 item 3); and an array task that its run directory refuses
is reported by `failures` with the reason, not only as "ended FAILED without recording any work"."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import REPO, clean_env, read_tree
from support.slurmtools import sbatch, wait_for_job

pytestmark = pytest.mark.slurm

NEMO_STYLE = REPO / "tests" / "pipelines" / "nemo_style.py"


def test_four_array_tasks_under_four_hash_seeds_equal_the_unsharded_run(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    single, out, logs = tmp_path / "single", tmp_path / "out", tmp_path / "logs"
    logs.mkdir()
    local = subprocess.run(
        [sys.executable, str(NEMO_STYLE), "--input", str(corpus), "--output", str(single)],
        env=clean_env({"PYTHONHASHSEED": "0"}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert local.returncode == 0, local.stderr
    script = (
        "#!/bin/bash\nset -e\n"
        "export PYTHONHASHSEED=$((SLURM_ARRAY_TASK_ID + 1))\n"  # each task iterates the set in its own order
        f"exec {sys.executable} {NEMO_STYLE} --input {corpus} --output {out}\n"
    )
    job = sbatch(script, "--array=0-3", "-o", f"{logs}/task-%a.log", "-J", "hash-seeds")
    states = wait_for_job(job, timeout=600)
    texts = {i: (logs / f"task-{i}.log").read_text() for i in range(4)}
    assert states == {str(i): "COMPLETED" for i in range(4)}, texts
    orders = {re.search(r"set order: (.*)", text).group(1) for text in texts.values()}  # type: ignore[union-attr]
    assert len(orders) > 1, "the tasks must really iterate the set differently for this test to mean anything"
    assert read_tree(out) == read_tree(single)
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


# A stage parameter that differs between array tasks: the first task to start records its fingerprint, the
# run directory refuses the other.
DIFFERS_PER_TASK = """\
import os, sys
from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage


class Mark(ProcessingStage):
    def __init__(self):
        self.task = os.environ.get("SLURM_ARRAY_TASK_ID", "none")

    def process(self, task):
        return task


if __name__ == "__main__":
    Pipeline("differs").add_stage(JsonlReader(sys.argv[1])).add_stage(Mark()).add_stage(
        ParquetWriter(sys.argv[2])
    ).run(LocalExecutor(workers=1))
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), timeout=120
    )


def test_failures_says_why_the_run_directory_refused_an_array_task(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    script, out = tmp_path / "differs.py", tmp_path / "out"
    script.write_text(DIFFERS_PER_TASK)
    run_dir = out / DEFAULT_RUN_DIR_NAME
    submitted = cli("submit", str(script), "--shards", "2", "--json", "--", str(corpus), str(out))
    assert submitted.returncode == 0, submitted.stderr
    (array,) = json.loads(submitted.stdout)["arrays"]
    job = str(array["job_id"])
    states = wait_for_job(job, timeout=300)
    assert sorted(states.values()) == ["COMPLETED", "FAILED"], states
    (refused,) = [task for task, state in states.items() if state == "FAILED"]
    winner = "1" if refused == "0" else "0"
    failures = cli("failures", str(run_dir))
    assert failures.returncode != 0 or failures.stdout, failures.stderr
    expected = (
        f"array task {job}_{refused} ended FAILED without recording any work: the run directory refused it: "
        f"RunDirError: {run_dir} belongs to another pipeline"
    )
    assert expected in failures.stdout, failures.stdout
    assert f"stage 2 'mark': task was '{winner}', now '{refused}'" in failures.stdout
