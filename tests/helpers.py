"""Shared test helpers: run the example as a real process, compare output trees."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from curator_slurm.logs import ROOT
from curator_slurm.slurm.ledger import DEFAULT_RUN_DIR_NAME

REPO = Path(__file__).resolve().parents[1]
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
