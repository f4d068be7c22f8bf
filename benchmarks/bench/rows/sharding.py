"""Rows 5-6: the shard filter's cost per source task, and how evenly the strategies fill shards."""

from __future__ import annotations

import gc
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import xxhash

from curator_slurm import ShardSpec
from curator_slurm.runs.plan import shard_loads
from curator_slurm.runs.sharding import select
from curator_slurm.stages import FilePartitioningStage
from curator_slurm.tasks import EmptyTask, Task, content_id

from ..context import Bench
from ..corpora import MARKER
from ..harness import BenchError, Measure, Row, progress, rotated


def bench_select(b: Bench) -> list[Row]:
    """Row 5: ns per source task of the shard filter vs ns of the hash call it cannot avoid.

    The value compares the fastest sample of each side, as ``timeit`` advises for timings this short:
    on a shared machine noise only ever adds time, and single samples here spread by 30-80 %."""
    n = 100_000 if b.quick else 1_000_000
    progress(f"row 5: building {n:,} source tasks")
    # Like the partitioner's FileGroupTasks (a content id, a size in metadata) without touching files.
    tasks: list[Task] = [
        Task(task_id=content_id(f"/data/corpus/part-{i:07d}.jsonl"), metadata={"bytes": 1_000_000 + i % 9973})
        for i in range(n)
    ]
    ids = [t.task_id.encode("utf-8") for t in tasks]
    spec = ShardSpec.explicit(index=7, count=1000)
    h = xxhash.xxh64_intdigest
    per_select, per_hash = [], []
    gc.collect()
    kept: list[Task] = []

    def time_select() -> None:
        nonlocal kept
        start = time.perf_counter_ns()
        kept = select(tasks, spec)
        per_select.append((time.perf_counter_ns() - start) / n)

    def time_hash() -> None:
        start = time.perf_counter_ns()
        for tid in ids:
            h(tid)
        per_hash.append((time.perf_counter_ns() - start) / n)

    repeat = b.select_repeat
    for rep in range(repeat):  # a fraction of a second each: more samples, alternating order
        progress(f"row 5: repeat {rep + 1}/{repeat}")
        for measure in rotated([time_select, time_hash], rep):
            measure()
        if not 0 < len(kept) < n:
            raise BenchError(f"select kept {len(kept)} of {n}")
    fastest = f"fastest of {repeat}: select {min(per_select):.0f} ns, xxh64 {min(per_hash):.0f} ns"
    return [
        Row("5", f"shard filter: select() ns per source task / one xxh64_intdigest call ({n:,} tasks)",
            Measure("select", "ns", per_select), Measure("xxh64", "ns", per_hash), "<=", 3.0,
            value=min(per_select) / min(per_hash), note=f"value from the {fastest} (medians in the table)")
    ]  # fmt: skip


def max_over_mean(ids: list[str], weights: Sequence[float], count: int, strategy: str) -> float:
    """Heaviest shard's weight over the mean shard's under ``strategy``, as `curator-slurm plan` reports it."""
    loads = [w for _, w in shard_loads([[i, w] for i, w in zip(ids, weights, strict=True)], count, strategy)]
    return max(loads) / (sum(loads) / count)


def bench_balance(b: Bench) -> list[Row]:
    """Row 6: max/mean shard weight, balanced and hash, on lognormal task weights (sigma 1.5)."""
    per_shard = 20
    rows = []
    for k, count in enumerate((16, 100, 1000)):
        rng = random.Random(0)
        weights = [rng.lognormvariate(0.0, 1.5) for _ in range(per_shard * count)]
        ids = [content_id(f"task-{i}") for i in range(len(weights))]
        figures = {name: max_over_mean(ids, weights, count, name) for name in ("balanced", "hash")}
        bound = max(1.0, max(weights) / (sum(weights) / count))
        balanced = Measure("balanced", "", [figures["balanced"]])
        rows.append(
            Row(
                f"6{'abc'[k]}",
                f"max/mean shard weight ÷ best possible, N={count}, {per_shard} lognormal(sigma=1.5) tasks/shard",
                balanced,
                Measure("hash", "", [figures["hash"]]),
                "<=",
                1.05,
                value=figures["balanced"] / bound,
                note=f"A and B are max/mean; no assignment of whole tasks goes below {bound:.3f} here (the largest "
                "task outweighs a mean shard), so the value is balanced's max/mean divided by that"
                if bound > 1.0
                else "",
            )
        )
    rows.append(bench_split_balance(b, per_shard))
    return rows


def sparse_lognormal_files(root: Path, count: int, sigma: float, median: int) -> Path:
    """``count`` JSONL-named sparse files (no data blocks, never read) with lognormal sizes: real
    files for the partitioner to list and cut, made in a second or two and reused."""
    path = root / f"sparse-lognormal-n{count}-s{sigma}-m{median}"
    if not (path / MARKER).exists():
        progress(f"row 6d: making {count:,} sparse files with lognormal sizes")
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        rng = random.Random(0)
        for i in range(count):
            with open(path / f"part-{i:06d}.jsonl", "wb") as f:
                f.truncate(max(1, round(median * rng.lognormvariate(0.0, sigma))))
        (path / MARKER).write_text("")
    return path


def bench_split_balance(b: Bench, per_shard: int) -> Row:
    """Row 6d: the remedy when whole files cannot be balanced: the partitioner cuts the large files
    (split_files, blocksize = the mean file size, so a piece is at most 1/20 of a mean shard) and the
    balanced strategy assigns the pieces. Real (sparse) files, listed and cut by FilePartitioningStage."""
    count = 100 if b.quick else 1000
    root = sparse_lognormal_files(b.root / "corpora", per_shard * count, 1.5, 1 << 20)
    sizes = [p.stat().st_size for p in root.glob("*.jsonl")]
    blocksize = sum(sizes) // len(sizes)
    figures = {}
    for name, split in (("whole files", False), ("split", True)):
        tasks = FilePartitioningStage(str(root), blocksize=blocksize if split else None, split_files=split).process(
            EmptyTask()
        )
        ids, weights = [t.task_id for t in tasks], [t.metadata["bytes"] for t in tasks]
        figures[name] = (max_over_mean(ids, weights, count, "balanced"), len(tasks))
    return Row(
        "6d",
        f"max/mean shard bytes, N={count}, {per_shard} lognormal(sigma=1.5) files/shard, split at the mean file size",
        Measure(f"split ({figures['split'][1]:,} tasks)", "", [figures["split"][0]]),
        Measure(f"whole files ({figures['whole files'][1]:,})", "", [figures["whole files"][0]]),
        "<=",
        1.05,
        value=figures["split"][0],
        note="JsonlReader(blocksize=..., split_files=True): files over blocksize become byte-range source tasks",
    )
