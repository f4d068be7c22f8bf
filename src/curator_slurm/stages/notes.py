"""Notes a stage leaves on the tasks it makes: what it skipped or dropped and why, and damaged inputs.

A funnel row says how many documents a stage dropped; a note says why (``"non-HTML payload": 12``,
``"time limit (2.0 s)": 1``), and names an input file that was damaged and where (the records before the
damage were kept, the task did not fail). A stage puts them in its output task's metadata under
:data:`NOTES_KEY` with :func:`add_notes`; the adapter takes them off each output as it leaves the stage that
made them (so a later ``derive`` does not count them twice), sums them per source task, and the run ledger
records them beside the funnel, where the `status` and `failures` commands show them.
"""

from __future__ import annotations

from typing import Any

#: The metadata key of a task's notes: ``{"counts": {cause: n}, "damaged": [{"file", "offset", "error"}]}``.
NOTES_KEY = "notes"

#: Damaged inputs kept per source task (and shown by `status`): a listing, not a log.
MAX_DAMAGED = 100


def add_notes(
    metadata: dict[str, Any], counts: dict[str, int] | None = None, damaged: list[dict[str, Any]] | None = None
) -> None:
    """Add ``counts`` (cause -> how many) and ``damaged`` (file, offset, error) to the notes in ``metadata``."""
    if not counts and not damaged:
        return
    notes = metadata.setdefault(NOTES_KEY, {})
    merge_notes(notes, {"counts": counts or {}, "damaged": damaged or []})


def merge_notes(into: dict[str, Any], notes: dict[str, Any] | None, prefix: str = "") -> None:
    """Add the counts and damaged inputs of ``notes`` to ``into`` (counts keyed ``prefix + cause``)."""
    if not notes:
        return
    counts = into.setdefault("counts", {})
    for cause, n in (notes.get("counts") or {}).items():
        counts[prefix + cause] = counts.get(prefix + cause, 0) + int(n)
    damaged = notes.get("damaged") or []
    if damaged:
        kept = into.setdefault("damaged", [])
        kept.extend(damaged[: max(MAX_DAMAGED - len(kept), 0)])
