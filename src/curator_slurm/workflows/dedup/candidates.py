"""Fuzzy dedup's candidates phase in bounded memory: a k-way merge of one bucket's sorted runs (one per file of the
signatures phase) into star edges, streamed out in batches. Design: docs/design.md, "Deduplication"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import DocumentBatch, FileGroupTask
from curator_slurm.workflows.dedup import minhash
from curator_slurm.workflows.dedup.common import KEY
from curator_slurm.workflows.sorted_runs import SUFFIX, Rows, read_run

#: The bands' sort order: a (band, value) group's rows are consecutive, its smallest key first.
BAND_ORDER = ("band", "value", KEY)
#: Bytes of read buffers the merge may hold, shared by its runs (each gets at least :data:`_MIN_READ`).
DEFAULT_MERGE_MEMORY = 64 << 20
_MIN_READ = 8 << 10
#: Edges per output batch (one sorted file each): 16 bytes an edge, about 4x that while a file is sorted.
DEFAULT_EDGES_PER_FILE = 1 << 21


def _count_at_most(cols: list[np.ndarray], bound: tuple[Any, ...]) -> int:
    """How many leading rows of ``cols`` (sorted lexicographically) are <= ``bound``."""
    lo, hi = 0, len(cols[0])
    for c, x in zip(cols[:-1], bound[:-1], strict=True):
        part = c[lo:hi]
        lo, hi = lo + int(np.searchsorted(part, x, "left")), lo + int(np.searchsorted(part, x, "right"))
    return lo + int(np.searchsorted(cols[-1][lo:hi], bound[-1], "right"))


def _lex_min(cols: list[np.ndarray], among: np.ndarray) -> int:
    """The index (of ``among``) whose row of ``cols`` is lexicographically smallest."""
    for c in cols:
        values = c[among]
        among = among[values == values.min()]
    return int(among[0])


def _at_most(cols: list[np.ndarray], bound: tuple[Any, ...]) -> np.ndarray:
    """Whether each row of ``cols`` is lexicographically <= ``bound``."""
    below = np.zeros(len(cols[0]), dtype=bool)
    equal = np.ones(len(cols[0]), dtype=bool)
    for c, x in zip(cols, bound, strict=True):
        below |= equal & (c < x)
        equal &= c == x
    return below | equal


class _Merge:
    """The state of a k-way merge: each run's current block (the rows not yet taken), and per run its first and
    last row's sort values, so a round picks its bound and its contributing runs with numpy, not a loop."""

    def __init__(self, runs: list[Iterator[tuple[Rows, bool]]], order: tuple[str, ...]) -> None:
        self.runs = runs
        self.order = order
        n = len(runs)
        self.blocks: list[Rows | None] = [None] * n
        self.final = np.zeros(n, dtype=bool)  # the current block is the run's last
        self.dead = np.zeros(n, dtype=bool)  # nothing left
        self.first: list[np.ndarray] = []
        self.last: list[np.ndarray] = []

    def _load(self, i: int) -> None:
        for block, final in self.runs[i]:
            if len(block[self.order[0]]):
                self.blocks[i], self.final[i] = block, final
                return
            if final:
                break
        self.blocks[i], self.dead[i] = None, True

    def _ends(self, i: int) -> None:
        block = self.blocks[i]
        if block is not None:
            for k, name in enumerate(self.order):
                self.first[k][i], self.last[k][i] = block[name][0], block[name][-1]

    def rounds(self) -> Iterator[Rows]:
        """The rows of every run in sort order, in chunks: each round takes every row up to the smallest last
        row of the runs that have more blocks to come (every row, when none has), and sorts them."""
        for i in range(len(self.runs)):
            self._load(i)
        live = [b for b in self.blocks if b is not None]
        if not live:
            return
        self.first = [np.empty(len(self.runs), dtype=live[0][c].dtype) for c in self.order]
        self.last = [np.empty(len(self.runs), dtype=live[0][c].dtype) for c in self.order]
        for i in range(len(self.runs)):
            self._ends(i)
        while not self.dead.all():
            yield self._round()

    def _refill(self, i: int, rest: Rows) -> None:
        """Run ``i`` after a round took from it: what it has left, and its next block behind that (so it holds a
        whole block beyond the bound, and the next round's bound moves a block, not one run's share of one)."""
        left = len(rest[self.order[0]])
        if not self.final[i]:
            self._load(i)
            following = self.blocks[i]
            if following is None:  # the file said more blocks, but none came: what is left is all
                self.final[i] = True
            elif left:
                self.blocks[i] = {c: np.concatenate([rest[c], following[c]]) for c in rest}
                return
            else:
                return
        self.blocks[i] = rest if left else None
        self.dead[i] = not left

    def _round(self) -> Rows:
        alive = np.flatnonzero(~self.dead)
        pending = alive[~self.final[alive]]
        bound = None
        if len(pending):
            at = _lex_min([c[pending] for c in self.last], np.arange(len(pending)))
            bound = tuple(c[pending[at]] for c in self.last)
        taking = alive if bound is None else alive[_at_most([c[alive] for c in self.first], bound)]
        parts: list[Rows] = []
        for i in taking.tolist():
            block = self.blocks[i]
            assert block is not None
            n = len(block[self.order[0]])
            if bound is not None:
                n = _count_at_most([block[c] for c in self.order], bound)
            parts.append({c: a[:n] for c, a in block.items()})
            self._refill(i, {c: a[n:] for c, a in block.items()})
            self._ends(i)
        rows = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
        order = np.lexsort([rows[c] for c in reversed(self.order)])
        return {c: a[order] for c, a in rows.items()}


