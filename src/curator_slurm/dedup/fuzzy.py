"""Fuzzy deduplication (MinHash + LSH + connected components) as a four-phase workflow over arrays, on CPUs.

1. ``signatures``: per input source task, each document's word ``ngram``-shingles are MinHashed
   (:mod:`curator_slurm.dedup.minhash`, vectorised) and cut into ``bands`` x ``rows``; one row per
   (document, band) goes to the shuffle bucket of its (band, value).
2. ``candidates``: per bucket, documents that share a (band, value) are joined as a star to the smallest
   key (|group| - 1 edges), optionally keeping only edges whose estimated Jaccard similarity (from 8-bit
   signatures carried through the shuffle) is at least ``jaccard_threshold``.
3. ``components``: one task reads every bucket's edges chunk by chunk and finds connected components in
   memory proportional to the documents that have an edge, not to the edges
   (:mod:`curator_slurm.dedup.components`); every member but the smallest key of its component is listed.
4. ``write``: the input again, minus the listed documents, through the writer given (same output names
   as a plain ``reader -> writer`` pipeline).

The survivor of each group is its smallest key: the **first occurrence in (input path relative to the
reader's root, row) order**, as in exact dedup. ``identify_only=True`` stops after phase 3 and writes the
list (document, its group's survivor, and their paths and rows) to the output directory.

The probability that a pair at Jaccard similarity s becomes a candidate is ``1 - (1 - s**rows)**bands``
(:func:`curator_slurm.dedup.minhash.candidate_probability`); the reference tabulates it for the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from .._lazy import LazyModule
from ..errors import InputError
from ..positions import ROW_BITS, document_positions
from ..shuffle import BUCKET, BucketReader, BucketSource, BucketWriter, bucket_of
from ..stages.base import ProcessingStage
from ..stages.partitioning import input_root, list_files
from ..stages.writers import BaseWriter
from ..tasks import DocumentBatch, FileGroupTask
from ..workflow import Phase, Workflow
from . import minhash
from .common import KEY, SortedKeyWriter, write_phase
from .exact import _reader_with_fields

pq = LazyModule("pyarrow.parquet")

DEFAULT_BUCKETS = 64
#: Bits of each signature value carried through the shuffle for verification (160 bytes a row at 8).
VERIFY_BITS = 8


class MinHashBands(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Phase 1: (band, value, key, bucket[, signature]) rows for a batch straight from the reader."""

    name = "minhash_bands"

    def __init__(
        self, text_field: str, ngram: int, bands: int, rows: int, seed: int, buckets: int, verify: bool
    ) -> None:
        self.text_field = text_field
        self.ngram = ngram
        self.bands = bands
        self.rows = rows
        self.seed = seed
        self.buckets = buckets
        self.verify = verify

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], ["band", "value", KEY, BUCKET, *(["signature"] if self.verify else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            where = ", ".join(task.metadata.get("files", [])) or task.task_id
            raise InputError(
                f"{where}: no field {self.text_field!r} to deduplicate on; the data has {table.column_names}"
            )
        keys = document_positions(task).keys
        offsets, hashes = minhash.shingle_hashes(table.column(self.text_field), self.ngram, self.seed)
        signatures = minhash.minhash_signatures(offsets, hashes, self.bands * self.rows, self.seed)
        band_ids, values, row_keys = minhash.flatten_bands(
            minhash.band_hashes(signatures, self.bands, self.rows, self.seed), keys
        )
        columns: dict[str, Any] = {
            "band": band_ids,
            "value": values,
            KEY: row_keys,
            BUCKET: bucket_of(values, self.buckets).astype(np.int32),
        }
        if self.verify:
            small = signatures.astype(np.uint8)  # the lowest 8 bits of each value (b-bit MinHash)
            per_row = np.repeat(small, self.bands, axis=0)
            columns["signature"] = pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(small.shape[1]), len(per_row), [None, pa.py_buffer(np.ascontiguousarray(per_row).tobytes())]
            )
        return task.derive(pa.table(columns))


class CandidateEdges(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Phase 2: the star edges (u < v) of every (band, value) group of one bucket."""

    name = "candidate_edges"

    def __init__(self, jaccard_threshold: float | None) -> None:
        self.jaccard_threshold = jaccard_threshold

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [KEY, "v"]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        signatures = None
        if self.jaccard_threshold is not None:
            column = table.column("signature").combine_chunks()
            width = column.type.byte_width
            signatures = np.frombuffer(column.buffers()[1], dtype=np.uint8)[
                column.offset * width : (column.offset + len(column)) * width
            ].reshape(len(column), width)
        u, v = minhash.candidate_edges(
            table.column("band").to_numpy(),
            table.column("value").to_numpy(),
            table.column(KEY).to_numpy(),
            signatures=signatures,
            threshold=self.jaccard_threshold,
            bits=VERIFY_BITS if signatures is not None else None,
        )
        return task.derive(pa.table({KEY: u, "v": v}))


class ConnectedComponents(ProcessingStage[FileGroupTask, DocumentBatch]):
    """Phase 3 (one task): every edge file, read in chunks, into (key, group_key) for each document that is
    not the survivor of its component; with ``files`` (identify-only), also the paths and rows of both."""

    name = "connected_components"

    def __init__(self, edges_dir: str | os.PathLike, input_paths: Any = None, extensions: list[str] | None = None):
        self.edges_dir = os.fspath(edges_dir)
        self.input_paths = input_paths
        self.extensions = extensions

    def params(self) -> dict[str, Any]:
        return {"names_paths": self.input_paths is not None}  # where data lives is not what the stage does

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], None

    def _edges(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        names = sorted(n for n in os.listdir(self.edges_dir) if n.endswith(".parquet") and not n.startswith("."))
        for name in names:
            with pq.ParquetFile(os.path.join(self.edges_dir, name)) as f:
                for batch in f.iter_batches(batch_size=1 << 20, columns=[KEY, "v"]):
                    yield batch.column(0).to_numpy(), batch.column(1).to_numpy()

    def process(self, task: FileGroupTask) -> DocumentBatch:
        from .components import duplicate_members

        keys, groups = duplicate_members(self._edges) if os.path.isdir(self.edges_dir) else (np.empty(0, np.int64),) * 2
        columns: dict[str, Any] = {KEY: keys, "group_key": groups}
        if self.input_paths is not None:
            files = list_files(self.input_paths, self.extensions)
            root = input_root(self.input_paths)
            names = np.array([os.path.relpath(f, root).replace(os.sep, "/") for f in files], dtype=object)
            mask = (1 << ROW_BITS) - 1
            columns.update(
                path=pa.array(names[keys >> ROW_BITS] if len(keys) else [], pa.string()),
                row=keys & mask,
                group_path=pa.array(names[groups >> ROW_BITS] if len(groups) else [], pa.string()),
                group_row=groups & mask,
            )
        return task.derive(pa.table(columns), cls=DocumentBatch)


class FuzzyDuplicates(Workflow):
    """Remove (or, with ``identify_only``, list) near-duplicates of ``text_field`` across the whole input.

    ``ngram`` words per shingle (5), ``bands`` x ``rows`` (20 x 8 = 160 MinHash permutations; a pair at
    Jaccard 0.8 becomes a candidate with probability 0.975), ``seed`` for every hash, ``buckets`` of the
    shuffle (tasks of the candidates phase), and ``jaccard_threshold`` (None: no check) to drop candidate
    edges whose estimated similarity is lower. ``work_dir`` defaults to ``<output>/.curator-work``.
    """

    def __init__(
        self,
        reader: ProcessingStage,
        writer: BaseWriter,
        text_field: str = "text",
        ngram: int = minhash.DEFAULT_NGRAM,
        bands: int = minhash.DEFAULT_BANDS,
        rows: int = minhash.DEFAULT_ROWS,
        seed: int = minhash.DEFAULT_SEED,
        buckets: int = DEFAULT_BUCKETS,
        jaccard_threshold: float | None = None,
        identify_only: bool = False,
        work_dir: str | os.PathLike | None = None,
        name: str = "fuzzy-dedup",
    ) -> None:
        for label, value in (("ngram", ngram), ("bands", bands), ("rows", rows), ("buckets", buckets)):
            if value < 1:
                raise ValueError(f"{label}={value} must be >= 1")
        if jaccard_threshold is not None and not 0.0 < jaccard_threshold <= 1.0:
            raise ValueError(f"jaccard_threshold={jaccard_threshold} must be in (0, 1], or None for no check")
        work = os.fspath(work_dir) if work_dir is not None else os.path.join(writer.path, ".curator-work")
        bands_dir = os.path.join(work, "shuffle", "bands")
        edges_dir = os.path.join(work, "edges")
        duplicates_dir = writer.path if identify_only else os.path.join(work, "duplicates")
        partitioner = reader.partitioner  # type: ignore[attr-defined]
        from ..pipeline import Pipeline

        verify = jaccard_threshold is not None
        phases = [
            Phase(
                "signatures",
                Pipeline(f"{name}-signatures")
                .add_stage(_reader_with_fields(reader, [text_field]))
                .add_stage(MinHashBands(text_field, ngram, bands, rows, seed, buckets, verify))
                .add_stage(BucketWriter(bands_dir)),
            ),
            Phase(
                "candidates",
                Pipeline(f"{name}-candidates")
                .add_stage(BucketSource(bands_dir, buckets, f"{name}/bands"))
                .add_stage(BucketReader())
                .add_stage(CandidateEdges(jaccard_threshold))
                .add_stage(SortedKeyWriter(edges_dir)),
                max_shards=buckets,
            ),
            Phase(
                "components",
                Pipeline(f"{name}-components")
                .add_stage(BucketSource(edges_dir, 1, f"{name}/edges"))
                .add_stage(
                    ConnectedComponents(
                        edges_dir,
                        partitioner.file_paths if identify_only else None,
                        partitioner.file_extensions,
                    )
                )
                .add_stage(SortedKeyWriter(duplicates_dir)),
                max_shards=1,
            ),
        ]
        if not identify_only:
            phases.append(write_phase(name, reader, duplicates_dir, writer))
        super().__init__(name, work, phases)
