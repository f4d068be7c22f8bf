"""The unchanged example as a real Slurm job array on the local single-node cluster."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records, load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.executors import requires_ray
from support.helpers import EXAMPLE, read_tree, run_example
from support.slurmtools import sbatch, wait_for_job
from support.tallying import TALLY

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def unsharded(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("unsharded")
    run_example(corpus, out, "--workers", "1")
    return read_tree(out)


def job_script(command: str) -> str:
    # exec: the pipeline is the batch step itself, so `scancel --full --signal=TERM` reaches it directly.
    return f"#!/bin/bash\nset -e\nexec {command}\n"


@pytest.mark.parametrize(("spec", "ids"), [("0-3", [0, 1, 2, 3]), ("1-7:2", [1, 3, 5, 7])])
def test_array_of_the_unchanged_example(
    slurm_cluster: str, corpus: Path, tmp_path: Path, unsharded: dict[str, bytes], spec: str, ids: list[int]
) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    logs.mkdir()
    command = f"{sys.executable} {EXAMPLE} --input {corpus} --output {out} --workers 1"
    job = sbatch(job_script(command), f"--array={spec}", "-o", f"{logs}/task-%a.log", "-J", "curate-array")
    states = wait_for_job(job, timeout=300)
    assert states == {str(i): "COMPLETED" for i in ids}, {k: v for k, v in states.items()}
    assert read_tree(out) == unsharded
    kept = 0
    for position, task_id in enumerate(ids):
        log = (logs / f"task-{task_id}.log").read_text()
        match = re.search(rf"shard {position}/{len(ids)}: kept (\d+) of 12 source tasks", log)
        assert match, log
        assert f"job {job}_{task_id}" in log
        kept += int(match.group(1))
    assert kept == 12
    done = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert {r["array_job_id"] for r in done} == {job}
    assert {r["array_task_id"] for r in done} <= {str(i) for i in ids}
    assert len({r["source"] for r in done}) == len(done) == 12


def test_srun_ranks_inside_an_array_task_write_nothing_twice(
    slurm_cluster: str, corpus: Path, tmp_path: Path, unsharded: dict[str, bytes]
) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    logs.mkdir()
    command = f"srun -n 2 {sys.executable} {EXAMPLE} --input {corpus} --output {out} --workers 1"
    script = f"#!/bin/bash\nset -e\n{command}\n"
    job = sbatch(script, "--array=0-1", "-n", "2", "-o", f"{logs}/task-%a.log")
    assert wait_for_job(job, timeout=300) == {"0": "COMPLETED", "1": "COMPLETED"}
    logs_text = "".join(p.read_text() for p in logs.iterdir())
    kept = [int(n) for n in re.findall(r"shard \d/4: kept (\d+) of 12", logs_text)]
    assert len(kept) == 4 and sum(kept) == 12, logs_text
    done = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert len(done) == len({r["source"] for r in done}) == 12, "each source task written by exactly one rank"
    assert read_tree(out) == unsharded


def test_scancel_signal_term_flushes_the_ledger_and_rerun_completes(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    reference = tmp_path / "reference"
    subprocess.run(
        [
            sys.executable,
            str(TALLY),
            "--input",
            str(corpus),
            "--output",
            str(reference),
            "--tally",
            str(tmp_path / "r"),
        ],
        check=True,
        capture_output=True,
    )
    out, tally, log = tmp_path / "out", tmp_path / "tally", tmp_path / "job.log"
    command = f"{sys.executable} {TALLY} --input {corpus} --output {out} --tally {tally} --sleep 1 --workers 1"
    job = sbatch(job_script(command), "-o", str(log))
    deadline = time.monotonic() + 120
    while not (tally.exists() and len(tally.read_text().split()) >= 2):
        assert time.monotonic() < deadline, "the job never started working"
        time.sleep(0.2)
    subprocess.run(["scancel", "--full", "--signal=TERM", job], check=True)
    states = wait_for_job(job, timeout=120)
    assert states[""] in {"FAILED", "CANCELLED"}, states
    text = log.read_text()
    assert "received SIGTERM" in text and "stopped by SIGTERM" in text, text
    done = load_status(str(out / DEFAULT_RUN_DIR_NAME)).done
    assert 0 < len(done) < 12
    assert done == set(tally.read_text().split()), "every started source task was finished and recorded"

    rerun = sbatch(job_script(command.replace("--sleep 1", "--sleep 0")), "-o", str(tmp_path / "rerun.log"))
    assert wait_for_job(rerun, timeout=300) == {"": "COMPLETED"}
    assert sorted(tally.read_text().split()) == sorted(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done)
    assert len(tally.read_text().split()) == 12, "no source task ran twice"
    assert read_tree(out) == read_tree(reference)


def test_requeue_after_a_stop_signal_resumes_with_restart_count(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """`submit --requeue`: the warning signal (SIGUSR1) finishes in-flight work, requeues the task, and
    the next attempt (SLURM_RESTART_COUNT=1) does only the rest."""
    out, tally = tmp_path / "out", tmp_path / "tally"
    submit = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "submit", str(TALLY), "--shards", "1", "--requeue", "--",
         "--input", str(corpus), "--output", str(out), "--tally", str(tally), "--sleep", "0.5"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    job = re.search(r"(\d+) \(shards", submit.stdout).group(1)  # type: ignore[union-attr]
    deadline = time.monotonic() + 120
    while not (tally.exists() and len(tally.read_text().split()) >= 2):
        assert time.monotonic() < deadline, "the job never started working"
        time.sleep(0.2)
    subprocess.run(["scancel", "--full", "--signal=USR1", f"{job}_0"], check=True)  # the time-limit warning
    # Slurm holds a requeued job back for about two minutes; let it start sooner, but not at once: a
    # requeued job started while the node still cleans up the stopped one fails ("credential revoked").
    deadline = time.monotonic() + 120
    while not {"Restarts=1", "JobState=PENDING"} <= set(_scontrol_job(f"{job}_0")):
        assert time.monotonic() < deadline, "the job was never requeued"
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"JobId={job}_0", "StartTime=now+10"], check=False, capture_output=True)
    assert wait_for_job(job, timeout=300) == {"0": "COMPLETED"}
    records = list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))
    restarts = {r["restart_count"] for r in records}
    assert restarts == {0, 1}, restarts
    assert len(records) == len({r["source"] for r in records}) == 12, "nothing done twice across the requeue"
    assert len(tally.read_text().split()) == 12
    log = next((out / DEFAULT_RUN_DIR_NAME / "logs").glob(f"{job}_0.log")).read_text()
    assert "stopped by SIGUSR1" in log and "requeued job" in log


def _scontrol_job(job: str) -> list[str]:
    proc = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True)
    return proc.stdout.split()


def run_two_cpu_array(corpus: Path, tmp_path: Path, unsharded: dict[str, bytes], *args: str, timeout: float) -> Path:
    """The example with ``args`` as a two-task array of two CPUs each, into ``tmp_path/out``: both tasks
    complete and their outputs are the unsharded run's. Returns the directory of the task logs."""
    out, logs = tmp_path / "out", tmp_path / "logs"
    logs.mkdir()
    command = shlex.join([sys.executable, str(EXAMPLE), "--input", str(corpus), "--output", str(out), *args])
    job = sbatch(job_script(command), "--array=0-1", "--cpus-per-task=2", "-o", f"{logs}/task-%a.log")
    assert wait_for_job(job, timeout=timeout) == {"0": "COMPLETED", "1": "COMPLETED"}
    assert read_tree(out) == unsharded
    return logs


