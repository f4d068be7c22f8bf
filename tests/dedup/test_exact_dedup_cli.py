"""The dedup workflow through the command line: `curator-slurm local` (simulated arrays, a shard count per
phase), `submit --dry-run`, status/retry of a workflow, and real Slurm arrays (one per phase, afterok)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_exact_dedup import kept_ids

from support.dupcorpus import brute_force, make_dup_corpus
from support.helpers import REPO, assert_same_parquet, clean_env
from support.slurmtools import wait_for_job

DEDUP = REPO / "examples" / "dedup.py"


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], env=clean_env(), capture_output=True, text=True, check=check
    )


@pytest.fixture(scope="module")
def corpus_and_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("dupcli")
    make_dup_corpus(root / "in", files=6, docs=30)
    subprocess.run(
        [sys.executable, str(DEDUP), "--input", str(root / "in"), "--output", str(root / "ref"), "--buckets", "6"],
        env=clean_env(),
        check=True,
        capture_output=True,
    )
    return root / "in", root / "ref"


def test_local_runs_each_phase_as_its_own_array(corpus_and_reference: tuple[Path, Path], tmp_path: Path) -> None:
    data, ref = corpus_and_reference
    out = tmp_path / "out"
    proc = cli("local", str(DEDUP), "--shards", "3", "--phase-shards", "find=2", "--logs", str(tmp_path / "logs"),
               "--", "--input", str(data), "--output", str(out), "--buckets", "6")  # fmt: skip
    assert [line for line in proc.stdout.splitlines() if line.startswith("phase ")] == [
        "phase hash:", "phase find:", "phase write:"
    ]  # fmt: skip
    assert "running 2 shards" in proc.stdout.split("phase find:")[1].split("phase write:")[0]
    assert_same_parquet(out, ref)
    kept, _ = brute_force(data)
    assert kept_ids(out) == sorted(kept)

    run_root = out / ".curator-work" / ".curator-run"
    status = cli("status", str(run_root))
    assert [line for line in status.stdout.splitlines() if line.startswith("==")] == [
        "== phase hash", "== phase find", "== phase write"
    ]  # fmt: skip
    as_json = json.loads(cli("status", str(run_root), "--json").stdout)
    assert list(as_json["phases"]) == ["hash", "find", "write"]
    assert as_json["phases"]["find"]["done"] == 6 and as_json["phases"]["write"]["pending"] == 0


def test_submit_dry_run_chains_the_phases(corpus_and_reference: tuple[Path, Path], tmp_path: Path) -> None:
    data, _ = corpus_and_reference
    proc = cli("submit", str(DEDUP), "--shards", "4", "--phase-shards", "write=2", "--dry-run",
               "--", "--input", str(data), "--output", str(tmp_path / "out"), "--buckets", "3")  # fmt: skip
    phases = proc.stdout.split("# === phase ")[1:]
    assert [p.split(":")[0] for p in phases] == ["'hash'", "'find'", "'write'"]
    # find has 3 buckets, so no more than 3 shards; write was given 2
    assert "#SBATCH --array=0-3" in phases[0] and "#SBATCH --array=0-2" in phases[1] and "--array=0-1" in phases[2]
    assert "--dependency" not in phases[0]
    assert "#SBATCH --dependency=afterok:<jobs of hash>" in phases[1] and "--kill-on-invalid-dep=yes" in phases[1]
    assert "export CURATOR_PHASE=find" in phases[1]
    bad = cli("submit", str(DEDUP), "--shards", "2", "--phase-shards", "nope=2", "--dry-run",
              "--", "--input", str(data), "--output", str(tmp_path / "out"), check=False)  # fmt: skip
    assert bad.returncode == 2 and "no phase 'nope'" in bad.stderr


@pytest.mark.slurm
def test_real_arrays_per_phase_then_retry_after_a_fixed_input(
    slurm_cluster: str, corpus_and_reference: tuple[Path, Path], tmp_path: Path
) -> None:
    """On the test cluster: a broken input fails its hash task, the later phases never run (their dependency
    cannot be met), `retry` after the fix resubmits the hash phase and the phases behind it, and the
    result equals the unsharded run's, file for file."""
    data, ref = corpus_and_reference
    copy = tmp_path / "in"
    subprocess.run(["cp", "-r", str(data), str(copy)], check=True)
    broken = sorted(copy.rglob("*.jsonl"))[2]
    good = broken.read_text()
    broken.write_text(good + '{"id": "x", "text": \n')
    out = tmp_path / "out"
    run_root = out / ".curator-work" / ".curator-run"
    submitted = cli("submit", str(DEDUP), "--shards", "4", "--phase-shards", "find=3", "--json",
                    "--", "--input", str(copy), "--output", str(out), "--buckets", "6")  # fmt: skip
    jobs = {name: [a["job_id"] for a in record["arrays"]] for name, record in json.loads(submitted.stdout).items()}
    assert list(jobs) == ["hash", "find", "write"]
    hash_states = wait_for_job(jobs["hash"][0], timeout=180)
    assert sorted(hash_states.values()).count("FAILED") == 1, hash_states
    for later in ("find", "write"):
        states = wait_for_job(jobs[later][0], timeout=120)
        assert set(states.values()) == {"CANCELLED"}, (later, states)
    failures = cli("failures", str(run_root), check=False)
    assert broken.name in failures.stdout and "malformed JSON" in failures.stdout
    broken.write_text(good)
    retried = cli("retry", str(run_root))
    assert "retrying phase hash (1 source task(s) not done) and then find, write" in retried.stdout
    new_jobs = {line.split(":")[0].split()[1]: line.rsplit(" ", 1)[1] for line in retried.stdout.splitlines()
                if line.startswith("phase ")}  # fmt: skip
    for name in ("hash", "find", "write"):
        assert set(wait_for_job(new_jobs[name], timeout=180).values()) == {"COMPLETED"}, name
    assert_same_parquet(out, ref)
    assert cli("retry", str(run_root)).stdout.startswith("nothing to retry")


def test_plan_of_a_workflow_shows_its_first_phase_and_the_manifest_strategy(
    corpus_and_reference: tuple[Path, Path], tmp_path: Path
) -> None:
    data, _ = corpus_and_reference
    args = ["--", "--input", str(data), "--output", str(tmp_path / "out")]
    summary = json.loads(cli("plan", str(DEDUP), "--shards", "3", "--json", *args).stdout)
    assert (summary["phase"], summary["source_tasks"]) == ("hash", 6)
    assert summary["manifest"] is True and summary["submit_strategy"] == "balanced"
    text = cli("plan", str(DEDUP), "--shards", "3", *args).stdout
    assert text.startswith("6 source tasks of phase 'hash' over 3 shards")
