"""Outputs on object storage are checked as local ones are: after an output object is deleted, `status
--verify` says so (exit 1) with one listing of the prefix, not a request per object, and a re-run writes it
again; a prefix emptied behind the run's back (or a new bucket under the same name) is done again on resume,
not skipped as done because the local run directory says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import REPO, clean_env, read_tree
from support.s3tools import client, endpoint, fault_proxy, new_bucket, object_tree, s3_env, upload_tree

CURATE = REPO / "examples" / "curate.py"


@pytest.fixture(scope="module")
def server() -> str:
    return endpoint()


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_deleted_output_object_is_found_by_verify_and_written_again(
    server: str, corpus: Path, tmp_path: Path
) -> None:
    bucket = new_bucket(server)
    upload_tree(server, corpus, bucket, "in")
    out = f"s3://{bucket}/out"
    env = clean_env(s3_env(server))
    curate = [sys.executable, str(CURATE), "--input", f"s3://{bucket}/in", "--output", out, "--workers", "1"]
    assert run(curate, tmp_path, env).returncode == 0
    written = object_tree(server, bucket, "out")
    assert len(written) == 12
    victim = sorted(written)[3]
    client(server).delete_object(Bucket=bucket, Key=f"out/{victim}")

    with fault_proxy(server) as proxy:
        verify = run([sys.executable, "-m", "curator_slurm.cli", "status", out, "--verify"], tmp_path,
                     clean_env(s3_env(proxy.url)))  # fmt: skip
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert f"{out}/{victim}: missing" in verify.stdout and "verified:" not in verify.stdout
    assert proxy.counts["HEAD"] <= 2 and proxy.counts["LIST"] <= 2, proxy.counts

    again = run(curate, tmp_path, env)
    assert again.returncode == 0 and "their outputs are gone" in again.stderr, again.stderr[-2000:]
    assert object_tree(server, bucket, "out") == written
    final = run([sys.executable, "-m", "curator_slurm.cli", "status", out, "--verify"], tmp_path, env)
    assert final.returncode == 0 and "verified:" in final.stdout, final.stdout


def test_an_emptied_prefix_is_done_again_on_resume(server: str, corpus: Path, tmp_path: Path) -> None:
    bucket = new_bucket(server)
    upload_tree(server, corpus, bucket, "in")
    out = f"s3://{bucket}/out"
    env = clean_env(s3_env(server))
    curate = [sys.executable, str(CURATE), "--input", f"s3://{bucket}/in", "--output", out, "--workers", "1"]
    assert run(curate, tmp_path, env).returncode == 0
    written = object_tree(server, bucket, "out")
    s3 = client(server)
    for key in written:
        s3.delete_object(Bucket=bucket, Key=f"out/{key}")
    again = run(curate, tmp_path, env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "doing 12 done source task(s) again, their outputs are gone" in again.stderr, again.stderr[-2000:]
    assert "skipping" not in again.stderr and "12 source tasks done" in again.stderr
    assert object_tree(server, bucket, "out") == written
    assert read_tree(tmp_path / ".curator-run" / "s3" / bucket / "out"), "the run directory stays local"
