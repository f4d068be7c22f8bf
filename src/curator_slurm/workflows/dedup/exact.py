"""Exact deduplication across the whole corpus, as a three-phase workflow over arrays: ``hash`` (xxh3-128 of the
normalised text, to buckets), ``find`` (the first occurrence survives), ``write`` (the input minus the listed
documents). Design: docs/design.md, section Deduplication."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.readers import FileReader
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.positions import document_positions
from curator_slurm.stages.text.compute import _compute, call, cast, replace_regex
from curator_slurm.tasks import DocumentBatch
from curator_slurm.workflows.dedup.common import KEY, bucket_phase, check_empty_text, write_phase
from curator_slurm.workflows.shuffle import BUCKET, BucketWriter, bucket_of
from curator_slurm.workflows.workflow import Phase, Workflow, phase_upstream

DEFAULT_BUCKETS = 64


#: Whitespace exactly as Python's ``str.split()`` sees it (RE2's ``\s`` alone is ASCII and misses ``\v``).
_SPACE = r"\s\x0b\x1c-\x1f\x85\p{Z}"
_NOT_PLAIN_SPACE = r"\t\n\r\f\x0b\x1c-\x1f\x85\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
#: Only what must change matches (a run of 2+ whitespace, or one that is not a plain space): about 12x
#: faster than replacing every ``\s+`` in RE2, which rewrites every word gap of every document.
_COLLAPSE = f"[{_SPACE}]{{2,}}|[{_NOT_PLAIN_SPACE}]"


def normalize_for_exact(texts: pa.ChunkedArray | pa.Array) -> pa.Array:
    """What counts as "the same text": ``" ".join(text.split())`` in Python's terms, i.e. leading and trailing
    whitespace dropped and every run of whitespace made one space (copies that differ only in line wrapping or
    trailing newlines are duplicates); case, punctuation and Unicode forms are kept (fuzzy deduplication
    handles near-copies)."""
    if pa.types.is_null(texts.type):
        texts = cast(texts, pa.string())
    collapsed = replace_regex(call("coalesce", texts, ""), _COLLAPSE, " ")
    return call("utf8_trim", collapsed, options=_compute.TrimOptions(" "))


def text_hashes(texts: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """xxh3-128 of each text's UTF-8 bytes, as an (n, 2) uint64 array (high, low)."""
    import xxhash

    digest = xxhash.xxh3_128_digest
    values = texts.to_pylist()
    joined = b"".join(digest(t.encode("utf-8")) for t in values)
    return np.frombuffer(joined, dtype=">u8").astype(np.uint64).reshape(len(values), 2)


