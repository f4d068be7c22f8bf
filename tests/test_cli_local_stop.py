"""`curator-slurm local` under SIGTERM and Ctrl-C (issue #24.6, #24.9): the signal reaches every running
shard, which finishes its in-flight work and records it; no shard outlives `local`; `local` says what
happened and exits as the signal would; the same command then finishes the run, each task done once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import REPO, clean_env

TALLY = REPO / "tests" / "pipelines" / "tally.py"
CLI = [sys.executable, "-m", "curator_slurm.cli"]


def shard_pids(marker: str) -> list[int]:
    """The processes whose command line holds ``marker`` (the test's own output path) and runs tally.py."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if marker in cmdline and "tally.py" in cmdline and "curator_slurm.cli" not in cmdline and not zombie:
            pids.append(int(entry))
    return pids


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_local_reaches_its_shards_and_local_waits_for_them(
    corpus: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    out, tally = tmp_path / "out", tmp_path / "tally"
    args = ["local", str(TALLY), "--shards", "3", "--parallel", "3", "--logs", str(tmp_path / "logs"), "--"]
    args += ["--input", str(corpus), "--output", str(out), "--tally", str(tally), "--sleep", "1.5"]
    env = clean_env({"CURATOR_GRACE_SECONDS": "30"})
    proc = subprocess.Popen([*CLI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(lines(tally)) < 3 and time.monotonic() < deadline:  # every shard has a task in flight
        time.sleep(0.05)
    assert len(lines(tally)) >= 3, "the shards did not start"
    started = set(lines(tally))
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=180)
    assert shard_pids(str(out)) == [], "a shard process outlived `curator-slurm local`"
    assert proc.returncode == 128 + sig, (stdout, stderr)
    assert f"stopped by {sig.name}" in stderr and "never started" in stderr, stderr
    assert "Traceback" not in stdout + stderr
    done = load_status(str(out / DEFAULT_RUN_DIR_NAME)).done
    assert started <= done, "the work in flight when the signal came was finished and recorded"
    assert len(done) < 12, "the shards stopped early instead of doing all their work"
    for i in range(3):  # each shard ended with its usual summary, not a traceback
        log = (tmp_path / "logs" / f"shard-{i}.log").read_text()
        assert f"stopped by {sig.name}" in log and "Traceback" not in log, log
    again = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    ids = lines(tally)
    assert len(set(ids)) == 12 and len(ids) == 12, "every source task done exactly once over both runs"


def test_local_refuses_to_run_beside_a_live_process_of_the_same_run(corpus: Path, tmp_path: Path) -> None:
    """Both would take the same source tasks (issue #24.6: 15 of 40 tasks were done twice)."""
    out, tally = tmp_path / "out", tmp_path / "tally"
    script = ["--input", str(corpus), "--output", str(out), "--tally", str(tally), "--sleep", "2"]
    plain = subprocess.Popen([sys.executable, str(TALLY), *script], env=clean_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not lines(tally) and time.monotonic() < deadline:
            time.sleep(0.05)
        local = subprocess.run([*CLI, "local", str(TALLY), "--shards", "2", "--", *script], env=clean_env(),
                               capture_output=True, text=True, timeout=300)  # fmt: skip
        assert local.returncode == 2, local.stdout + local.stderr
        assert "are working in" in local.stderr and f"{out / DEFAULT_RUN_DIR_NAME}" in local.stderr
        assert f"{plain.pid}" in local.stderr, local.stderr
    finally:
        plain.kill()
        plain.wait()
    assert len(lines(tally)) == len(set(lines(tally))), "nothing was done twice"
