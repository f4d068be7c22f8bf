"""Damage is counted, never silent, never fatal to good records: a run whose input lost records to damage
ends its array task successfully (no retry can fix a damaged file) but says so where a user looks first:
the summary line, the first lines of `status`, and `status`'s exit code 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.helpers import REPO, clean_env
from support.webfixtures import build_warc, pages, response_urls, truncated_copy

EXTRACT = REPO / "examples" / "extract.py"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "curator_slurm.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=300)


def test_damaged_input_is_said_in_the_summary_the_status_and_its_exit_code(tmp_path: Path) -> None:
    docs = pages("python3.11-doc", limit=30)
    whole = build_warc(tmp_path / "whole.warc.gz", docs, docs[0].parents[1])
    inputs = tmp_path / "in"
    inputs.mkdir()
    cut = response_urls(whole)[10][0]
    truncated_copy(whole, inputs / "cut.warc.gz", cut + 300)
    build_warc(inputs / "good.warc.gz", docs[:5], docs[0].parents[1])
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXTRACT), "--input", str(inputs), "--output", str(out), "--extractor", "resiliparse"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=600)
    assert run.returncode == 0, "a damaged input does not fail the task: no retry can fix it"
    summary = [line for line in run.stderr.splitlines() if "source tasks done" in line][-1]
    assert "DAMAGED INPUT: 1 input(s) lost records" in summary and "cut.warc.gz" in summary, summary

    status = cli("status", str(out / ".curator-run"))
    assert status.returncode == 3, status.stdout
    first = status.stdout.splitlines()[:4]
    assert any(line.startswith("DAMAGED INPUT: 1 input(s)") and "cut.warc.gz" in line for line in first), first
    data = json.loads(cli("status", str(out / ".curator-run"), "--json").stdout)
    assert data["damaged"] == 1 and data["done"] == 2 and data["percent"] == 100.0
