"""Distributions that a run's summaries keep in a bounded size whatever the number of records: source task
durations in log-spaced bins, finished tasks per minute of wall time, and the slowest tasks."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: Bins per doubling of a duration: a bin's edges are 2**(1/8) (9 %) apart, and so is a median read from them.
BINS_PER_OCTAVE = 8
#: Durations below this (seconds) share the first bin.
SMALLEST = 1e-4
#: How many of the slowest source tasks a summary keeps.
SLOWEST = 20


def bin_of(seconds: float) -> int:
    """The bin of a duration: 0 for anything up to :data:`SMALLEST`, then one bin per 1/8 octave."""
    if not seconds > SMALLEST:  # also NaN
        return 0
    return 1 + math.floor(BINS_PER_OCTAVE * math.log2(seconds / SMALLEST))


def bin_edges(index: int) -> tuple[float, float]:
    """The durations bin ``index`` holds, ``[low, high)``."""
    if index <= 0:
        return 0.0, SMALLEST
    return SMALLEST * 2 ** ((index - 1) / BINS_PER_OCTAVE), SMALLEST * 2 ** (index / BINS_PER_OCTAVE)


@dataclass
class Durations:
    """How long source tasks took: counts per log-spaced bin, the exact sum, and the slowest ``SLOWEST``
    (``(seconds, source id, shard)``)."""

    bins: dict[int, int] = field(default_factory=dict)
    count: int = 0
    total: float = 0.0
    slowest: list[tuple[float, str, str]] = field(default_factory=list)

    def add(self, seconds: float, source: str = "", shard: str = "") -> None:
        b = bin_of(seconds)
        self.bins[b] = self.bins.get(b, 0) + 1
        self.count += 1
        self.total += seconds
        entry = (float(seconds), str(source), str(shard))
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, entry)
        elif entry > self.slowest[0]:
            heapq.heapreplace(self.slowest, entry)

    def add_all(self, seconds: Iterable[float]) -> None:
        for s in seconds:
            self.add(s)

    def merge(self, other: Durations) -> None:
        for b, n in other.bins.items():
            self.bins[b] = self.bins.get(b, 0) + n
        self.count += other.count
        self.total += other.total
        for entry in other.slowest:
            if len(self.slowest) < SLOWEST:
                heapq.heappush(self.slowest, entry)
            elif entry > self.slowest[0]:
                heapq.heapreplace(self.slowest, entry)

    def quantile(self, q: float) -> float | None:
        """The duration below which a fraction ``q`` of the tasks fall (the geometric middle of its bin);
        None without tasks."""
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for b in sorted(self.bins):
            seen += self.bins[b]
            if seen >= rank:
                low, high = bin_edges(b)
                return math.sqrt(low * high) if low > 0 else high / 2
        return bin_edges(max(self.bins))[1]

    def slowest_first(self) -> list[tuple[float, str, str]]:
        return sorted(self.slowest, reverse=True)

    def as_json(self) -> dict[str, Any]:
        return {
            "bins": {str(b): n for b, n in sorted(self.bins.items())},
            "count": self.count,
            "total": self.total,
            "slowest": [list(e) for e in self.slowest],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Durations:
        return cls(
            bins={int(b): int(n) for b, n in data.get("bins", {}).items()},
            count=int(data.get("count", 0)),
            total=float(data.get("total", 0.0)),
            slowest=[(float(s), str(i), str(h)) for s, i, h in data.get("slowest", [])],
        )


def add_columns(durations: Durations, seconds: Any, sources: list[str], shard: str) -> None:
    """Add many tasks at once: ``seconds`` (a numpy array, NaN where unknown) of the source tasks ``sources``
    of one shard; vectorised, for ledgers of millions of records."""
    import numpy as np

    values = np.asarray(seconds, dtype=np.float64)
    known = ~np.isnan(values)
    if not known.any():
        return
    kept = values[known]
    ratio = np.maximum(kept, SMALLEST) / SMALLEST
    bins = np.where(kept > SMALLEST, 1 + np.floor(BINS_PER_OCTAVE * np.log2(ratio)).astype(np.int64), 0)
    for b, n in zip(*np.unique(bins, return_counts=True), strict=True):
        durations.bins[int(b)] = durations.bins.get(int(b), 0) + int(n)
    durations.count += int(kept.size)
    durations.total += float(kept.sum())
    where = np.flatnonzero(known)
    top = where[np.argsort(values[where])[-SLOWEST:]]
    for i in top.tolist():
        entry = (float(values[i]), str(sources[i]), shard)
        if len(durations.slowest) < SLOWEST:
            heapq.heappush(durations.slowest, entry)
        elif entry > durations.slowest[0]:
            heapq.heapreplace(durations.slowest, entry)


def add_minutes(into: dict[int, int], times: Any) -> None:
    """Count wall-clock ``times`` (seconds since the epoch; a numpy array, NaN where unknown) per minute:
    finished tasks over time."""
    import numpy as np

    values = np.asarray(times, dtype=np.float64)
    values = values[~np.isnan(values)]
    for minute, n in zip(*np.unique(np.floor(values / 60).astype(np.int64), return_counts=True), strict=True):
        into[int(minute)] = into.get(int(minute), 0) + int(n)


__all__ = ["BINS_PER_OCTAVE", "SLOWEST", "Durations", "add_columns", "add_minutes", "bin_edges", "bin_of"]
