"""NeMo Curator 1.x's exact deduplication, spelled as a NeMo user spells it: ``ExactDeduplicationWorkflow`` lists
the duplicates (``<output_path>/ExactDuplicateIds``, and ``exact_id_generator.json``), then
``TextDuplicatesRemovalWorkflow`` writes the input without them. Underneath: :class:`.exact.ExactDuplicates`
(identify only) and a pipeline with :class:`.common.RemoveDuplicates`; a document's id is its position.
"""

from __future__ import annotations

import json
import os
from typing import Any

from curator_slurm import fs
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.errors import InputError
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME
from curator_slurm.runs.upstream import Upstream
from curator_slurm.stages.io.readers import FileReader, JsonlReader, ParquetReader
from curator_slurm.stages.io.writers import BaseWriter, JsonlWriter, ParquetWriter
from curator_slurm.tasks import EmptyTask
from curator_slurm.workflows.dedup.common import RemoveDuplicates
from curator_slurm.workflows.dedup.exact import ExactDuplicates

#: Where NeMo's exact identification writes its list, and its id generator, under ``output_path``.
IDS_DIR = "ExactDuplicateIds"
ID_GENERATOR_OUTPUT_FILENAME = "exact_id_generator.json"
#: NeMo's name of the id its id generator assigns (accepted, not written: an id here is the position).
NEMO_DEDUP_ID_FIELD = "_curator_dedup_id"

READERS: dict[str, type[FileReader]] = {"jsonl": JsonlReader, "parquet": ParquetReader}
WRITERS: dict[str, type[BaseWriter]] = {"jsonl": JsonlWriter, "parquet": ParquetWriter}


def _reader(
    kind: str,
    path: Any,
    extensions: list[str] | None,
    fields: list[str] | None = None,
    files_per_partition: int | None = None,
    blocksize: Any = None,
    limit: int | None = None,
) -> FileReader:
    if kind not in READERS:
        raise ValueError(f"input_filetype={kind!r}: one of {sorted(READERS)}")
    return READERS[kind](path, files_per_partition, blocksize, fields, extensions, limit)


def _refuse(**given: Any) -> None:
    """NeMo's options for remote storage through fsspec: here paths go through ``curator_slurm.fs``."""
    for name, value in given.items():
        if value:
            raise ValueError(
                f"{name}={value!r}: NeMo passes these to fsspec and pandas; here paths go through curator_slurm.fs "
                "(configure S3 with CURATOR_S3_* settings) and the readers and writers take no keyword passthrough"
            )


def input_description(reader: FileReader) -> dict[str, Any]:
    """What a list of duplicates is tied to: the input's files (their count and the first and last names
    relative to the root), whose order numbers the documents."""
    files, root = reader.input_files(), reader.input_root()
    names = [fs.relative(f, root) for f in files]
    return {"ids": "document positions (file index << 32 | row)", "files": len(names), "names": names[:1] + names[-1:]}


