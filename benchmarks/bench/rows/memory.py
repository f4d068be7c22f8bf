"""Row 7: peak RSS does not grow with the corpus."""

from __future__ import annotations

from ..context import Bench
from ..demo import curate_cmd
from ..harness import Measure, Row, fresh_dir, progress, rotated, run_child


def bench_rss(b: Bench) -> list[Row]:
    """Row 7: peak RSS of the demo job (fresh process, workers=1) on a 10x larger corpus of same-size files."""
    small, large = b.corpus("rss-small"), b.corpus("rss-large")
    b.warm_children()
    rss: dict[str, list[float]] = {"small": [], "large": []}
    for rep in range(b.repeat):
        for name, corpus in rotated([("small", small), ("large", large)], rep):
            progress(f"row 7: {name} ({corpus.size}), repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"rss-{name}")) as out:
                rss[name].append(run_child(curate_cmd(corpus.path, out)).maxrss)
    return [
        Row("7", f"peak RSS, LocalExecutor(workers=1): {large.size} corpus / {small.size} corpus "
            f"({len(large.files)} vs {len(small.files)} files)",
            Measure(f"{large.size}", "B", rss["large"]), Measure(f"{small.size}", "B", rss["small"]),
            "<=", 1.3)
    ]  # fmt: skip
