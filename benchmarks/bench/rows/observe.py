"""Rows 16s-16r, 16w, 17 and 18: watching a run. `status` on ten million done source tasks read through the ledger
files' summaries (row 16's fixture), `status` on a workflow of 10,000 array tasks, what live progress and stats
cost a running task, and `report` on a million."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from curator_slurm import LocalExecutor

from ..context import Bench
from ..corpora import MARKER
from ..demo import run_demo_job
from ..harness import ChildRun, Limits, Measure, Row, fresh_dir, progress, rotated, run_child
from .status import memory_limit, status_run_dir

IMPORT_CLI = "import curator_slurm.cli.commands"


def summarised_run_dir(b: Bench, records: int, shards: int) -> Path:
    """Row 16's run directory with the summaries its writers would have kept: its ledger files hard-linked (no
    second copy of the records), ``ledger-summaries/`` written by the writers' own code. Made once, reused."""
    import ledger_fixture  # benchmarks/, on sys.path through run.py

    source = status_run_dir(b, records, shards)
    root = source.with_name(source.name + "-summarised")
    if not (root / MARKER).exists():
        progress(f"row 16s: summarising a ledger of {records:,} records (the writers' SummaryKeeper)")
        shutil.rmtree(root, ignore_errors=True)
        (root / "ledger").mkdir(parents=True)
        for path in (source / "ledger").iterdir():
            os.link(path, root / "ledger" / path.name)
        for name in ("run.json", "sources.json"):
            shutil.copy(source / name, root / name)
        ledger_fixture.write_summaries(str(root))
        (root / MARKER).touch()
    return root


def bench_status_summaries(b: Bench) -> list[Row]:
    """Rows 16s and 16r: `curator-slurm status RUN_DIR` (a fresh process, as a user types it) on row 16's ten million
    done source tasks with their ledger files' summaries: wall seconds (target <= 5) and peak RSS (target <= 300
    MiB); beside it, the interpreter importing the command (the floor of any `status`)."""
    records, shards = (20_000, 20) if b.quick else (10_000_000, 1000)
    run_dir = summarised_run_dir(b, records, shards)
    limits = Limits(memory=memory_limit(), cpu_seconds=900)
    b.warm_children()
    commands = {
        "status": [sys.executable, "-m", "curator_slurm.cli", "status", str(run_dir)],
        "import": [sys.executable, "-c", IMPORT_CLI],
    }
    runs: dict[str, list[ChildRun]] = {k: [] for k in commands}
    for rep in range(b.repeat):
        for name in rotated(list(commands), rep):
            progress(f"row 16s: {name} on {records:,} summarised records, repeat {rep + 1}/{b.repeat}")
            runs[name].append(run_child(commands[name], limits=limits))
    shown = runs["status"][-1].stdout
    note = "" if f"{records} done" in shown else f"status did not report {records:,} done: {shown[:200]!r}"
    wall = Measure("status", "s", [r.wall for r in runs["status"]])
    rss = Measure("status peak RSS", "B", [float(r.maxrss) for r in runs["status"]])
    return [
        Row("16s", f"curator-slurm status on {records:,} done source tasks with summaries ({shards:,} ledger files), "
            "wall s (value: A)", wall, Measure("import the CLI", "s", [r.wall for r in runs["import"]]), "<=", 5.0,
            value=wall.median, note=note),
        Row("16r", "the same status's peak RSS, MiB (value: A)", rss,
            Measure("import the CLI", "B", [float(r.maxrss) for r in runs["import"]]), "<=", 300.0,
            value=rss.median / 2**20),
    ]  # fmt: skip


