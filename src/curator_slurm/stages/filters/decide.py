"""The one filter contract: a filter decides for a whole batch at once (:class:`Decision`), and :class:`BaseFilter`
does the rest (keeps, notes reasons and removed characters, writes exclusions). Design: docs/design.md, Filters."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import xxhash

from curator_slurm import fs
from curator_slurm.errors import FilterError, InputError
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage, Resources
from curator_slurm.stages.io.writers import BaseWriter, output_stem
from curator_slurm.stages.notes import add_notes, note_removed_chars
from curator_slurm.stages.text.compute import call, filter_table, from_numpy, to_numpy
from curator_slurm.stages.text.split import strings
from curator_slurm.tasks import DocumentBatch, Task

#: The column that says why an excluded document was removed (datatrove's ``metadata["filter_reason"]``).
REASON_FIELD = "filter_reason"


@dataclass(frozen=True)
class Decision:
    """A filter's verdict on a batch, one entry per row.

    ``keep``: which rows to keep (a numpy bool array, or an Arrow boolean array in which null drops).
    ``reasons``: why each dropped row goes (``None`` for a kept row, or a dropped one without a reason); leave
    it out and every dropped row goes for the filter's :meth:`BaseFilter.reason`, with no notes (the funnel
    row says how many). ``texts``: for a filter that rewrites, every row's new text (the kept rows' are kept).
    ``columns``: fields written on every row, kept and excluded (scores, the language). ``details``: fields
    written on the excluded rows only (the document a duplicate duplicated)."""

    keep: Any
    reasons: list[str | None] | None = None
    texts: pa.Array | None = None
    columns: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)


def first_reason(rules: list[tuple[str, np.ndarray]], rows: int) -> Decision:
    """The decision of checks made in order, each ``(reason, dropped rows)``: a row goes for the first
    check it fails, as datatrove's ``filter`` returns at the first failing test."""
    reasons: list[str | None] = [None] * rows
    keep = np.ones(rows, dtype=bool)
    for reason, dropped in rules:
        newly = np.flatnonzero(keep & dropped)
        for i in newly.tolist():
            reasons[i] = reason
        keep[newly] = False
    return Decision(keep, reasons)


def check_writer(owner: str, writer: Any) -> BaseWriter | None:
    """``writer`` if it is a writer (or None); a clear error otherwise."""
    if writer is not None and not isinstance(writer, BaseWriter):
        raise TypeError(f"{owner}(exclusion_writer={writer!r}): give a writer, e.g. JsonlWriter(path)")
    return writer


def set_column(table: pa.Table, name: str, values: Any) -> pa.Table:
    """``table`` with ``values`` as the column ``name``, replacing a column of that name in place."""
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


FilterT = TypeVar("FilterT", bound="BaseFilter")


