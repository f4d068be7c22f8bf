"""What a run reports: per-stage counts, the fate of each source task, the run's result and funnel, and the
progress lines of a long run. Values only: every executor fills them, the run loop sums them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from curator_slurm.runs.funnel import FunnelRow, funnel_of_records
from curator_slurm.runs.summary import describe_s3
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.notes import merge_notes
from curator_slurm.tasks import FailedTask, FileGroupTask, Task


@dataclass
class StageStats:
    """Counts and time for one stage, summed over the tasks it saw."""

    name: str
    tasks_in: int = 0
    tasks_out: int = 0
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    failures: int = 0
    #: What the stage noted on its outputs (``stages.notes``): counts by cause, damaged inputs.
    notes: dict[str, Any] = field(default_factory=dict)
    #: Characters of the documents it dropped, and those its rewriting took from the ones it kept, as a
    #: filtering stage notes them (``stages.notes.note_removed_chars``).
    chars_dropped: int = 0
    chars_rewritten: int = 0
    #: Documents in of the tasks whose characters it did not count (a stage that is not a filter, a failure):
    #: while there are any, the characters it removed are unknown.
    rows_uncounted: int = 0
    #: Log2 bucket counts (``runs.stats``) of the UTF-8 lengths of the documents it let out, and of the tokens per
    #: document a token writer wrote; None while it let out none.
    lengths: Any = None
    tokens: Any = None
    #: Lengths not folded into ``lengths`` yet (``runs.stats.note_output``), and how many.
    pending: list[Any] = field(default_factory=list)
    pending_rows: int = 0

    @property
    def chars_known(self) -> bool:
        """Whether every document that entered the stage had its removed characters counted."""
        return self.rows_uncounted == 0

    def add(self, other: StageStats) -> None:
        self.tasks_in += other.tasks_in
        self.tasks_out += other.tasks_out
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.seconds += other.seconds
        self.failures += other.failures
        self.chars_dropped += other.chars_dropped
        self.chars_rewritten += other.chars_rewritten
        self.rows_uncounted += other.rows_uncounted
        merge_notes(self.notes, other.notes)
        self.pending += other.pending
        self.pending_rows += other.pending_rows
        for key in ("lengths", "tokens"):
            theirs = getattr(other, key)
            if theirs is not None:
                mine = getattr(self, key)
                setattr(self, key, theirs.copy() if mine is None else mine + theirs)

    def funnel_row(self) -> FunnelRow:
        """This stage's row of the funnel (its characters None when unknown)."""
        seconds = round(self.seconds, 4)
        if not self.chars_known:
            return FunnelRow(self.name, self.rows_in, self.rows_out, seconds=seconds)
        return FunnelRow(
            self.name, self.rows_in, self.rows_out, self.chars_dropped, self.chars_rewritten, seconds=seconds
        )


@dataclass
class SourceResult:
    """The fate of one source task after everything descending from it has left the pipeline."""

    source_id: str
    outputs: list[str] = field(default_factory=list)
    #: Bytes of each output, as its writer published it (``sizes`` in a written file group's metadata).
    sizes: dict[str, int] = field(default_factory=dict)
    output_tasks: list[Task] = field(default_factory=list)
    failure: FailedTask | None = None
    attempts: int = 1
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    stats: list[StageStats] = field(default_factory=list)
    #: Tokens its outputs hold, when its writer counts them (``tokens`` in the metadata of a written file group).
    tokens: int | None = None
    #: Object-store requests it made and retried (:func:`s3_counts`), None when it made none.
    s3: dict[str, Any] | None = None


def s3_counts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """What happened between two :func:`curator_slurm.fs.s3_stats` snapshots of one process: ``requests``,
    ``retries`` and the retries by cause (``reasons``); None when no request was made."""
    requests = after["requests_total"] - before["requests_total"]
    if requests <= 0:
        return None
    reasons = {k: v - before["reasons"].get(k, 0) for k, v in after["reasons"].items()}
    gave_up = sum(after["gave_up"].values()) - sum(before["gave_up"].values())
    out = {"requests": requests, "retries": after["retries_total"] - before["retries_total"]}
    out["reasons"] = {k: v for k, v in reasons.items() if v > 0}
    if gave_up > 0:
        out["gave_up"] = gave_up
    return out


def summarise(source_id: str, finals: list[Task], stats: list[StageStats], started: float) -> SourceResult:
    """The result of one source task from everything that left its last stage (every executor's)."""
    result = SourceResult(source_id=source_id, stats=stats)
    for t in finals:
        if isinstance(t, FailedTask):
            if result.failure is None:
                result.failure = t
            continue
        result.attempts = max(result.attempts, t.metadata.get("attempts", 1))
        if isinstance(t, FileGroupTask) and "rows" in t.metadata:
            result.outputs.extend(t.data)
            result.sizes.update(zip(t.data, t.metadata.get("sizes") or (), strict=False))
            if "tokens" in t.metadata:
                result.tokens = (result.tokens or 0) + int(t.metadata["tokens"])
        else:
            result.output_tasks.append(t)
    if result.failure is not None:
        result.attempts = max(result.attempts, result.failure.attempts)
    if stats:
        first, last = stats[0], stats[-1]
        result.rows_in = first.rows_in or first.rows_out
        result.rows_out = last.rows_out
    result.seconds = time.perf_counter() - started
    return result


