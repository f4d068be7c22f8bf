"""Test stages that more than one test uses, defined once.

``Tally`` is the stage of the tally pipeline (tests/pipelines/tally.py, a real process that tests kill,
signal and submit) and of in-process pipelines that count or time the work a stage sees. Ray workers
cannot import this module by name: executors.ship_test_module sends it by value with the test module.
"""

from __future__ import annotations

import os
import time

from curator_slurm.stages import ProcessingStage
from curator_slurm.tasks import DocumentBatch


def append_line(path: str, line: str) -> None:
    """One O_APPEND write per line, so lines from concurrent worker processes never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


class Tally(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Appends ``<label> <source id>`` (the id alone without a label) to ``path`` for every batch it sees.

    ``sleep`` seconds pass before the line is written, so the line says the batch is through the stage;
    ``hold`` seconds pass after it, so the line says the batch has started and it stays in the stage that
    long (a run stopped midway then has work in flight that the tally already counts)."""

    def __init__(self, path: str, label: str = "", sleep: float = 0.0, hold: float = 0.0) -> None:
        self.path, self.label, self.sleep, self.hold = path, label, sleep, hold
        self.name = f"tally_{label}" if label else "tally"

    def params(self) -> dict[str, object]:
        return {}  # where we count is not part of what the pipeline computes

    def process(self, task: DocumentBatch) -> DocumentBatch:
        time.sleep(self.sleep)
        append_line(self.path, f"{self.label} {task.source_id}".strip())
        time.sleep(self.hold)
        return task


class Skew(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Stalls each batch ``light`` seconds, or ``heavy`` seconds when its source task belongs to shard
    ``heavy_shard`` of ``shards`` under the hash strategy: one shard's tasks an order of magnitude slower, as
    when one shard drew the slow pages. With ``started``, appends ``<pid> <source id>`` there first, so a test
    sees which process started which task."""

    def __init__(
        self, light: float, heavy: float, shards: int, heavy_shard: int = 0, started: str | None = None
    ) -> None:
        self.light, self.heavy, self.shards, self.heavy_shard, self.started = light, heavy, shards, heavy_shard, started
        self.name = "skew"

    def params(self) -> dict[str, object]:
        return {}  # how slow the work is does not change what it computes

    def process(self, task: DocumentBatch) -> DocumentBatch:
        from curator_slurm.runs.sharding import shard_of

        if self.started:
            append_line(self.started, f"{os.getpid()} {task.source_id}")
        slow = shard_of(str(task.source_id), self.shards) == self.heavy_shard
        time.sleep(self.heavy if slow else self.light)
        return task
