"""Pipelines and dedup workflows with input and output on a real S3 server (moto, scripts/s3-up.sh) give,
object for object, what the same runs give on local disk: unsharded, as array tasks of `curator-slurm local`
and as a real array on the cluster; a killed run resumes without a partial or second copy; array tasks
started from the manifest never list the bucket; a missing bucket fails at once, naming the URI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import REPO, clean_env, kill_when_recorded, read_tree
from support.s3tools import client, endpoint, fault_proxy, new_bucket, object_tree, s3_env, upload_tree

CURATE = REPO / "examples" / "curate.py"
DEDUP = REPO / "examples" / "dedup.py"
#: A secret no output, log or run file may hold (moto accepts any key).
SECRET = "s3cr3t-never-in-any-file-9f2c"


@pytest.fixture(scope="module")
def server() -> str:
    return endpoint()


@pytest.fixture(scope="module")
def s3_corpus(server: str, corpus: Path) -> str:
    """The shared test corpus uploaded to a new bucket: its ``s3://bucket/in`` URI."""
    bucket = new_bucket(server)
    upload_tree(server, corpus, bucket, "in")
    return f"s3://{bucket}/in"


def env_for(url: str, **extra: str) -> dict[str, str]:
    return clean_env({**s3_env(url), "AWS_SECRET_ACCESS_KEY": SECRET, **extra})


