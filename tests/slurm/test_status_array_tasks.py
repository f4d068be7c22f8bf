"""`status` accounts for every array task of a run on the real cluster: tasks that ended without
recording their work are shown with their state and log, the run is "stalled" (no ETA) with nothing
queued or running, and the exit code says so (issue 14, item 7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.slurm.submit import job_states
from support.helpers import clean_env
from support.slurmtools import wait_for_job

pytestmark = pytest.mark.slurm

DIES_IN_ARRAY_TASKS = """\
import os, sys
from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import JsonlReader, ParquetWriter

if os.environ.get("SLURM_ARRAY_TASK_ID"):
    raise RuntimeError("broken at import in every array task")

if __name__ == "__main__":
    Pipeline("dies").add_stage(JsonlReader(sys.argv[1])).add_stage(ParquetWriter(sys.argv[2])).run(
        LocalExecutor(workers=1)
    )
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), timeout=120
    )


def test_tasks_that_died_before_recording_anything_make_the_run_stalled(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    script, out = tmp_path / "dies.py", tmp_path / "out"
    script.write_text(DIES_IN_ARRAY_TASKS)
    run_dir = out / ".curator-run"
    submitted = cli("submit", str(script), "--shards", "2", "--json", "--", str(corpus), str(out))
    assert submitted.returncode == 0, submitted.stderr
    (array,) = json.loads(submitted.stdout)["arrays"]
    job = str(array["job_id"])
    assert wait_for_job(job, timeout=120) == {"0": "FAILED", "1": "FAILED"}

    states = job_states([job, "999999"])  # ended tasks are seen; a forgotten id does not hide them
    assert states == {f"{job}_0": "FAILED", f"{job}_1": "FAILED"}

    status = cli("status", str(run_dir))
    assert status.returncode == 1, status.stdout + status.stderr
    text = status.stdout
    assert "12 pending" in text and "stopped:" in text and "ETA" not in text
    for i in (0, 1):
        log = run_dir / "logs" / f"{job}_{i}.log"
        assert f"array task {job}_{i} (shard {i}/2) ended FAILED without recording any work; log: {log}" in text
        assert "broken at import" in log.read_text()
    assert f"curator-slurm retry {run_dir}" in text

    data = json.loads(cli("status", str(run_dir), "--json").stdout)
    assert data["stalled"] is True and data["eta_seconds"] is None
    assert [(t["job"], t["state"], t["recorded"]) for t in data["ended_tasks"]] == [
        (f"{job}_0", "FAILED", False),
        (f"{job}_1", "FAILED", False),
    ]

    failures = cli("failures", str(run_dir))
    assert f"array task {job}_0 ended FAILED without recording any work" in failures.stdout
    assert "no failed source tasks\n" not in failures.stdout

    piped = subprocess.run(
        f"{sys.executable} -m curator_slurm.cli status {run_dir} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert piped.stdout.startswith("run directory") and "Broken pipe" not in piped.stderr, piped.stderr


def test_a_run_is_not_complete_while_the_last_submissions_tasks_failed(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    script, out = tmp_path / "dies.py", tmp_path / "out"
    script.write_text(DIES_IN_ARRAY_TASKS)
    local = subprocess.run([sys.executable, str(script), str(corpus), str(out)], env=clean_env(), capture_output=True)
    assert local.returncode == 0, local.stderr  # every source task done, outside Slurm
    submitted = cli("submit", str(script), "--shards", "2", "--json", "--", str(corpus), str(out))
    assert submitted.returncode == 0, submitted.stderr
    (array,) = json.loads(submitted.stdout)["arrays"]
    assert set(wait_for_job(str(array["job_id"]), timeout=120).values()) == {"FAILED"}
    status = cli("status", str(out / ".curator-run"))
    assert status.returncode == 1, status.stdout
    assert "12 done, 0 failed, 0 pending" in status.stdout
    assert "not complete: 2 array task(s) of the last submission ended badly" in status.stdout
    assert f"array task {array['job_id']}_1 (shard 1/2) ended FAILED" in status.stdout


WORKS = """\
import sys
from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import JsonlReader, ParquetWriter

if __name__ == "__main__":
    Pipeline("works").add_stage(JsonlReader(sys.argv[1])).add_stage(ParquetWriter(sys.argv[2])).run(
        LocalExecutor(workers=1)
    )
"""


@pytest.mark.parametrize("waiting", ["held", "behind a dependency"])
def test_array_tasks_cancelled_while_pending_are_listed_as_cancelled_by_name(
    slurm_cluster: str, corpus: Path, tmp_path: Path, waiting: str
) -> None:
    """``scancel <job>_<i>`` of a task that waits leaves no trace in squeue (Slurm drops the index from the
    array): `status` and `failures` still list it, CANCELLED, with its array task and shard."""
    script, out = tmp_path / "works.py", tmp_path / "out"
    script.write_text(WORKS)
    blocker = None
    if waiting == "held":
        hold = "--sbatch-arg=--hold"
    else:
        blocker = subprocess.run(["sbatch", "--parsable", "--hold", "--wrap", "true"], capture_output=True, text=True,
                                 check=True).stdout.strip().split(";")[0]  # fmt: skip
        hold = f"--sbatch-arg=--dependency=afterok:{blocker}"
    submitted = cli("submit", str(script), "--shards", "3", hold, "--json", "--", str(corpus), str(out))
    assert submitted.returncode == 0, submitted.stderr
    job = str(json.loads(submitted.stdout)["arrays"][0]["job_id"])
    run_dir = str(out / ".curator-run")
    try:
        subprocess.run(["scancel", f"{job}_1"], check=True)
        assert f"{job}_1" not in (job_states([job]) or {}), "Slurm keeps no record of it"
        status = cli("status", run_dir, "--json")
        data = json.loads(status.stdout)
        assert data["job_states"] == {"CANCELLED": 1, "PENDING": 2}
        assert [(t["job"], t["shard"], t["state"], t["started"]) for t in data["ended_tasks"]] == [
            (f"{job}_1", "1/3", "CANCELLED", False)
        ]
        text = cli("status", run_dir).stdout
        assert f"array task {job}_1 (shard 1/3) ended CANCELLED before it started" in text
        assert "UNKNOWN" not in text
        assert f"- array task {job}_1 ended CANCELLED before it started (shard 1/3)" in cli("failures", run_dir).stdout
        subprocess.run(["scancel", job], check=True)
        wait_for_job(job, timeout=60)
        data = json.loads(cli("status", run_dir, "--json").stdout)
        assert data["job_states"] == {"CANCELLED": 3} and data["stalled"] is True
        failures = cli("failures", run_dir).stdout
        for i in range(3):
            assert f"- array task {job}_{i} ended CANCELLED before it started (shard {i}/3)" in failures
    finally:
        subprocess.run(["scancel", job, *([blocker] if blocker else [])], check=False)