@requires_ray
def test_array_tasks_on_ray_match_the_unsharded_run(
    slurm_cluster: str, corpus: Path, tmp_path: Path, unsharded: dict[str, bytes]
) -> None:
    """Each array task starts its own Ray (sized by SLURM_CPUS_PER_TASK) and runs the unchanged example."""
    logs = run_two_cpu_array(corpus, tmp_path, unsharded, "--executor", "ray", timeout=600)
    text = "".join(p.read_text() for p in logs.iterdir())
    assert "on RayExecutor" in text and len(re.findall(r"shard \d/2: kept", text)) == 2


def test_array_tasks_with_two_cpus_fork_two_workers_each(
    slurm_cluster: str, corpus: Path, tmp_path: Path, unsharded: dict[str, bytes]
) -> None:
    """Without --workers, LocalExecutor takes SLURM_CPUS_PER_TASK workers; a batch step has no other
    thread, so they are forked, and the array's outputs are the unsharded run's."""
    logs = run_two_cpu_array(corpus, tmp_path, unsharded, timeout=300)
    out = tmp_path / "out"
    for task in ("0", "1"):
        log = (logs / f"task-{task}.log").read_text()
        assert "starting 2 worker processes by fork (this process runs no other thread)" in log, log
    done = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert len({r["source"] for r in done}) == len(done) == 12
