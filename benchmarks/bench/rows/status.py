"""Row 16 (issue #19): ``curator-slurm status`` on the run directory of ten million source tasks."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from curator_slurm import LocalExecutor
from curator_slurm.runs.ledger import DEFAULT_RUN_DIR_NAME, RUN_FILE, SOURCES_FILE, iter_records, source_record
from curator_slurm.tasks import content_id

from ..context import Bench
from ..demo import run_demo_job
from ..harness import ChildRun, Limits, Measure, Row, fresh_dir, progress, rotated, run_child
from .ledger import synthetic_ledger

#: The fields of a done record that differ from one source task to the next, with a placeholder each.
_VARYING = {
    "source": "@source@",
    "outputs": ["@output@"],
    "shard": "@shard@",
    "job_id": "@job@",
    "array_job_id": "1000",
    "array_task_id": "@task@",
    "time": "@time@",
}
#: Fields of the real record that change from one bench run to the next: fixed, so the directory is reused.
_FIXED = {"host": "node01", "pid": 4242, "seconds": 0.05}
#: B side: the library's fast ledger reader (pyarrow's JSON parser, source and status only) on the same run.
LOAD_STATUS = "import sys; from curator_slurm.runs.ledger import load_status; load_status(sys.argv[1])"


def record_template(record: dict[str, Any]) -> str:
    """``record`` (a done record a real run wrote) as a %-format string over its varying fields: a synthetic
    record has the real one's fields and values, only its ids, shard, job and time differ."""
    fixed = {k: v for k, v in _FIXED.items() if k in record}
    text = json.dumps({**record, **fixed, **_VARYING}).replace("%", "%%")
    for name in ("source", "output", "shard", "job", "task"):
        text = text.replace(f'"@{name}@"', f'"%({name})s"')
    return text.replace('"@time@"', "%(time).3f")


def real_run(b: Bench) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run.json and a done record of the demo job on a one-file corpus: a real run directory, so the
    synthetic one has whatever a run writes today."""
    with fresh_dir(b.out("status-template")) as out:
        run_demo_job(LocalExecutor(workers=1), b.corpus("one-file"), out)
        run_dir = out / DEFAULT_RUN_DIR_NAME
        run = json.loads((run_dir / RUN_FILE).read_text())
        done = next(r for r in iter_records(str(run_dir)) if r["status"] == "done")
    return run, done


def status_run_dir(b: Bench, records: int, writers: int) -> Path:
    """A run directory of ``records`` done source tasks over an array of ``writers`` tasks, written directly
    in the ledger format (run.json and the record shape from a real run; sources.json from the ids); the
    ledger is written once per record shape and reused."""
    run, done = real_run(b)
    template = record_template(done)
    root = b.root / "ledgers" / f"status-r{records}-w{writers}-{content_id(template)[:8]}"
    outputs = root.parent / "outputs"

    def line(source: str, w: int) -> str:
        values = {"source": source, "output": f"{outputs}/{source}.parquet", "shard": f"{w}/{writers}",
                  "job": str(1001 + w), "task": str(w), "time": 1.8e9 + w * 60.0}  # fmt: skip
        return template % values

    synthetic_ledger(root, records, writers, line, "row 16")
    (root / RUN_FILE).write_text(json.dumps(run))  # this run's fingerprint (it names this run's output)
    if not (root / SOURCES_FILE).exists():
        per_file = records // writers
        ids = [content_id(f"task-{w}-{i}") for w in range(writers) for i in range(per_file)]
        (root / SOURCES_FILE).write_text(json.dumps(source_record(ids)))
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
    a run directory of 10,000,000 done source tasks from a 1,000-task array; beside it, the library's fast
    reader ``load_status`` on the same directory. No target: the figure is the record. Each child runs under
    a memory and a CPU limit (:func:`memory_limit`, 15 min): if status outgrows them, the row says so, with
    the seconds until it stopped. One sample of each when a sample takes over a minute."""
    records, writers = (20_000, 20) if b.quick else (10_000_000, 1000)
    run_dir = status_run_dir(b, records, writers)
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
        Row("16", f"curator-slurm status on {records:,} done source tasks ({writers:,} ledger files), wall s "
            "(value: A)", Measure("status", "s", [r.wall for r in runs["status"]]),
            Measure("load_status", "s", [r.wall for r in runs["load"]]), "report", 0.0,
            value=statistics.median(r.wall for r in runs["status"]), note="; ".join(notes))
    ]  # fmt: skip