class BaseFilter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """The base of every filter: implement :meth:`decide`; ``text_field`` is the field it reads (datatrove's
    ``doc.text``), ``exclusion_writer`` a writer (e.g. ``JsonlWriter(dir)``) for the removed documents.

    The class attributes are the defaults, so a subclass whose ``__init__`` does not call this one (NeMo
    Curator's filters need not) is a filter reading ``text`` with no exclusions.

    Args:
        exclusion_writer: where the removed documents go, with their reason (None: nowhere).
        text_field: the field :meth:`decide` gets, and whose characters the funnel counts as removed.
    """

    text_field: str = "text"
    exclusion_writer: BaseWriter | None = None
    exclusion_path: str | None = None

    def __init__(self, exclusion_writer: BaseWriter | None = None, text_field: str = "text") -> None:
        self.exclusion_writer = check_writer(type(self).__name__, exclusion_writer)
        # In the fingerprint: where the removed documents go is part of what the stage produces.
        self.exclusion_path = exclusion_writer.path if exclusion_writer is not None else None
        self.text_field = text_field

    # --- what a filter implements --------------------------------------------------------------------------
    def decide(self, texts: Any, task: DocumentBatch) -> Decision:
        """The decision on ``task``: ``texts`` is :meth:`texts` of it (by default its ``text_field``, one
        ``large_string`` array, a null read as the empty text)."""
        raise NotImplementedError(f"{type(self).__name__} must implement decide()")

    def texts(self, task: DocumentBatch) -> Any:
        """What :meth:`decide` gets: the ``text_field`` column as one string array without nulls."""
        return strings(self.column(task, self.text_field, "text_field"))

    def counted_texts(self, task: DocumentBatch, texts: Any) -> Any:
        """The texts whose characters the funnel counts as removed: those the filter decides on (a filter
        deciding on another field, such as a URL, says which; None: none to count)."""
        return texts

    def reason(self) -> str | None:
        """The reason of a dropped row when the decision gives none: the filter's name."""
        return self.name

    # --- declarations and set-up -----------------------------------------------------------------------
    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def column(self, task: DocumentBatch, name: str, parameter: str) -> pa.ChunkedArray:
        """The batch's column ``name``, or an error naming the batch's files, the field and the fix."""
        table = task.data
        if name not in table.column_names:
            where = task.where()
            raise InputError(
                f"{where}: {type(self).__name__} needs the field {name!r}; the data has {table.column_names}. "
                f"Set {parameter}= to one of them."
            )
        return table.column(name)

    def output_dirs(self) -> list[str]:
        return [] if self.exclusion_writer is None else self.exclusion_writer.output_dirs()

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        if self.exclusion_writer is not None:
            fs.makedirs(self.exclusion_writer.path)

    def end_source(self, source: Task, failed: bool, whole: bool = True) -> list[Task]:
        """The exclusion file of ``source`` published (or dropped): it is not handed on, nor recorded."""
        if self.exclusion_writer is not None:
            self.exclusion_writer.end_source(source, failed, whole)
        return []

    def teardown(self) -> None:
        if self.exclusion_writer is not None:
            self.exclusion_writer.teardown()

    def remove_dead_temporaries(self) -> fs.Cleanup:
        """What dead writers on this host left half-written in the exclusion directory, deleted."""
        if self.exclusion_writer is None:
            return fs.Cleanup("")
        return self.exclusion_writer.remove_dead_temporaries()

    def remove_temporaries(self, pids: Any) -> list[str]:
        """The temporary exclusion files that processes ``pids`` (killed while writing) left, deleted."""
        return [] if self.exclusion_writer is None else self.exclusion_writer.remove_temporaries(pids)

    def with_(
        self: FilterT,
        name: str | None = None,
        resources: Resources | None = None,
        batch_size: int | None = None,
        max_retries: int | None = None,
        exclusion_writer: BaseWriter | None = None,
    ) -> FilterT:
        """A copy with some settings overridden (see :meth:`ProcessingStage.with_`); ``exclusion_writer``
        gives the copy a writer for what it removes (any filter, a NeMo ``DocumentFilter`` too)."""
        new = super().with_(name, resources, batch_size, max_retries)
        if exclusion_writer is not None:
            new = copy.copy(new)
            new.exclusion_writer = check_writer(type(self).__name__, exclusion_writer)
            new.exclusion_path = exclusion_writer.path
        return new

    # --- what the base does --------------------------------------------------------------------------------
    def process(self, task: DocumentBatch) -> DocumentBatch:
        texts = self.texts(task)
        return self.apply(task, texts, self.decide(texts, task))

    def apply(self, task: DocumentBatch, texts: Any, decision: Decision) -> DocumentBatch:
        """``task`` filtered by ``decision``: columns written, text rewritten, the dropped rows written to the
        exclusion writer, their reasons and characters noted."""
        table = task.data
        rows = table.num_rows
        keep = _keep_array(self, decision.keep, rows)
        for name, values in decision.columns.items():
            table = set_column(table, name, values)
        annotated = table  # the documents as they came in, with the filter's columns: what exclusions hold
        if decision.texts is not None:
            at = table.column_names.index(self.text_field)
            table = table.set_column(at, self.text_field, decision.texts.cast(table.schema.field(at).type))
        dropped = None
        if self.exclusion_writer is not None or decision.reasons is not None:
            dropped = ~to_numpy(call("coalesce", keep, False)) if rows else np.zeros(0, dtype=bool)
        out = task.derive(filter_table(table, keep))
        if dropped is not None and dropped.any():
            where = np.flatnonzero(dropped)
            reasons = self._reasons(decision, where)
            if decision.reasons is not None:
                counts: dict[str, int] = {}
                for r in reasons:
                    if r is not None:
                        counts[r] = counts.get(r, 0) + 1
                add_notes(out.metadata, counts)
            if self.exclusion_writer is not None:
                self._write_excluded(task, annotated, where, reasons, decision.details)
        counted = self.counted_texts(task, texts)
        if counted is not None:  # the characters it removed, for the funnel
            note_removed_chars(out, counted, keep, decision.texts)
        return out

    def _reasons(self, decision: Decision, where: np.ndarray) -> list[str | None]:
        if decision.reasons is None:
            return [self.reason()] * len(where)
        return [decision.reasons[i] for i in where.tolist()]

    def _write_excluded(
        self,
        task: DocumentBatch,
        table: pa.Table,
        where: np.ndarray,
        reasons: list[str | None],
        details: Mapping[str, Any],
    ) -> None:
        """The removed documents (their text as it came in) with their reasons and details, as one file."""
        at = pa.array(where, pa.int64())
        excluded = call("take", table, at)
        for name, values in details.items():
            excluded = set_column(excluded, name, call("take", values, at))
        excluded = set_column(excluded, REASON_FIELD, pa.array(reasons, pa.string()))
        writer = self.exclusion_writer
        assert writer is not None
        writer.process(task.derive(excluded))


def _keep_array(f: BaseFilter, keep: Any, rows: int) -> Any:
    """A decision's ``keep`` as an Arrow boolean array of ``rows`` entries, or a FilterError naming the filter."""
    if isinstance(keep, np.ndarray) and keep.dtype == bool:
        keep = from_numpy(keep, pa.bool_())
    if not isinstance(keep, (pa.Array, pa.ChunkedArray)) or not pa.types.is_boolean(keep.type):
        raise FilterError(f"{type(f).__name__}.decide returned keep={type(keep).__name__}; give a bool per row")
    if len(keep) != rows:
        raise FilterError(f"{type(f).__name__}.decide returned {len(keep)} decisions for {rows} documents")
    return keep


class DatatroveFilter(BaseFilter):
    """datatrove's spelling of :class:`BaseFilter`, the base of the datatrove-named filters."""


def batch_seed(seed: int | None, task: DocumentBatch) -> np.random.Generator:
    """A random generator for one batch, from ``seed`` and the batch's lineage (source task id and position
    in it): the same batch draws the same numbers in every run, shard and executor (datatrove's filters draw
    from one generator per worker, in the order documents reach it, so their draws depend on scheduling)."""
    key = xxhash.xxh64_intdigest(output_stem(task).encode())
    return np.random.default_rng([0 if seed is None else int(seed), key])


__all__ = [
    "REASON_FIELD",
    "BaseFilter",
    "DatatroveFilter",
    "Decision",
    "batch_seed",
    "check_writer",
    "first_reason",
    "set_column",
]
