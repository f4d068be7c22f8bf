"""`submit` and `retry` check before submitting what every array task would check as it starts, submit
one at a time per run, and record each array's job id as soon as sbatch returns it (issue 14, items 6, 8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import curator_slurm.slurm.submit as submit_module
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.slurm.submit import ArrayChunk, SlurmCommandError, SubmitOptions, load_submissions, submit
from support.helpers import EXAMPLE, REPO, clean_env, run_example
from support.slurmtools import wait_for_job

TALLY = REPO / "tests" / "pipelines" / "tally.py"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), cwd=cwd,
        timeout=300,
    )  # fmt: skip


def test_submit_into_a_run_of_other_parameters_is_refused_before_sbatch(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(corpus, out, "--workers", "1", "--min-words", "50")
    proc = cli("submit", str(EXAMPLE), "--shards", "2", "--", "--input", str(corpus), "--output", str(out),
               "--min-words", "80")  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "belongs to another pipeline" in proc.stderr and "min_words=50" in proc.stderr
    assert "Every array task would stop at once" in proc.stderr
    assert not (out / DEFAULT_RUN_DIR_NAME / "submissions.jsonl").exists(), "nothing was submitted"
    dry = cli("submit", str(EXAMPLE), "--shards", "2", "--dry-run", "--", "--input", str(corpus), "--output",
              str(out), "--min-words", "80")  # fmt: skip
    assert dry.returncode == 2 and "belongs to another pipeline" in dry.stderr


def test_retry_lists_the_work_again_and_refuses_changed_inputs(corpus: Path, tmp_path: Path) -> None:
    import shutil

    inp, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(corpus, inp)
    run_example(inp, out, "--workers", "1")
    run_dir = out / DEFAULT_RUN_DIR_NAME
    plan = {"tasks": [["never-done", 1]], "run_dir": str(run_dir), "has_bytes": False}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    args = ["--input", str(inp), "--output", str(out), "--workers", "1"]
    submission = {"kind": "submit", "shards": 2, "arrays": [{"job_id": "987654321", "offset": 0, "size": 2}],
                  "script": str(EXAMPLE), "script_args": args, "options": {"workdir": str(tmp_path)}}  # fmt: skip
    (run_dir / "submissions.jsonl").write_text(json.dumps(submission) + "\n")
    (inp / "zz-new.jsonl").write_text(json.dumps({"text": "new " * 60}) + "\n")
    proc = cli("retry", str(run_dir), "--dry-run")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the inputs changed since this run started" in proc.stderr


def test_each_job_id_is_recorded_as_soon_as_sbatch_returns_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch is the boundary: the first array is accepted, the second refused."""
    answers = iter(["4242\n", SlurmCommandError("sbatch: error: QOSMaxSubmitJobPerUserLimit")])

    def fake_sbatch(cmd: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(submit_module, "_run_slurm", fake_sbatch)
    opts = SubmitOptions(script=str(EXAMPLE), shards=4, run_dir=str(tmp_path / "run"))
    with pytest.raises(SlurmCommandError, match=r"SubmitJobPerUserLimit. The arrays submitted before it \(4242\)"):
        submit(opts, [ArrayChunk(0, 2), ArrayChunk(2, 2)], "submit")
    (recorded,) = load_submissions(str(tmp_path / "run"))
    assert (
        recorded["arrays"] == [{"job_id": "4242", "offset": 0, "size": 2, "script": recorded["arrays"][0]["script"]}]
        and recorded["shards"] == 4
    )


@pytest.mark.slurm
def test_a_second_submission_while_the_first_runs_is_refused(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = cli("submit", str(TALLY), "--shards", "2", "--json", "--", "--input", str(corpus), "--output", str(out),
                "--tally", str(tmp_path / "tally"), "--sleep", "2", "--workers", "1")  # fmt: skip
    assert first.returncode == 0, first.stderr
    (array,) = json.loads(first.stdout)["arrays"]
    try:
        second = cli("submit", str(TALLY), "--shards", "3", "--", "--input", str(corpus), "--output", str(out),
                     "--tally", str(tmp_path / "tally"), "--sleep", "2", "--workers", "1")  # fmt: skip
        assert second.returncode == 2, second.stdout + second.stderr
        assert "still queued or running" in second.stderr and "twice" in second.stderr
        assert len(load_submissions(str(out / DEFAULT_RUN_DIR_NAME))) == 1
    finally:
        subprocess.run(["scancel", str(array["job_id"])], check=False)
        wait_for_job(str(array["job_id"]), timeout=120)


def test_requeue_with_a_short_time_limit_warns_early_enough_and_says_so(corpus: Path, tmp_path: Path) -> None:
    """--requeue asks for SIGUSR1 120 s before the limit; with --time 0:01:00 that would come before the task
    starts: the warning is then half the limit, and submit says so (issue #24.9)."""
    base = ["submit", str(EXAMPLE), "--shards", "2", "--dry-run", "--requeue"]
    data = ["--", "--input", str(corpus), "--output", str(tmp_path / "out")]
    short = cli(*base, "--time", "0:01:00", *data)
    assert short.returncode == 0, short.stderr
    assert "#SBATCH --signal=B:USR1@30\n" in short.stdout and "USR1@120" not in short.stdout
    assert "note: --requeue with --time 0:01:00 (60 s)" in short.stderr and "B:USR1@30" in short.stderr
    long = cli(*base, "--time", "1-00:00:00", *data)
    assert "#SBATCH --signal=B:USR1@120\n" in long.stdout and "note:" not in long.stderr
    given = cli("submit", str(EXAMPLE), "--shards", "2", "--dry-run", "--time", "1", "--signal", "B:USR1@90", *data)
    assert given.returncode == 2 and "--time 1 is only 60 s" in given.stderr, given.stderr
    bad = cli("submit", str(EXAMPLE), "--shards", "2", "--dry-run", "--time", "2h", *data)
    assert bad.returncode == 2 and "--time '2h': not a Slurm time limit" in bad.stderr, bad.stderr
