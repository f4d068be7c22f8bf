"""Rows st1-st2: takeover of a straggler's work, a 4-shard local array with and without it."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import shard_of

from ..context import Bench
from ..corpora import CorpusSpec, ensure_corpus
from ..harness import BenchError, ChildRun, Measure, Row, fresh_dir, progress, rotated, run_child

JOB = Path(__file__).resolve().parents[1] / "straggler_job.py"
SHARDS = 4


def _array(corpus: Path, out: Path, slow: float, steal: bool) -> ChildRun:
    """`curator-slurm local` of the straggler job: 4 shards at once (as 4 array tasks would run), hash strategy."""
    cmd = [sys.executable, "-m", "curator_slurm.cli", "local", str(JOB), "--shards", str(SHARDS), "--parallel",
           str(SHARDS), "--strategy", "hash", "--logs", str(out.parent / f"{out.name}-logs"),
           *([] if steal else ["--no-steal"]), "--", str(corpus), str(out), f"{slow:g}", str(SHARDS)]  # fmt: skip
    return run_child(cmd)


def _check(out: Path, files: int) -> tuple[int, int]:
    """Every source task done exactly once; how many were taken over, and how many shard 0 owns."""
    done = [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    if len(done) != files or len({r["source"] for r in done}) != files:
        raise BenchError(f"{len(done)} done records for {files} source tasks in {out}")
    return sum(1 for r in done if "taken_from" in r), sum(1 for r in done if shard_of(r["source"], SHARDS) == 0)


def bench_takeover(b: Bench) -> list[Row]:
    """Row st1: a 4-shard array whose shard 0 has slow pages (its tasks take about ten times the others'), wall
    with takeover over wall without, target <= 0.6. Row st2: the same array without slow pages, CPU seconds of
    every process with takeover over without (what claims and the search for work cost), target <= 1.03."""
    files = 16 if b.quick else 48
    corpus = ensure_corpus(b.root / "corpora", CorpusSpec(files=files, docs_per_file=b.docs_per_file, seed=7))
    slow = 0.0002 if b.quick else 0.001  # per document: shard 0's tasks stall ~1 s each (1000 documents)
    b.warm_children()
    walls: dict[tuple[float, bool], list[float]] = {}
    cpus: dict[tuple[float, bool], list[float]] = {}
    taken: dict[tuple[float, bool], list[int]] = {}
    heavy = 0
    for k in range(b.repeat):
        for seconds, steal in rotated([(slow, True), (slow, False), (0.0, True), (0.0, False)], k):
            progress(f"row st: 4-shard array, {'slow pages in shard 0' if seconds else 'even'}, "
                     f"takeover {'on' if steal else 'off'}, {k + 1}/{b.repeat}")  # fmt: skip
            with fresh_dir(b.out("takeover")) as out:
                run = _array(corpus.path, out / "out", seconds, steal)
                count, heavy = _check(out / "out", files)
                taken.setdefault((seconds, steal), []).append(count)
            walls.setdefault((seconds, steal), []).append(run.wall)
            cpus.setdefault((seconds, steal), []).append(run.cpu)
    if any(taken[(s, False)] != [0] * b.repeat for s in (slow, 0.0)):
        raise BenchError("an array without takeover took over work")
    note_1 = (
        f"{corpus.size}, {files} files, {heavy} of them in shard 0 at {slow * 1000:g} ms per document; tasks taken "
        f"over: {json.dumps(taken[(slow, True)])}; wall without slow pages: "
        f"{statistics.median(walls[(0.0, False)]):.1f} s"
    )
    note_2 = (
        f"wall with/without: {statistics.median(walls[(0.0, True)]):.1f}/{statistics.median(walls[(0.0, False)]):.1f}"
        f" s; tasks taken over: {json.dumps(taken[(0.0, True)])}"
    )
    return [
        Row("st1", "skewed 4-shard array (slow pages in one shard): wall with takeover / without",
            Measure("takeover", "s", walls[(slow, True)]), Measure("no takeover", "s", walls[(slow, False)]),
            "<=", 0.6, note=note_1),
        Row("st2", "even 4-shard array: CPU s of every process with takeover / without",
            Measure("takeover", "s CPU", cpus[(0.0, True)]), Measure("no takeover", "s CPU", cpus[(0.0, False)]),
            "<=", 1.03, note=note_2),
    ]  # fmt: skip
