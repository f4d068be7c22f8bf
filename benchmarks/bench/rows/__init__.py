"""Every row family, registered in table order (:data:`GROUPS`): one module per family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..context import Bench
from ..harness import Row
from .dedup import bench_exact_dedup, bench_fuzzy_signatures, bench_fuzzy_workflow
from .executor import bench_executor, bench_small_files
from .fasttext import bench_fasttext
from .filters import bench_filters
from .fineweb_filters import ROWS as DATATROVE_ROWS
from .fineweb_filters import bench_datatrove_filters
from .fineweb_recipe import bench_fineweb_dedup, bench_fineweb_recipe
from .ledger import bench_ledger
from .memory import bench_rss
from .observe import bench_progress, bench_report, bench_status_summaries, bench_workflow_status
from .ray_executor import bench_ray
from .s3 import bench_s3_listing, bench_s3_read
from .sharded import bench_sharded_cpu
from .sharding import bench_balance, bench_select
from .startup import bench_empty_shard, bench_manifest_startup
from .status import bench_status
from .takeover import bench_takeover
from .tokens import bench_merge_rss, bench_tokens
from .web import bench_web_datatrove, bench_web_loop, bench_web_time_limit, bench_web_workers


@dataclass(frozen=True)
class Group:
    keys: tuple[str, ...]
    run: Callable[[Bench], list[Row]]


#: Every row, in table order. A new row is a new Group (or a new Row from an existing one).
GROUPS: list[Group] = [
    Group(("1", "2"), bench_executor),
    Group(("15a", "15b"), bench_small_files),
    Group(("3a", "3b"), bench_sharded_cpu),
    Group(("4",), bench_empty_shard),
    Group(("14",), bench_manifest_startup),
    Group(("5",), bench_select),
    Group(("6a", "6b", "6c", "6d"), bench_balance),
    Group(("7",), bench_rss),
    Group(("8a", "8b"), bench_ledger),
    Group(("16",), bench_status),
    Group(("16s", "16r"), bench_status_summaries),
    Group(("16w",), bench_workflow_status),
    Group(("17",), bench_progress),
    Group(("18",), bench_report),
    Group(("st1", "st2"), bench_takeover),
    Group(("9a", "9b", "9c"), bench_ray),
    Group(("12",), bench_fuzzy_signatures),
    Group(("10a", "10b", "10c", "10d"), bench_exact_dedup),
    Group(("13a", "13b", "13c", "13d", "13e"), bench_fuzzy_workflow),
    Group(tuple(f"h{i}" for i in range(1, 25)), bench_filters),
    Group(tuple(DATATROVE_ROWS), bench_datatrove_filters),
    Group(("t1", "t1c", "t2", "t2c"), bench_tokens),
    Group(("t3",), bench_merge_rss),
    Group(("ft1", "ft2"), bench_fasttext),
    Group(("w1a", "w1b", "w1c", "w3"), bench_web_loop),
    Group(("w2",), bench_web_workers),
    Group(("w4",), bench_web_datatrove),
    Group(("w5",), bench_web_time_limit),
    Group(("fw1",), bench_fineweb_recipe),
    Group(("fw2", "fw3"), bench_fineweb_dedup),
    Group(("s1", "s1j"), bench_s3_read),
    Group(("s2a", "s2b"), bench_s3_listing),
]
ROW_KEYS: tuple[str, ...] = tuple(k for g in GROUPS for k in g.keys)
