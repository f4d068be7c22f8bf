"""Shared test helpers: run the example as a real process, compare output trees."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from curator_slurm.logs import ROOT
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "curate.py"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any Slurm or curator variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CURATOR_"))}
    env.update(extra or {})
    return env


def run_example(
    input_dir: Path, output_dir: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``examples/curate.py`` as its own process, as a user (or an array task) would."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--input", str(input_dir), "--output", str(output_dir), *args],
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"curate.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


class _Collect(logging.Handler):
    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def logged(level: int = logging.INFO) -> Iterator[list[str]]:
    """The messages the package logs at ``level`` or above inside the block, wherever its handlers send them."""
    package = logging.getLogger(ROOT)
    handler, before = _Collect(level), package.level
    package.addHandler(handler)
    package.setLevel(min(level, package.getEffectiveLevel()))
    try:
        yield handler.messages
    finally:
        package.removeHandler(handler)
        package.setLevel(before)


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, hidden ones included so that leftover temporary
    files show up; only the run directory (the ledger, which differs between runs) is left out."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file() and DEFAULT_RUN_DIR_NAME not in p.relative_to(root).parts
    }


def records(out: Path) -> list[dict]:
    """The ledger records of a run whose run directory is the default one, inside its output ``out``."""
    return list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))


def parquet_tables(root: Path) -> dict[str, Any]:
    """The Parquet files directly in ``root`` by name, as tables (an output directory of a writer)."""
    import pyarrow.parquet as pq

    return {p.name: pq.read_table(p) for p in sorted(Path(root).glob("*.parquet"))}


def assert_same_parquet(mine: Path, theirs: Path) -> None:
    """Both directories hold the same Parquet files, by name, with equal tables."""
    a, b = parquet_tables(mine), parquet_tables(theirs)
    assert list(a) == list(b), "other file names"
    assert all(a[name].equals(b[name]) for name in a), "same names, other rows"


def kill_when_recorded(
    cmd: list[str],
    ledger: Path,
    timeout: float,
    window: int = 5,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    """Start ``cmd`` and SIGKILL it as soon as a record appears in the ledger directory ``ledger`` (the run
    is then in the middle of the work that ledger records); fail if it ended before that. The ledger
    commits every ``window`` records (``CURATOR_LEDGER_WINDOW``), so records appear while work goes on
    even when the whole phase takes less than the default window's half second."""
    import signal
    import time

    env = {**(env if env is not None else clean_env()), "CURATOR_LEDGER_WINDOW": str(window)}
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if ledger.is_dir() and any(f.stat().st_size for f in ledger.iterdir()):
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before {ledger} recorded anything"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def arrays_match_local(
    script: Path, args: list[str], ref: Path, out: Path, submit: list[str], phases: list[str]
) -> None:
    """Run the workflow ``script`` locally into ``ref``, then submit it to the real cluster into ``out`` with
    the ``submit`` options (shards per phase); every phase's array must complete and the outputs match."""
    import json

    from support.slurmtools import wait_for_job

    subprocess.run([sys.executable, str(script), *args, "--output", str(ref)], env=clean_env(), check=True,
                   capture_output=True)  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "submit", str(script), *submit, "--json", "--", *args,
         "--output", str(out)],
        env=clean_env(), check=True, capture_output=True, text=True,
    )  # fmt: skip
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(proc.stdout).items()}
    assert list(jobs) == phases
    for name in phases:
        assert set(wait_for_job(jobs[name], timeout=300).values()) == {"COMPLETED"}, name
    assert_same_parquet(out, ref)


def kill_mid_phase_then_rerun(base: list[str], out: Path, ref: Path, phase: str, earlier: str, tasks: int) -> None:
    """Run the workflow command ``base`` (without ``--output``) into ``ref``; run it into ``out`` and kill -9
    it once phase ``phase`` (of ``tasks`` source tasks) has recorded some but not all of them; run it again:
    the phase ``earlier`` records nothing more (its work is not redone) and ``out`` equals ``ref``."""
    runs = out / ".curator-work" / ".curator-run"
    subprocess.run([*base, "--output", str(ref)], env=clean_env(), check=True, capture_output=True)
    kill_when_recorded([*base, "--output", str(out)], runs / phase / "ledger", timeout=180)
    before = len(list(iter_records(str(runs / earlier))))
    done = sum(r["status"] == "done" for r in iter_records(str(runs / phase)))
    assert 0 < done < tasks, f"killed in the middle of the {phase} phase"
    subprocess.run([*base, "--output", str(out)], env=clean_env(), check=True, capture_output=True)
    assert len(list(iter_records(str(runs / earlier)))) == before, f"no {earlier} work redone"
    assert_same_parquet(out, ref)
