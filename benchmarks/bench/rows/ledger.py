"""Rows 8a-8b: what the ledger costs per record written, and to load a million."""

from __future__ import annotations

import gc
import json
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from curator_slurm import LocalExecutor, ShardSpec
from curator_slurm.tasks import content_id

from ..context import Bench
from ..corpora import MARKER
from ..demo import run_demo_job
from ..harness import BenchError, Measure, Row, fresh_dir, progress, rotated


def synthetic_ledger(root: Path, records: int, writers: int, line: Callable[[str, int], str], row: str) -> Path:
    """``root/ledger``: ``records`` records in ``writers`` files, one per array task of an array (named as
    array tasks name theirs), generated once (``root`` holds a marker when complete) and reused. ``line(source
    id, writer)`` gives one record's JSON line; the source ids are content ids, as the partitioner gives."""
    ledger_dir = root / "ledger"
    if not (root / MARKER).exists():
        progress(f"{row}: writing a ledger of {records:,} records in {writers} files")
        shutil.rmtree(root, ignore_errors=True)
        ledger_dir.mkdir(parents=True)
        per_file = records // writers
        for w in range(writers):
            lines = [line(content_id(f"task-{w}-{i}"), w) for i in range(per_file)]
            (ledger_dir / f"1000_{w}-node01-{w}.jsonl").write_text("\n".join(lines) + "\n")
        (root / MARKER).touch()
    return ledger_dir


def bench_ledger(b: Bench) -> list[Row]:
    """Row 8: what the ledger costs: one durable record per source task, and loading a million."""
    from curator_slurm.runs.ledger import LedgerWriter, load_status

    n_write = 200 if b.quick else 2000
    corpus = b.corpus("base")
    per_task: list[float] = []
    for rep in range(b.repeat):
        progress(f"row 8a: demo job for the per-task baseline, repeat {rep + 1}/{b.repeat}")
        with fresh_dir(b.out("ledger-job")) as out:
            run = run_demo_job(LocalExecutor(workers=1), corpus, out)
        per_task.append(run.seconds / len(corpus.files) * 1e6)
    write_us: list[float] = []
    record = {"source": "", "status": "done", "outputs": ["/data/out/0123456789abcdef.parquet"], "rows_in": 1000,
              "rows_out": 800, "seconds": 0.05, "attempts": 1}  # fmt: skip
    for _ in range(b.repeat):
        with fresh_dir(b.out("ledger-write")) as out:
            # A done record's outputs are made durable with it (group commit): each lists a real, empty file.
            outputs = [out / f"{i:016x}.parquet" for i in range(n_write)]
            for path in outputs:
                path.touch()
            writer = LedgerWriter(str(out), ShardSpec.explicit(3, 16))
            start = time.perf_counter()
            for i, path in enumerate(outputs):
                writer.write({**record, "source": f"{i:016x}", "outputs": [str(path)]})
            writer.close()  # commits the last window
            write_us.append((time.perf_counter() - start) / n_write * 1e6)

    n_load, writers = (20_000, 20) if b.quick else (1_000_000, 1000)
    ledger_root = b.root / "ledgers" / f"r{n_load}-w{writers}"

    def line(source: str, w: int) -> str:
        return json.dumps({**record, "source": source, "shard": f"{w}/{writers}", "array_job_id": "1000",
                           "array_task_id": str(w), "host": "node01", "time": 1.0e9})  # fmt: skip

    ledger_dir = synthetic_ledger(ledger_root, n_load, writers, line, "row 8b")
    load_s: list[float] = []
    naive_s: list[float] = []
    for rep in range(b.repeat):
        for name in rotated(["ours", "naive"], rep):
            progress(f"row 8b: load with {name}, repeat {rep + 1}/{b.repeat}")
            gc.collect()
            start = time.perf_counter()
            if name == "ours":
                state = load_status(str(ledger_root))
                if len(state.done) != n_load:
                    raise BenchError(f"load_status found {len(state.done)} of {n_load} records")
                load_s.append(time.perf_counter() - start)
            else:
                done = set()
                for path in sorted(ledger_dir.iterdir()):
                    with open(path, encoding="utf-8") as f:
                        for line in f:
                            r = json.loads(line)
                            if r["status"] == "done":
                                done.add(r["source"])
                naive_s.append(time.perf_counter() - start)
    rate = n_load / statistics.median(load_s)
    return [
        Row("8a", f"ledger: one durable record per source task / demo job time per source task ({corpus.size})",
            Measure("record", "us", write_us), Measure("source task", "us", per_task), "report", 0.0,
            note=f"{statistics.median(write_us):,.0f} us per record, its output made durable and the record "
                 "committed by the driver"),
        Row("8b", f"ledger: load {n_load:,} records from {writers} files / a json.loads loop over them",
            Measure("load_status", "s", load_s), Measure("json.loads loop", "s", naive_s), "report", 0.0,
            note=f"load_status reads {rate:,.0f} records/s"),
    ]  # fmt: skip
