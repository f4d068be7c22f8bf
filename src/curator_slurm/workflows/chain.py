"""Chaining phases: :class:`PhaseOutputsReader` reads what an earlier phase wrote, one source task per earlier
source task (same ids, known before it has run), each reading the files the earlier ledger records as its
outputs. Design: docs/design.md, section Workflows and phase inputs."""

from __future__ import annotations

import os
import re
from typing import Any

from curator_slurm import fs
from curator_slurm.backends.adapter import list_sources
from curator_slurm.errors import InputError
from curator_slurm.pipeline import Pipeline
from curator_slurm.runs.upstream import Upstream, files_of, recorded
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.readers import (
    FILE_PATH,
    FileReader,
    FileReaderStage,
    concat_tables,
    read_jsonl,
    read_parquet,
)
from curator_slurm.tasks import DocumentBatch, EmptyTask, FileGroupTask
from curator_slurm.workflows.workflow import planned_ids

#: Outputs one earlier source task may have: keys are ``(task index * MAX_OUTPUTS + output) << 32 | row``. A
#: writer makes one output per source task, in parts of ``max_file_size`` (1 GiB by default): 256 GiB of output
#: from one source task.
MAX_OUTPUTS = 256


def upstream_ids(pipeline: Pipeline, run_dir: str) -> list[str]:
    """The source task ids of the phase that ``pipeline`` runs in ``run_dir``: those `submit` planned
    (``plan.json``), else those its source stage lists now; in the order of their inputs (the place of each
    task's first file in the sorted listing of all inputs, as positions order documents), so "the first
    occurrence wins" still means first in (input path, row) order."""
    listed = list_sources(pipeline.build()[0], ShardSpec.single()).sources
    ids = planned_ids(run_dir) or [t.task_id for t in listed]
    place: dict[str, tuple[int, ...]] = {}
    for t in listed:
        indices = t.metadata.get("file_indices") or [t.metadata.get("upstream_index", 1 << 62)]
        start = (t.metadata.get("byte_range") or [0])[0]
        place[t.task_id] = (int(indices[0]), int(start))
    return sorted(ids, key=lambda i: (*place.get(i, (1 << 62, 0)), i))


class PhaseOutputsSource(ProcessingStage[EmptyTask, FileGroupTask]):
    """One source task per source task of the earlier phase (same id); the files are found when it is read."""

    name = "phase_outputs_source"

    def __init__(self, pipeline: Pipeline, run_dir: str | os.PathLike, output_dir: str | os.PathLike) -> None:
        self._pipeline = pipeline
        self.upstream = pipeline.name
        self._run_dir = os.path.abspath(os.fspath(run_dir))
        self._reads = Upstream(pipeline.name, self._run_dir, per_task=True)
        self._output_dir = fs.absolute(output_dir)  # may be on object storage
        # What dedup workflows look for on a reader's partitioner (the files it lists, their endings).
        self.file_paths = [self._output_dir]
        self.file_extensions = [".jsonl", ".parquet"]
        self.patterns: tuple[str, ...] | None = None  # every file the earlier phase recorded

    def params(self) -> dict[str, Any]:
        # The earlier phase by name, not where its directories are mounted (they are not part of the meaning).
        return {"upstream": self.upstream, "file_extensions": self.file_extensions}

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def upstreams(self) -> list[Any]:
        return [self._reads]

    def file_names(self) -> dict[int, str]:
        """Each file the earlier phase recorded, relative to its output directory, by the file index positions
        give it here (its task's place times :data:`MAX_OUTPUTS`, plus its place among that task's outputs):
        what names a document from its key once the earlier phase is complete."""
        written = {s: [p for p, _ in r.files] for s, r in recorded(self._run_dir).items()}
        names: dict[int, str] = {}
        for index, source_id in enumerate(upstream_ids(self._pipeline, self._run_dir)):
            files = data_files(written.get(source_id, []))
            names.update({index * MAX_OUTPUTS + k: fs.relative(p, self._output_dir) for k, p in enumerate(files)})
        return names

    def process(self, task: EmptyTask) -> list[FileGroupTask]:
        ids = upstream_ids(self._pipeline, self._run_dir)
        return [
            FileGroupTask(
                task_id=source_id,
                dataset_name=self.upstream,
                data=[],
                metadata={
                    "upstream_index": index,
                    "upstream": self._reads.as_json(),
                    "root": self._output_dir,
                    "bytes": 1,
                },
            )
            for index, source_id in enumerate(ids)
        ]


