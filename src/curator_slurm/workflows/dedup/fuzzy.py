"""Fuzzy deduplication (MinHash + LSH + connected components) as a workflow of phases over arrays, on CPUs:
``signatures``, ``candidates``, (``edge-shingles``, ``verify`` with ``jaccard_check="exact"``), ``components``,
``write``; the survivor of a group is its first occurrence. Design: docs/design.md, section Deduplication."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME
from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.partitioning import input_root, list_files
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.positions import ROW_BITS, document_positions
from curator_slurm.tasks import DocumentBatch, FileGroupTask
from curator_slurm.workflows.chain import PhaseOutputsSource
from curator_slurm.workflows.dedup import minhash
from curator_slurm.workflows.dedup.candidates import BAND_ORDER, MergedCandidateEdges
from curator_slurm.workflows.dedup.common import KEY, SortedKeyWriter, bucket_phase, check_empty_text, write_phase
from curator_slurm.workflows.dedup.exact import _reader_with_fields
from curator_slurm.workflows.dedup.fuzzy_ids import id_phases
from curator_slurm.workflows.dedup.verify import EdgeShingles, VerifyEdges
from curator_slurm.workflows.shuffle import BUCKET, BucketSource, BucketWriter, bucket_of
from curator_slurm.workflows.sorted_runs import SortedRunWriter
from curator_slurm.workflows.workflow import Phase, Workflow, phase_upstream

pq = LazyModule("pyarrow.parquet")

DEFAULT_BUCKETS = 64
#: The edge-shingles shuffle's Parquet codec: small row groups read once each; lz4 wrote them 2x and read
#: them 3x faster than zstd, for files 18 % larger (measured by make bench on its dedup corpus).
SHUFFLE_COMPRESSION = "lz4"
#: Bits of each signature value carried through the shuffle for verification (160 bytes a row at 8).
VERIFY_BITS = 8


class MinHashBands(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Phase 1: (band, value, key, bucket[, signature]) rows for a batch straight from the reader."""

    name = "minhash_bands"

    def __init__(
        self,
        text_field: str,
        ngram: int,
        bands: int,
        rows: int,
        seed: int,
        buckets: int,
        verify: bool,
        char_ngrams: int | None = None,
        empty_text: str = "dedup",
    ) -> None:
        check_empty_text(empty_text)
        self.empty_text = empty_text
        self.text_field = text_field
        self.ngram = ngram
        self.bands = bands
        self.rows = rows
        self.seed = seed
        self.buckets = buckets
        self.verify = verify
        self.char_ngrams = char_ngrams

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], ["band", "value", KEY, BUCKET, *(["signature"] if self.verify else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            where = task.where()
            raise InputError(
                f"{where}: no field {self.text_field!r} to deduplicate on; the data has {table.column_names}"
            )
        keys = document_positions(task).keys
        offsets, hashes = minhash.document_shingles(
            table.column(self.text_field), self.ngram, self.seed, self.char_ngrams
        )
        signatures = minhash.minhash_signatures(offsets, hashes, self.bands * self.rows, self.seed)
        band_ids, values, row_keys = minhash.flatten_bands(
            minhash.band_hashes(signatures, self.bands, self.rows, self.seed), keys
        )
        kept = None
        if self.empty_text == "keep":  # a text with no shingle (null, empty) is nobody's near-duplicate
            kept = ~np.isin(row_keys, keys[np.diff(offsets) == 0])
            band_ids, values, row_keys = band_ids[kept], values[kept], row_keys[kept]
        columns: dict[str, Any] = {
            "band": band_ids,
            "value": values,
            KEY: row_keys,
            BUCKET: bucket_of(values, self.buckets).astype(np.int32),
        }
        if self.verify:
            small = signatures.astype(np.uint8)  # the lowest 8 bits of each value (b-bit MinHash)
            per_row = np.repeat(small, self.bands, axis=0)
            per_row = per_row if kept is None else per_row[kept]
            columns["signature"] = pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(small.shape[1]), len(per_row), [None, pa.py_buffer(np.ascontiguousarray(per_row).tobytes())]
            )
        return task.derive(pa.table(columns))


class ConnectedComponents(ProcessingStage[FileGroupTask, DocumentBatch]):
    """Phase 3 (one task): every edge file, read in chunks, into (key, group_key) for each document that is
    not the survivor of its component; with ``files`` (identify-only), also the paths and rows of both."""

    name = "connected_components"

    def __init__(
        self,
        edges: Upstream,
        input_paths: Any = None,
        extensions: list[str] | None = None,
        survivors: bool = False,
    ):
        self.edges = edges
        self.input_paths = input_paths
        self.extensions = extensions
        self.survivors = survivors

    def params(self) -> dict[str, Any]:
        return {"names_paths": self.input_paths is not None, "survivors": self.survivors}  # not where data lives

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], None

    def upstreams(self) -> list[Any]:
        return [self.edges]

    def _edges(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for path in files_of(self.edges, suffix=".parquet"):
            with pq.ParquetFile(path if fs.is_local(path) else fs.open_input(path)) as f:
                for batch in f.iter_batches(batch_size=1 << 20, columns=[KEY, "v"]):
                    yield batch.column(0).to_numpy(), batch.column(1).to_numpy()

    def process(self, task: FileGroupTask) -> list[DocumentBatch]:
        """Every batch of the list; a pipeline takes them one at a time instead (:meth:`stream`)."""
        return list(self.stream(task))

    def process_batch(self, tasks: list[FileGroupTask]) -> list[Any]:
        return [self.stream(t) for t in tasks]

    def stream(self, task: FileGroupTask) -> Iterator[DocumentBatch]:
        """The list in batches of consecutive keys (each a sorted file), made one at a time from the components;
        with ``survivors``, each group's first document too, as key == group_key (fuzzy_ids finds its id)."""
        from curator_slurm.workflows.dedup.components import duplicate_member_batches

        names = _file_names(self.input_paths, self.extensions) if self.input_paths is not None else None
        for keys, groups in duplicate_member_batches(self._edges, survivors=self.survivors):
            columns: dict[str, Any] = {KEY: keys, "group_key": groups}
            if names is not None:
                mask = (1 << ROW_BITS) - 1
                columns.update(
                    path=pa.array(names(keys >> ROW_BITS), pa.string()),
                    row=keys & mask,
                    group_path=pa.array(names(groups >> ROW_BITS), pa.string()),
                    group_row=groups & mask,
                )
            yield task.derive(pa.table(columns), cls=DocumentBatch)


def _file_names(inputs: Any, extensions: list[str] | None) -> Any:
    """A function from file indices (a key's file part) to file names: the reader's sorted listing of ``inputs``
    relative to its root, or, for a reader of an earlier phase's outputs (``inputs`` is its source stage),
    the outputs that phase recorded."""
    if isinstance(inputs, PhaseOutputsSource):
        recorded = inputs.file_names()
        return lambda indices: np.array([recorded[i] for i in indices.tolist()], dtype=object)
    files = list_files(inputs, extensions)
    root = input_root(inputs)
    names = np.array([fs.relative(f, root) for f in files], dtype=object)
    return lambda indices: names[indices]


#: How ``jaccard_threshold`` is checked: from 8-bit signatures carried through the shuffle, or exactly.
JACCARD_CHECKS = ("estimate", "exact")


def _check_options(
    counts: dict[str, int],
    jaccard_threshold: float | None,
    jaccard_check: str,
    char_ngrams: int | None,
    id_field: str | None,
    identify_only: bool,
) -> None:
    """FuzzyDuplicates' settings, checked when it is built (before any phase runs), each error naming the
    setting and the fix."""
    for label, value in counts.items():
        if value < 1:
            raise ValueError(f"{label}={value} must be >= 1")
    if char_ngrams is not None and char_ngrams < 2:
        raise ValueError(f"char_ngrams={char_ngrams} must be >= 2 characters (NeMo Curator's tutorial: 24)")
    if id_field is not None and not identify_only:
        raise ValueError(
            f"id_field={id_field!r} names the ids in the list of duplicates, which only identify_only=True "
            "writes; removing duplicates needs no ids (drop id_field, or set identify_only=True)"
        )
    if jaccard_threshold is not None and not 0.0 < jaccard_threshold <= 1.0:
        raise ValueError(f"jaccard_threshold={jaccard_threshold} must be in (0, 1], or None for no check")
    if jaccard_check not in JACCARD_CHECKS:
        raise ValueError(f"jaccard_check={jaccard_check!r} must be one of {JACCARD_CHECKS}")
    if jaccard_check == "exact" and jaccard_threshold is None:
        raise ValueError("jaccard_check='exact' needs a jaccard_threshold (e.g. 0.8) to check against")


def _exact_check_phases(
    name: str,
    reader: ProcessingStage,
    shingles: EdgeShingles,
    work: str,
    buckets: int,
    threshold: float,
    edges_dir: str,
) -> list[Phase]:
    """``edge-shingles`` and ``verify``: the exact Jaccard check of the candidate edges (:mod:`.verify`)."""
    from curator_slurm.pipeline import Pipeline

    shingles_dir = fs.join(work, "shuffle", "edge-shingles")
    return [
        Phase(
            "edge-shingles",
            Pipeline(f"{name}-edge-shingles")
            .add_stage(reader)
            .add_stage(shingles)
            .add_stage(BucketWriter(shingles_dir, compression=SHUFFLE_COMPRESSION)),
        ),
        bucket_phase(
            "verify",
            name,
            shingles_dir,
            buckets,
            "edge-shingles",
            VerifyEdges(threshold),
            edges_dir,
            phase_upstream(work, "edge-shingles"),
        ),
    ]


def _names(partitioner: Any, named: bool) -> tuple[Any, list[str] | None]:
    """What the components phase names input files by, when its list names them (identify-only, or exclusions
    naming each survivor): a file reader's paths (with the patterns it lists) by their sorted listing, a reader
    of an earlier phase's outputs by what that phase recorded; nothing otherwise."""
    paths = (partitioner if isinstance(partitioner, PhaseOutputsSource) else partitioner.file_paths) if named else None
    return paths, list(partitioner.patterns) if partitioner.patterns else None


def _candidates_phase(
    name: str, bands_dir: str, upstream: Upstream, buckets: int, threshold: float | None, endpoints: bool, out: str
) -> Phase:
    """``candidates``: one task per bucket, the k-way merge of its sorted runs into star edges (:mod:`.candidates`),
    in sorted files of at most ``DEFAULT_EDGES_PER_FILE`` edges into ``out``."""
    from curator_slurm.pipeline import Pipeline

    pipeline = (
        Pipeline(f"{name}-candidates")
        .add_stage(BucketSource(bands_dir, buckets, f"{name}/bands", upstream))
        .add_stage(MergedCandidateEdges(threshold, endpoints=endpoints, verify_bits=VERIFY_BITS))
        .add_stage(SortedKeyWriter(out))
    )
    return Phase("candidates", pipeline, max_shards=buckets)


def _components_phase(
    name: str, edges_dir: str, edges: Upstream, paths: Any, extensions: list[str] | None, survivors: bool, out: str
) -> Phase:
    """``components``: one task over every edge file (written by the phase ``edges``), the list of duplicates
    sorted by key into ``out``."""
    from curator_slurm.pipeline import Pipeline

    pipeline = (
        Pipeline(f"{name}-components")
        .add_stage(BucketSource(edges_dir, 1, f"{name}/edges", edges))
        .add_stage(ConnectedComponents(edges, paths, extensions, survivors=survivors))
        .add_stage(SortedKeyWriter(out))
    )
    return Phase("components", pipeline, max_shards=1)


class FuzzyDuplicates(Workflow):
    """Remove (or, with ``identify_only``, list) near-duplicates of ``text_field`` across the whole input.

    Either Jaccard check compares each member of a (band, value) group with the group's smallest key only (the
    star), so a member similar to another member but not to the smallest one loses that edge (it may keep one
    through another band). FineWeb's configuration (datatrove's defaults) is ``ngram=minhash.FINEWEB_NGRAM,
    bands=minhash.FINEWEB_BANDS, rows=minhash.FINEWEB_ROWS``.

    Args:
        reader: a file reader over the input.
        writer: the writer of the deduplicated corpus (its path is the output directory).
        text_field: the field compared.
        ngram: words per shingle.
        bands: LSH bands; ``bands`` x ``rows`` MinHash permutations (20 x 8: a pair at Jaccard 0.8 becomes a
            candidate with probability 0.975).
        rows: MinHash values per band.
        seed: the seed of every hash.
        buckets: the shuffle's buckets (tasks of the candidates phase).
        jaccard_threshold: drop candidate edges whose similarity is lower (None: no check).
        identify_only: write the list of duplicates to the output directory instead of removing them.
        work_dir: the intermediate files and run directories (default ``<output>/.curator-work``).
        name: the workflow's name.
        jaccard_check: ``"estimate"``: from 8-bit signatures carried through the shuffle, no extra phase
            (standard error about 0.03 at 0.8); ``"exact"``: the shingle sets' Jaccard similarity
            (:func:`minhash.text_jaccard`), in two more phases that re-read the input's text.
        char_ngrams: shingles of that many characters of the raw text instead of ``ngram`` words of the
            normalised text (e.g. 24, NeMo Curator's).
        id_field: with ``identify_only``, the list gets the input's ids of each document and of its survivor
            (``<id_field>``, ``group_<id_field>``), through two more phases.
        empty_text: ``"dedup"``: documents with no shingle (null, missing or empty text) are one group, the
            first kept; ``"keep"``: every one of them is kept.
        exclusion_writer: a writer for every removed document with its group's survivor (``survivor_key``,
            ``survivor_path``, ``survivor_row``).
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
        jaccard_check: str = "estimate",
        char_ngrams: int | None = None,
        id_field: str | None = None,
        empty_text: str = "dedup",
        exclusion_writer: BaseWriter | None = None,
    ) -> None:
        check_empty_text(empty_text)
        if exclusion_writer is not None and identify_only:
            raise ValueError("exclusion_writer: identify_only=True removes nothing; its list names the duplicates")
        _check_options(
            {"ngram": ngram, "bands": bands, "rows": rows, "buckets": buckets},
            jaccard_threshold,
            jaccard_check,
            char_ngrams,
            id_field,
            identify_only,
        )
        exact = jaccard_check == "exact"
        work = os.fspath(work_dir) if work_dir is not None else fs.join(writer.path, DEFAULT_WORK_DIR_NAME)
        bands_dir = fs.join(work, "shuffle", "bands")
        edges_dir = fs.join(work, "edges")
        endpoints_dir = fs.join(work, "candidates")
        duplicates_dir = writer.path if identify_only else fs.join(work, "duplicates")
        members_dir = fs.join(work, "members") if id_field else duplicates_dir
        signature_reader = _reader_with_fields(reader, [text_field])  # refuses a reader that is not a FileReader
        partitioner = signature_reader.partitioner
        from curator_slurm.pipeline import Pipeline

        verify = jaccard_threshold is not None and not exact
        phases = [
            Phase(
                "signatures",
                Pipeline(f"{name}-signatures")
                .add_stage(signature_reader)
                .add_stage(MinHashBands(text_field, ngram, bands, rows, seed, buckets, verify, char_ngrams, empty_text))
                .add_stage(SortedRunWriter(bands_dir, buckets, BAND_ORDER)),
            ),
            _candidates_phase(
                name,
                bands_dir,
                phase_upstream(work, "signatures"),
                buckets,
                jaccard_threshold if verify else None,
                exact,
                endpoints_dir if exact else edges_dir,
            ),
        ]
        if exact:
            assert jaccard_threshold is not None
            endpoints = phase_upstream(work, "candidates")
            shingles = EdgeShingles(text_field, ngram, seed, endpoints, buckets, char_ngrams)
            phases += _exact_check_phases(name, signature_reader, shingles, work, buckets, jaccard_threshold, edges_dir)
        survivors = id_field is not None  # the id phases look up the survivors' ids too
        named = identify_only or exclusion_writer is not None
        edges = phase_upstream(work, "verify" if exact else "candidates")
        phases.append(_components_phase(name, edges_dir, edges, *_names(partitioner, named), survivors, members_dir))
        components = phase_upstream(work, "components")
        if id_field:
            phases += id_phases(name, signature_reader, id_field, components, work, duplicates_dir)
        if not identify_only:
            phases.append(write_phase(name, reader, components, writer, exclusion_writer))
        super().__init__(name, work, phases)
