"""Two processes of one job step that compute the same shard are caught: the second is refused, naming the
variables (issue 14, item 10). A later run of the script in the same step is not a second claimant."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from curator_slurm.errors import ShardConfigError
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME, RunDir
from curator_slurm.shard import JobInfo, ShardSpec
from support.helpers import EXAMPLE
from support.slurmtools import sbatch, wait_for_job


def _spec(job: JobInfo) -> ShardSpec:
    return ShardSpec(index=0, count=2, enabled=True, origin="srun rank 0 of 2", job=job)


def test_a_shard_claimed_by_another_process_of_the_step_is_refused(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    job = JobInfo(job_id="77", step_id="0", procid="0", host="node1")
    run.claim_shard(_spec(job))
    run.claim_shard(_spec(job))  # the same process again (a second pipeline of one script): fine
    claim = next((tmp_path / "run" / "claims" / "77").iterdir())
    claim.write_text("node2 12345 procid=0\n")  # the other rank, on another node
    with pytest.raises(ShardConfigError, match=r"shard 0/2 is already being done by another process of job 77 step 0"):
        run.claim_shard(_spec(job))
    run.claim_shard(_spec(JobInfo(job_id="77", step_id="1", host="node1")))  # another step may do it again
    run.claim_shard(_spec(JobInfo(job_id=None, host="node1")))  # outside Slurm nothing is claimed


@pytest.mark.slurm
def test_srun_ranks_forced_to_one_procid_do_the_work_once(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "job.log"
    # Each rank's process stays alive a while after its run, holding its claim, so the two overlap however
    # late the second starts (a claimant that has ended may be followed by a later run of the script).
    wrapper = tmp_path / "rank.py"
    wrapper.write_text(
        "import runpy, sys, time\n"
        f"sys.argv = [{str(EXAMPLE)!r}, '--input', {str(corpus)!r}, '--output', {str(out)!r}, '--workers', '1']\n"
        f"try:\n    runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\nfinally:\n    time.sleep(10)\n"
    )
    command = f"{sys.executable} {wrapper}"
    script = f"#!/bin/bash\nset -e\nsrun -n 2 bash -c 'SLURM_PROCID=0 exec {command}'\n"
    job = sbatch(script, "-n", "2", "-o", str(log))
    assert wait_for_job(job, timeout=300) == {"": "FAILED"}, "a step that did a shard twice must not end COMPLETED"
    text = log.read_text()
    assert text.count("is already being done by another process of job") == 1, text
    assert "SLURM_PROCID" in text
    done = [r["source"] for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert done and len(done) == len(set(done)), "no source task done twice"


@pytest.mark.slurm
def test_running_the_script_again_in_the_same_step_is_allowed(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "job.log"
    command = f"{sys.executable} {EXAMPLE} --input {corpus} --output {out} --workers 1"
    script = f"#!/bin/bash\nset -e\nexport CURATOR_NUM_SHARDS=2 CURATOR_SHARD_INDEX=1\n{command}\n{command}\n"
    job = sbatch(script, "-o", str(log))
    assert wait_for_job(job, timeout=300) == {"": "COMPLETED"}, log.read_text()
    assert "skipping" in log.read_text()
