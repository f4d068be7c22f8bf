"""Rows 1-2: the demo job against a plain pyarrow loop, and two workers against one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from curator_slurm import LocalExecutor

from ..context import Bench
from ..demo import JobRun, plain_loop, run_curate, run_demo_job
from ..harness import BenchError, Measure, Row, available_cores, fresh_dir, progress, rotated


def bench_executor(b: Bench) -> list[Row]:
    """Row 1: the demo job in this process on LocalExecutor(workers=1) against the plain loop. Row 2:
    ``curate.py --workers 2`` against ``--workers 1``, each a fresh process as a user runs it (in this
    process, which has run pyarrow's thread pools, workers could not be forked)."""
    corpus = b.corpus("base")
    progress("rows 1-2: warm-up pass (untimed: page cache, bytecode)")
    b.warm_children()
    with fresh_dir(b.out("warmup")) as out:
        run_demo_job(LocalExecutor(workers=1), corpus, out)
    runs: dict[str, list[JobRun]] = {"plain": [], "w1": [], "c1": [], "c2": []}
    contenders: list[tuple[str, Callable[[Path], JobRun]]] = [
        ("plain", lambda out: plain_loop(corpus, out)),
        ("w1", lambda out: run_demo_job(LocalExecutor(workers=1), corpus, out)),
        ("c1", lambda out: run_curate(corpus, out, 1)),
        ("c2", lambda out: run_curate(corpus, out, 2)),
    ]
    for rep in range(b.repeat):
        for name, fn in rotated(contenders, rep):
            progress(f"rows 1-2: {name}, repeat {rep + 1}/{b.repeat} ({corpus.size}, {len(corpus.files)} files)")
            with fresh_dir(b.out(name)) as out:
                runs[name].append(fn(out))
    for name, name_runs in runs.items():
        outs = {(r.docs_in, r.docs_out, r.files_out) for r in name_runs} | {
            (r.docs_in, r.docs_out, r.files_out) for r in runs["plain"]
        }
        if len(outs) != 1:
            raise BenchError(f"{name} and the plain loop disagree on (docs in, docs out, files): {sorted(outs)}")
    dps = {k: Measure(k, "docs/s", [r.docs_per_s for r in v]) for k, v in runs.items()}
    dps["plain"].label = "plain pyarrow"
    dps["w1"].label = "workers=1"
    dps["c1"].label = "--workers 1"
    dps["c2"].label = "--workers 2"
    size = f"{corpus.size}, {len(corpus.files)} files"
    small = "" if b.quick or corpus.mb >= 100 else "the demo job ran on less than 100 MB: not a record"
    return [
        Row("1", f"demo job docs/s: LocalExecutor(workers=1) / plain pyarrow loop ({size})", dps["w1"], dps["plain"],
            ">=", 0.8, note=small),
        Row("2", f"curate.py docs/s, whole process: --workers 2 / --workers 1 ({size}, {available_cores()} cores)",
            dps["c2"], dps["c1"], ">=", 1.7, note="workers start by fork (a fresh curate.py has no other thread)"),
    ]  # fmt: skip
