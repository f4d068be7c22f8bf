"""Worker processes end with their driver: `kill -9` of a LocalExecutor run leaves none behind (issue 14,
item 9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.helpers import REPO, clean_env

TALLY = REPO / "tests" / "pipelines" / "tally.py"


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_kill_9_of_the_driver_leaves_no_worker(corpus: Path, tmp_path: Path, start_method: str) -> None:
    tally = tmp_path / "tally"
    driver = subprocess.Popen(
        [sys.executable, str(TALLY), "--input", str(corpus), "--output", str(tmp_path / "out"), "--tally",
         str(tally), "--sleep", "3", "--workers", "2", "--start-method", start_method],
        env=clean_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(tally.read_text().split() if tally.exists() else []) < 2:  # both workers are in a task
            assert time.monotonic() < deadline and driver.poll() is None, "the workers never started"
            time.sleep(0.05)
        workers = _children(driver.pid)
        assert len(workers) >= 2
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    deadline = time.monotonic() + 30
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "workers outlived their driver"
