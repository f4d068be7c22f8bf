"""Stop signals on a real process: after SIGTERM every source task already started finishes and is recorded,
and the re-run does the rest without running any task twice; once the grace period is over, stuck work is
abandoned and nothing is recorded done."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import clean_env, read_tree
from support.tallying import (
    reference_fixture,  # noqa: F401 - a fixture
    start_tally,
    tallied,
    tally_cmd,
    wait_for_lines,
)


def test_sigterm_stops_cleanly_and_resumes(corpus: Path, tmp_path: Path, reference: dict[str, bytes]) -> None:
    out, tally = tmp_path / "out", tmp_path / "tally"
    proc = start_tally(tally_cmd(corpus, out, tally, "--sleep", "0.4", "--workers", "2"))
    wait_for_lines(tally, 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "received SIGTERM" in err and "stopped by SIGTERM" in err
    state = load_status(str(out / DEFAULT_RUN_DIR_NAME))
    started = set(tallied(tally))
    assert state.done == started, "every source task started before the signal finished and was recorded"
    assert len(state.done) < 12

    rerun = subprocess.run(tally_cmd(corpus, out, tally), env=clean_env(), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert Counter(tallied(tally)).most_common(1)[0][1] == 1, "no source task ran twice"
    assert read_tree(out) == reference


def test_grace_period_abandons_stuck_work(corpus: Path, tmp_path: Path) -> None:
    out, tally = tmp_path / "out", tmp_path / "tally"
    proc = start_tally(tally_cmd(corpus, out, tally, "--sleep", "30"), {"CURATOR_GRACE_SECONDS": "1"})
    wait_for_lines(tally, 1)
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "grace period of 1 s over" in err
    assert load_status(str(out / DEFAULT_RUN_DIR_NAME)).done == set()
