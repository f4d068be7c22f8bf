"""A full output filesystem is an error that names the directory and the remedy, not a crash: nothing is
retried, no temporary file is left, and after space is freed a re-run completes (issue 14, item 13).

Uses a real tmpfs of a few hundred KiB (needs the right to mount, as root in the test container)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import read_tree, run_example


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> None:
    """Take every byte left on the filesystem of ``directory``."""
    try:
        with open(directory / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass  # full (possibly already before the file could be created)


def _leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if ".tmp-" in p.name]


def test_a_full_disk_stops_the_run_with_the_directory_and_the_remedy(
    small_fs: Path, corpus: Path, tmp_path: Path
) -> None:
    reference = tmp_path / "reference"
    run_example(corpus, reference, "--workers", "1")
    out = small_fs / "out"
    for workers in ("1", "2"):
        proc = run_example(corpus, out, "--workers", workers, check=False)
        assert proc.returncode == 2, proc.stderr
        # The directory the write failed in: the output, or the run directory inside it (the ledger's records,
        # which now keep each task's inputs and outputs, may be the first write that meets the full disk).
        named = re.search(rf"{re.escape(str(out))}(/[^\s:]*)?: no space left on the device", proc.stderr)
        assert named and "Free space there" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "retrying" not in proc.stderr, proc.stderr
        assert _leftovers(small_fs) == []
    _fill(out)  # run.json exists: checking it must not need a byte
    proc = run_example(corpus, out, "--workers", "1", check=False)
    assert proc.returncode == 2 and "no space left on the device" in proc.stderr and "Traceback" not in proc.stderr
    assert _leftovers(small_fs) == []
    if (out / "filler").exists():
        os.unlink(out / "filler")
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_fs)], check=True)
    run_example(corpus, out, "--workers", "2")
    assert read_tree(out) == read_tree(reference)