class ExactDeduplicationWorkflow:
    """NeMo's ``ExactDeduplicationWorkflow``: the exact duplicates of ``text_field`` in ``input_path`` listed in
    ``<output_path>/ExactDuplicateIds`` (each with the document it duplicates), ``exact_id_generator.json`` beside
    it. ``total_nparts`` is the number of partitions of the identification, as in NeMo: the tasks of the find
    phase, so at most that many files list the duplicates (None: NeMo's choice, a third of the input's tasks, at
    least one). NeMo's GPU settings (``rmm_pool_size``, ``spill_memory_limit``, ``use_async_memory``, ``env_vars``,
    ``identification_batchsize``) are accepted and mean nothing on CPUs; ``perform_removal=True`` is refused, as
    in NeMo (use :class:`TextDuplicatesRemovalWorkflow`).

    Args:
        output_path: where the list goes.
        input_path: the input directory (or files).
        input_filetype: ``"jsonl"`` or ``"parquet"``.
        input_blocksize: how much input one task reads.
        input_file_extensions: the endings read (None: the filetype's).
        assign_id: ids are the documents' positions (True), or ``id_field``'s values are listed too (False).
        id_field: the input's id field, listed with each duplicate and its survivor when ``assign_id`` is False.
        text_field: the field compared.
    """

    def __init__(
        self,
        output_path: str,
        input_path: str | list[str] | None = None,
        input_filetype: str = "parquet",
        input_blocksize: str | int = "2GiB",
        identification_batchsize: int = 1,
        input_file_extensions: list[str] | None = None,
        read_kwargs: dict[str, Any] | None = None,
        write_kwargs: dict[str, Any] | None = None,
        assign_id: bool = True,
        id_field: str | None = None,
        text_field: str = "text",
        perform_removal: bool = False,
        total_nparts: int | None = None,
        rmm_pool_size: Any = "auto",
        spill_memory_limit: Any = "auto",
        env_vars: dict[str, Any] | None = None,
        use_async_memory: bool = True,
    ) -> None:
        if perform_removal:
            raise NotImplementedError("Removal is not implemented yet")  # NeMo's own words: remove in a second step
        if input_path is None:
            raise ValueError("input_path to the dataset must be provided")
        _refuse(read_kwargs=read_kwargs, write_kwargs=write_kwargs)
        self.output_path = os.fspath(output_path)
        self.reader = _reader(input_filetype, input_path, input_file_extensions, blocksize=input_blocksize)
        if total_nparts is None:
            total_nparts = len(self.reader.partitioner.process(EmptyTask())) // 3
        self.total_nparts = max(1, int(total_nparts))
        self.workflow = ExactDuplicates(
            self.reader,
            ParquetWriter(fs.join(self.output_path, IDS_DIR)),
            text_field=text_field,
            id_field=None if assign_id else id_field,
            identify_only=True,
            buckets=self.total_nparts,
            work_dir=fs.join(self.output_path, DEFAULT_WORK_DIR_NAME),
            name="exact_deduplication",
        )

    def run(self, initial_tasks: Any = None, executor: BaseExecutor | None = None) -> Any:
        """Run the identification (every phase, or this array task's share of one); ``initial_tasks`` is NeMo's
        and refused (the input is ``input_path``)."""
        if initial_tasks is not None:
            raise ValueError("initial_tasks: give input_path; the workflow lists the input itself")
        description = json.dumps(input_description(self.reader), sort_keys=True).encode("utf-8")
        fs.makedirs(self.output_path)
        fs.atomic_write(fs.join(self.output_path, ID_GENERATOR_OUTPUT_FILENAME), lambda f: f.write(description))
        return self.workflow.run(executor)


def identification_phase(ids_to_remove_path: str) -> Upstream:
    """The find phase of the :class:`ExactDeduplicationWorkflow` that wrote the list ``ids_to_remove_path``
    (``<output_path>/ExactDuplicateIds``): the removal reads the files its ledger records, never a listing."""
    from curator_slurm.workflows.workflow import phase_upstream

    output_path = fs.dirname(fs.absolute(ids_to_remove_path))
    find = phase_upstream(fs.join(output_path, DEFAULT_WORK_DIR_NAME), "find")
    if not os.path.isdir(find.run_dir):
        raise InputError(
            f"ids_to_remove_path={ids_to_remove_path}: no run of an ExactDeduplicationWorkflow wrote it (its find "
            f"phase would be recorded in {find.run_dir}); give the ExactDuplicateIds directory that workflow wrote"
        )
    return find


