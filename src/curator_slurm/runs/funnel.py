"""A run's funnel: how many documents each stage took in and let through, and how many characters (code points)
each filtering stage removed, summed over done records."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FunnelRow:
    """One stage of a run's funnel: documents in and out (a reader reads files: its ``rows_in`` is 0), and
    the characters it removed: ``chars_dropped``, those of the documents it dropped, and ``chars_rewritten``,
    those its rewriting took from the documents it kept (C4's line removal). Both are None when unknown: a
    stage that does not count them (not a filter), or a done record written before records carried them.
    ``seconds``: the time the stage spent on these documents (None when no record carried it)."""

    stage: str
    rows_in: int
    rows_out: int
    chars_dropped: int | None = None
    chars_rewritten: int | None = None
    seconds: float | None = None

    @property
    def dropped(self) -> int:
        """Documents the stage removed (0 for a stage that adds rows or reads files)."""
        return max(self.rows_in - self.rows_out, 0)

    @property
    def chars_removed(self) -> int | None:
        """Characters the stage removed, by dropping documents and by rewriting them (None: unknown)."""
        if self.chars_dropped is None or self.chars_rewritten is None:
            return None
        return self.chars_dropped + self.chars_rewritten

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "dropped": self.dropped,
            "chars_removed": self.chars_removed,
            "chars_dropped": self.chars_dropped,
            "chars_rewritten": self.chars_rewritten,
            "seconds": self.seconds,
        }


def funnel_of_records(records: Iterable[dict[str, Any]]) -> list[FunnelRow]:
    """The funnel of a run directory: the ``stages`` rows of its done records, summed stage by stage
    (records of a ledger written before they carried ``stages`` are left out)."""
    funnel = FunnelSum()
    for record in records:
        if record.get("status") == "done":
            funnel.add(record.get("stages"), record.get("stage_seconds"))
    return funnel.rows()


class FunnelSum:
    """Sums done records' ``stages`` stage by stage, in pipeline order, into the run's funnel. An entry is
    ``[name, rows_in, rows_out]`` per stage after the source, followed by ``chars_dropped, chars_rewritten``
    when the stage counted them; a stage's characters are known when every entry with documents in has them
    (an entry without documents in removed none). ``seconds`` (a record's ``stage_seconds``, parallel to its
    ``stages``) adds up each stage's time; a stage's seconds are None until a record carries them."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.counts: list[list[int]] = []  # rows_in, rows_out, chars_dropped, chars_rewritten, entries unknown
        self.seconds: list[float | None] = []

    def add(self, stages: Any, seconds: Any = None) -> None:
        if not isinstance(stages, list):  # a record written before records carried stages
            return
        timed = seconds if isinstance(seconds, list) and len(seconds) == len(stages) else None
        for i, (name, rows_in, rows_out, *chars) in enumerate(stages):
            if i == len(self.names):
                self.names.append(name)
                self.counts.append([0, 0, 0, 0, 0])
                self.seconds.append(None)
            if timed is not None and isinstance(timed[i], (int, float)):
                self.seconds[i] = (self.seconds[i] or 0.0) + float(timed[i])
            counts = self.counts[i]
            counts[0] += int(rows_in)
            counts[1] += int(rows_out)
            if len(chars) >= 2 and chars[0] is not None and chars[1] is not None:
                counts[2] += int(chars[0])
                counts[3] += int(chars[1])
            elif int(rows_in):
                counts[4] += 1

    def merge(self, other: FunnelSum) -> None:
        """Add ``other``'s sums (of other records) to these, stage by stage."""
        for i, name in enumerate(other.names):
            if i == len(self.names):
                self.names.append(name)
                self.counts.append([0, 0, 0, 0, 0])
                self.seconds.append(None)
            self.counts[i] = [a + b for a, b in zip(self.counts[i], other.counts[i], strict=True)]
            theirs = other.seconds[i]
            if theirs is not None:
                self.seconds[i] = (self.seconds[i] or 0.0) + theirs

    def as_json(self) -> list[list[Any]]:
        """The sums as data (``[name, counts, seconds]`` per stage), which :meth:`from_json` reads back."""
        return [[n, c, s] for n, c, s in zip(self.names, self.counts, self.seconds, strict=True)]

    @classmethod
    def from_json(cls, data: list[list[Any]]) -> FunnelSum:
        out = cls()
        for name, counts, seconds in data:
            out.names.append(str(name))
            out.counts.append([int(c) for c in counts])
            out.seconds.append(None if seconds is None else float(seconds))
        return out

    def rows(self) -> list[FunnelRow]:
        rows = []
        for n, c, s in zip(self.names, self.counts, self.seconds, strict=True):
            seconds = None if s is None else round(s, 4)
            rows.append(
                FunnelRow(n, c[0], c[1], seconds=seconds)
                if c[4]
                else FunnelRow(n, c[0], c[1], c[2], c[3], seconds=seconds)
            )
        return rows


def workflow_numbers(statuses: dict[str, dict[str, Any] | None], documents: list[str] | None) -> dict[str, Any]:
    """A workflow's own numbers from its phases' statuses (in order; None: not started) and the phases that
    write ``documents`` (None: unknown, then the first and the last phase): ``records`` the first phase's reader
    made, the ``funnel`` of every step between a document phase's reader and its writer (documents in, removed,
    out), the stages' drop ``reasons`` (counts by cause, the largest first), the ``documents`` and ``tokens``
    the last document phase wrote (None until it ran), the log2 distributions of the written documents' lengths
    and tokens (from the stats files, ``runs.stats``); ``complete`` once every phase is done without failures."""
    names = list(statuses)
    chosen = documents if documents is not None else sorted({names[0], names[-1]}, key=names.index)
    first = statuses[names[0]]
    records = None
    if first is not None and first["funnel"]:
        head = first["funnel"][0]
        records = head["rows_out"] if head["rows_in"] == 0 else head["rows_in"]
    funnel = []
    for name in (n for n in names if n in chosen):
        rows = (statuses[name] or {}).get("funnel") or []
        for i, row in enumerate(rows):
            if row["rows_in"] == 0 or i == len(rows) - 1:  # a reader (documents from files), the writer
                continue
            funnel.append({"phase": name, "stage": row["stage"], "documents_in": row["rows_in"],
                           "removed": row["dropped"], "documents_out": row["rows_out"]})  # fmt: skip
    reasons: dict[str, int] = {}
    for name in (n for n in names if n in chosen):
        counts = ((statuses[name] or {}).get("notes") or {}).get("counts") or {}
        for cause, count in counts.items():
            reasons[cause] = reasons.get(cause, 0) + int(count)
    lengths: list[int] = []
    tokens: list[int] = []
    for name in reversed([n for n in names if n in chosen]):  # what the last phases that had them wrote
        stages = ((statuses[name] or {}).get("stats") or {}).get("stages") or []
        lengths = lengths or next((s["length_log2"] for s in reversed(stages) if s["length_log2"]), [])
        tokens = tokens or next((s["token_log2"] for s in reversed(stages) if s["token_log2"]), [])
    last = statuses.get(chosen[-1]) if chosen else None
    complete = all(s is not None and not s["pending"] and not s["failed"] for s in statuses.values())
    return {
        "records": records,
        "funnel": funnel,
        "documents": None if last is None else last["rows_out"],
        "tokens": None if last is None else last.get("tokens"),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "length_log2": lengths,
        "token_log2": tokens,
        "document_phases": list(chosen),
        "complete": complete,
    }


def describe_numbers(numbers: dict[str, Any]) -> str:
    """``N records -> stage -k -> ... -> M documents -> T tokens`` (``(so far)`` while not complete)."""

    def n(value: Any) -> str:
        return "?" if value is None else f"{value:,}"

    parts = [f"{n(numbers['records'])} records"]
    parts += [f"{step['stage']} -{n(step['removed'])}" for step in numbers["funnel"]]
    parts.append(f"{n(numbers['documents'])} documents")
    if numbers.get("tokens") is not None:
        parts.append(f"{n(numbers['tokens'])} tokens")
    return " -> ".join(parts) + ("" if numbers["complete"] else " (so far: not complete)")


__all__ = ["FunnelRow", "FunnelSum", "describe_numbers", "funnel_of_records", "workflow_numbers"]
