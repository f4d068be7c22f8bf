"""What `status` and `failures` compute, called directly on run directories that real pipeline runs left:
the counts are the ledger's (``load_status``), the rest (totals, shards, array tasks, exit code, text)
is built around them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curator_slurm.errors import RunDirError
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.slurm.local_array import run_local
from curator_slurm.slurm.status import (
    array_tasks,
    check_run_dir,
    collect_status,
    failure_rows,
    format_failures,
    format_status,
    status_exit_code,
    status_report,
)
from support.helpers import REPO, run_example

DEDUP = REPO / "examples" / "dedup.py"


@pytest.fixture
def damaged(corpus: Path, tmp_path: Path) -> Path:
    """A copy of the corpus whose first file has a malformed line: its source task fails."""
    inp = tmp_path / "in"
    shutil.copytree(corpus, inp)
    first = sorted(inp.glob("*.jsonl"))[0]
    lines = first.read_text().splitlines()
    first.write_text("\n".join([*lines[:3], "{broken", *lines[3:]]) + "\n")
    return inp


def test_counts_are_the_ledgers_and_the_failure_is_named(damaged: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(damaged, out, "--workers", "1", check=False)
    run_dir = str(out / DEFAULT_RUN_DIR_NAME)
    state = load_status(run_dir)
    status = collect_status(run_dir)
    assert (status["done"], status["failed"]) == (len(state.done), len(state.failed)) == (11, 1)
    assert status["total"] == 12 and status["pending"] == 0 and status_exit_code(status) == 1
    assert sum(s["done"] for s in status["shards"]) == 11 and sum(s["failed"] for s in status["shards"]) == 1
    assert status["rows_in"] == sum(s["rows_in"] for s in status["shards"]) > 0
    assert status["funnel"][0]["rows_out"] == status["rows_in"], "the reader's output is what the done tasks read"
    assert status["job_states"] is None and status["jobs"] == [], "no submission: no array tasks to ask about"
    text = format_status(status, show_all=False)
    assert "source tasks: 12 total, 11 done, 1 failed, 0 pending (91.7% done)" in text

    rows, tasks = failure_rows(run_dir)
    bad = sorted(damaged.glob("*.jsonl"))[0]
    assert tasks == [] and len(rows) == 1 and rows[0]["files"] == [str(bad)]
    assert f"{bad}:4: malformed JSON" in rows[0]["error"] and rows[0]["stage"] == "jsonl_reader"
    text = format_failures(rows, tasks, traceback=True)
    assert text.startswith("1 failed source task(s):") and "Traceback" in text


def test_a_task_done_after_it_failed_counts_as_done(damaged: Path, corpus: Path, tmp_path: Path) -> None:
    """The ledger keeps both records; the task is done once any record says so, in status as in the ledger."""
    out = tmp_path / "out"
    run_example(damaged, out, "--workers", "1", check=False)
    bad = sorted(damaged.glob("*.jsonl"))[0]
    shutil.copy(corpus / bad.name, bad)  # fixed: the same path, so the same source task
    run_example(damaged, out, "--workers", "1")
    run_dir = str(out / DEFAULT_RUN_DIR_NAME)
    status = collect_status(run_dir)
    assert (status["done"], status["failed"], status["pending"]) == (12, 0, 0)
    assert status_exit_code(status) == 0 and failure_rows(run_dir) == ([], [])
    assert format_failures([], [], traceback=False) == "no failed source tasks"


def test_a_shard_run_alone_leaves_the_rest_pending_and_submitted_shards_get_rows(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(corpus, out, "--workers", "1", env={"CURATOR_NUM_SHARDS": "3", "CURATOR_SHARD_INDEX": "1"})
    run_dir = out / DEFAULT_RUN_DIR_NAME
    done = len(load_status(str(run_dir)).done)
    submission = {"shards": 3, "arrays": [{"job_id": "7", "offset": 0, "size": 3}], "options": {}, "submission": "s"}
    (run_dir / "submissions.jsonl").write_text(json.dumps(submission) + "\n")
    status = collect_status(str(run_dir))
    assert 0 < status["done"] == done < 12 and status["pending"] == 12 - done and status["failed"] == 0
    rows = {s["shard"]: s for s in status["shards"]}
    assert list(rows) == ["0/3", "1/3", "2/3"] and rows["1/3"]["done"] == done and rows["0/3"]["job"] == "7_0"
    tasks = array_tasks(str(run_dir), [submission], {"7_2": "FAILED"})
    assert [(t["job"], t["shard"], t["state"]) for t in tasks] == [
        ("7_0", "0/3", None),
        ("7_1", "1/3", None),
        ("7_2", "2/3", "FAILED"),
    ]
    assert tasks[2]["log"] == str(run_dir / "logs" / "7_2.log")


def test_an_output_directory_is_not_a_run_directory(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(corpus, out, "--workers", "1")
    with pytest.raises(RunDirError, match=f"did you mean {out / DEFAULT_RUN_DIR_NAME}"):
        check_run_dir(str(out))
    with pytest.raises(RunDirError, match="no such run directory"):
        collect_status(str(tmp_path / "missing"))


def test_a_workflow_run_by_the_local_array_reports_each_phase(corpus: Path, tmp_path: Path) -> None:
    """``run_local`` runs each phase of the dedup example as shard processes; the report then covers every
    phase, and a phase whose run directory is gone counts as not started (with nothing running: stopped)."""
    out = tmp_path / "out"
    logs = tmp_path / "logs"
    failed = run_local(str(DEDUP), ["--input", str(corpus), "--output", str(out)], 2, str(logs), parallel=2)
    assert failed == [] and sorted(p.name for p in logs.iterdir())[:2] == ["find-shard-0.log", "find-shard-1.log"]
    root = out / ".curator-work" / DEFAULT_RUN_DIR_NAME
    report = status_report(str(root))
    phases = report.data["phases"]
    assert report.workflow and report.code == 0 and report.settled and next(iter(phases)) == "hash"
    assert all(s["pending"] == 0 and s["done"] == s["total"] > 0 for s in phases.values())
    assert [line for line in report.text.splitlines() if line.startswith("== phase")] == [
        f"== phase {name}" for name in phases
    ]
    last = list(phases)[-1]
    shutil.rmtree(root / last)
    report = status_report(str(root))
    assert report.data["phases"][last] is None and f"== phase {last}: not started" in report.text
    # Nothing of the workflow runs any more, so the phase will not start by itself: stopped (issue #24.7),
    # and `--watch` ends instead of repeating it forever.
    assert report.settled and report.code == 1 and report.data["stopped"] is True
    assert f"stopped: phase {last} is not complete" in report.text


def test_a_repeated_record_counts_once_and_a_torn_line_is_skipped(corpus: Path, tmp_path: Path) -> None:
    """A window whose write was cut short and redone repeats records; a killed writer leaves a torn last
    line. Neither changes the counts, rows or funnel `status` gives (it sums the ledger file by file)."""
    out = tmp_path / "out"
    run_example(corpus, out, "--workers", "1")
    run_dir = str(out / DEFAULT_RUN_DIR_NAME)
    before = collect_status(run_dir)
    assert before["done"] == 12 and before["rows_in"] > 0 and before["funnel"]
    ledger = sorted((Path(run_dir) / "ledger").glob("*.jsonl"))
    lines = ledger[0].read_bytes().splitlines(keepends=True)
    with ledger[0].open("ab") as f:
        f.writelines(lines[: len(lines) // 2 + 1])  # records repeated, as by a redone window
        f.write(lines[-1][:25])  # and a torn last line
    after = collect_status(run_dir)
    for key in ("done", "failed", "pending", "rows_in", "rows_out"):
        assert after[key] == before[key], key
    # Every count of the funnel is the same; its seconds are float sums whose order differs when the file is
    # read again past a torn line, so the rounded figure may differ in its last digit.
    untimed = [{k: v for k, v in row.items() if k != "seconds"} for row in after["funnel"]]
    assert untimed == [{k: v for k, v in row.items() if k != "seconds"} for row in before["funnel"]]
    for a, b in zip(after["funnel"], before["funnel"], strict=True):
        assert a["seconds"] == pytest.approx(b["seconds"], abs=1e-3), a["stage"]
    assert [(s["shard"], s["done"], s["rows_in"]) for s in after["shards"]] == [
        (s["shard"], s["done"], s["rows_in"]) for s in before["shards"]
    ]