@dataclass
class PipelineResult:
    """What a run did: per-stage counts, files written, source-task fates."""

    shard: ShardSpec
    stages: list[StageStats]
    output_files: list[str]
    output_tasks: list[Task]
    source_tasks_total: int
    source_tasks_mine: int
    source_tasks_skipped: int
    done: int
    failed: list[FailedTask]
    seconds: float
    run_dir: str | None = None
    stopped_by: str | None = None
    #: Tokens written by the source tasks this run did (None: its writer counts none).
    tokens: int | None = None
    #: Object-store requests and retries of the source tasks this run did (None: none made), see ``s3_counts``.
    s3: dict[str, Any] | None = None
    #: Source tasks of other shards this run finished (done or failed, counted in ``done`` and ``failed``).
    taken_over: int = 0
    #: Source tasks of this shard left to do that other processes did or hold (taken over by them).
    left_to_others: int = 0

    @property
    def damaged(self) -> list[dict[str, Any]]:
        """The damaged inputs the stages noted (file, byte offset, error): records after the damage were lost,
        and no retry can bring them back, so their source tasks are done and this says so."""
        notes: dict[str, Any] = {}
        for s in self.stages:
            merge_notes(notes, s.notes)
        return list(notes.get("damaged") or [])

    @property
    def rows_in(self) -> int:
        if len(self.stages) < 2:
            return 0
        return self.stages[1].rows_in or self.stages[1].rows_out

    @property
    def rows_out(self) -> int:
        return self.stages[-1].rows_out if self.stages else 0

    def funnel(self) -> list[FunnelRow]:
        """Documents in and out of every stage after the source, summed over the source tasks this run did:
        how many documents and characters each filter removed. `curator-slurm status` shows the same for the
        whole run directory."""
        return [s.funnel_row() for s in self.stages[1:]]

    def summary(self) -> str:
        return (
            f"{self.shard.label}: {self.done} source tasks done, {len(self.failed)} failed, "
            f"{self.source_tasks_skipped} already done; {self.rows_in} docs in, {self.rows_out} out, "
            f"{len(self.output_files)} files written"
            + (f" ({self.tokens} tokens)" if self.tokens is not None else "")
            + (f"; {self.taken_over} taken over from other shards" if self.taken_over else "")
            + (f"; {self.left_to_others} left to other processes" if self.left_to_others else "")
            + f" in {self.seconds:.2f} s"
            + (f"; {describe_s3(self.s3)}" if self.s3 else "")
            + _damage_note(self.damaged)
        )


def _damage_note(damaged: list[dict[str, Any]]) -> str:
    """What the summary line says of damaged inputs (nothing when none)."""
    if not damaged:
        return ""
    first = damaged[0]
    return (
        f"; DAMAGED INPUT: {len(damaged)} input(s) lost records to damage (first: {first.get('file')} at byte "
        f"{first.get('offset')}: {first.get('error')}); the rest was kept, see `curator-slurm status`"
    )


class ProgressLog:
    """Logs progress at most every ``interval`` seconds, so long runs show they are alive.

    Args:
        total: the number of source tasks the run has to do.
        log: the logger the progress lines go to.
        interval: least seconds between two lines.
        clock: the clock that times them (monotonic seconds).
    """

    def __init__(self, total: int, log: Any, interval: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.total, self.log, self.interval, self.clock = total, log, interval, clock
        self.start = self.last = clock()
        self.done = self.failed = self.rows_in = self.rows_out = 0

    def update(self, result: SourceResult) -> None:
        self.done += result.failure is None
        self.failed += result.failure is not None
        self.rows_in += result.rows_in
        self.rows_out += result.rows_out
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            finished = self.done + self.failed
            elapsed = now - self.start
            eta = elapsed / finished * (self.total - finished) if finished else float("nan")
            self.log.info(
                f"progress: {finished}/{self.total} source tasks ({100 * finished / max(self.total, 1):.1f}%), "
                f"{self.failed} failed; {self.rows_in} docs in, {self.rows_out} out; "
                f"{self.rows_in / max(elapsed, 1e-9):.0f} docs/s; ETA {eta:.0f} s"
            )


__all__ = ["FunnelRow", "PipelineResult", "ProgressLog", "SourceResult", "StageStats", "funnel_of_records", "summarise"]
