"""A workflow on the real cluster: one submission at a time (a second `submit`, or `local`, beside queued
tasks is refused, as for a pipeline), and the `retry` that `status` advises after cancelled phases runs as
printed and completes the workflow; cancelled tasks that never started are said to be so (issue #24.6, #24.7)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.slurm.control import job_states
from support.helpers import REPO, clean_env
from support.slurmtools import wait_for_job

pytestmark = pytest.mark.slurm

DEDUP = REPO / "examples" / "dedup.py"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), timeout=600
    )


def submit(corpus: Path, out: Path, *options: str) -> dict[str, list[str]]:
    proc = cli("submit", str(DEDUP), "--shards", "2", *options, "--json", "--", "--input", str(corpus), "--output",
               str(out), "--buckets", "8")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {name: [str(a["job_id"]) for a in record["arrays"]] for name, record in json.loads(proc.stdout).items()}


def test_a_second_workflow_submission_while_the_first_is_queued_is_refused(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    jobs = submit(corpus, out, "--sbatch-arg=--hold")  # held: queued, never started
    every = [j for ids in jobs.values() for j in ids]
    try:
        again = cli("submit", str(DEDUP), "--shards", "2", "--", "--input", str(corpus), "--output", str(out),
                    "--buckets", "8")  # fmt: skip
        assert again.returncode == 2, again.stdout + again.stderr
        assert "still queued or running" in again.stderr and "exact-dedup" in again.stderr
        # The count and the names agree: every queued task of every phase is named (squeue's short form).
        said = re.search(
            r"(\d+) task\(s\) of workflow 'exact-dedup' are still queued or running \(([^)]*)\)", again.stderr
        )
        assert said is not None, again.stderr
        queued = sorted(job_states(every) or {})
        assert int(said[1]) == len(queued) == 6  # 3 phases x 2 shards
        assert said[2] == ", ".join(f"{j}_[0-1]" for j in every)
        local = cli("local", str(DEDUP), "--shards", "2", "--", "--input", str(corpus), "--output", str(out),
                    "--buckets", "8")  # fmt: skip
        assert local.returncode == 2 and "still queued or running" in local.stderr, local.stdout + local.stderr
        root = out / ".curator-work" / ".curator-run"
        for phase in ("hash", "find", "write"):
            assert len((root / phase / "submissions.jsonl").read_text().splitlines()) == 1, phase
        assert not (root / "hash" / "ledger").exists() or not list((root / "hash" / "ledger").iterdir())
    finally:
        subprocess.run(["scancel", *every], check=False)


def test_the_retry_that_status_advises_after_cancelled_phases_completes_the_workflow(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    jobs = submit(corpus, out)
    later = [*jobs["find"], *jobs["write"]]
    subprocess.run(["scancel", *later], check=True)  # they wait for hash (afterok): cancelled before they start
    for job in jobs["hash"]:
        wait_for_job(job, timeout=600)
    for job in later:
        wait_for_job(job, timeout=120)
    root = out / ".curator-work" / ".curator-run"
    status = cli("status", str(root / "find"))
    assert status.returncode == 1, status.stdout
    assert "before it started (no log)" in status.stdout and "recorded some work" not in status.stdout
    assert "log: " not in status.stdout.split("before it started")[0].splitlines()[-1]
    advised = re.search(r"`(curator-slurm retry [^`]+)`", status.stdout)
    assert advised, status.stdout
    assert advised.group(1) == f"curator-slurm retry {root}", "a phase is retried through its workflow"
    retry = cli(*shlex.split(advised.group(1))[1:])
    assert retry.returncode == 0, retry.stdout + retry.stderr
    new = re.findall(r"phase (find|write): \d+ shards as \d+ array\(s\): ([\d, ]+)", retry.stdout)
    assert [name for name, _ in new] == ["find", "write"], retry.stdout
    for _, ids in new:
        for job in ids.split(", "):
            assert set(wait_for_job(job.strip(), timeout=600).values()) == {"COMPLETED"}, retry.stdout
    done = cli("status", str(root))
    assert done.returncode == 0, done.stdout
    assert done.stdout.count("100.0% done") == 3


def test_a_workflow_whose_parameters_changed_under_its_run_directories_is_refused_before_sbatch(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """As for a pipeline: every task of the first phase would stop at its changed fingerprint, so `submit`
    says why and queues nothing, writing no submission record over the run's."""
    out = tmp_path / "out"
    local = subprocess.run(
        [sys.executable, str(DEDUP), "--input", str(corpus), "--output", str(out), "--buckets", "8", "--workers", "1"],
        capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    changed = cli("submit", str(DEDUP), "--shards", "2", "--", "--input", str(corpus), "--output", str(out),
                  "--buckets", "4")  # fmt: skip
    assert changed.returncode == 2, changed.stdout + changed.stderr
    assert "Traceback" not in changed.stderr
    root = out / ".curator-work" / ".curator-run"
    assert f"{root / 'hash'} belongs to another pipeline" in changed.stderr
    assert "Every array task would stop at once" in changed.stderr
    assert not list(root.rglob("submissions.jsonl")) and not (root / "workflow-submission.json").exists()
