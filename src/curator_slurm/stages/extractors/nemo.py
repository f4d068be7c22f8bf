"""NeMo Curator 1.x's Common Crawl extraction, spelled as a NeMo user spells it, over WARC files already here:
``DocumentIterateExtractStage(iterator=CommonCrawlWarcIterator(), extractor=CommonCrawlHTMLExtractor(...))``
after a ``FilePartitioningStage``, giving NeMo's columns (``url``, ``warc_id``, ``source_id``, ``language``,
``text``, ``file_name``). Underneath: :class:`~..io.warc.WarcReaderStage` and this package's extractors.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm.stages.base import PASSTHROUGH, CompositeStage, ProcessingStage
from curator_slurm.stages.extractors.base import HtmlExtractor, ResiliparseExtractor, TrafilaturaExtractor
from curator_slurm.stages.extractors.justext import JusTextExtractor
from curator_slurm.stages.extractors.language import PageLanguage
from curator_slurm.stages.io.warc import WarcReaderStage
from curator_slurm.stages.text.compute import _compute, call
from curator_slurm.tasks import DocumentBatch, FileGroupTask

#: NeMo's names of its HTML extraction algorithms, and the extractor each is here.
ALGORITHMS: dict[str, type[HtmlExtractor]] = {
    "justext": JusTextExtractor,
    "resiliparse": ResiliparseExtractor,
    "trafilatura": TrafilaturaExtractor,
}
#: The columns of NeMo's Common Crawl extraction, in its order (``file_name`` with ``add_filename_column``).
NEMO_COLUMNS = ("url", "warc_id", "source_id", "language", "text")


class CommonCrawlWarcIterator:
    """NeMo's iterator of a WARC file's ``response`` records: here FastWARC reads them (:class:`WarcReaderStage`),
    HTML payloads only (NeMo hands every payload to the extractor, which finds no text in the others).

    Args:
        storage_options: NeMo's fsspec options; paths here go through ``curator_slurm.fs`` (give None).
    """

    def __init__(self, storage_options: dict[str, Any] | None = None) -> None:
        if storage_options:
            raise ValueError(
                "CommonCrawlWarcIterator(storage_options=...): paths are read through curator_slurm.fs; configure "
                "S3 with CURATOR_S3_* settings or curator_slurm.fs.configure_s3 instead"
            )
        self.storage_options = None

    def output_columns(self) -> list[str]:
        return ["url", "warc_id", "source_id", "content"]


class CommonCrawlHTMLExtractor:
    """NeMo's HTML extractor of a record: ``algorithm`` (``"justext"``, the default, ``"resiliparse"``,
    ``"trafilatura"``, or an extractor built here) with ``algorithm_kwargs``, and jusText's ``stop_lists``.
    Every algorithm adds ``language``, as NeMo's extractor does (an extractor given without ``add_language=True``
    is used as a copy with it).

    Args:
        algorithm: the extraction algorithm, by NeMo's name or as an extractor (``JusTextExtractor()``).
        algorithm_kwargs: its parameters, when it is given by name.
        stop_lists: jusText's stop lists by CLD2 language name (None: NeMo's defaults).
    """

    def __init__(
        self,
        algorithm: HtmlExtractor | str | None = None,
        algorithm_kwargs: dict[str, Any] | None = None,
        stop_lists: dict[str, frozenset[str]] | None = None,
    ) -> None:
        kwargs = dict(algorithm_kwargs or {})
        if algorithm is None:
            algorithm = "justext"
        if isinstance(algorithm, str):
            if algorithm not in ALGORITHMS:
                raise ValueError(f"CommonCrawlHTMLExtractor(algorithm={algorithm!r}): one of {sorted(ALGORITHMS)}")
            cls = ALGORITHMS[algorithm]
            if cls is JusTextExtractor and stop_lists is not None:
                kwargs["stop_lists"] = stop_lists
            algorithm = cls(**kwargs)
        elif not isinstance(algorithm, HtmlExtractor):
            raise TypeError(f"CommonCrawlHTMLExtractor(algorithm={algorithm!r}): a name or an extractor")
        if isinstance(algorithm, PageLanguage) and not algorithm.add_language:
            algorithm = copy.copy(algorithm)
            algorithm.language_on(True)
        self.algorithm = algorithm

    def output_columns(self) -> list[str]:
        return list(NEMO_COLUMNS)


class NemoRecordColumns(ProcessingStage[DocumentBatch, DocumentBatch]):
    """The extracted documents in NeMo's columns: ``warc_id`` (the record id without ``<urn:uuid:`` and ``>``),
    ``source_id`` (the WARC file's name), and ``filename_column`` (NeMo's ``file_name``) if given."""

    name = "nemo_record_columns"

    def __init__(self, filename_column: str | None) -> None:
        self.filename_column = filename_column

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], ["url", "warc_record_id", "language", "text"]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [*NEMO_COLUMNS, *([self.filename_column] if self.filename_column else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        names = [os.path.basename(f) for f in task.metadata.get("files", [])]
        per_file = np.asarray(task.metadata.get("file_rows", [table.num_rows]), np.int64)
        origin = np.repeat(np.arange(len(per_file)), per_file) if len(names) == len(per_file) else None
        record_id = table.column("warc_record_id")
        columns: dict[str, Any] = {
            "url": table.column("url"),
            "warc_id": call("utf8_slice_codeunits", record_id, options=_compute.SliceOptions(10, -1)),
            "source_id": pa.array([names[i] for i in origin] if origin is not None else [None] * table.num_rows),
            "language": table.column("language"),
            "text": table.column("text"),
        }
        if self.filename_column:
            columns[self.filename_column] = columns["source_id"]
        return task.derive(pa.table(columns))


class _FirstRecords(ProcessingStage[DocumentBatch, DocumentBatch]):
    """At most ``record_limit`` records of each file of a batch (its first), straight after the reader: the
    batch then says it read that many rows of each, so positions stay right."""

    name = "record_limit"

    def __init__(self, record_limit: int) -> None:
        self.record_limit = record_limit

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        per_file = np.asarray(task.metadata.get("file_rows", [task.data.num_rows]), np.int64)
        starts = np.cumsum(per_file) - per_file
        kept = np.minimum(per_file, self.record_limit)
        rows = np.concatenate([np.arange(s, s + k) for s, k in zip(starts, kept, strict=True)] or [np.zeros(0, int)])
        table = call("take", task.data, pa.array(rows, pa.int64()))
        return task.derive(table, file_rows=kept.tolist())


class DocumentIterateExtractStage(CompositeStage[FileGroupTask, DocumentBatch]):
    """NeMo's iterate-extract stage: each file group (from a ``FilePartitioningStage``) read by ``iterator``
    (:class:`CommonCrawlWarcIterator`), each page's text by ``extractor`` (:class:`CommonCrawlHTMLExtractor`),
    at most ``record_limit`` records of a file, and ``add_filename_column`` (True: ``file_name``; a name: that
    column). A page without text is dropped and counted by its cause.

    Args:
        iterator: a CommonCrawlWarcIterator.
        extractor: a CommonCrawlHTMLExtractor (None: NeMo's default, jusText).
        record_limit: the most records read from each file (None: all).
        add_filename_column: True, False or a column name, as NeMo's.
        max_calls_per_worker: NeMo's Ray Data setting (ignored here: workers are processes).
    """

    def __init__(
        self,
        iterator: CommonCrawlWarcIterator,
        extractor: CommonCrawlHTMLExtractor | None = None,
        record_limit: int | None = None,
        add_filename_column: bool | str = True,
        max_calls_per_worker: int | None = None,
    ) -> None:
        if not isinstance(iterator, CommonCrawlWarcIterator):
            raise TypeError(f"DocumentIterateExtractStage(iterator={iterator!r}): give CommonCrawlWarcIterator()")
        self.iterator = iterator
        self.extractor = extractor if extractor is not None else CommonCrawlHTMLExtractor()
        self.record_limit = record_limit
        self.add_filename_column = add_filename_column
        self.filename_column = "file_name" if add_filename_column is True else add_filename_column or None
        self.max_calls_per_worker = max_calls_per_worker
        self.name = f"iterate_extract_commoncrawlwarciterator_{type(self.extractor.algorithm).__name__.lower()}"

    def decompose(self) -> list[ProcessingStage]:
        stages: list[ProcessingStage] = [WarcReaderStage()]
        if self.record_limit is not None:
            stages.append(_FirstRecords(self.record_limit))
        filename = self.filename_column if isinstance(self.filename_column, str) else None
        return [*stages, self.extractor.algorithm, NemoRecordColumns(filename)]


__all__ = [
    "ALGORITHMS",
    "CommonCrawlHTMLExtractor",
    "CommonCrawlWarcIterator",
    "DocumentIterateExtractStage",
    "NemoRecordColumns",
]
