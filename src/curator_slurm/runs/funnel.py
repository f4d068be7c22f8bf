"""A run's funnel: how many documents each stage took in and let through, summed over done records.

A value of the run directory (the ledger's done records carry each stage's counts), so it lives with the
ledger; ``PipelineResult`` and ``curator-slurm status`` both report it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FunnelRow:
    """One stage of a run's funnel: documents in and out (a reader reads files: its ``rows_in`` is 0)."""

    stage: str
    rows_in: int
    rows_out: int

    @property
    def dropped(self) -> int:
        """Documents the stage removed (0 for a stage that adds rows or reads files)."""
        return max(self.rows_in - self.rows_out, 0)

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "rows_in": self.rows_in, "rows_out": self.rows_out, "dropped": self.dropped}


def funnel_of_records(records: Iterable[dict[str, Any]]) -> list[FunnelRow]:
    """The funnel of a run directory: the ``stages`` rows of its done records, summed stage by stage
    (records of a ledger written before they carried ``stages`` are left out)."""
    funnel = FunnelSum()
    for record in records:
        if record.get("status") == "done":
            funnel.add(record.get("stages"))
    return funnel.rows()


class FunnelSum:
    """Sums done records' ``stages`` (``[name, rows_in, rows_out]`` per stage after the source), stage by
    stage in pipeline order, into the run's funnel."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.counts: list[list[int]] = []

    def add(self, stages: Any) -> None:
        if not isinstance(stages, list):  # a record written before records carried stages
            return
        for i, (name, rows_in, rows_out) in enumerate(stages):
            if i == len(self.names):
                self.names.append(name)
                self.counts.append([0, 0])
            self.counts[i][0] += int(rows_in)
            self.counts[i][1] += int(rows_out)

    def rows(self) -> list[FunnelRow]:
        return [FunnelRow(n, c[0], c[1]) for n, c in zip(self.names, self.counts, strict=True)]


__all__ = ["FunnelRow", "FunnelSum", "funnel_of_records"]
