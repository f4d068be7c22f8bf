"""Notes a stage leaves on the tasks it makes: what it skipped or dropped and why, damaged inputs
(:func:`add_notes`, under :data:`NOTES_KEY`), and the characters a filter removed (:func:`note_removed_chars`).
Design: docs/design.md, section Stage parameters and notes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from curator_slurm.stages.text.compute import call

#: The metadata key of a task's notes: ``{"counts": {cause: n}, "damaged": [{"file", "offset", "error"}],
#: "damaged_total": n}`` (the list keeps :data:`MAX_DAMAGED` inputs; the total counts every one).
NOTES_KEY = "notes"

#: The metadata key of the characters a filtering stage removed from a batch: ``{"dropped": n, "rewritten": m}``.
CHARS_KEY = "removed_chars"

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
    total = int(notes.get("damaged_total") or len(damaged))
    if total:  # every damaged input counted, also past the ones the list keeps
        into["damaged_total"] = int(into.get("damaged_total") or 0) + total


def removed_chars(
    texts: pa.Array | pa.ChunkedArray, keep: pa.Array | pa.ChunkedArray, new_texts: pa.Array | None = None
) -> dict[str, int] | None:
    """The characters a filter removed from a batch: ``dropped``, those of the ``texts`` that ``keep`` does not
    keep (false or null), and ``rewritten``, those the kept texts lost when the stage replaced them by
    ``new_texts`` (all rows, in order). Characters are code points, Python's ``len`` (Arrow's ``utf8_length``);
    a null text has none. None when ``texts`` is not a string column (its characters mean nothing)."""
    if not _is_text(texts.type) or (new_texts is not None and not _is_text(new_texts.type)):
        return None
    lengths = _lengths(texts)
    kept = _sum(call("filter", lengths, keep))
    rewritten = 0 if new_texts is None else kept - _sum(call("filter", _lengths(new_texts), keep))
    return {"dropped": _sum(lengths) - kept, "rewritten": rewritten}


def note_removed_chars(task: Any, texts: Any, keep: Any, new_texts: Any = None) -> Any:
    """``task`` (a filtering stage's output for one batch) with :func:`removed_chars` noted in its metadata
    under :data:`CHARS_KEY`, for the funnel; returned for ``return note_removed_chars(task.derive(...), ...)``."""
    counts = removed_chars(texts, keep, new_texts)
    if counts is not None:
        task.metadata[CHARS_KEY] = counts
    return task


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


def _lengths(texts: pa.Array | pa.ChunkedArray) -> Any:
    """Each text's code points (0 for a null text and for a column of nulls)."""
    if pa.types.is_null(texts.type):
        return pa.nulls(len(texts), pa.int64())
    return call("utf8_length", texts)


def _sum(lengths: Any) -> int:
    return int(call("sum", lengths).as_py() or 0)
