"""The exact Jaccard check of fuzzy dedup (``jaccard_check="exact"``): ``edge-shingles`` and ``verify``, two phases
between ``candidates`` and ``components``. Design: docs/design.md, section Deduplication."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.runs.upstream import Upstream
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.positions import document_positions
from curator_slurm.tasks import DocumentBatch
from curator_slurm.workflows.dedup import minhash
from curator_slurm.workflows.dedup.common import KEY
from curator_slurm.workflows.shuffle import BUCKET, bucket_of, read_overlapping, shuffle_files

pq = LazyModule("pyarrow.parquet")


#: Multiplier that mixes an edge's second end into its first, for the bucket of the edge.
_EDGE_MIX = np.uint64(0x9E3779B97F4A7C15)


def _edge_buckets(u: np.ndarray, v: np.ndarray, buckets: int) -> np.ndarray:
    """The shuffle bucket of each edge (u, v): both ends' rows of one edge meet in one bucket."""
    mixed = u.astype(np.uint64) * _EDGE_MIX + v.astype(np.uint64)
    return bucket_of(mixed, buckets).astype(np.int32)


def _endpoint_rows(endpoints: Upstream, low: int, high: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (key, u, v) rows of the candidates phase's endpoint files with ``low <= key <= high``."""
    parts = []
    for path in shuffle_files(endpoints):
        table = read_overlapping(path, KEY, low, high, columns=[KEY, "u", "v"])
        if table is not None:
            key = table.column(KEY).to_numpy()
            inside = (key >= low) & (key <= high)
            parts.append((key[inside], table.column("u").to_numpy()[inside], table.column("v").to_numpy()[inside]))
    if not parts:
        return (np.empty(0, np.int64),) * 3
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]


class EdgeShingles(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Exact check, step 1 (per input source task): every candidate edge one of whose ends is a document of
    this batch, with that document's shingle set, into the shuffle bucket of the edge.

    Rows: ``u``, ``v``, ``side`` (0: the row carries u's shingles, 1: v's), ``shingles`` (the sorted unique
    32-bit shingle hashes of :func:`minhash.shingle_hashes`, the sets :func:`minhash.text_jaccard`
    compares) and ``bucket``. A document that is an end of k edges is carried k times: the volume is the
    edges' (two rows each) times the shingles of a document, not the corpus."""

    name = "edge_shingles"

    def __init__(
        self,
        text_field: str,
        ngram: int,
        seed: int,
        endpoints: Upstream,
        buckets: int,
        char_ngrams: int | None = None,
    ) -> None:
        self.text_field = text_field
        self.ngram = ngram
        self.seed = seed
        self.endpoints = endpoints
        self.buckets = buckets
        self.char_ngrams = char_ngrams

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in super().params().items() if k != "endpoints"}  # where, not what

    def upstreams(self) -> list[Any]:
        return [self.endpoints]

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], ["u", "v", "side", "shingles", BUCKET]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            where = task.where()
            raise InputError(f"{where}: no field {self.text_field!r} to check; the data has {table.column_names}")
        keys = document_positions(task).keys
        if len(keys):
            ends, u, v = _endpoint_rows(self.endpoints, int(keys.min()), int(keys.max()))
        else:
            ends = u = v = np.empty(0, np.int64)
        order = np.argsort(keys, kind="stable")
        at = np.minimum(np.searchsorted(keys[order], ends), max(len(keys) - 1, 0))
        found = keys[order][at] == ends if len(keys) else np.zeros(0, bool)
        ends, u, v, rows = ends[found], u[found], v[found], order[at[found]]
        docs, inverse = np.unique(rows, return_inverse=True)
        offsets, hashes = minhash.shingle_sets(
            *minhash.document_shingles(
                table.column(self.text_field).take(pa.array(docs)), self.ngram, self.seed, self.char_ngrams
            )
        )
        row_offsets, row_hashes = minhash.take_sets(offsets, hashes, inverse)
        return task.derive(
            pa.table(
                {
                    "u": u,
                    "v": v,
                    "side": (ends == v).astype(np.int8),
                    "shingles": pa.LargeListArray.from_arrays(pa.array(row_offsets), pa.array(row_hashes)),
                    BUCKET: _edge_buckets(u, v, self.buckets),
                }
            )
        )


#: Edges whose Jaccard similarity is computed at once by :class:`VerifyEdges` (memory: their shingles).
_VERIFY_SLICE = 1 << 16


class VerifyEdges(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Exact check, step 2 (per bucket): each edge's two shingle sets compared; the edges whose exact Jaccard
    similarity is at least ``threshold`` are kept, as (key = u, v). An edge found in several candidate
    buckets (several bands) arrives several times and is checked once."""

    name = "verify_edges"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [KEY, "v"]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        u, v = table.column("u").to_numpy(), table.column("v").to_numpy()
        side = table.column("side").to_numpy()
        order = np.lexsort((side, v, u))
        u, v, side = u[order], v[order], side[order]
        first = np.ones(len(u), dtype=bool)
        first[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1]) | (side[1:] != side[:-1])
        rows, u, v, side = order[first], u[first], v[first], side[first]
        left = np.flatnonzero((side[:-1] == 0) & (side[1:] == 1) & (u[:-1] == u[1:]) & (v[:-1] == v[1:]))
        if len(left) * 2 != len(u):
            raise InputError(
                f"task {task.task_id}: {len(u) - 2 * len(left)} edge end(s) arrived without the other end; "
                "the edge-shingles phase is incomplete or its files were changed: re-run that phase"
            )
        lists = table.column("shingles")
        lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
        offsets = lists.offsets.to_numpy()
        values = lists.values.to_numpy()
        keep = np.zeros(len(left), dtype=bool)
        for s in range(0, len(left), _VERIFY_SLICE):
            part = left[s : s + _VERIFY_SLICE]
            similarity = minhash.exact_jaccard(offsets, values, rows[part], rows[part + 1])
            keep[s : s + len(part)] = similarity >= self.threshold
        return task.derive(pa.table({KEY: u[left[keep]], "v": v[left[keep]]}))
