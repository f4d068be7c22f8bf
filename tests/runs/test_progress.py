"""Watching a run while it goes, through the CLI on real processes: a large source task read a batch at a time
shows its documents growing in `status` before it ends; a killed process shows dead; the seconds of the stages
add up to the task's; `status --watch` redraws in place on a terminal; the straggler rule."""

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

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator_slurm.cli.commands import main
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.progress_read import STRAGGLER_FACTOR, mark_stragglers
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import REPO, clean_env

SLOW = REPO / "tests" / "pipelines" / "slow.py"


def _corpus(root: Path, docs: int = 120) -> Path:
    """One JSONL file of ``docs`` documents: one source task."""
    root.mkdir(parents=True)
    rows = "".join(json.dumps({"n": i, "text": f"document {i} " * 20}) + "\n" for i in range(docs))
    (root / "big.jsonl").write_text(rows)
    return root


def _start(corpus: Path, out: Path, *args: str) -> subprocess.Popen[str]:
    env = clean_env({"CURATOR_PROGRESS_SECONDS": "0"})
    cmd = [sys.executable, str(SLOW), "--input", str(corpus), "--output", str(out), *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def status(target: Path, *args: str) -> tuple[int, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(target), *args],
        capture_output=True, text=True, env=clean_env(), timeout=120,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if "--json" in args else proc.stdout


def quick_status(target: Path) -> dict[str, Any]:
    """`curator-slurm status TARGET --json`, run in this process (a new interpreter per look would miss a
    task that ends within a second or two on a busy machine)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["status", str(target), "--json"])
    return json.loads(out.getvalue())


def _watch_running(out: Path, proc: subprocess.Popen[str], until: int, deadline: float = 120) -> list[dict]:
    """`status OUT --json` again and again while ``proc`` runs, until a running entry has ``until`` docs in;
    each sample is (done, the running entries)."""
    seen: list[dict] = []
    stop = time.monotonic() + deadline
    while proc.poll() is None and time.monotonic() < stop:
        if (out / DEFAULT_RUN_DIR_NAME / "run.json").exists():
            data = quick_status(out)
            seen.append(data)
            if any(e["docs_in"] >= until for e in data["running"]):
                break
        time.sleep(0.1)
    return seen


def test_a_large_source_task_shows_its_documents_growing_before_it_ends(tmp_path: Path) -> None:
    """One source task of 120 documents read 20 at a time, each batch held 0.5 s: `status OUT --json` lists the
    process running it with docs_in growing while the ledger records nothing done; afterwards nothing runs, the
    task is done once, and its six batches are one file."""
    corpus, out = _corpus(tmp_path / "in"), tmp_path / "out"
    proc = _start(corpus, out, "--sleep", "0.5", "--batch-rows", "20")
    seen = _watch_running(out, proc, until=60)
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr
    growing = [(s["done"], e) for s in seen for e in s["running"]]
    assert growing, "status never showed the running task"
    before_end = sorted({e["docs_in"] for done, e in growing if done == 0 and e["docs_in"]})
    assert len(before_end) >= 2 and before_end[-1] < 120, before_end
    entry = growing[-1][1]
    for key in ("shard", "host", "pid", "source_task", "docs_in", "docs_out", "seconds", "docs_per_second"):
        assert key in entry
    assert entry["straggler"] is False and entry["pid"] == proc.pid and entry["shard"] == "0/1"
    (record,) = list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))
    assert record["status"] == "done" and entry["source_task"] == record["source"]
    code, after = status(out, "--json")
    assert code == 0 and after["running"] == [] and after["dead"] == [] and after["done"] == 1
    names = sorted(p.name for p in out.glob("*.parquet"))
    assert names == [f"{record['source']}.parquet"], "six batches, one file for the source task"
    assert sum(pq.read_table(out / n).num_rows for n in names) == 120


def test_a_killed_process_is_shown_dead_with_what_it_was_doing(tmp_path: Path) -> None:
    corpus, out = _corpus(tmp_path / "in"), tmp_path / "out"
    proc = _start(corpus, out, "--sleep", "0.5", "--batch-rows", "20")
    seen = _watch_running(out, proc, until=20)
    assert seen and seen[-1]["running"], "status never showed the running task"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    code, data = status(out, "--json")
    assert code == 1 and data["stalled"] and data["running"] == []
    (dead,) = data["dead"]
    assert dead["pid"] == proc.pid and dead["docs_in"] >= 20 and dead["source_task"]
    _, text = status(out)
    assert f"dead: {dead['host']}:{proc.pid}" in text and "killed" in text
    rerun = _start(corpus, out, "--sleep", "0.5", "--batch-rows", "20")  # the resume prunes what it left
    rerun.wait(timeout=120)
    code, data = status(out, "--json")
    assert rerun.returncode == 0 and code == 0 and data["dead"] == [] and data["done"] == 1


def test_a_killed_worker_is_shown_dead_while_its_driver_goes_on(tmp_path: Path) -> None:
    corpus, out = tmp_path / "in", tmp_path / "out"
    _corpus(corpus)
    (corpus / "big.jsonl").rename(corpus / "a.jsonl")
    _corpus(tmp_path / "in2")
    (tmp_path / "in2" / "big.jsonl").rename(corpus / "b.jsonl")
    proc = _start(corpus, out, "--sleep", "0.5", "--batch-rows", "20", "--workers", "2")
    seen = _watch_running(out, proc, until=20)
    worker = next(e for e in seen[-1]["running"] if e["role"] == "worker" and e["docs_in"] >= 20)
    os.kill(worker["pid"], signal.SIGKILL)
    dead: list[dict] = []
    for _ in range(100):
        dead = quick_status(out)["dead"]
        if any(d["pid"] == worker["pid"] for d in dead) or proc.poll() is not None:
            break
        time.sleep(0.1)
    # The pool is broken: the driver ends the other worker too (its task is done again): dead as well.
    killed = next(d for d in dead if d["pid"] == worker["pid"])
    assert killed["source_task"] == worker["source_task"] and killed["docs_in"] >= worker["docs_in"]
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr
    _, data = status(out, "--json")
    assert data["done"] == 2 and data["dead"] == [], "the driver removed what its dead worker left at its end"


def test_the_seconds_of_the_stages_add_up_to_the_task(tmp_path: Path) -> None:
    corpus, out = _corpus(tmp_path / "in", docs=90), tmp_path / "out"
    proc = _start(corpus, out, "--sleep", "0.2", "--batch-rows", "30")
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr
    (record,) = list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))
    names = [entry[0] for entry in record["stages"]]
    seconds = dict(zip(names, record["stage_seconds"], strict=True))
    assert seconds["slow_stage"] >= 0.6, "three batches held 0.2 s each"
    assert abs(sum(seconds.values()) - record["seconds"]) <= 0.1 * record["seconds"] + 0.05, (seconds, record)
    _, data = status(out, "--json")
    assert {row["stage"]: row["seconds"] for row in data["funnel"]} == pytest.approx(seconds, abs=1e-3)
    _, text = status(out)
    assert "time per stage" in text and "slow_stage" in text.split("time per stage")[1]


def test_watch_redraws_in_place_on_a_terminal(tmp_path: Path) -> None:
    import pty

    corpus, out = _corpus(tmp_path / "in"), tmp_path / "out"
    proc = _start(corpus, out, "--sleep", "0.4", "--batch-rows", "20")
    _watch_running(out, proc, until=1)
    main, child = pty.openpty()
    watch = subprocess.Popen(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(out), "--watch", "0.3"],
        stdout=child, stderr=child, env=clean_env(), close_fds=True,
    )  # fmt: skip
    os.close(child)
    screen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the watch ended: its terminal is closed
            break
        if not chunk:
            break
        screen += chunk
    watch.wait(timeout=60)
    proc.wait(timeout=60)
    os.close(main)
    assert watch.returncode == 0
    assert screen.count(b"\x1b[H\x1b[2J") >= 2, "redrawn, not printed one under another"
    assert b"running: 1 process" in screen


@given(
    done_median=st.floats(0.01, 1000),
    elapsed=st.lists(st.floats(0, 10_000), min_size=1, max_size=8),
    interval=st.floats(0, 60),
)
def test_a_straggler_has_run_three_times_the_typical_task_and_two_intervals(
    done_median: float, elapsed: list[float], interval: float
) -> None:
    running = [{"seconds": s, "interval": interval} for s in elapsed]
    mark_stragglers(running, done_median)
    for e in running:
        assert e["straggler"] == (e["seconds"] > max(STRAGGLER_FACTOR * done_median, 2 * interval))
    mark_stragglers(running, None)  # no done tasks yet: the running ones' median, when there are 3 or more
    if len(running) < 3:
        assert not any(e["straggler"] for e in running)
