"""A finished source task's record in the ledger: done (outputs, rows, seconds, the funnel, notes) or failed."""

from __future__ import annotations

from typing import Any

from curator_slurm.runs.results import SourceResult, StageStats
from curator_slurm.stages.notes import merge_notes


def ledger_record(result: SourceResult) -> dict[str, Any]:
    """The ledger record of one finished source task."""
    if result.failure is None:
        record = {
            "source": result.source_id,
            "status": "done",
            "outputs": result.outputs,
            "rows_in": result.rows_in,
            "rows_out": result.rows_out,
            "seconds": round(result.seconds, 4),
            "attempts": result.attempts,
            # Rows in and out of every stage after the source, for the run's funnel (`status`).
            "stages": [stage_entry(s) for s in result.stats],
            # Seconds each of those stages spent on the task (`status` sums them beside the funnel).
            "stage_seconds": [round(s.seconds, 5) for s in result.stats],
        }
        notes: dict[str, Any] = {}
        for s in result.stats:  # why stages dropped documents, and damaged inputs (stages.notes)
            merge_notes(notes, s.notes, prefix=f"{s.name}: ")
        if notes:
            record["notes"] = notes
        if result.tokens is not None:  # a writer that counts tokens (MegatronTokenizerWriter): `status` sums them
            record["tokens"] = result.tokens
        if result.s3:  # object-store requests and retries (`status` sums them)
            record["s3"] = result.s3
        return record
    f = result.failure
    return {
        "source": result.source_id,
        "status": "failed",
        "stage": f.stage,
        "error": f.error,
        "traceback": f.traceback,
        "attempts": result.attempts,
        "task_id": f.metadata.get("task_id"),
        "files": f.metadata.get("files"),
        "seconds": round(result.seconds, 4),
        **({"s3": result.s3} if result.s3 else {}),
    }


def stage_entry(s: StageStats) -> list[Any]:
    """A stage's entry in a done record's ``stages``: ``[name, rows_in, rows_out]``, then the characters it
    removed, ``chars_dropped, chars_rewritten``, when it counted them for every document it took in (a stage
    that took none removed none: its entry stays short)."""
    entry: list[Any] = [s.name, s.rows_in, s.rows_out]
    if s.rows_in and s.chars_known:
        entry += [s.chars_dropped, s.chars_rewritten]
    return entry


__all__ = ["ledger_record", "stage_entry"]