class TextDuplicatesRemovalWorkflow:
    """NeMo's ``TextDuplicatesRemovalWorkflow``: ``input_path`` without the documents ``ids_to_remove_path`` lists
    (an :class:`ExactDeduplicationWorkflow`'s ``ExactDuplicateIds``), written to ``output_path``. With
    ``id_generator_path`` the input must still be the files the list was made from. NeMo's id settings
    (``id_field``, ``duplicate_id_field``, ``drop_id_field``) name its generated ids; here ids are positions,
    so they are accepted and nothing is added to drop.

    Args:
        input_path: the input read again (as the identification read it).
        ids_to_remove_path: the list of duplicates.
        output_path: where the deduplicated documents go.
        input_filetype: ``"jsonl"`` or ``"parquet"``; output_filetype likewise.
        id_generator_path: the identification's ``exact_id_generator.json``, checked against the input.
    """

    def __init__(
        self,
        input_path: str | None,
        ids_to_remove_path: str,
        output_path: str,
        input_filetype: str = "parquet",
        input_fields: list[str] | None = None,
        id_field: str | None = NEMO_DEDUP_ID_FIELD,
        input_files_per_partition: int | None = None,
        input_blocksize: str | None = None,
        input_file_extensions: list[str] | None = None,
        input_task_limit: int | None = None,
        input_kwargs: dict[str, Any] | None = None,
        duplicate_id_field: str = "id",
        duplicate_id_read_kwargs: dict[str, Any] | None = None,
        id_generator_path: str | None = None,
        id_generator_storage_options: dict[str, Any] | None = None,
        output_file_extension: str | None = None,
        output_filetype: str = "parquet",
        output_kwargs: dict[str, Any] | None = None,
        output_fields: list[str] | None = None,
        output_mode: str | None = None,
        drop_id_field: bool = False,
    ) -> None:
        if input_path is None:
            raise ValueError("input_path is required")
        if output_filetype not in WRITERS:
            raise ValueError(f"output_filetype={output_filetype!r}: one of {sorted(WRITERS)}")
        if output_mode not in (None, "overwrite"):
            raise ValueError(f"output_mode={output_mode!r}: a writer here replaces its own files only (None)")
        if output_file_extension is not None:
            raise ValueError("output_file_extension: the writers name their files (.jsonl, .parquet)")
        _refuse(input_kwargs=input_kwargs, duplicate_id_read_kwargs=duplicate_id_read_kwargs,
                id_generator_storage_options=id_generator_storage_options, output_kwargs=output_kwargs)  # fmt: skip
        self.reader = _reader(
            input_filetype, input_path, input_file_extensions, input_fields,
            input_files_per_partition, input_blocksize, input_task_limit,
        )  # fmt: skip
        self.ids_to_remove_path = os.fspath(ids_to_remove_path)
        self.id_generator_path = id_generator_path
        self.writer = WRITERS[output_filetype](output_path, output_fields)

    def _check_input(self) -> None:
        if self.id_generator_path is None:
            return
        with fs.open_input(self.id_generator_path) as f:
            recorded = json.loads(f.read().decode("utf-8"))
        now = input_description(self.reader)
        if recorded != now:
            raise InputError(
                f"{self.id_generator_path}: the list of duplicates was made from {recorded['files']} input files "
                f"({recorded['names']}), the input is now {now['files']} ({now['names']}); documents are numbered "
                "by their place in the input, so run the identification again on this input"
            )

    def run(self, executor: BaseExecutor | None = None, initial_tasks: Any = None) -> Any:
        """Run the removal pipeline (or this array task's share of it)."""
        from curator_slurm.pipeline import Pipeline

        if initial_tasks is not None:
            raise ValueError("initial_tasks: give input_path; the workflow lists the input itself")
        self._check_input()
        pipeline = (
            Pipeline("text_duplicates_removal_workflow")
            .add_stage(self.reader)
            .add_stage(RemoveDuplicates(identification_phase(self.ids_to_remove_path)))
            .add_stage(self.writer)
        )
        return pipeline.run(executor)


__all__ = ["NEMO_DEDUP_ID_FIELD", "ExactDeduplicationWorkflow", "TextDuplicatesRemovalWorkflow"]