def workflow_run_dir(b: Bench, phases: int, records: int, shards: int) -> Path:
    """A workflow's run directory of ``phases`` phases, each a ``shards``-task array that did ``records`` source
    tasks: row 16s's summarised ledger (hard-linked) in every phase, and one stats file per array task (what
    each task's process writes). Made once, reused."""
    source = summarised_run_dir(b, records, shards)
    root = b.root / "ledgers" / f"workflow-p{phases}-r{records}-s{shards}"
    if not (root / MARKER).exists():
        progress(f"row 16w: a workflow of {phases} phases x {shards:,} array tasks")
        shutil.rmtree(root, ignore_errors=True)
        names = [f"phase{k}" for k in range(phases)]
        for name in names:
            phase = root / name
            for sub in ("ledger", "ledger-summaries", "stats"):
                (phase / sub).mkdir(parents=True)
            for sub in ("ledger", "ledger-summaries"):
                for path in (source / sub).iterdir():
                    os.link(path, phase / sub / path.name)
            for file in ("run.json", "sources.json"):
                shutil.copy(source / file, phase / file)
            for i in range(shards):
                stage = {"stage": "score_filter", "tasks": records // shards, "docs_in": 20, "docs_out": 17,
                         "seconds": 0.03, "length_log2": [0] * 10 + [3, 7, 9, 1], "token_log2": []}  # fmt: skip
                data = {"version": 1, "host": f"node{i % 100:03d}", "pid": 10000 + i, "shard": f"{i}/{shards}",
                        "job": f"7000_{i}", "tasks": records // shards, "seconds": 0.03, "stages": [stage]}  # fmt: skip
                (phase / "stats" / f"node{i % 100:03d}-{10000 + i}.json").write_text(json.dumps(data))
        (root / "workflow.json").write_text(json.dumps({"workflow": "bench", "phases": names, "documents": names}))
        (root / MARKER).touch()
    return root


def bench_workflow_status(b: Bench) -> list[Row]:
    """Row 16w: `curator-slurm status` (a fresh process) on a workflow of 4 phases x 2,500 array tasks (10,000
    array tasks, each with its ledger file, summary and stats file; 25,000 source tasks a phase): wall seconds
    (target <= 2), beside importing the command."""
    phases, records, shards = (4, 2_000, 20) if b.quick else (4, 25_000, 2_500)
    run_dir = workflow_run_dir(b, phases, records, shards)
    b.warm_children()
    commands = {
        "status": [sys.executable, "-m", "curator_slurm.cli", "status", str(run_dir)],
        "import": [sys.executable, "-c", IMPORT_CLI],
    }
    runs: dict[str, list[ChildRun]] = {k: [] for k in commands}
    for rep in range(b.repeat):
        for name in rotated(list(commands), rep):
            progress(f"row 16w: {name} on a workflow of {phases * shards:,} array tasks, repeat {rep + 1}/{b.repeat}")
            runs[name].append(run_child(commands[name]))
    shown = runs["status"][-1].stdout
    note = (
        "" if shown.startswith("workflow: ") else f"status did not start with the workflow's numbers: {shown[:200]!r}"
    )
    wall = Measure("status", "s", [r.wall for r in runs["status"]])
    return [
        Row("16w", f"curator-slurm status on a workflow of {phases} phases x {shards:,} array tasks "
            f"({phases * records:,} done source tasks, a stats file per task), wall s (value: A)", wall,
            Measure("import the CLI", "s", [r.wall for r in runs["import"]]), "<=", 2.0, value=wall.median, note=note),
    ]  # fmt: skip


def bench_progress(b: Bench) -> list[Row]:
    """Row 17: the time live progress and stats take from the source tasks of the demo job (LocalExecutor(workers=1),
    its default interval of 10 s): the clock reads after a stage's output, the progress files written (by the task
    and by the timer thread), the length distributions of every stage's outputs and the stats file, timed from
    inside (the outermost call only), over the time of the source tasks. The note gives the same at an interval of
    0 (a progress file per batch, a stats file per task)."""
    import threading

    from curator_slurm.backends import adapter
    from curator_slurm.runs import progress as published

    corpus = b.corpus("base")
    spent = {"s": 0.0}
    depth = threading.local()

    def timed(fn: Any, thread_only: bool = False) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            outer = not getattr(depth, "n", 0) and (not thread_only or threading.current_thread() is not main)
            depth.n = getattr(depth, "n", 0) + 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth.n -= 1
                if outer:
                    spent["s"] += time.perf_counter() - start

        return wrapper

    main = threading.main_thread()
    patched = {(published.TaskProgress, name): getattr(published.TaskProgress, name)
               for name in ("begin", "tick", "end", "count", "_publish")}  # fmt: skip
    patched[(adapter, "note_output")] = adapter.note_output
    shares: dict[str, list[float]] = {"10": [], "0": []}
    task_seconds: list[float] = []
    for (owner, name), real in patched.items():
        setattr(owner, name, timed(real, thread_only=name == "_publish"))
    try:
        for rep in range(b.repeat):
            for interval in rotated(list(shares), rep):
                progress(f"row 17: demo job, progress every {interval} s, repeat {rep + 1}/{b.repeat}")
                spent.update(s=0.0)
                os.environ["CURATOR_PROGRESS_SECONDS"] = interval
                with fresh_dir(b.out("progress-job")) as out:
                    run = run_demo_job(LocalExecutor(workers=1), corpus, out)
                shares[interval].append(spent["s"] / run.seconds)
                if interval == "10":
                    task_seconds.append(run.seconds)
    finally:
        for (owner, name), real in patched.items():
            setattr(owner, name, real)
        os.environ.pop("CURATOR_PROGRESS_SECONDS", None)
    share = Measure("progress+stats / task time", "", shares["10"])
    at_zero = statistics.median(shares["0"])
    return [
        Row("17", f"live progress and stats: their time over the source tasks' time (demo job, {corpus.size}, "
            "interval 10 s)", share, Measure("demo job", "s", task_seconds), "<=", 0.01, value=share.median,
            note=f"at interval 0 (a progress file at every batch, a stats file per task): {100 * at_zero:.2f} % of "
                 "the time"),
    ]  # fmt: skip


def bench_report(b: Bench) -> list[Row]:
    """Row 18: `curator-slurm report RUN_DIR -o page.html` on a run of a million done source tasks (row 16's
    fixture at that size, with summaries): wall seconds, beside `status` on the same run."""
    records, shards = (20_000, 20) if b.quick else (1_000_000, 1000)
    run_dir = summarised_run_dir(b, records, shards)
    b.warm_children()
    with fresh_dir(b.out("report")) as out:
        commands = {
            "report": [sys.executable, "-m", "curator_slurm.cli", "report", str(run_dir), "-o", str(out / "r.html")],
            "status": [sys.executable, "-m", "curator_slurm.cli", "status", str(run_dir)],
        }
        runs: dict[str, list[ChildRun]] = {k: [] for k in commands}
        for rep in range(b.repeat):
            for name in rotated(list(commands), rep):
                progress(f"row 18: {name} on {records:,} records, repeat {rep + 1}/{b.repeat}")
                runs[name].append(run_child(commands[name]))
        size = (out / "r.html").stat().st_size
    wall = Measure("report", "s", [r.wall for r in runs["report"]])
    return [
        Row("18", f"curator-slurm report on {records:,} done source tasks, wall s (value: A)", wall,
            Measure("status", "s", [r.wall for r in runs["status"]]), "<=", 5.0, value=wall.median,
            note=f"page of {size / 1e6:.1f} MB (plotly.js inside), peak RSS "
                 f"{max(r.maxrss for r in runs['report']) / 2**20:,.0f} MiB"),
    ]  # fmt: skip
