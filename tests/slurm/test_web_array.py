"""examples/extract.py, unchanged, as a real Slurm job array on the local cluster: the array's four tasks
together write, file for file, what one unsharded run writes (WARC files cut into record-aligned pieces)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import REPO, clean_env, read_tree
from support.slurmtools import sbatch, wait_for_job
from support.webfixtures import build_warcs

pytestmark = pytest.mark.slurm
EXTRACT = REPO / "examples" / "extract.py"


def test_real_array_of_the_extract_example_equals_one_unsharded_run(slurm_cluster: str, tmp_path: Path) -> None:
    warcs = tmp_path / "warcs"
    build_warcs(warcs, "python3.11-doc", files=3, limit=30, others=4)
    args = f"--input {warcs} --extractor resiliparse --workers 1 --blocksize 96KiB"
    subprocess.run(
        [sys.executable, str(EXTRACT), *args.split(), "--output", str(tmp_path / "whole")],
        env=clean_env(),
        check=True,
        capture_output=True,
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    script = f"#!/bin/bash\nset -e\nexec {sys.executable} {EXTRACT} {args} --output {tmp_path / 'array'}\n"
    job = sbatch(script, "--array=0-3", "-o", f"{logs}/task-%a.log", "-J", "extract-array")
    states = wait_for_job(job, timeout=600)
    assert states == {str(i): "COMPLETED" for i in range(4)}, {i: (logs / f"task-{i}.log").read_text() for i in states}
    whole = read_tree(tmp_path / "whole")
    assert len(whole) > 3 and read_tree(tmp_path / "array") == whole
    done = [r for r in iter_records(str(tmp_path / "array" / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert {r["array_job_id"] for r in done} == {job}
    assert len(done) == len({r["source"] for r in done})