def run(cmd: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def split_uri(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix


def tree_of(server: str, uri: str) -> dict[str, bytes]:
    return object_tree(server, *split_uri(uri))


def top_level(tree: dict[str, bytes]) -> dict[str, bytes]:
    """The files directly in an output (the work directory's shuffle files left out)."""
    return {k: v for k, v in tree.items() if "/" not in k}


def local_reference(script: Path, corpus: Path, tmp_path: Path, *args: str) -> dict[str, bytes]:
    out = tmp_path / "local-ref"
    run([sys.executable, str(script), "--input", str(corpus), "--output", str(out), *args], tmp_path, clean_env())
    tree = read_tree(out)
    assert tree, "the local run wrote something"
    return tree


def input_listings(proxy: Any, uri: str) -> int:
    """How many LIST requests went to the bucket of ``uri`` (the input's: the output is in another bucket)."""
    bucket = uri.removeprefix("s3://").split("/")[0]
    return sum(1 for path in proxy.list_paths if path.lstrip("/").split("?")[0].split("/")[0] == bucket)


def test_demo_on_s3_equals_local_unsharded_and_sharded(
    server: str, s3_corpus: str, corpus: Path, tmp_path: Path
) -> None:
    ref = local_reference(CURATE, corpus, tmp_path, "--workers", "1")
    bucket = new_bucket(server)
    out = f"s3://{bucket}/out"
    with fault_proxy(server) as proxy:
        proc = run([sys.executable, str(CURATE), "--input", s3_corpus, "--output", out, "--workers", "1"], tmp_path,
                   env_for(proxy.url))  # fmt: skip
        listed_once = input_listings(proxy, s3_corpus)  # what one listing of the input costs (a check, the pages)
    assert tree_of(server, out) == ref
    # The run directory stayed on local disk, named after the output, and a re-run finds everything done.
    run_dir = tmp_path / ".curator-run" / "s3" / bucket / "out"
    assert (run_dir / "run.json").is_file(), proc.stderr
    again = run([sys.executable, str(CURATE), "--input", s3_corpus, "--output", out], tmp_path, env_for(server))
    assert "0 files written" in again.stdout + again.stderr or "already done" in again.stderr
    assert tree_of(server, out) == ref

    sharded = f"s3://{bucket}/sharded"
    with fault_proxy(server) as proxy:  # counts what the driver and the array tasks ask of S3
        run([sys.executable, "-m", "curator_slurm.cli", "local", str(CURATE), "--shards", "4", "--", "--input",
             s3_corpus, "--output", sharded, "--workers", "1"], tmp_path, env_for(proxy.url))  # fmt: skip
        listings = input_listings(proxy, s3_corpus)
    assert tree_of(server, sharded) == ref
    status = run([sys.executable, "-m", "curator_slurm.cli", "status", sharded], tmp_path, env_for(server))
    assert "12" in status.stdout and "100" in status.stdout, status.stdout
    # The driver listed the input once for the manifest; the four array tasks read it, not the bucket. (Array
    # tasks that start afresh at the same moment may each list the *output* once, to refuse stale files.)
    assert 0 < listings == listed_once, f"{listings} LIST requests of the input, {listed_once} for one listing"


@pytest.mark.parametrize("fuzzy", [False, True], ids=["exact", "fuzzy"])
def test_dedup_on_s3_equals_local(server: str, s3_corpus: str, corpus: Path, tmp_path: Path, fuzzy: bool) -> None:
    flags = ["--fuzzy"] if fuzzy else []
    ref = local_reference(DEDUP, corpus, tmp_path, *flags)
    ref_parquet = top_level(ref)
    bucket = new_bucket(server)
    out = f"s3://{bucket}/dedup"
    run([sys.executable, str(DEDUP), *flags, "--input", s3_corpus, "--output", out], tmp_path, env_for(server))
    got = tree_of(server, out)
    assert top_level(got) == ref_parquet
    # The shuffle buckets and duplicate lists went to the bucket too, under the work directory.
    assert any(k.startswith(".curator-work/") for k in got)
    sharded = f"s3://{bucket}/sharded"
    run([sys.executable, "-m", "curator_slurm.cli", "local", str(DEDUP), "--shards", "4", "--", *flags,
         "--input", s3_corpus, "--output", sharded], tmp_path, env_for(server))  # fmt: skip
    assert top_level(tree_of(server, sharded)) == ref_parquet


def test_kill_9_mid_upload_then_resume_leaves_one_whole_copy(
    server: str, s3_corpus: str, corpus: Path, tmp_path: Path
) -> None:
    ref = local_reference(CURATE, corpus, tmp_path, "--workers", "1")
    bucket = new_bucket(server)
    out = f"s3://{bucket}/out"
    ledger = tmp_path / ".curator-run" / "s3" / bucket / "out" / "ledger"
    cmd = [sys.executable, str(CURATE), "--input", s3_corpus, "--output", out, "--workers", "1"]
    kill_when_recorded(cmd, ledger, timeout=120, window=1, env=env_for(server), cwd=tmp_path)
    partial = tree_of(server, out)
    assert 0 < len(partial) < len(ref), "killed in the middle"
    assert all(ref[name] == data for name, data in partial.items()), "every object there is whole"
    run(cmd, tmp_path, env_for(server))
    assert tree_of(server, out) == ref
    uploads = client(server).list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert uploads == [], "no unfinished upload left behind"


def test_real_array_on_s3_equals_local(
    slurm_cluster: str, server: str, s3_corpus: str, corpus: Path, tmp_path: Path
) -> None:
    from support.slurmtools import wait_for_job

    ref = local_reference(CURATE, corpus, tmp_path, "--workers", "1")
    bucket = new_bucket(server)
    out = f"s3://{bucket}/out"
    proc = run([sys.executable, "-m", "curator_slurm.cli", "submit", str(CURATE), "--shards", "4", "--json", "--",
                "--input", s3_corpus, "--output", out, "--workers", "1"], tmp_path, env_for(server))  # fmt: skip
    record = json.loads(proc.stdout)
    job = record["arrays"][0]["job_id"]
    assert set(wait_for_job(job, timeout=300).values()) == {"COMPLETED"}
    assert tree_of(server, out) == ref
    # The credentials reached the tasks through the environment, and no file of the run holds them.
    for path in (tmp_path / ".curator-run").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.parametrize("fuzzy", [False, True], ids=["exact", "fuzzy"])
def test_real_dedup_arrays_on_s3_equal_local(
    slurm_cluster: str, server: str, s3_corpus: str, corpus: Path, tmp_path: Path, fuzzy: bool
) -> None:
    """`submit examples/dedup.py` with input, output and work directory on S3: one array per phase, each
    waiting for the one before, the deduplicated objects equal to the local run's files."""
    from support.slurmtools import wait_for_job

    flags = ["--fuzzy"] if fuzzy else []
    ref = local_reference(DEDUP, corpus, tmp_path, *flags)
    bucket = new_bucket(server)
    out = f"s3://{bucket}/dedup"
    proc = run([sys.executable, "-m", "curator_slurm.cli", "submit", str(DEDUP), "--shards", "4", "--json", "--",
                *flags, "--input", s3_corpus, "--output", out], tmp_path, env_for(server))  # fmt: skip
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(proc.stdout).items()}
    assert len(jobs) == (4 if fuzzy else 3)
    for name, job in jobs.items():
        assert set(wait_for_job(job, timeout=300).values()) == {"COMPLETED"}, name
    assert top_level(tree_of(server, out)) == top_level(ref)


def test_missing_bucket_fails_at_once_naming_the_uri(server: str, corpus: Path, tmp_path: Path) -> None:
    bucket = new_bucket(server)
    missing = "s3://curator-no-such-bucket-x1/in"
    with fault_proxy(server) as proxy:
        proc = run([sys.executable, str(CURATE), "--input", missing, "--output", f"s3://{bucket}/out"], tmp_path,
                   env_for(proxy.url), check=False)  # fmt: skip
        asked = sum(proxy.counts.values())
    assert proc.returncode != 0
    assert missing in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert asked <= 4, f"{asked} requests: a permanent error is not retried"


def test_a_run_directory_on_object_storage_is_refused_before_any_work(
    server: str, s3_corpus: str, tmp_path: Path
) -> None:
    bucket = new_bucket(server)
    proc = run([sys.executable, str(CURATE), "--input", s3_corpus, "--output", f"s3://{bucket}/out"], tmp_path,
               env_for(server, CURATOR_RUN_DIR=f"s3://{bucket}/run"), check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "CURATOR_RUN_DIR" in proc.stderr and "POSIX" in proc.stderr, proc.stderr
    assert tree_of(server, f"s3://{bucket}/out") == {}, "nothing written"


def test_tokenized_megatron_files_on_s3_equal_local(server: str, tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    from curator_slurm.samples.corpus import make_corpus
    from support.megatron_files import EOT, corpus_texts, train_tokenizer

    script = REPO / "examples" / "tokenize_corpus.py"
    make_corpus(str(tmp_path / "in"), files=6, docs_per_file=30, seed=3)
    train_tokenizer(tmp_path / "tok.json", list(corpus_texts(tmp_path / "in")), vocab_size=600)
    common = ["--tokenizer", str(tmp_path / "tok.json"), "--eos-token", EOT, "--merge-tokens", "4000"]
    local = tmp_path / "local"
    run([sys.executable, str(script), "--input", str(tmp_path / "in"), "--output", str(local), *common], tmp_path,
        clean_env())  # fmt: skip
    want = {p.name: p.read_bytes() for p in sorted(local.glob("*")) if p.suffix in (".bin", ".idx")}
    assert len(want) >= 4, "several merged parts"
    bucket = new_bucket(server)
    upload_tree(server, tmp_path / "in", bucket, "in")
    run([sys.executable, str(script), "--input", f"s3://{bucket}/in", "--output", f"s3://{bucket}/tokens",
         *common], tmp_path, env_for(server))  # fmt: skip
    assert top_level(tree_of(server, f"s3://{bucket}/tokens")) == want


def test_a_fifth_of_requests_failing_still_gives_every_object_once(
    server: str, s3_corpus: str, corpus: Path, tmp_path: Path
) -> None:
    """20 % of requests answered 503 SlowDown or reset: the sharded demo completes with the local run's
    objects, each source task recorded done once, and `status` reports the request retries."""
    from curator_slurm.runs.ledger import iter_records

    ref = local_reference(CURATE, corpus, tmp_path, "--workers", "1")
    bucket = new_bucket(server)
    out = f"s3://{bucket}/out"
    with fault_proxy(server, fault_rate=0.2, seed=5, keep_alive=False) as proxy:
        run([sys.executable, "-m", "curator_slurm.cli", "local", str(CURATE), "--shards", "4", "--", "--input",
             s3_corpus, "--output", out, "--workers", "1"], tmp_path,
            env_for(proxy.url, CURATOR_S3_RETRY_BASE="0.01", CURATOR_S3_MAX_ATTEMPTS="12"))  # fmt: skip
        injected = sum(proxy.faults.values())
    assert injected > 10, "the proxy did fail requests"
    assert tree_of(server, out) == ref
    run_dir = tmp_path / ".curator-run" / "s3" / bucket / "out"
    done = [r["source"] for r in iter_records(str(run_dir)) if r["status"] == "done"]
    assert len(done) == len(set(done)) == 12, "every source task done exactly once"
    status = run([sys.executable, "-m", "curator_slurm.cli", "status", "--json", out], tmp_path, env_for(server))
    counts = json.loads(status.stdout)["s3"]
    # The array tasks' retries (the driver's listing retried too, outside any task): some, never more than
    # the faults, every one a throttle or a reset.
    assert 0 < counts["retries"] <= injected, counts
    assert set(counts["reasons"]) <= {"throttled", "connection reset", "connection failed"}, counts
    text = run([sys.executable, "-m", "curator_slurm.cli", "status", out], tmp_path, env_for(server)).stdout
    assert f"{counts['retries']} retried" in text, text
