"""Headless Chromium (Debian's `chromium`, installed by scripts/chromium.sh) to render a page as a person's
browser would: the DOM once its scripts ran, the script errors it logged, and a screenshot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

#: No sandbox (root in a container), no GPU, nothing fetched from the network: no background requests, no
#: component updates, no sync, and every host name resolves to nothing (a page that needs the network breaks).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--virtual-time-budget=20000",
]


def chromium() -> str:
    """The chromium binary; without one the test skips, unless CURATOR_REQUIRE_SLURM=1 (CI), where it fails."""
    found = shutil.which("chromium")
    if found:
        return found
    why = "no chromium on PATH; install it with scripts/chromium.sh"
    if os.environ.get("CURATOR_REQUIRE_SLURM") == "1":
        pytest.fail(f"CURATOR_REQUIRE_SLURM=1 but {why}")
    pytest.skip(why)


@dataclass(frozen=True)
class Rendered:
    """A page as Chromium showed it: its DOM after the scripts ran, the script errors it logged."""

    dom: str
    errors: list[str]
    screenshot: Path


def render(page: Path, screenshot: Path, width: int = 1280, height: int = 3200) -> Rendered:
    """Open ``page`` (a local file) in headless Chromium with a fresh profile, twice: once to dump the DOM, once
    for a screenshot (``screenshot``, a PNG)."""
    binary = chromium()
    errors: list[str] = []
    outputs = []
    for mode in (["--dump-dom"], [f"--screenshot={screenshot}", f"--window-size={width},{height}"]):
        with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
            proc = subprocess.run(
                [binary, *FLAGS, f"--user-data-dir={profile}", *mode, page.resolve().as_uri()],
                capture_output=True, text=True, timeout=180,
            )  # fmt: skip
        outputs.append(proc.stdout)
        errors += [line for line in proc.stderr.splitlines() if re.search(r"CONSOLE.*(Uncaught|Error)", line)]
    return Rendered(dom=outputs[0], errors=errors, screenshot=screenshot)
