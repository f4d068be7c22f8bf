"""Phase inputs through real chained arrays: a shuffle bucket moved away while the next phase waits is refused
by that phase's tasks (never read around), `status --verify` says so, and the `retry` it advises starts from
the phase whose outputs were lost; a tokenization whose per-task pairs vanished is retried from tokenize, not
only the merge. The outputs end equal to a local run's."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from support.dupcorpus import make_dup_corpus
from support.helpers import REPO, assert_same_parquet, clean_env
from support.megatron_files import corpus_texts, read_megatron, train_tokenizer
from support.slurmtools import wait_for_job

pytestmark = pytest.mark.slurm

DEDUP = REPO / "examples" / "dedup.py"
TOKENIZE = REPO / "examples" / "tokenize_corpus.py"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "curator_slurm.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=900)


def submit_held(script: Path, args: list[str]) -> dict[str, list[str]]:
    """Every phase's arrays, submitted and at once held by the administrator (queued, not started; their own
    options hold nothing, so a retry of them is not held), by phase."""
    proc = cli("submit", str(script), "--shards", "2", "--json", "--", *args)
    assert proc.returncode == 0, proc.stderr
    jobs = {name: [str(a["job_id"]) for a in record["arrays"]] for name, record in json.loads(proc.stdout).items()}
    held = subprocess.run(
        ["scontrol", "hold", *[j for ids in jobs.values() for j in ids]], capture_output=True, text=True
    )
    assert held.returncode == 0, held.stderr
    return jobs


def release_and_wait(jobs: list[str], timeout: float = 600) -> dict[str, str]:
    released = subprocess.run(["scontrol", "release", *jobs], capture_output=True, text=True)
    assert released.returncode == 0, released.stderr
    states: dict[str, str] = {}
    for job in jobs:
        states.update(wait_for_job(job, timeout=timeout))
    return states


def follow_retry(root: Path) -> None:
    """Run the `retry` that `status` advises and wait for every array it submits."""
    status = cli("status", str(root))
    advised = re.search(r"`(curator-slurm retry [^`]+)`", status.stdout)
    assert advised, status.stdout
    retry = cli(*shlex.split(advised.group(1))[1:])
    assert retry.returncode == 0, retry.stdout + retry.stderr
    jobs = re.findall(r"phase \S+: \d+ shards as \d+ array\(s\): ([\d, ]+)", retry.stdout)
    assert jobs, retry.stdout
    for ids in jobs:
        for job in ids.split(", "):
            assert set(wait_for_job(job.strip(), timeout=900).values()) == {"COMPLETED"}, retry.stdout
    return retry.stdout


def test_a_bucket_moved_away_while_find_waits_is_refused_and_the_retry_starts_from_hash(
    slurm_cluster: str, tmp_path: Path
) -> None:
    data, out, reference = tmp_path / "in", tmp_path / "out", tmp_path / "reference"
    make_dup_corpus(data, files=6, docs=30)
    args = ["--input", str(data), "--output", str(out), "--buckets", "4", "--id-field", "id"]
    local = subprocess.run([sys.executable, str(DEDUP), *args[:2], "--output", str(reference), *args[4:]],
                           env=clean_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert local.returncode == 0, local.stderr
    jobs = submit_held(DEDUP, args)
    try:
        assert set(release_and_wait(jobs["hash"]).values()) == {"COMPLETED"}
        moved = sorted((out / ".curator-work" / "shuffle" / "hash").glob("*.parquet"))[0]
        moved.rename(tmp_path / moved.name)
        states = release_and_wait([*jobs["find"], *jobs["write"]])
    finally:
        subprocess.run(["scancel", *[j for ids in jobs.values() for j in ids]], check=False)
    assert "COMPLETED" not in {s for job, s in states.items() if job.split("_")[0] in jobs["find"]}, states
    root = out / ".curator-work" / ".curator-run"
    failures = cli("failures", str(root / "find"))
    assert f"{moved}: missing" in failures.stdout, failures.stdout
    verify = cli("status", str(root), "--verify")
    assert verify.returncode == 1 and f"{moved}: missing" in verify.stdout, verify.stdout
    assert "verified:" not in verify.stdout.split("== phase hash")[1].split("== phase find")[0]

    retried = follow_retry(root)
    assert retried.index("phase hash") < retried.index("phase find"), "the retry starts from the lost outputs"
    assert_same_parquet(out, reference)
    final = cli("status", str(root), "--verify")
    assert final.returncode == 0 and final.stdout.count("verified:") == 3, final.stdout


def test_a_tokenization_whose_pairs_vanished_is_retried_from_tokenize(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(tokenizer, list(corpus_texts(corpus)), vocab_size=600)
    out = tmp_path / "tokens"
    args = ["--input", str(corpus), "--output", str(out), "--tokenizer", str(tokenizer), "--no-eos"]
    jobs = submit_held(TOKENIZE, args)
    try:
        assert set(release_and_wait(jobs["tokenize"]).values()) == {"COMPLETED"}
        pairs = sorted((out / ".curator-work").rglob("*.bin"))
        assert pairs
        pairs[0].unlink()
        release_and_wait(jobs["merge"])
    finally:
        subprocess.run(["scancel", *[j for ids in jobs.values() for j in ids]], check=False)
    root = out / ".curator-work" / ".curator-run"
    retried = follow_retry(root)
    assert "phase tokenize" in retried, "the merge alone would fail again the same way"
    merged = read_megatron(out / "part_00000")
    assert len(merged["document_index"]) - 1 == sum(1 for _ in corpus_texts(corpus))


def test_accepted_new_inputs_through_submit_redo_the_bucket_phases(slurm_cluster: str, tmp_path: Path) -> None:
    """A complete submitted dedup, then a file of copies added and the workflow submitted again with
    --accept-new-inputs: the find tasks (ids independent of the inputs) and every write task are done again,
    so the output is a fresh run's over the new inputs, and status never counts more than the listing."""
    data, out, reference = tmp_path / "in", tmp_path / "out", tmp_path / "reference"
    make_dup_corpus(data, files=4, docs=30)
    args = ["--input", str(data), "--output", str(out), "--buckets", "4", "--id-field", "id"]
    jobs = submit_held(DEDUP, args)
    release_and_wait([j for ids in jobs.values() for j in ids])
    first = sorted((data / "a").glob("*.jsonl"))[0]
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    (data / "a" / "zz-added.jsonl").write_text("".join(json.dumps({**r, "id": f"new-{i}"}) + "\n"
                                                       for i, r in enumerate(rows)))  # fmt: skip
    again = cli("submit", str(DEDUP), "--shards", "2", "--accept-new-inputs", "--json", "--", *args)
    assert again.returncode == 0, again.stderr
    for record in json.loads(again.stdout).values():
        for array in record["arrays"]:
            assert set(wait_for_job(str(array["job_id"]), timeout=900).values()) == {"COMPLETED"}
    local = subprocess.run([sys.executable, str(DEDUP), *args[:2], "--output", str(reference), *args[4:]],
                           env=clean_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert_same_parquet(out, reference)
    status = json.loads(cli("status", str(out / ".curator-work" / ".curator-run"), "--json").stdout)
    for name, phase in status["phases"].items():
        assert phase["done"] == phase["total"] and phase["percent"] == 100.0, (name, phase)
