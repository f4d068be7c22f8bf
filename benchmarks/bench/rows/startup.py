"""Rows 4 and 14: the wall time of an array task with nothing to do, listing its input or reading its
shard of a planned manifest."""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curator_slurm import ShardSpec
from curator_slurm.runs.sharding import shard_of
from curator_slurm.tasks import FileGroupTask, content_id

from ..context import Bench
from ..demo import curate_cmd, demo_pipeline
from ..harness import BenchError, ChildRun, Measure, Row, fresh_dir, progress, rotated, run_child


def bench_empty_shard(b: Bench) -> list[Row]:
    """Row 4: the wall time of an array task that owns no source task, vs importing pyarrow.parquet."""
    corpus = b.corpus("one-file")
    count = 64
    task_id = FileGroupTask.from_paths([str(corpus.files[0])]).task_id
    owner = shard_of(task_id, count)
    index = next(i for i in range(count) if i != owner)
    env = {"CURATOR_NUM_SHARDS": str(count), "CURATOR_SHARD_INDEX": str(index)}
    empty: list[float] = []
    baseline: list[float] = []
    imports: list[float] = []  # context for the note: the framework's import alone
    sides: list[tuple[list[float], Callable[[Path], ChildRun]]] = [
        (empty, lambda out: run_child(curate_cmd(corpus.path, out), env)),
        (baseline, lambda out: run_child([sys.executable, "-c", "import pyarrow.parquet"])),
        (imports, lambda out: run_child([sys.executable, "-c", "import curator_slurm.stages"])),
    ]
    b.warm_children()
    for rep in range(b.micro_repeat):
        progress(f"row 4: repeat {rep + 1}/{b.micro_repeat}")
        for samples, fn in rotated(sides, rep):
            with fresh_dir(b.out("empty-shard")) as out:
                samples.append(fn(out).wall)
                wrote = list(out.glob("*.parquet"))
                if samples is empty and wrote:
                    raise BenchError(f"shard {index}/{count} was meant to get no work but wrote {wrote}")
    return [
        Row("4", f"array task with no work (shard {index}/{count} of a 1-file corpus) / import pyarrow.parquet, "
            "wall s", Measure("empty shard", "s", empty), Measure("import", "s", baseline), "<=", 2.0,
            note=f"`python -c 'import curator_slurm.stages'` alone takes {statistics.median(imports):.3f} s wall")
    ]  # fmt: skip


def planned_manifest(directory: Path, files: int, shards: int) -> tuple[float, list[str]]:
    """A manifest of ``files`` one-file source tasks (the files are not made) over ``shards`` shards, as
    `curator-slurm submit` would write for examples/curate.py over ``directory / "input"``: lognormal sizes
    around 20 kB, balanced by bytes. Returns the seconds write_manifest took and shard 0's task ids."""
    from curator_slurm.runs.manifest import SCHEMA, write_manifest

    root = str(directory / "input")
    rng = random.Random(14)
    rel = [f"d{i // 1000:04d}/part-{i:07d}.jsonl" for i in range(files)]
    sizes = [max(1, int(rng.lognormvariate(math.log(20_000), 1.0))) for _ in range(files)]
    columns = [
        [content_id(r) for r in rel],
        ["input"] * files,
        [[f"{root}/{r}"] for r in rel],
        [[n] for n in sizes],
        [json.dumps({"bytes": n, "root": root, "file_indices": [i]}) for i, n in enumerate(sizes)],
        sizes,
    ]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, SCHEMA, strict=True)]
    table = pa.Table.from_arrays(arrays, schema=SCHEMA)
    start = time.perf_counter()
    info = write_manifest(str(directory / "manifest"), table, shards, "balanced")
    seconds = time.perf_counter() - start
    return seconds, pq.read_table(info.shard_file(0), columns=["task_id"]).column("task_id").to_pylist()


def bench_manifest_startup(b: Bench) -> list[Row]:
    """Row 14: the wall time of an array task with nothing left to do whose shard comes from a manifest of
    1,000,000 files (1,000 shards of 1,000; its tasks are recorded done in the ledger, so it reads its
    shard file, checks the run directory and ends), vs row 4's task with no work that lists a 1-file corpus.
    Target: at most 2 s, whatever the size of the manifest (the task reads only its shard's file)."""
    from curator_slurm.runs.ledger import LedgerWriter
    from curator_slurm.runs.rundir import RunDir

    files = 20_000 if b.quick else 1_000_000
    shards = files // 1000
    with fresh_dir(b.out("manifest-startup")) as work:
        progress(f"row 14: writing a manifest of {files:,} files over {shards} shards (the files are not made)")
        write_seconds, mine = planned_manifest(work, files, shards)
        out = work / "out"
        run_dir = out / ".curator-run"
        RunDir(run_dir).claim(demo_pipeline(work / "input", out).fingerprint())
        ledger = LedgerWriter(str(run_dir), ShardSpec.explicit(0, shards))
        for task_id in mine:  # shard 0 finished earlier: this task start finds nothing left to do
            ledger.write({"source": task_id, "status": "done", "outputs": [], "rows_in": 0, "rows_out": 0})
        ledger.close()
        env = {
            "CURATOR_MANIFEST": str(work / "manifest"),
            "CURATOR_NUM_SHARDS": str(shards),
            "CURATOR_SHARD_INDEX": "0",
        }
        corpus = b.corpus("one-file")
        owner = shard_of(FileGroupTask.from_paths([str(corpus.files[0])]).task_id, 64)
        listing_env = {"CURATOR_NUM_SHARDS": "64", "CURATOR_SHARD_INDEX": str((owner + 1) % 64)}
        b.warm_children()
        # Untimed: writes sources.json once. The input directory does not exist, so a task that listed
        # it instead of loading the manifest would fail (and the bench with it).
        run_child(curate_cmd(work / "input", out), env)
        manifest: list[float] = []
        listing: list[float] = []
        sides: list[tuple[list[float], Callable[[], ChildRun]]] = [
            (manifest, lambda: run_child(curate_cmd(work / "input", out), env)),
            (listing, lambda: run_child(curate_cmd(corpus.path, work / "listing-out"), listing_env)),
        ]
        for rep in range(b.micro_repeat):
            progress(f"row 14: repeat {rep + 1}/{b.micro_repeat}")
            for samples, fn in rotated(sides, rep):
                samples.append(fn().wall)
        if list(out.glob("*.parquet")):
            raise BenchError("row 14: the task was meant to find nothing left to do but wrote outputs")
    return [
        Row("14", f"array task with nothing left to do, its shard from a {files:,}-file manifest ({shards:,} "
            "shards), wall s (value: A)", Measure("manifest", "s", manifest), Measure("1-file listing (row 4)", "s",
            listing), "<=", 2.0, value=statistics.median(manifest),
            note=f"writing the manifest at submit took {write_seconds:.1f} s ({files:,} tasks, balanced)")
    ]  # fmt: skip
