"""Running the tally pipeline (tests/pipelines/tally.py) as its own process and reading what it tallied:
one line per source task it started, so a test can wait for work to be under way, then kill or signal it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.helpers import REPO, clean_env, read_tree

TALLY = REPO / "tests" / "pipelines" / "tally.py"


def tally_cmd(inp: Path, out: Path, tally: Path, *extra: str) -> list[str]:
    return [sys.executable, str(TALLY), "--input", str(inp), "--output", str(out), "--tally", str(tally), *extra]


def tallied(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.fixture(scope="module", name="reference")
def reference_fixture(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Outputs of one uninterrupted run of the tally pipeline."""
    out = tmp_path_factory.mktemp("reference")
    subprocess.run(tally_cmd(corpus, out, out.parent / "ref-tally"), check=True, env=clean_env(), capture_output=True)
    return read_tree(out)


def start_tally(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The tally pipeline as a background process whose stderr (its log) the test reads at the end."""
    return subprocess.Popen(cmd, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(tallied(path)) < n:
        assert time.monotonic() < deadline, f"{path} never reached {n} lines"
        time.sleep(0.05)
