"""`curator-slurm status` says what the facts say (issue #24.7): a run whose processes are gone is
"stopped" with a non-zero exit (not "pending, ETA 9 s"), `--watch` ends when nothing can change, and
`--verify` checks the recorded outputs, which a re-run restores when they are gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import REPO, clean_env, kill_when_recorded, run_example
from test_cli_local_stop import shard_pids

TALLY = REPO / "tests" / "pipelines" / "tally.py"
CLI = [sys.executable, "-m", "curator_slurm.cli"]


def status(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "status", str(run_dir), *args], env=clean_env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def assert_stopped(run_dir: Path) -> None:
    proc = status(run_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopped:" in proc.stdout and "pending" in proc.stdout and "ETA" not in proc.stdout, proc.stdout
    data = json.loads(status(run_dir, "--json").stdout)
    assert data["stopped"] is True and data["eta_seconds"] is None and data["pending"] > 0
    watch = status(run_dir, "--watch", "0.1")  # ends at once: nothing can change any more
    assert watch.returncode == 1 and watch.stdout.count("source tasks:") == 1, watch.stdout


def test_a_killed_run_is_stopped_not_pending_with_an_eta(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(TALLY), "--input", str(corpus), "--output", str(out), "--tally", str(tmp_path / "t"),
           "--sleep", "0.3"]  # fmt: skip
    kill_when_recorded(cmd, out / DEFAULT_RUN_DIR_NAME / "ledger", timeout=120, window=1)
    assert_stopped(out / DEFAULT_RUN_DIR_NAME)


def test_a_running_run_is_not_stopped(corpus: Path, tmp_path: Path) -> None:
    out, tally = tmp_path / "out", tmp_path / "t"
    cmd = [sys.executable, str(TALLY), "--input", str(corpus), "--output", str(out), "--tally", str(tally),
           "--sleep", "2"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not tally.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        data = json.loads(status(out / DEFAULT_RUN_DIR_NAME, "--json").stdout)
        assert data["stopped"] is False and data["pending"] > 0 and data["processes"]["alive"], data["processes"]
    finally:
        proc.kill()
        proc.wait()
    assert_stopped(out / DEFAULT_RUN_DIR_NAME)


def test_a_killed_local_run_is_stopped(corpus: Path, tmp_path: Path) -> None:
    out, tally = tmp_path / "out", tmp_path / "t"
    args = ["local", str(TALLY), "--shards", "2", "--logs", str(tmp_path / "logs"), "--", "--input", str(corpus),
            "--output", str(out), "--tally", str(tally), "--sleep", "1"]  # fmt: skip
    proc = subprocess.Popen([*CLI, *args], env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(tally.read_text().split() if tally.exists() else []) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # kill -9 of everything: `local` and its shards
    for pid in shard_pids(str(out)):
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while shard_pids(str(out)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert_stopped(out / DEFAULT_RUN_DIR_NAME)


def test_verify_finds_a_deleted_output_and_a_rerun_restores_it(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(corpus, out, "--workers", "1")
    run_dir = out / DEFAULT_RUN_DIR_NAME
    assert status(run_dir, "--verify").returncode == 0
    victim = sorted(out.glob("*.parquet"))[3]
    content = victim.read_bytes()
    victim.unlink()
    proc = status(run_dir, "--verify")
    assert proc.returncode == 1, proc.stdout
    assert f"{victim}: missing" in proc.stdout and "not complete: 1 done source task(s) lost outputs" in proc.stdout
    data = json.loads(status(run_dir, "--verify", "--json").stdout)
    assert list(data["verified"]["lost_outputs"].values()) == [[f"{victim}: missing"]]
    again = run_example(corpus, out, "--workers", "1")
    assert "doing 1 done source task(s) again, their outputs are gone" in again.stdout + again.stderr
    assert victim.read_bytes() == content, "the re-run wrote the same file again"
    verified = status(run_dir, "--verify")
    assert verified.returncode == 0 and "verified: every done source task's outputs exist" in verified.stdout
