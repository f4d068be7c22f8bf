"""Watching a run at its seams, through the CLI on real processes: a source task whose one batch sits in a slow
stage is listed as running with its documents read (the timer thread publishes); a frozen process (SIGSTOP) is
flagged as not progressing; `status` polled through a `local` run of a workflow never fails at a phase change;
`status --watch` waits for a run that has not started yet."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from curator_slurm.cli.commands import main
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.dupcorpus import make_dup_corpus
from support.helpers import REPO, clean_env

SLOW = REPO / "tests" / "pipelines" / "slow.py"
DEDUP = REPO / "examples" / "dedup.py"
#: The publication interval of the runs watched here (short: the timer thread's, not a speed assertion).
INTERVAL = "0.5"


def _corpus(root: Path, docs: int = 300) -> Path:
    root.mkdir(parents=True)
    rows = "".join(json.dumps({"n": i, "text": f"document {i} " * 10}) + "\n" for i in range(docs))
    (root / "one.jsonl").write_text(rows)
    return root


def _slow(corpus: Path, out: Path, sleep: float) -> subprocess.Popen[str]:
    """One source task read as one batch, held ``sleep`` seconds by the slow stage."""
    env = clean_env({"CURATOR_PROGRESS_SECONDS": INTERVAL})
    cmd = [sys.executable, str(SLOW), "--input", str(corpus), "--output", str(out), "--sleep", str(sleep)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _status(target: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["status", str(target), *args])
    return code, out.getvalue()


def _until(out: Path, predicate: Any, proc: subprocess.Popen[str], deadline: float = 120) -> dict[str, Any] | None:
    """`status OUT --json` again and again until ``predicate(data)`` holds (the data), or the run ends (None)."""
    stop = time.monotonic() + deadline
    while proc.poll() is None and time.monotonic() < stop:
        if (out / DEFAULT_RUN_DIR_NAME / "run.json").exists():
            data = json.loads(_status(out, "--json")[1])
            if predicate(data):
                return data
        time.sleep(0.1)
    return None


def test_a_single_batch_in_a_slow_stage_is_listed_running_with_its_documents_read(tmp_path: Path) -> None:
    """The reader hands its one batch of 300 documents to a stage that holds it 8 s: before the task ends,
    `status` lists the process running it with the 300 documents read (published by the timer thread; at batch
    boundaries only, the file would say 0 until the end); then the task is done once and nothing runs."""
    corpus, out = _corpus(tmp_path / "in"), tmp_path / "out"
    proc = _slow(corpus, out, sleep=8)
    seen = _until(out, lambda d: d["done"] == 0 and any(e["docs_in"] == 300 for e in d["running"]), proc)
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert seen is not None, "the running task never showed its documents read before it ended"
    (entry,) = seen["running"]
    assert entry["pid"] == proc.pid and entry["progressing"] is True and entry["source_task"]
    code, text = _status(out, "--json")
    data = json.loads(text)
    assert code == 0 and data["done"] == 1 and data["running"] == [] and data["rows_out"] == 300


def test_a_frozen_process_is_flagged_not_progressing(tmp_path: Path) -> None:
    corpus, out = _corpus(tmp_path / "in"), tmp_path / "out"
    proc = _slow(corpus, out, sleep=120)
    try:
        live = _until(out, lambda d: any(e["docs_in"] == 300 for e in d["running"]), proc)
        assert live is not None and live["running"][0]["progressing"] is True
        os.kill(proc.pid, signal.SIGSTOP)
        frozen = _until(out, lambda d: d["running"] and not d["running"][0]["progressing"], proc)
        assert frozen is not None, "a stopped process was never flagged"
        (entry,) = frozen["running"]
        assert entry["pid"] == proc.pid and entry["updated_seconds_ago"] > 2 * float(INTERVAL)
        _, text = _status(out)
        assert "1 not progressing" in text and "NOT PROGRESSING" in text
        os.kill(proc.pid, signal.SIGCONT)
        thawed = _until(out, lambda d: d["running"] and d["running"][0]["progressing"], proc)
        assert thawed is not None, "a process that goes on again is progressing again"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_status_polled_through_a_local_workflow_run_never_fails(tmp_path: Path) -> None:
    """`status OUT` every 0.3 s while `curator-slurm local` runs the three phases of the dedup workflow, from the
    moment the workflow exists until it ends: never exit 2 (a phase directory made before its run.json shows as
    starting); at the end, every phase is there and complete."""
    make_dup_corpus(tmp_path / "in", files=6, docs=30)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "curator_slurm.cli", "local", str(DEDUP), "--shards", "3", "--logs",
           str(tmp_path / "logs"), "--", "--input", str(tmp_path / "in"), "--output", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = out / ".curator-work" / ".curator-run"
    codes: list[tuple[int, str]] = []
    while proc.poll() is None:
        if (root / "workflow.json").exists():
            codes.append(_status(out))
        time.sleep(0.3)
    assert proc.wait() == 0, proc.stderr
    assert codes, "the run ended before status could look"
    assert [text for code, text in codes if code == 2] == []
    code, text = _status(out, "--json")
    data = json.loads(text)
    assert code == 0 and list(data["phases"]) == ["hash", "find", "write"] and data["starting"] == []
    assert all(s["pending"] == 0 and s["failed"] == 0 for s in data["phases"].values())


def test_a_phase_directory_without_its_run_shows_as_starting(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "workflow.json").write_text(json.dumps({"workflow": "w", "phases": ["one", "two"]}))
    (root / "one").mkdir()  # made, its run.json not written yet
    code, text = _status(root)  # nothing of it runs here: stopped (1), not a usage error (2)
    assert code == 1 and "== phase one: starting" in text and "== phase two: not started" in text
    code, as_json = _status(root, "--json")
    assert code == 1 and json.loads(as_json)["starting"] == ["one"]


def test_watch_waits_for_a_run_that_does_not_exist_yet(tmp_path: Path) -> None:
    """`status OUT --watch` before OUT exists says it waits, then follows the run once it starts, to its end."""
    corpus, out = _corpus(tmp_path / "in", docs=20), tmp_path / "out"
    watch = subprocess.Popen(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(out), "--watch", "0.3"],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    assert watch.poll() is None, watch.communicate()
    run = _slow(corpus, out, sleep=0.5)
    assert run.wait(timeout=120) == 0, run.stderr.read() if run.stderr else ""
    stdout, stderr = watch.communicate(timeout=120)
    assert watch.returncode == 0, stdout + stderr
    assert f"waiting for a run in {out}" in stderr and stderr.count("waiting for a run") == 1
    assert "source tasks: 1 total, 1 done" in stdout
