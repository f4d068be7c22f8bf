"""What exact and fuzzy deduplication share: the list of documents to drop (Parquet sorted by document key, in row
groups of :data:`ROW_GROUP` rows), the phases that write and read it, and :class:`RemoveDuplicates`, the filter
that drops them. Design: docs/design.md, "Deduplication"."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm._lazy import LazyModule
from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.filters.decide import BaseFilter, Decision
from curator_slurm.stages.filters.score import document_texts
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.positions import ROW_BITS, document_positions
from curator_slurm.stages.text.compute import call, filter_table
from curator_slurm.tasks import DocumentBatch
from curator_slurm.workflows.shuffle import SortedFileWriter, read_overlapping
from curator_slurm.workflows.workflow import Phase

pq = LazyModule("pyarrow.parquet")

KEY = "key"
#: Rows per row group of a duplicates file: a write task reads whole row groups, so smaller groups mean
#: less reading for a narrow key range, larger ones fewer footer entries.
ROW_GROUP = 65_536


class SortedKeyWriter(SortedFileWriter):
    """A list of documents (or edges) sorted by ``key``, in row groups of :data:`ROW_GROUP` rows.

    Args:
        path: the directory of the lists (local, or a URI).
    """

    name = "sorted_key_writer"

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(path, KEY, ROW_GROUP)


def bucket_phase(
    phase: str,
    workflow: str,
    bucket_dir: str,
    buckets: int,
    source: str,
    stage: ProcessingStage,
    out_dir: str,
    reads: Upstream,
) -> Phase:
    """A phase with one source task per shuffle bucket: the bucket's rows (written by the phase ``reads`` into
    ``bucket_dir``; ``source`` names the shuffle in the tasks' ids) through ``stage``, its result sorted by key
    into ``out_dir``."""
    from curator_slurm.pipeline import Pipeline
    from curator_slurm.workflows.shuffle import BucketReader, BucketSource

    pipeline = (
        Pipeline(f"{workflow}-{phase}")
        .add_stage(BucketSource(bucket_dir, buckets, f"{workflow}/{source}", reads))
        .add_stage(BucketReader())
        .add_stage(stage)
        .add_stage(SortedKeyWriter(out_dir))
    )
    return Phase(phase, pipeline, max_shards=buckets)


def write_phase(
    name: str,
    reader: ProcessingStage,
    duplicates: Upstream,
    writer: BaseWriter,
    exclusion_writer: BaseWriter | None = None,
) -> Phase:
    """The last phase of a dedup workflow: the input read again, without the documents the phase ``duplicates``
    listed, written (and the removed ones to ``exclusion_writer``, with the document each duplicated)."""
    from curator_slurm.pipeline import Pipeline

    remove = RemoveDuplicates(duplicates, exclusion_writer=exclusion_writer)
    pipeline = Pipeline(f"{name}-write").add_stage(reader).add_stage(remove)
    return Phase("write", pipeline.add_stage(writer))


def listed_in_range(files: list[str], low: int, high: int, columns: list[str] | None = None) -> pa.Table | None:
    """The rows (``columns`` of them, default all) of the sorted key ``files`` whose key is in ``[low, high]``, in
    key order within each file; None when there are none. Row groups whose statistics overlap the range are
    read; others are skipped, their footers parsed once per process."""
    found = []
    for path in files:
        table = read_overlapping(path, KEY, low, high, columns=columns)
        if table is not None:
            keys = table.column(KEY).to_numpy()
            found.append(filter_table(table, pa.array((keys >= low) & (keys <= high))))
    found = [t for t in found if t.num_rows]
    if not found:
        return None
    return pa.concat_tables(found, promote_options="default") if len(found) > 1 else found[0]


def keys_in_range(files: list[str], low: int, high: int) -> np.ndarray:
    """Every key in ``[low, high]`` listed by the sorted key ``files`` (:func:`listed_in_range`)."""
    table = listed_in_range(files, low, high, columns=[KEY])
    return table.column(KEY).to_numpy() if table is not None else np.empty(0, np.int64)


#: What an exclusion of deduplication names of the document a removed one duplicated, from whichever columns
#: the list has: exact deduplication's ``survivor_*``, fuzzy deduplication's ``group_*`` (its group's first).
SURVIVOR = {"survivor_key": ("survivor_key", "group_key"), "survivor_path": ("survivor_path", "group_path"),
            "survivor_row": ("survivor_row", "group_row")}  # fmt: skip


def survivor_columns(listed: pa.Table) -> dict[str, Any]:
    """The columns of a duplicates list that name each document's survivor, under the names exclusions give
    them: ``survivor_key``, ``survivor_path``, ``survivor_row``, and ``survivor_<id>`` for an id (exact
    deduplication's ``survivor_<id_field>``, fuzzy's ``group_<id_field>``)."""
    names = listed.column_names
    out: dict[str, Any] = {}
    for name, options in SURVIVOR.items():
        found = next((c for c in options if c in names), None)
        if found is not None:
            out[name] = listed.column(found)
    if "survivor_row" not in out and "survivor_key" in out:  # a list without names: the row is in the key
        keys = out["survivor_key"]
        out["survivor_row"] = call("bit_wise_and", keys, pa.scalar((1 << ROW_BITS) - 1, keys.type))
    for column in names:
        for prefix in ("survivor_", "group_"):
            rest = column[len(prefix) :]
            if column.startswith(prefix) and rest not in ("key", "path", "row"):
                out.setdefault(f"survivor_{rest}", listed.column(column))
    return out


class RemoveDuplicates(BaseFilter):
    """Drop the documents that the phase ``duplicates`` lists (by document key). Put it right after the reader:
    keys are document positions, known only while the batch still has every row the reader read.

    With ``exclusion_writer``, each removed document is written with ``filter_reason`` ``duplicate`` and the
    document it duplicated: ``survivor_key``, and ``survivor_path`` and ``survivor_row`` (its input file,
    relative to the reader's root, and row) and ``survivor_<id field>`` where the list holds them.

    Args:
        duplicates: the phase whose recorded sorted key files list the documents to drop (a dedup workflow's find
            or components phase).
        exclusion_writer: a writer for the removed documents (None: none).
        text_field: the document's text, whose characters the funnel counts as removed.
    """

    name = "remove_duplicates"

    def __init__(
        self, duplicates: Upstream, exclusion_writer: BaseWriter | None = None, text_field: str = "text"
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        self.duplicates = duplicates

    def params(self) -> dict[str, Any]:
        # Where the list lives is not what the stage does (the phase before is fingerprinted); where the removed
        # documents go is.
        return {} if self.exclusion_path is None else {"exclusion_path": self.exclusion_path}

    def upstreams(self) -> list[Any]:
        return [self.duplicates]

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], []

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def reason(self) -> str:
        return "duplicate"

    def texts(self, task: DocumentBatch) -> None:
        return None  # the documents' positions decide, not their text

    def counted_texts(self, task: DocumentBatch, texts: Any) -> pa.ChunkedArray | None:
        return document_texts(task, self.text_field)

    def decide(self, texts: None, task: DocumentBatch) -> Decision:
        if task.num_items == 0:
            return Decision(np.ones(0, dtype=bool))
        keys = document_positions(task).keys
        low, high = int(keys.min()), int(keys.max())
        files = files_of(self.duplicates, suffix=".parquet")
        if self.exclusion_writer is None:
            return Decision(~np.isin(keys, keys_in_range(files, low, high)))
        listed = listed_in_range(files, low, high)
        if listed is None:
            return Decision(np.ones(len(keys), dtype=bool))
        listed_keys = listed.column(KEY).to_numpy()
        order = np.argsort(listed_keys, kind="stable")
        at = np.clip(np.searchsorted(listed_keys[order], keys), 0, len(order) - 1)
        found = listed_keys[order][at] == keys
        # For each row, the list's row that names it (a null index where it is not listed): the details.
        index = pa.array(np.where(found, order[at], 0), pa.int64(), mask=~found)
        details = {name: call("take", values, index) for name, values in survivor_columns(listed).items()}
        return Decision(~found, details=details)


#: What deduplication does with documents whose text is null, missing or empty (after normalisation):
#: "dedup" (the default, as NeMo Curator hashes them): they are all one text, the first kept and the rest
#: duplicates of it; "keep": every one is kept and none is anyone's duplicate.
EMPTY_TEXT_CHOICES = ("dedup", "keep")


def check_empty_text(empty_text: str) -> None:
    if empty_text not in EMPTY_TEXT_CHOICES:
        raise ValueError(f"empty_text={empty_text!r} must be one of {EMPTY_TEXT_CHOICES}")
