"""The stage every datatrove filter here is: decide for a whole batch, keep, and write what it removed.

A datatrove filter answers, per document, keep or drop-with-a-reason (``"gopher_short_doc"``); C4's
quality filter also rewrites the text it keeps. :class:`DatatroveFilter` asks its subclass for the
decisions of a whole batch at once (:meth:`DatatroveFilter.decide`), keeps the documents it accepts, and
hands the others, with their reason in the column ``filter_reason`` (datatrove's metadata key), to the
``exclusion_writer`` when one is given (datatrove's parameter of the same name).

The excluded documents of a batch become one file of the exclusion writer named as the batch's own output
would be (source task id plus lineage, :func:`..writers.output_stem`), written
atomically: a retried or re-run source task rewrites the same file with the same documents, so each excluded
document is in exactly one file however often its task ran. Give each filter its own directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.io.writers import BaseWriter, output_stem
from curator_slurm.stages.notes import note_removed_chars
from curator_slurm.stages.text.compute import filter_table, from_numpy
from curator_slurm.stages.text.split import strings
from curator_slurm.tasks import DocumentBatch

#: The column that says why an excluded document was removed (datatrove's ``metadata["filter_reason"]``).
REASON_FIELD = "filter_reason"


@dataclass(frozen=True)
class Decision:
    """A filter's verdict on a batch: which rows to keep, why each other row goes (``None`` for a kept
    row), and, for a filter that rewrites, the kept rows' new texts (all rows, ``None`` if unchanged)."""

    keep: np.ndarray
    reasons: list[str | None]
    texts: pa.Array | None = None


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


class DatatroveFilter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Base of the datatrove-named filters: ``text_field`` is the text (datatrove's ``doc.text``),
    ``exclusion_writer`` a writer (e.g. ``JsonlWriter(dir)``) for the removed documents."""

    def __init__(self, exclusion_writer: BaseWriter | None = None, text_field: str = "text") -> None:
        if exclusion_writer is not None and not isinstance(exclusion_writer, BaseWriter):
            raise TypeError(
                f"{type(self).__name__}(exclusion_writer={exclusion_writer!r}): give a writer, e.g. JsonlWriter(path)"
            )
        self.exclusion_writer = exclusion_writer
        # In the fingerprint: where the removed documents go is part of what the stage produces.
        self.exclusion_path = exclusion_writer.path if exclusion_writer is not None else None
        self.text_field = text_field

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        raise NotImplementedError(f"{type(self).__name__} must implement decide()")

    def column(self, task: DocumentBatch, field: str, parameter: str) -> pa.ChunkedArray:
        """The batch's column ``field``, or an error naming the batch's files, the field and the fix."""
        table = task.data
        if field not in table.column_names:
            where = ", ".join(task.metadata.get("files", [])) or task.task_id
            raise InputError(
                f"{where}: {type(self).__name__} needs the field {field!r}; the data has {table.column_names}. "
                f"Set {parameter}= to one of them."
            )
        return table.column(field)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        texts = strings(self.column(task, self.text_field, "text_field"))
        decision = self.decide(texts, task)
        if decision.texts is not None:
            at = table.column_names.index(self.text_field)
            table = table.set_column(at, self.text_field, decision.texts.cast(table.schema.field(at).type))
        keep = from_numpy(decision.keep, pa.bool_())
        if self.exclusion_writer is not None and not decision.keep.all():
            self._write_excluded(task, decision)
        out = task.derive(filter_table(table, keep))
        counted = self.counted_texts(task, texts)
        if counted is not None:  # the characters it removed, for the funnel
            note_removed_chars(out, counted, keep, decision.texts if counted is texts else None)
        return out

    def counted_texts(self, task: DocumentBatch, texts: pa.Array) -> pa.Array | pa.ChunkedArray | None:
        """The texts whose characters the funnel counts as removed: those the filter decides on (a filter
        deciding on another field says which; None: none to count)."""
        return texts

    def _write_excluded(self, task: DocumentBatch, decision: Decision) -> None:
        """The removed documents (their text as it came in) with their reasons, as one file."""
        dropped = from_numpy(~decision.keep, pa.bool_())
        excluded = filter_table(task.data, dropped)
        reasons = pa.array([decision.reasons[i] for i in np.flatnonzero(~decision.keep).tolist()], pa.string())
        if REASON_FIELD in excluded.column_names:
            excluded = excluded.drop_columns([REASON_FIELD])
        excluded = excluded.append_column(REASON_FIELD, reasons)
        writer = self.exclusion_writer
        assert writer is not None
        writer.process(task.derive(excluded))

    def output_dirs(self) -> list[str]:
        return [] if self.exclusion_writer is None else self.exclusion_writer.output_dirs()

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        if self.exclusion_writer is not None:
            fs.makedirs(self.exclusion_writer.path)


def batch_seed(seed: int | None, task: DocumentBatch) -> np.random.Generator:
    """A random generator for one batch, from ``seed`` and the batch's lineage (source task id and position
    in it): the same batch draws the same numbers in every run, shard and executor (datatrove's filters draw
    from one generator per worker, in the order documents reach it, so their draws depend on scheduling)."""
    key = xxhash.xxh64_intdigest(output_stem(task).encode())
    return np.random.default_rng([0 if seed is None else int(seed), key])


__all__ = ["REASON_FIELD", "DatatroveFilter", "Decision", "batch_seed", "first_reason"]
