"""Rows 16s-16r, 17 and 18: watching a run. `status` on ten million done source tasks read through the ledger
files' summaries (row 16's fixture), what live progress costs a running task, and `report` on a million."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path

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


def bench_progress(b: Bench) -> list[Row]:
    """Row 17: the time live progress takes from the source tasks of the demo job (LocalExecutor(workers=1), its
    default interval of 10 s): every clock read after a stage's output and every file it writes, timed from
    inside, over the time of the source tasks. The note gives the same at an interval of 0 (a file per batch)."""
    from curator_slurm.runs import progress as published

    corpus = b.corpus("base")
    spent = {"s": 0.0, "writes": 0}
    real_tick, real_publish = published.TaskProgress.tick, published.Publisher.publish

    def tick(self: published.TaskProgress) -> None:
        start = time.perf_counter()
        real_tick(self)
        spent["s"] += time.perf_counter() - start

    def publish(self: published.Publisher) -> None:
        spent["writes"] += 1
        real_publish(self)

    shares: dict[str, list[float]] = {"10": [], "0": []}
    task_seconds: list[float] = []
    published.TaskProgress.tick, published.Publisher.publish = tick, publish  # type: ignore[method-assign]
    try:
        for rep in range(b.repeat):
            for interval in rotated(list(shares), rep):
                progress(f"row 17: demo job, progress every {interval} s, repeat {rep + 1}/{b.repeat}")
                spent.update(s=0.0, writes=0)
                os.environ["CURATOR_PROGRESS_SECONDS"] = interval
                with fresh_dir(b.out("progress-job")) as out:
                    run = run_demo_job(LocalExecutor(workers=1), corpus, out)
                shares[interval].append(spent["s"] / run.seconds)
                if interval == "10":
                    task_seconds.append(run.seconds)
    finally:
        published.TaskProgress.tick, published.Publisher.publish = real_tick, real_publish  # type: ignore[method-assign]
        os.environ.pop("CURATOR_PROGRESS_SECONDS", None)
    share = Measure("progress / task time", "", shares["10"])
    at_zero = statistics.median(shares["0"])
    return [
        Row("17", f"live progress: its time over the source tasks' time (demo job, {corpus.size}, interval 10 s)",
            share, Measure("demo job", "s", task_seconds), "<=", 0.01, value=share.median,
            note=f"at interval 0 (a file written at every batch): {100 * at_zero:.2f} % of the time"),
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
            Measure("status", "s", [r.wall for r in runs["status"]]), "<=", 30.0, value=wall.median,
            note=f"page of {size / 1e6:.1f} MB (plotly.js inside), peak RSS "
                 f"{max(r.maxrss for r in runs['report']) / 2**20:,.0f} MiB"),
    ]  # fmt: skip
