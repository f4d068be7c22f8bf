"""Rows 3a-3b: what sharding costs in CPU, a simulated array against one unsharded process."""

from __future__ import annotations

import concurrent.futures
import math
import statistics
import sys
from pathlib import Path

from ..context import Bench
from ..demo import BARE_IMPORTS, curate_cmd
from ..harness import BenchError, Measure, Row, fresh_dir, progress, rotated, run_child


def bench_sharded_cpu(b: Bench) -> list[Row]:
    """Row 3: N array tasks (CURATOR_SHARD_INDEX/CURATOR_NUM_SHARDS), run one after another, vs one
    unsharded process; CPU seconds summed over the children.

    The two sides of each pair run at the same time, one stream of processes per core: the CPU seconds
    of an 800 MB pass moved by 5-10 % from one minute to the next on a shared machine (32.5-38.7 s),
    more than 3b's margin, and a pair that shares the minutes shares that drift. Each side is pinned to
    its own core, and the cores swap from one pair to the next (so the number of pairs is even): one
    vCPU can be slower than the other for minutes (3a's pairs once gave 1.011 three times, and 1.05-1.07
    in another run). The value is the geometric mean of the median ratio with the shards on each core,
    in which that difference cancels; unpinned (one core available) it is the median of the ratios."""
    corpus = b.corpus("sharded")
    b.warm_children()
    counts = (4, 16)
    cores, pairs = b.pinned_cores, b.pairs
    pinned = bool(cores)
    sharded: dict[int, list[float]] = {n: [] for n in counts}
    whole: dict[int, list[float]] = {n: [] for n in counts}  # the unsharded run paired with each
    bare: list[float] = []  # CPU of a process that only imports what the demo job needs

    def one_process(out: Path, cpu: int | None) -> float:
        return run_child(curate_cmd(corpus.path, out), cpu=cpu).cpu

    def shards(n: int, out: Path, cpu: int | None) -> float:
        env = {"CURATOR_NUM_SHARDS": str(n)}
        return sum(
            run_child(curate_cmd(corpus.path, out), {**env, "CURATOR_SHARD_INDEX": str(i)}, cpu).cpu for i in range(n)
        )

    def side_cores(pair: int) -> tuple[int | None, int | None]:
        """(core of the shards, core of the unsharded process) for this pair."""
        return (cores[pair % 2], cores[1 - pair % 2]) if pinned else (None, None)

    for pair in range(pairs):
        bare += [run_child([sys.executable, "-c", BARE_IMPORTS]).cpu for _ in range(3)]
        on_shards, on_single = side_cores(pair)
        for n in rotated(list(counts), pair):
            where = f", shards on cpu {on_shards}, 1 process on cpu {on_single}" if pinned else ""
            progress(f"row 3: {n} shards beside 1 process, pair {pair + 1}/{pairs} ({corpus.size}, "
                     f"{len(corpus.files)} files{where})")  # fmt: skip
            with fresh_dir(b.out(f"shards-{n}")) as out_n, fresh_dir(b.out("shards-1")) as out_1:
                with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                    split = pool.submit(shards, n, out_n, on_shards)
                    single = pool.submit(one_process, out_1, on_single)
                    sharded[n].append(split.result())
                    whole[n].append(single.result())
                files = [{p.name: p.stat().st_size for p in out.glob("*.parquet")} for out in (out_n, out_1)]
            if len(files[0]) != len(corpus.files) or files[0] != files[1]:
                raise BenchError(f"{n} shards wrote {len(files[0])} files for {len(corpus.files)} source tasks, "
                                 "or not the files of the unsharded run")  # fmt: skip
    start_cpu = statistics.median(bare)

    def ratios(n: int) -> list[float]:
        return [a / c for a, c in zip(sharded[n], whole[n], strict=True)]

    def value(n: int) -> float:
        if not pinned:
            return statistics.median(ratios(n))
        by_core = [statistics.median(ratios(n)[first::2]) for first in (0, 1)]
        return math.sqrt(by_core[0] * by_core[1])

    def note(n: int) -> str:
        base = statistics.median(whole[n])
        extra = (statistics.median(sharded[n]) - base) / (n - 1)
        floor = (base + (n - 1) * start_cpu) / base
        where = [f" (shards on cpu {side_cores(i)[0]})" if pinned else "" for i in range(pairs)]
        shown = [f"{r:.3f}{w}" for r, w in zip(ratios(n), where, strict=True)]
        return (
            f"pairs (each run at the same time): {', '.join(shown)}; {extra:.3f} s CPU per extra process, of "
            f'which {start_cpu:.3f} s is `python -c "{BARE_IMPORTS}"`; with nothing but that start-up added '
            f"per process the ratio would be {floor:.3f}"
        )

    return [
        Row(f"3{'ab'[k]}", f"simulated {n}-shard array: sum of CPU s / one unsharded process beside it "
            f"({corpus.size}, {len(corpus.files)} files)", Measure(f"{n} processes", "s CPU", sharded[n]),
            Measure("1 process", "s CPU", whole[n]), "<=", 1.1, value=value(n), note=note(n))
        for k, n in enumerate(counts)
    ]  # fmt: skip
