"""What exact and fuzzy deduplication share: the list of documents to drop, and the stage that drops them.

The "find" side of a dedup workflow writes, per bucket (or component partition), the documents that do not
survive as a Parquet file sorted by document key (:mod:`curator_slurm.stages.positions`: ``file_index << 32 | row``,
which sorts as (relative path, row) does), in row groups of :data:`ROW_GROUP` rows with key statistics.
The "write" side re-reads the input with the same reader, so its source tasks and output names are those
of a plain pipeline over the same input, and :class:`RemoveDuplicates` drops the listed documents: each
task reads only the row groups whose key range overlaps its own files' keys.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm._lazy import LazyModule
from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.positions import document_positions
from curator_slurm.stages.text.compute import filter_table
from curator_slurm.tasks import DocumentBatch
from curator_slurm.workflows.shuffle import SortedFileWriter, read_overlapping
from curator_slurm.workflows.workflow import Phase

pq = LazyModule("pyarrow.parquet")

KEY = "key"
#: Rows per row group of a duplicates file: a write task reads whole row groups, so smaller groups mean
#: less reading for a narrow key range, larger ones fewer footer entries.
ROW_GROUP = 65_536


class SortedKeyWriter(SortedFileWriter):
    """A list of documents (or edges) sorted by ``key``, in row groups of :data:`ROW_GROUP` rows."""

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


def write_phase(name: str, reader: ProcessingStage, duplicates: Upstream, writer: BaseWriter) -> Phase:
    """The last phase of a dedup workflow: the input read again, without the documents the phase ``duplicates``
    listed, written."""
    from curator_slurm.pipeline import Pipeline

    pipeline = Pipeline(f"{name}-write").add_stage(reader).add_stage(RemoveDuplicates(duplicates))
    return Phase("write", pipeline.add_stage(writer))


def keys_in_range(files: list[str], low: int, high: int) -> np.ndarray:
    """Every key in ``[low, high]`` listed by the sorted key ``files`` (row groups whose statistics overlap the
    range are read; others are skipped, their footers parsed once per process)."""
    found = []
    for path in files:
        table = read_overlapping(path, KEY, low, high, columns=[KEY])
        if table is not None:
            keys = table.column(KEY).to_numpy()
            found.append(keys[(keys >= low) & (keys <= high)])
    return np.concatenate(found) if found else np.empty(0, np.int64)


class RemoveDuplicates(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Drop the documents that ``duplicates_dir`` lists (by document key). Put it right after the reader:
    keys are document positions, known only while the batch still has every row the reader read."""

    name = "remove_duplicates"

    def __init__(self, duplicates: Upstream) -> None:
        self.duplicates = duplicates

    def params(self) -> dict[str, Any]:
        return {}  # where the list lives is not what the stage does; the phase before is fingerprinted

    def upstreams(self) -> list[Any]:
        return [self.duplicates]

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], []

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if task.num_items == 0:
            return task
        keys = document_positions(task).keys
        dropped = keys_in_range(files_of(self.duplicates, suffix=".parquet"), int(keys.min()), int(keys.max()))
        if not len(dropped):
            return task
        keep = ~np.isin(keys, dropped)
        return task.derive(filter_table(task.data, pa.array(keep)))


#: What deduplication does with documents whose text is null, missing or empty (after normalisation):
#: "dedup" (the default, as NeMo Curator hashes them): they are all one text, the first kept and the rest
#: duplicates of it; "keep": every one is kept and none is anyone's duplicate.
EMPTY_TEXT_CHOICES = ("dedup", "keep")


def check_empty_text(empty_text: str) -> None:
    if empty_text not in EMPTY_TEXT_CHOICES:
        raise ValueError(f"empty_text={empty_text!r} must be one of {EMPTY_TEXT_CHOICES}")