def merge_runs(runs: list[Iterator[tuple[Rows, bool]]], order: tuple[str, ...]) -> Iterator[Rows]:
    """Sorted runs (blocks of rows, each run sorted by ``order``) merged: chunks of rows, each sorted, each
    after the one before. Memory: up to two blocks per run, plus a round's rows (about a block per run)."""
    return _Merge(runs, order).rounds()


def streamed_edges(
    chunks: Iterator[Rows], threshold: float | None = None, bits: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The star edges of a stream of (band, value, key[, signature]) rows sorted across chunks: a group cut by a
    chunk's end goes on with its root, carried into the next chunk as a first row."""
    carry: Rows | None = None
    for chunk in chunks:
        if carry is not None:
            chunk = {c: np.concatenate([carry[c], a]) for c, a in chunk.items()}
        signatures = chunk.get("signature") if threshold is not None else None
        u, v, root_pos = minhash.sorted_star_edges(
            chunk["band"], chunk["value"], chunk[KEY], signatures, threshold, bits
        )
        last_root = int(root_pos[-1])
        carry = {c: a[last_root : last_root + 1].copy() for c, a in chunk.items()}
        if len(u):
            yield u, v


class MergedCandidateEdges(ProcessingStage[FileGroupTask, DocumentBatch]):
    """Phase 2, per bucket (a task of :class:`~curator_slurm.workflows.shuffle.BucketSource`): the bucket's sorted
    runs merged into the star edges (u < v) of every (band, value) group, in batches of at most
    ``edges_per_file`` edges (each written as one sorted file; an edge found through two bands may be in two).

    With ``endpoints`` (the exact check follows), each edge is written twice, once under each end's key
    (``key``, ``u``, ``v``), so that the ``edge-shingles`` task holding a document finds every edge it is an
    end of by reading the row groups of its own key range.

    Args:
        jaccard_threshold: drop edges whose similarity, estimated from the rows' 8-bit signatures, is lower.
        endpoints: write each edge under both ends' keys.
        verify_bits: the bits of each signature value the rows carry.
        edges_per_file: the most edges an output batch holds.
        merge_memory: the bytes of read buffers the merge shares among its runs.
    """

    name = "merged_candidate_edges"

    def __init__(
        self,
        jaccard_threshold: float | None,
        endpoints: bool = False,
        verify_bits: int = 8,
        edges_per_file: int = DEFAULT_EDGES_PER_FILE,
        merge_memory: int = DEFAULT_MERGE_MEMORY,
    ) -> None:
        if edges_per_file < 1 or merge_memory < 1:
            raise ValueError(f"edges_per_file={edges_per_file} and merge_memory={merge_memory} must be >= 1")
        self.jaccard_threshold = jaccard_threshold
        self.endpoints = endpoints
        self.verify_bits = verify_bits
        self.edges_per_file = edges_per_file
        self.merge_memory = merge_memory

    def params(self) -> dict[str, Any]:
        return {"jaccard_threshold": self.jaccard_threshold, "endpoints": self.endpoints, "bits": self.verify_bits}

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [KEY, "u", "v"] if self.endpoints else [KEY, "v"]

    def process(self, task: FileGroupTask) -> list[DocumentBatch]:
        """Every batch of ``task``'s edges; a pipeline takes them one at a time instead (:meth:`stream`)."""
        return list(self.stream(task))

    def process_batch(self, tasks: list[FileGroupTask]) -> list[Any]:
        return [self.stream(t) for t in tasks]

    def stream(self, task: FileGroupTask) -> Iterator[DocumentBatch]:
        """The edges of ``task``'s bucket, a batch at a time, each made when the one before has been taken."""
        files = files_of(Upstream.of(task.metadata["upstream"]), suffix=SUFFIX)
        return self._batches(task, files, int(task.metadata["bucket"]))

    def _batches(self, task: FileGroupTask, files: list[str], bucket: int) -> Iterator[DocumentBatch]:
        read_size = max(_MIN_READ, self.merge_memory // max(1, len(files)))
        runs = [read_run(path, bucket, read_size) for path in files]
        bits = self.verify_bits if self.jaccard_threshold is not None else None
        pending: list[tuple[np.ndarray, np.ndarray]] = []
        count = 0
        for u, v in streamed_edges(merge_runs(runs, BAND_ORDER), self.jaccard_threshold, bits):
            pending.append((u, v))
            count += len(u)
            if count >= self.edges_per_file:
                yield self._batch(task, pending)
                pending, count = [], 0
        if pending:
            yield self._batch(task, pending)

    def _batch(self, task: FileGroupTask, pending: list[tuple[np.ndarray, np.ndarray]]) -> DocumentBatch:
        u, v = minhash.unique_edges(np.concatenate([p[0] for p in pending]), np.concatenate([p[1] for p in pending]))
        if self.endpoints:
            table = pa.table({KEY: np.concatenate([u, v]), "u": np.tile(u, 2), "v": np.tile(v, 2)})
        else:
            table = pa.table({KEY: u, "v": v})
        return task.derive(table, cls=DocumentBatch)
