"""An input file that changes under done work is refused in every path, naming the file and what changed,
and nothing is written from a mix of old and new content (issue #24.1): a workflow resumed after a file
was appended behind its hash phase, one phase started by hand, `local`, `submit`, `retry` on the cluster."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_slurm.samples.corpus import make_corpus
from support.helpers import REPO, clean_env
from support.slurmtools import wait_for_job

DEDUP = REPO / "examples" / "dedup.py"
CLI = [sys.executable, "-m", "curator_slurm.cli"]


def dedup(data: Path, out: Path, phase: str | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env({"CURATOR_PHASE": phase} if phase else None)
    cmd = [sys.executable, str(DEDUP), "--input", str(data), "--output", str(out), "--buckets", "8"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=clean_env(), capture_output=True, text=True, timeout=600)


def rows(out: Path) -> int:
    files = glob.glob(str(out / "*.parquet"))
    return pq.read_table(files).num_rows if files else 0


@pytest.fixture
def hashed(tmp_path: Path) -> tuple[Path, Path, str]:
    """The issue's corpus (3 files of 20 documents), its hash phase done, then two documents of the first
    file appended to the third: duplicates the hash phase never saw. The third file's path."""
    data, out = tmp_path / "d", tmp_path / "o"
    make_corpus(str(data), files=3, docs_per_file=20, seed=0)
    assert dedup(data, out, "hash").returncode == 0
    first = (data / "part-00000.jsonl").read_text().splitlines(keepends=True)
    with open(data / "part-00002.jsonl", "a") as f:
        f.writelines(first[:2])
    return data, out, str(data / "part-00002.jsonl")


def assert_refused(proc: subprocess.CompletedProcess[str], changed: str) -> None:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    text = proc.stdout + proc.stderr
    assert "changed since" in text and changed in text, text
    assert "bytes, was" in text and "start afresh" in text, text
    assert "Traceback" not in text, text


def test_a_resumed_workflow_refuses_an_input_appended_after_its_hash_phase(hashed: tuple[Path, Path, str]) -> None:
    data, out, changed = hashed
    proc = dedup(data, out)
    assert_refused(proc, changed)
    assert rows(out) == 0, "nothing was written from the mix"
    fresh = out.parent / "fresh"
    assert dedup(data, fresh).returncode == 0
    assert rows(fresh) == 60, "starting afresh removes the two appended duplicates"


def test_a_later_phase_started_on_its_own_refuses_a_file_an_earlier_phase_read(tmp_path: Path) -> None:
    """The write phase has done nothing yet: what it compares is what the hash phase read."""
    data, out = tmp_path / "d", tmp_path / "o"
    make_corpus(str(data), files=3, docs_per_file=20, seed=0)
    assert dedup(data, out, "hash").returncode == 0
    assert dedup(data, out, "find").returncode == 0
    changed = data / "part-00002.jsonl"
    changed.write_bytes(changed.read_bytes() + (data / "part-00000.jsonl").read_bytes()[:300])
    proc = dedup(data, out, "write")
    assert_refused(proc, str(changed))
    assert "phase 'hash'" in proc.stderr
    assert rows(out) == 0


def test_local_refuses_an_input_changed_under_done_work(hashed: tuple[Path, Path, str], tmp_path: Path) -> None:
    data, out, changed = hashed
    args = ["local", str(DEDUP), "--shards", "2", "--logs", str(tmp_path / "logs"), "--"]
    proc = cli(*args, "--input", str(data), "--output", str(out), "--buckets", "8")
    assert_refused(proc, changed)
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").iterdir()), "no shard started"
    assert rows(out) == 0


def test_submit_refuses_an_input_changed_under_done_work(hashed: tuple[Path, Path, str]) -> None:
    """Refused before sbatch with what changed (it used to blame non-deterministic ids, or queue tasks
    that would each fail their size check)."""
    data, out, changed = hashed
    proc = cli("submit", str(DEDUP), "--shards", "2", "--dry-run", "--", "--input", str(data), "--output", str(out))
    assert_refused(proc, changed)
    assert "non-deterministic" not in proc.stderr and "deterministic ids" not in proc.stderr


def test_a_pipeline_resume_refuses_a_changed_file_of_a_done_task_and_reads_a_fixed_one_of_a_failed_task(
    tmp_path: Path,
) -> None:
    data, out = tmp_path / "d", tmp_path / "o"
    make_corpus(str(data), files=3, docs_per_file=20, seed=0)
    broken = data / "part-00001.jsonl"
    good = broken.read_bytes()
    broken.write_bytes(good[:-40] + b"\n{not json\n")  # this task fails
    curate = [sys.executable, str(REPO / "examples" / "curate.py"), "--input", str(data), "--output", str(out)]
    first = subprocess.run([*curate, "--workers", "1"], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert first.returncode != 0
    broken.write_bytes(good)  # fixed: its task was not done, so the re-run reads it as it is now
    second = subprocess.run([*curate, "--workers", "1"], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    with open(data / "part-00002.jsonl", "a") as f:  # a done task's file: refused
        f.write(json.dumps({"text": "one more document " * 20}) + "\n")
    third = subprocess.run([*curate, "--workers", "1"], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert_refused(third, str(data / "part-00002.jsonl"))


@pytest.mark.slurm
def test_retry_of_a_workflow_refuses_an_input_appended_after_its_hash_phase_on_the_cluster(
    slurm_cluster: str, tmp_path: Path
) -> None:
    """The hash phase ran on the cluster, the later phases were cancelled, a file was appended: `retry`
    refuses it before sbatch (it used to plan the write phase afresh, which read the appended rows)."""
    data, out = tmp_path / "d", tmp_path / "o"
    make_corpus(str(data), files=3, docs_per_file=20, seed=0)
    sub = cli("submit", str(DEDUP), "--shards", "2", "--json", "--", "--input", str(data), "--output", str(out),
              "--buckets", "8")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    jobs = {name: [str(a["job_id"]) for a in record["arrays"]] for name, record in json.loads(sub.stdout).items()}
    later = [j for name in ("find", "write") for j in jobs[name]]
    subprocess.run(["scancel", *later], check=True)  # they wait for hash (afterok): cancelled before they start
    for job in jobs["hash"]:
        wait_for_job(job, timeout=600)
    for job in later:
        wait_for_job(job, timeout=120)
    run_root = out / ".curator-work" / ".curator-run"
    before = cli("status", str(run_root))
    assert "100.0% done" in before.stdout.split("== phase find")[0], before.stdout
    changed = data / "part-00002.jsonl"
    changed.write_bytes(changed.read_bytes() + (data / "part-00000.jsonl").read_bytes()[:300])
    for args in (["retry", str(run_root)], ["retry", str(run_root / "write")]):
        proc = cli(*args)
        assert_refused(proc, str(changed))
        assert "phase 'hash'" in proc.stderr
    for phase in ("find", "write"):
        submissions = (run_root / phase / "submissions.jsonl").read_text().splitlines()
        assert len(submissions) == 1, "retry submitted nothing"
    status = cli("status", str(run_root))
    assert status.returncode != 0, status.stdout
    assert rows(out) == 0
