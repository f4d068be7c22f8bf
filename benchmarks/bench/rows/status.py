"""Row 16 (issue #19): ``curator-slurm status`` on the run directory of ten million source tasks."""

from __future__ import annotations

import inspect
import json
import re
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from curator_slurm import LocalExecutor
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME, RUN_FILE, SOURCES_FILE, source_record
from curator_slurm.tasks import content_id

from ..context import Bench
from ..corpora import MARKER
from ..demo import run_demo_job
from ..harness import ChildRun, Limits, Measure, Row, fresh_dir, progress, rotated, run_child

#: B side: the library's fast ledger reader (pyarrow's JSON parser, source and status only) on the same run.
LOAD_STATUS = "import sys; from curator_slurm.runs.ledger import load_status; load_status(sys.argv[1])"


def real_run_json(b: Bench) -> dict[str, Any]:
    """The run.json of the demo job on a one-file corpus: what a real run directory holds beside its ledger."""
    with fresh_dir(b.out("status-run")) as out:
        run_demo_job(LocalExecutor(workers=1), b.corpus("one-file"), out)
        return json.loads((out / DEFAULT_RUN_DIR_NAME / RUN_FILE).read_text())


def status_run_dir(b: Bench, records: int, shards: int) -> Path:
    """A run directory of ``records`` done source tasks of a ``shards``-task hash array: its ledger written
    directly in the real format by ``benchmarks/ledger_fixture.py`` (one partitioned file per shard, as
    ``LedgerWriter`` names them), sources.json from the same ids, run.json from a real run. The ledger is
    written once per version of the fixture and reused."""
    import ledger_fixture  # benchmarks/, on sys.path through run.py

    version = content_id(inspect.getsource(ledger_fixture))[:8]
    root = b.root / "ledgers" / f"status-r{records}-s{shards}-{version}"
    if not (root / MARKER).exists():
        progress(f"row 16: writing a ledger of {records:,} records for {shards:,} shards")
        shutil.rmtree(root, ignore_errors=True)
        ledger_fixture.write_ledger(str(root), records, shards)
        ids = [ledger_fixture.source_id(k) for k in range(records)]
        (root / SOURCES_FILE).write_text(json.dumps(source_record(ids)))
        (root / MARKER).touch()
    (root / RUN_FILE).write_text(json.dumps(real_run_json(b)))
    return root


def memory_limit() -> int:
    """At most 8 GiB, and at most half the memory available now: status on ten million records may need
    more than the machine has, and must not take it from everything else."""
    available = 16 << 30
    try:
        with open("/proc/meminfo") as f:
            available = next(int(x.split()[1]) * 1024 for x in f if x.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return min(8 << 30, available // 2)


def bench_status(b: Bench) -> list[Row]:
    """Row 16: the wall seconds of ``curator-slurm status RUN_DIR`` (a fresh process, as a user types it) on
    a run directory of 10,000,000 done source tasks from a 1,000-task hash array; beside it, the library's fast
    reader ``load_status`` on the same directory. No target: the figure is the record. Each child runs under
    a memory and a CPU limit (:func:`memory_limit`, 15 min): if status outgrows them, the row says so, with
    the seconds until it stopped. One sample of each when a sample takes over a minute."""
    records, shards = (20_000, 20) if b.quick else (10_000_000, 1000)
    run_dir = status_run_dir(b, records, shards)
    limits = Limits(memory=memory_limit(), cpu_seconds=900)
    b.warm_children()
    runs: dict[str, list[ChildRun]] = {"status": [], "load": []}
    commands = {
        "status": [sys.executable, "-m", "curator_slurm.cli", "status", str(run_dir)],
        "load": [sys.executable, "-c", LOAD_STATUS, str(run_dir)],
    }
    for rep in range(b.repeat):
        for name in rotated(list(commands), rep):
            progress(f"row 16: {name} on {records:,} records, repeat {rep + 1}/{b.repeat}")
            runs[name].append(run_child(commands[name], limits=limits, check=False))
        if max(r.wall for r in runs["status"]) > 60:
            break
    status = runs["status"][-1]
    notes = []
    for name, child in (("status", status), ("load_status", runs["load"][-1])):
        if child.rc != 0:
            error = (child.stderr.strip().splitlines() or [f"signal {-child.rc}"])[-1]
            notes.append(
                f"{name} did not finish (exit {child.rc}: {error}) under {limits.memory / 2**30:.1f} GiB of address "
                f"space and {limits.cpu_seconds} s of CPU; its figure is the time until it stopped"
            )
    if status.rc == 0:
        shown = re.search(r"(\d+) total, (\d+) done", status.stdout)
        if shown is None or int(shown.group(2)) != records:
            notes.append(f"status did not report {records:,} done: {status.stdout[:200]!r}")
    peak = max(r.maxrss for r in runs["status"])
    size = sum(p.stat().st_size for p in (run_dir / "ledger").iterdir())
    notes.append(f"status peak RSS {peak / 2**20:,.0f} MiB; the ledger holds {size / 1e9:.2f} GB")
    return [
        Row("16", f"curator-slurm status on {records:,} done source tasks ({shards:,} ledger files), wall s "
            "(value: A)", Measure("status", "s", [r.wall for r in runs["status"]]),
            Measure("load_status", "s", [r.wall for r in runs["load"]]), "report", 0.0,
            value=statistics.median(r.wall for r in runs["status"]), note="; ".join(notes))
    ]  # fmt: skip
