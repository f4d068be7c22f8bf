"""A script of two pipelines plus glue under `plan`, `local` and `submit` (issue #24.5): every pipeline is
planned and run (each as its own array, behind the one before), and the glue, guarded by
``curator_slurm.is_driver()``, runs exactly once, after both, with their complete outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.samples.corpus import make_corpus
from support.helpers import REPO, clean_env
from support.slurmtools import wait_for_job

SCRIPT = REPO / "tests" / "pipelines" / "two_plus_glue.py"
CLI = [sys.executable, "-m", "curator_slurm.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=clean_env(), capture_output=True, text=True, timeout=900)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[list[str], str]:
    """The script's arguments (two corpora) and the report line a plain run writes."""
    make_corpus(str(tmp_path / "a"), files=6, docs_per_file=30, seed=1)
    make_corpus(str(tmp_path / "b"), files=4, docs_per_file=30, seed=2)
    args = ["--input-a", str(tmp_path / "a"), "--input-b", str(tmp_path / "b")]
    ref = tmp_path / "ref"
    plain = subprocess.run([sys.executable, str(SCRIPT), *args, "--output", str(ref)], env=clean_env(),
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    (line,) = (ref / "report.txt").read_text().splitlines()
    return args, line


def each_task_once(out: Path) -> None:
    for name, tasks in (("a", 6), ("b", 4)):
        done = [r["source"] for r in iter_records(str(out / name / ".curator-run")) if r["status"] == "done"]
        assert len(done) == len(set(done)) == tasks, (name, done)


def test_plan_lists_both_pipelines_and_runs_no_glue(inputs: tuple[list[str], str], tmp_path: Path) -> None:
    args, _ = inputs
    out = tmp_path / "out"
    proc = cli("plan", str(SCRIPT), "--shards", "2", "--json", "--", *args, "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert [s["source_tasks"] for s in summary["steps"]] == [6, 4] and summary["glue"] is True
    assert not (out / "report.txt").exists(), "plan mode does no work: no glue"


def test_local_runs_each_pipeline_as_an_array_and_the_glue_once(inputs: tuple[list[str], str], tmp_path: Path) -> None:
    args, line = inputs
    out = tmp_path / "out"
    proc = cli("local", str(SCRIPT), "--shards", "3", "--logs", str(tmp_path / "logs"), "--", *args, "--output",
               str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "report.txt").read_text().splitlines() == [line], "the glue ran once, with the complete outputs"
    each_task_once(out)
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert logs == ["driver-0.log", *(f"step{k}-shard-{i}.log" for k in (0, 1) for i in range(3))]


@pytest.mark.slurm
def test_submit_runs_each_pipeline_behind_the_one_before_and_the_glue_once(
    slurm_cluster: str, inputs: tuple[list[str], str], tmp_path: Path
) -> None:
    args, line = inputs
    out = tmp_path / "out"
    proc = cli("submit", str(SCRIPT), "--shards", "2", "--json", "--", *args, "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = json.loads(proc.stdout)
    assert len(sent) == 3 and list(sent)[-1].startswith("driver"), sent
    for jobs in sent.values():
        for job in jobs:
            assert set(wait_for_job(job, timeout=900).values()) == {"COMPLETED"}, (job, sent)
    assert (out / "report.txt").read_text().splitlines() == [line]
    each_task_once(out)
    for name in ("a", "b"):
        assert cli("status", str(out / name / ".curator-run")).returncode == 0