class ExactHash(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Phase 1: (key, path, row, hash, bucket[, id]) for each document of a batch straight from the reader."""

    name = "exact_hash"

    def __init__(
        self,
        text_field: str,
        buckets: int,
        id_field: str | None = None,
        normalize: bool = True,
        empty_text: str = "dedup",
    ) -> None:
        check_empty_text(empty_text)
        self.text_field = text_field
        self.buckets = buckets
        self.id_field = id_field
        self.normalize = normalize
        self.empty_text = empty_text

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field, *([self.id_field] if self.id_field else [])]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [KEY, "path", "row", "hash_hi", "hash_lo", BUCKET, *([self.id_field] if self.id_field else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        for name in (self.text_field, self.id_field):
            if name and name not in table.column_names:
                where = task.where()
                raise InputError(f"{where}: no field {name!r}; the data has {table.column_names}")
        positions = document_positions(task)
        texts = table.column(self.text_field)
        normalized = normalize_for_exact(texts) if self.normalize else texts
        hashes = text_hashes(normalized)
        columns: dict[str, Any] = {
            KEY: positions.keys,
            "path": positions.paths,
            "row": positions.rows,
            "hash_hi": hashes[:, 0],
            "hash_lo": hashes[:, 1],
            BUCKET: bucket_of(hashes[:, 0], self.buckets).astype(np.int32),
        }
        if self.id_field:
            columns[self.id_field] = table.column(self.id_field)
        out = pa.table(columns)
        if self.empty_text == "keep":  # no row in the shuffle: never a duplicate, never a survivor
            length = call("utf8_length", call("coalesce", cast(normalized, pa.string()), ""))
            out = out.filter(call("greater", length, 0))
        return task.derive(out)


def first_of_groups(group_columns: list[np.ndarray], keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by (group columns, key), and for each row the index (in that order) of its group's
    first row: the survivor rule, "smallest key wins", as two vectorised arrays."""
    order = np.lexsort((keys, *reversed(group_columns)))
    if not len(order):
        return order, order
    starts = np.ones(len(order), dtype=bool)
    for column in group_columns:
        sorted_column = column[order]
        starts[1:] &= sorted_column[1:] == sorted_column[:-1]
    starts = ~starts
    starts[0] = True
    first = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
    return order, first


class FindExactDuplicates(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Phase 2: in one bucket, every document whose hash an earlier document (smaller key) already has,
    with that survivor."""

    name = "find_exact_duplicates"

    def __init__(self, id_field: str | None = None) -> None:
        self.id_field = id_field

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], None

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        keys = table.column(KEY).to_numpy()
        order, first = first_of_groups([table.column("hash_hi").to_numpy(), table.column("hash_lo").to_numpy()], keys)
        duplicate = first != np.arange(len(order))
        rows = order[duplicate]
        survivors = order[first[duplicate]]
        take, keep = pa.array(rows), pa.array(survivors)
        columns = {
            KEY: call("take", table.column(KEY), take),
            "path": call("take", table.column("path"), take),
            "row": call("take", table.column("row"), take),
            "survivor_key": call("take", table.column(KEY), keep),
            "survivor_path": call("take", table.column("path"), keep),
            "survivor_row": call("take", table.column("row"), keep),
        }
        if self.id_field:
            columns[self.id_field] = call("take", table.column(self.id_field), take)
            columns[f"survivor_{self.id_field}"] = call("take", table.column(self.id_field), keep)
        return task.derive(pa.table(columns))


class ExactDuplicates(Workflow):
    """Remove (or, with ``identify_only``, list) exact duplicates of ``text_field`` across the whole input.

    Args:
        reader: a file reader over the input (``JsonlReader``, ``ParquetReader``, ...).
        writer: the writer of the deduplicated corpus (its path is the output directory).
        text_field: the field compared.
        id_field: a field of the input's ids, added to the list of duplicates.
        buckets: the shuffle's buckets (tasks of the find phase); one bucket must fit a task's memory.
        identify_only: write the list of duplicates to the output directory instead of removing them.
        normalize: compare texts with whitespace runs made one space and the ends stripped (else byte for byte).
        work_dir: the shuffle, the duplicate list and the phases' run directories (default
            ``<output>/.curator-work``).
        name: the workflow's name.
        empty_text: ``"dedup"``: documents whose text is null, missing or empty after normalisation are one text
            (the first kept, as NeMo Curator's hash does); ``"keep"``: every one of them is kept.
        exclusion_writer: a writer for every removed document with the one it duplicated (``survivor_path``,
            ``survivor_row``, and ``survivor_<id_field>`` with an ``id_field``).
    """

    def __init__(
        self,
        reader: ProcessingStage,
        writer: BaseWriter,
        text_field: str = "text",
        id_field: str | None = None,
        buckets: int = DEFAULT_BUCKETS,
        identify_only: bool = False,
        normalize: bool = True,
        work_dir: str | os.PathLike | None = None,
        name: str = "exact-dedup",
        empty_text: str = "dedup",
        exclusion_writer: BaseWriter | None = None,
    ) -> None:
        check_empty_text(empty_text)
        if exclusion_writer is not None and identify_only:
            raise ValueError("exclusion_writer: identify_only=True removes nothing; its list names the duplicates")
        if buckets < 1:
            raise ValueError(f"buckets={buckets} must be >= 1")
        work = os.fspath(work_dir) if work_dir is not None else fs.join(writer.path, DEFAULT_WORK_DIR_NAME)
        shuffle_dir = fs.join(work, "shuffle", "hash")
        duplicates_dir = writer.path if identify_only else fs.join(work, "duplicates")
        hashing = _reader_with_fields(reader, [text_field, *([id_field] if id_field else [])])
        from curator_slurm.pipeline import Pipeline

        phases = [
            Phase(
                "hash",
                Pipeline(f"{name}-hash")
                .add_stage(hashing)
                .add_stage(ExactHash(text_field, buckets, id_field, normalize, empty_text))
                .add_stage(BucketWriter(shuffle_dir)),
            ),
            bucket_phase(
                "find",
                name,
                shuffle_dir,
                buckets,
                "hash",
                FindExactDuplicates(id_field),
                duplicates_dir,
                phase_upstream(work, "hash"),
            ),
        ]
        if not identify_only:
            phases.append(write_phase(name, reader, phase_upstream(work, "find"), writer, exclusion_writer))
        super().__init__(name, work, phases)


def _reader_with_fields(reader: ProcessingStage, fields: list[str]) -> FileReader:
    """A copy of a file reader (any :class:`FileReader`) that reads only ``fields`` (the hash phase needs no more)."""
    if not isinstance(reader, FileReader):
        raise TypeError(
            f"the reader must be a FileReader (JsonlReader, ParquetReader or a subclass of "
            f"curator_slurm.stages.FileReader), got {type(reader).__name__}"
        )
    return reader.with_fields(fields)