def _natural(path: str) -> list[Any]:
    """A sort key that orders the numbers in ``path`` by value."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


#: The outputs of an earlier phase that hold documents (not, e.g., token files): what the writers write,
#: compressed JSONL too (``JsonlWriter(compression=...)``).
DATA_ENDINGS = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")


def data_files(paths: list[str]) -> list[str]:
    """The document files among an earlier source task's outputs, in the order it made them: ``x-p2`` before
    ``x-p10`` (the parts of a source task's output), as positions number them."""
    return sorted((p for p in paths if p.endswith(DATA_ENDINGS)), key=_natural)


class PhaseOutputsReaderStage(FileReaderStage):
    """Reads the JSONL or Parquet files that the earlier phase's ledger lists for this task."""

    name = "phase_outputs_reader"

    def _files(self, task: FileGroupTask) -> list[str]:
        upstream = Upstream.of(task.metadata["upstream"])
        if task.task_id not in recorded(upstream.run_dir):
            raise InputError(
                f"{upstream.run_dir}: source task {task.task_id} of the phase before is not done, so there is "
                "nothing to read for it; finish that phase first (re-run the script, or `curator-slurm retry`)"
            )
        files = data_files(files_of(upstream, [task.task_id]))
        if len(files) > MAX_OUTPUTS:
            raise InputError(
                f"{upstream.run_dir}: source task {task.task_id} wrote {len(files)} files, more than {MAX_OUTPUTS}; "
                "give the earlier phase's writer a larger max_file_size (its parts), or split its input finer"
            )
        return files

    def process(self, task: FileGroupTask) -> DocumentBatch | None:
        files = self._files(task)
        if not files:  # every document of that task was filtered out: nothing to read, nothing to write
            return None
        # Every field when the source-file column is asked for: the earlier phase's documents keep their own.
        fields = None if self.file_fields() != self.fields else self.fields
        tables = [
            self.with_source(
                read_parquet(p, fields) if p.endswith(".parquet") else read_jsonl(p, fields, schema=self._schema),
                self.source_name(task, p),
                p,
            )
            for p in files
        ]
        table = concat_tables(tables, files)
        base = int(task.metadata["upstream_index"]) * MAX_OUTPUTS
        return task.derive(
            table,
            cls=DocumentBatch,
            files=files,
            file_rows=[t.num_rows for t in tables],
            file_indices=[base + k for k in range(len(files))],
        )


class PhaseOutputsReader(FileReader):
    """Read what ``pipeline`` (a phase of the same workflow, recorded in ``run_dir``) wrote into ``output_dir``.

    Args:
        pipeline: the earlier phase's pipeline.
        run_dir: the earlier phase's run directory (``workflow.run_dir(phase)``).
        output_dir: where it wrote (``workflow.output_of(phase)``).
        fields: the fields to read (default all).
        file_path_field: the column naming each document's file (None: no such column).
    """

    name = "phase_outputs_reader"

    def __init__(
        self,
        pipeline: Pipeline,
        run_dir: str | os.PathLike,
        output_dir: str | os.PathLike,
        fields: list[str] | None = None,
        *,
        file_path_field: str | None = FILE_PATH,
    ) -> None:
        self.partitioner = PhaseOutputsSource(pipeline, run_dir, output_dir)  # type: ignore[assignment]
        self.reader = PhaseOutputsReaderStage(fields, file_path_field=file_path_field)
