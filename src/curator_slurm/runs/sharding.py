"""Which source tasks belong to which shard (``hash`` or ``balanced``): pure functions, no environment. Design:
docs/design.md, "The one idea"."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import xxhash

from curator_slurm import fs
from curator_slurm.errors import PipelineBuildError
from curator_slurm.shard import ShardSpec
from curator_slurm.tasks import Task

SHARD_HASH_SEED = 0


def shard_of(task_id: str, count: int) -> int:
    """The shard (0..count-1) that owns ``task_id`` under the hash strategy."""
    return xxhash.xxh64_intdigest(task_id.encode("utf-8"), SHARD_HASH_SEED) % count


def hash_assignment(task_ids: Sequence[str], count: int) -> list[int]:
    """Shard of each id, in order."""
    h = xxhash.xxh64_intdigest
    return [h(t.encode("utf-8"), SHARD_HASH_SEED) % count for t in task_ids]


def balanced_assignment(task_ids: Sequence[str], weights: Sequence[float], count: int) -> list[int]:
    """Shard of each id, in order, by greedy longest-first packing; depends only on the (id, weight)
    set, not its order."""
    if len(task_ids) != len(weights):
        raise ValueError(f"{len(task_ids)} task ids but {len(weights)} weights")
    order = sorted(range(len(task_ids)), key=lambda i: (-weights[i], task_ids[i]))
    heap = [(0.0, shard) for shard in range(count)]
    result = [0] * len(task_ids)
    for i in order:
        load, shard = heapq.heappop(heap)
        result[i] = shard
        heapq.heappush(heap, (load + weights[i], shard))
    return result


@dataclass(frozen=True)
class Selection:
    """What the shard filter kept, for the one log line per shard."""

    kept: int
    total: int
    kept_bytes: int | None
    total_bytes: int | None

    @classmethod
    def of(cls, tasks: Sequence[Task], kept: Sequence[Task]) -> Selection:
        """Counts, and bytes when every task knows its size (file groups do)."""
        try:
            total_bytes = sum(t.metadata["bytes"] for t in tasks) if tasks else None
            kept_bytes = sum(t.metadata["bytes"] for t in kept) if tasks else None
        except KeyError:
            total_bytes = kept_bytes = None
        return cls(kept=len(kept), total=len(tasks), kept_bytes=kept_bytes, total_bytes=total_bytes)

    def describe(self, spec: ShardSpec) -> str:
        line = f"{spec.label}: kept {self.kept} of {self.total} source tasks"
        if self.total_bytes is not None:
            line += f" ({format_bytes(self.kept_bytes or 0)} of {format_bytes(self.total_bytes)})"
        return line


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_source_ids(tasks: Sequence[Task], stage_name: str) -> None:
    """Refuse source tasks whose ids cannot shard deterministically (random or duplicated)."""
    seen: set[str] = set()
    for t in tasks:
        if not t.has_deterministic_id:
            raise PipelineBuildError(
                f"source stage {stage_name!r} produced a task without a deterministic task_id ({type(t).__name__}); "
                "sharding needs ids derived from the work itself (e.g. curator_slurm.tasks.content_id of the "
                "input paths) so every shard agrees. Give each task a task_id, or set CURATOR_SHARDING=off."
            )
        if t.task_id in seen:
            raise PipelineBuildError(
                f"source stage {stage_name!r} produced task_id {t.task_id!r} twice; source task ids must be "
                "unique, or the same work would be done twice"
            )
        seen.add(t.task_id)


def select(tasks: Sequence[Task], spec: ShardSpec) -> list[Task]:
    """The tasks this shard owns, in their original order: the shard filter itself, kept to one
    hash per task (its cost per task is a benchmark row)."""
    if spec.count == 1:
        return list(tasks)
    if spec.strategy == "balanced":
        shards = balanced_assignment([t.task_id for t in tasks], [t.weight for t in tasks], spec.count)
        return [t for t, s in zip(tasks, shards, strict=True) if s == spec.index]
    # xxh64's default seed is SHARD_HASH_SEED (0); leaving it out saves a few ns per task on this hot
    # loop, and the golden vectors in the tests would catch any difference.
    h, n, me = xxhash.xxh64_intdigest, spec.count, spec.index
    return [t for t in tasks if h(t.task_id.encode()) % n == me]


def read_source_list(path: str) -> set[str]:
    """Task ids from a file with one id per line (as `curator-slurm retry` writes them)."""
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip()}


def write_source_list(path: str, task_ids: Sequence[str]) -> None:
    """Write ids one per line, atomically, so shards never read half a list."""
    fs.atomic_write_text(path, "".join(t + "\n" for t in sorted(task_ids)))
