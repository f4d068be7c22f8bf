"""Rows 1-2 and 15a-15b: the demo job against a plain pyarrow loop, and two workers against one; on the base
corpus (files of 1,000 documents) and on a corpus of many small files (20 documents each), where what the
framework does per source task (ledger, durable outputs, lineage) weighs most."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from curator_slurm import LocalExecutor

from ..context import Bench
from ..corpora import Corpus
from ..demo import JobRun, plain_loop, run_curate, run_demo_job
from ..harness import BenchError, Measure, Row, available_cores, fresh_dir, progress, rotated


def measure_executors(b: Bench, corpus: Corpus, rows: str) -> dict[str, Measure]:
    """docs/s of the demo job on ``corpus``, interleaved ``b.repeat`` times: ``plain`` (the plain loop), ``w1``
    (LocalExecutor(workers=1) in this process), ``c1`` and ``c2`` (``curate.py --workers 1`` and ``2``, each a
    fresh process as a user runs it: in this process, which has run pyarrow's thread pools, workers could not
    be forked). Every side must agree with the plain loop on documents in and out and files written."""
    progress(f"rows {rows}: warm-up pass (untimed: page cache, bytecode)")
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
            progress(f"rows {rows}: {name}, repeat {rep + 1}/{b.repeat} ({corpus.size}, {len(corpus.files)} files)")
            with fresh_dir(b.out(name)) as out:
                runs[name].append(fn(out))
    for name, name_runs in runs.items():
        outs = {(r.docs_in, r.docs_out, r.files_out) for r in name_runs} | {
            (r.docs_in, r.docs_out, r.files_out) for r in runs["plain"]
        }
        if len(outs) != 1:
            raise BenchError(f"{name} and the plain loop disagree on (docs in, docs out, files): {sorted(outs)}")
    labels = {"plain": "plain pyarrow", "w1": "workers=1", "c1": "--workers 1", "c2": "--workers 2"}
    return {k: Measure(labels[k], "docs/s", [r.docs_per_s for r in v]) for k, v in runs.items()}


def bench_executor(b: Bench) -> list[Row]:
    """Row 1: the demo job in this process on LocalExecutor(workers=1) against the plain loop. Row 2:
    ``curate.py --workers 2`` against ``--workers 1``."""
    corpus = b.corpus("base")
    dps = measure_executors(b, corpus, "1-2")
    size = f"{corpus.size}, {len(corpus.files)} files"
    small = "" if b.quick or corpus.mb >= 100 else "the demo job ran on less than 100 MB: not a record"
    return [
        Row("1", f"demo job docs/s: LocalExecutor(workers=1) / plain pyarrow loop ({size})", dps["w1"], dps["plain"],
            ">=", 0.8, note=small),
        Row("2", f"curate.py docs/s, whole process: --workers 2 / --workers 1 ({size}, {available_cores()} cores)",
            dps["c2"], dps["c1"], ">=", 1.7, note="workers start by fork (a fresh curate.py has no other thread)"),
    ]  # fmt: skip


def bench_small_files(b: Bench) -> list[Row]:
    """Rows 15a-15b (issue #19): rows 1 and 2 on a corpus of small files, at least 5,000 files of 20 documents
    (one source task each) in a full run: the per-task cost of the run directory and the ledger, which group
    commit spreads over many tasks, is what decides these ratios."""
    corpus = b.corpus("small-files")
    dps = measure_executors(b, corpus, "15a-15b")
    size = f"{len(corpus.files):,} files of {corpus.spec.docs_per_file} docs, {corpus.size}"
    return [
        Row("15a", f"small files, demo job docs/s: LocalExecutor(workers=1) / plain pyarrow loop ({size})",
            dps["w1"], dps["plain"], ">=", 0.9),
        Row("15b", f"small files, curate.py docs/s, whole process: --workers 2 / --workers 1 ({size}, "
            f"{available_cores()} cores)", dps["c2"], dps["c1"], ">=", 1.8),
    ]  # fmt: skip
